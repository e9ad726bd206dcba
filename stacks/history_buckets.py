"""The job history buckets: raw events, curated Parquet, reports, and their access logs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.nag import acknowledge
from stacks.settings import HistoryPipelineSettings
from sundial.history.replay import FAILED_BATCHES_PREFIX, REPLAYED_PREFIX

# Key prefixes. The raw prefix is what the history Lambda writes; Lambda itself writes failed
# stream batches (the event source's on-failure destination) under FAILED_BATCHES_PREFIX, and
# the hourly replay marks each one it replayed under REPLAYED_PREFIX (sundial.history.replay).
RAW_PREFIX = "history"
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
    they are the job history. All are versioned: an object overwritten or deleted (by a Glue
    job re-run, or by hand) can be restored for `noncurrent_version_days`, after which its old
    versions expire, as do the delete markers left when the current ones expire."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: HistoryPipelineSettings,
        noncurrent_version_days: int = 30,
    ) -> None:
        super().__init__(scope, construct_id)
        self._noncurrent_versions = s3.LifecycleRule(
            id="expire-noncurrent-versions",
            noncurrent_version_expiration=Duration.days(noncurrent_version_days),
            expired_object_delete_marker=True,
        )
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
                # A replay's marker lives as long as the failed batch it marks.
                s3.LifecycleRule(
                    id="expire-replay-markers",
                    prefix=f"{REPLAYED_PREFIX}/",
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
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(settings.access_log_retention_days),
                ),
                self._noncurrent_versions,
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
            versioned=True,
            lifecycle_rules=[*rules, abort_uploads, self._noncurrent_versions],
        )
