"""The payload bucket: job payloads stored in S3 (issue 17, item 5; sundial.model.payloads)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.nag import acknowledge
from sundial.model.payloads import PAYLOAD_PREFIX, queue_prefix
from sundial.model.submission import MAX_HORIZON_S

# Environment variable the functions read (sundial.settings.Settings.payload_bucket).
ENV_PAYLOAD_BUCKET = "SUNDIAL_PAYLOAD_BUCKET"
INCOMPLETE_UPLOAD_DAYS = 1
# Beyond the horizon and the retention: a job's first attempt may be a day late (a paused
# queue, a backlog), its retries run after that, and a retry of it (POST /jobs/{id}/retry, a
# dead-letter replay) may come until its retention ends.
EXPIRY_MARGIN_DAYS = 30
HORIZON_DAYS = -(-MAX_HORIZON_S // 86_400)


def payload_expiry_days(retention_days: int) -> int:
    """How long a payload object lives: a job may wait MAX_HORIZON (366 days) for its first
    attempt, then be retried or replayed for as long as it is kept (the retention), and a
    margin. A repeat put of the same payload (content-addressed) restarts the count."""
    return HORIZON_DAYS + retention_days + EXPIRY_MARGIN_DAYS


class PayloadBucket(Construct):
    """Payloads stored in S3, under payloads/<queue>/<sha256>. SSE-S3 encrypted, TLS-only,
    closed to the public, bucket-owner-enforced, server access logged to `access_logs`,
    retained when the stack goes (a job waiting a year must still find its payload after a
    redeploy). Objects expire after `payload_expiry_days`; Sundial itself never deletes one,
    so no interleaving can take an object a live job references. Not versioned: an object is
    its content's hash, and a repeat put writes the same bytes.

    Grants are explicit and narrow: `grant_put` (the functions that create or change jobs from
    a request), `grant_get` on one queue's prefix (that queue's consumer) or on all (the
    workers function, which presigns GETs for leased jobs of any queue)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention_days: int,
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
                s3.LifecycleRule(
                    id="expire-payloads",
                    prefix=f"{PAYLOAD_PREFIX}/",
                    expiration=Duration.days(payload_expiry_days(retention_days)),
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
        """s3:PutObject on every queue's payloads: a submit stores a large payload."""
        self._grant(function, ["s3:PutObject"], f"{PAYLOAD_PREFIX}/*", "stores a payload")

    def grant_get(self, function: lambda_.IFunction, queue: str | None = None) -> None:
        """s3:GetObject on `queue`'s payloads (None: every queue's), and s3:PutObject there
        too: a retry far out restarts its payload's lifecycle (a copy onto itself, which
        needs both; sundial.store.payloads.PayloadStore.refresh)."""
        prefix = f"{queue_prefix(queue)}*" if queue is not None else f"{PAYLOAD_PREFIX}/*"
        self._grant(
            function,
            ["s3:GetObject", "s3:PutObject"],
            prefix,
            "reads (or presigns) a payload, and refreshes one (a copy onto itself)",
        )

    def grant_refresh(self, function: lambda_.Function) -> None:
        """s3:GetObject too: a move to a later time copies the payload onto itself."""
        self._grant(
            function, ["s3:GetObject"], f"{PAYLOAD_PREFIX}/*", "refreshes a payload (a copy)"
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
                f"The function {why} by its key, payloads/<queue>/<sha256 of the payload>, "
                "made per job: its actions are granted on that prefix and nothing else."
            ),
        )


def _cfn(bucket: s3.IBucket) -> s3.CfnBucket:
    resource = bucket.node.default_child
    assert isinstance(resource, s3.CfnBucket)
    return resource
