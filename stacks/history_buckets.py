"""The job history buckets: raw events, curated Parquet, reports, and their access logs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.nag import acknowledge
from stacks.settings import HistoryPipelineSettings

# Key prefixes. The raw prefix is what the history Lambda writes; Lambda itself writes failed
# stream batches (the event source's on-failure destination) under FAILED_BATCHES_PREFIX.
RAW_PREFIX = "history"
FAILED_BATCHES_PREFIX = "aws/lambda"
INCOMPLETE_UPLOAD_DAYS = 7
ACCESS_LOGS_BY_POLICY = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"
# Curated Parquet older than this is read rarely: Intelligent-Tiering moves it to cheaper tiers
# by itself and back when it is read, so queries never fail on it.
CURATED_TIERING_DAYS = 30


class HistoryBuckets(Construct):
    """`raw` (gzip JSON lines from the history Lambda, and failed stream batches), `curated`
    (the job_history Parquet table) and `reports` (report tables and the human report).

    Each is SSE-S3 encrypted, TLS-only, closed to the public, logs its server access to
    `access_logs`, and expires objects per settings. All are retained when the stack goes:
    they are the job history."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: HistoryPipelineSettings
    ) -> None:
        super().__init__(scope, construct_id)
        # Server access logs are delivered under a bucket policy (the logging service
        # principal), not the legacy LogDeliveryWrite ACL, which BUCKET_OWNER_ENFORCED forbids.
        # Set here so the construct behaves the same in any app, whatever its cdk.json says.
        self.node.set_context(ACCESS_LOGS_BY_POLICY, True)
        self.access_logs = self._access_log_bucket(settings)
        self.raw = self._bucket(
            "Raw",
            [
                s3.LifecycleRule(
                    id="expire-raw-history",
                    prefix=f"{RAW_PREFIX}/",
                    expiration=Duration.days(settings.raw_retention_days),
                ),
                s3.LifecycleRule(
                    id="expire-failed-batches",
                    prefix=f"{FAILED_BATCHES_PREFIX}/",
                    expiration=Duration.days(settings.curated_retention_days),
                ),
            ],
        )
        self.curated = self._bucket(
            "Curated",
            [
                s3.LifecycleRule(
                    id="tier-and-expire-curated",
                    transitions=[
                        s3.Transition(
                            storage_class=s3.StorageClass.INTELLIGENT_TIERING,
                            transition_after=Duration.days(CURATED_TIERING_DAYS),
                        )
                    ],
                    expiration=Duration.days(settings.curated_retention_days),
                )
            ],
        )
        self.reports = self._bucket(
            "Reports",
            [
                s3.LifecycleRule(
                    id="expire-reports",
                    expiration=Duration.days(settings.report_retention_days),
                )
            ],
        )

    def _access_log_bucket(self, settings: HistoryPipelineSettings) -> s3.Bucket:
        """Where the history buckets log their server access (it logs none of its own)."""
        access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(settings.access_log_retention_days),
                )
            ],
        )
        acknowledge(
            access_logs,
            "AwsSolutions-S1",
            reason=(
                "This bucket is the server access log target of the history buckets; logging "
                "its own access would log the log deliveries themselves, without end."
            ),
        )
        return access_logs

    def _bucket(self, construct_id: str, rules: list[s3.LifecycleRule]) -> s3.Bucket:
        abort_uploads = s3.LifecycleRule(
            id="abort-incomplete-uploads",
            abort_incomplete_multipart_upload_after=Duration.days(INCOMPLETE_UPLOAD_DAYS),
        )
        return s3.Bucket(
            self,
            construct_id,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=f"{construct_id.lower()}/",
            lifecycle_rules=[*rules, abort_uploads],
        )
