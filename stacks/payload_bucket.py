"""The payload bucket: job payloads stored in S3 (sundial.model.payloads)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.nag import acknowledge
from sundial.model.payloads import (
    PAYLOAD_PREFIX,
    REFERENCE_TAG,
    UNREFERENCED,
    UNREFERENCED_DAYS,
    queue_prefix,
)

# Environment variable the functions read (sundial.settings.Settings.payload_bucket).
ENV_PAYLOAD_BUCKET = "SUNDIAL_PAYLOAD_BUCKET"
INCOMPLETE_UPLOAD_DAYS = 1


class PayloadBucket(Construct):
    """Payloads stored in S3, under payloads/<queue>/<job ULID>/<sha256>: each object belongs
    to one job. SSE-S3 encrypted, TLS-only, closed to the public, bucket-owner-enforced, server
    access logged to `access_logs`, retained when the stack goes (a job waiting a year must
    still find its payload after a redeploy). The lifecycle expires only objects still tagged
    unreferenced (no job was written for them); an object a job references lives as long as
    the job, whose expiry deletes it (sundial.model.payloads). Not versioned: an object is
    written once per job and payload, and a repeat put writes the same bytes.

    Grants are explicit and narrow: `grant_put` (the functions that create or change jobs from
    a request), `grant_get` on one queue's prefix (that queue's consumer) or on all (the
    workers function, which presigns GETs for leased jobs of any queue), `grant_retention`
    (the history function, which keeps and removes objects with their jobs)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        access_logs: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="payloads/",
            lifecycle_rules=[
                # Only objects no job was written for (a crash between the put and the job's
                # write): an object a job references is tagged referenced and lives as long as
                # its job, which deletes it when its item expires.
                s3.LifecycleRule(
                    id="expire-unreferenced-payloads",
                    prefix=f"{PAYLOAD_PREFIX}/",
                    tag_filters={REFERENCE_TAG: UNREFERENCED},
                    expiration=Duration.days(UNREFERENCED_DAYS),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(INCOMPLETE_UPLOAD_DAYS),
                ),
            ],
        )

    def bind(self, function: lambda_.Function) -> None:
        """Tell `function` the bucket's name (it reads SUNDIAL_PAYLOAD_BUCKET)."""
        function.add_environment(ENV_PAYLOAD_BUCKET, self.bucket.bucket_name)

    def grant_put(self, function: lambda_.Function) -> None:
        """s3:PutObject and s3:PutObjectTagging on every queue's payloads: a submit or a move
        stores a payload (tagged unreferenced), then tags it referenced once its job is written
        (and a replaced one unreferenced)."""
        self._grant(
            function,
            ["s3:PutObject", "s3:PutObjectTagging"],
            f"{PAYLOAD_PREFIX}/*",
            "stores a payload and tags it",
        )

    def grant_get(self, function: lambda_.IFunction, queue: str | None = None) -> None:
        """s3:GetObject on `queue`'s payloads (None: every queue's)."""
        prefix = f"{queue_prefix(queue)}*" if queue is not None else f"{PAYLOAD_PREFIX}/*"
        self._grant(function, ["s3:GetObject"], prefix, "reads (or presigns) a payload")

    def grant_retention(self, function: lambda_.Function) -> None:
        """s3:PutObjectTagging and s3:DeleteObject on every queue's payloads: the history
        function tags a written job's payload referenced (a backstop) and deletes an expired
        job's (sundial.services.job_retention)."""
        self._grant(
            function,
            ["s3:PutObjectTagging", "s3:DeleteObject"],
            f"{PAYLOAD_PREFIX}/*",
            "tags a job's payload referenced, and deletes an expired job's",
        )

    def _grant(
        self, function: lambda_.IFunction, actions: list[str], pattern: str, why: str
    ) -> None:
        function.add_to_role_policy(
            iam.PolicyStatement(actions=actions, resources=[self.bucket.arn_for_objects(pattern)])
        )
        if function.role is None:
            return
        bucket_id = Stack.of(self).get_logical_id(_cfn(self.bucket))
        acknowledge(
            function.role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{pattern}]",
            reason=(
                f"The function {why} by its key, payloads/<queue>/<job ULID>/<sha256>, made "
                "per job: its actions are granted on that prefix and nothing else."
            ),
        )


def _cfn(bucket: s3.IBucket) -> s3.CfnBucket:
    resource = bucket.node.default_child
    assert isinstance(resource, s3.CfnBucket)
    return resource
