"""The history analytics: a Glue Data Catalog database and tables over the curated and report
buckets (for Athena), the two Glue 5.0 jobs (compact_history, history_report), and a Glue
workflow that runs them daily, the report only after the compaction succeeded."""

from __future__ import annotations

import re

from aws_cdk import Aws, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as assets
from constructs import Construct

from stacks.history_buckets import RAW_PREFIX, HistoryBuckets
from stacks.nag import acknowledge
from stacks.paths import ASSET_EXCLUDES, GLUE_DIR, locked_version
from stacks.settings import HistoryPipelineSettings
from sundial_history.columns import JOB_HISTORY, REPORT_TABLES, TableSpec

GLUE_VERSION = "5.0"
JOB_TIMEOUT_MINUTES = 120
# The first day Athena's partition projection offers; days without data simply return nothing.
PROJECTION_START = "2025-01-01"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
# The report draws its charts with matplotlib: installed on the job at start, at the version
# this repository tests with (requirements.lock).
CHART_MODULE = "matplotlib"
GLUE_LOG_GROUPS = "/aws-glue/*"
# Where the report job writes the human report (HTML, Markdown, charts) in the reports bucket.
HUMAN_REPORT_PREFIX = "human"


def database_name(stack_name: str) -> str:
    """A Glue database name (lowercase letters, digits, underscores) unique per stack."""
    return re.sub(r"[^a-z0-9_]", "_", f"{stack_name.lower()}_history")


class HistoryAnalytics(Construct):
    """Catalog, jobs and schedule. Each job has its own role: compaction reads raw history and
    writes the job_history table; the report reads job_history and writes the reports bucket.
    Both run under a Glue security configuration that encrypts their CloudWatch logs and
    bookmarks with a KMS key of their own (S3 output is SSE-S3, as the buckets are)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        buckets: HistoryBuckets,
        settings: HistoryPipelineSettings,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.buckets = buckets
        self.database_name = database_name(stack.stack_name)
        self._add_catalog(buckets)
        self._add_encryption(stack)
        self._add_jobs(buckets, settings)
        self._add_workflow(settings)

    def _add_catalog(self, buckets: HistoryBuckets) -> None:
        """The database and its tables: job_history and the report tables."""
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name,
                description="Sundial job history (compact_history) and reports (history_report)",
            ),
        )
        self.tables = {JOB_HISTORY.name: self._table(JOB_HISTORY, buckets.curated)}
        for spec in REPORT_TABLES:
            self.tables[spec.name] = self._table(spec, buckets.reports)

    def _add_encryption(self, stack: Stack) -> None:
        """The jobs' KMS key (CloudWatch logs and bookmarks) and their security configuration."""
        self.key = kms.Key(
            self,
            "LogsKey",
            description="Sundial history Glue jobs: CloudWatch logs and job bookmarks",
            enable_key_rotation=True,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
                            f"log-group:{GLUE_LOG_GROUPS}"
                        )
                    }
                },
            )
        )
        self.security_configuration = glue.CfnSecurityConfiguration(
            self,
            "SecurityConfiguration",
            name=f"{stack.stack_name}-history",
            encryption_configuration=glue.CfnSecurityConfiguration.EncryptionConfigurationProperty(
                cloud_watch_encryption=glue.CfnSecurityConfiguration.CloudWatchEncryptionProperty(
                    cloud_watch_encryption_mode="SSE-KMS", kms_key_arn=self.key.key_arn
                ),
                job_bookmarks_encryption=glue.CfnSecurityConfiguration.JobBookmarksEncryptionProperty(
                    job_bookmarks_encryption_mode="CSE-KMS", kms_key_arn=self.key.key_arn
                ),
                s3_encryptions=[
                    glue.CfnSecurityConfiguration.S3EncryptionProperty(s3_encryption_mode="SSE-S3")
                ],
            ),
        )

    def _add_jobs(self, buckets: HistoryBuckets, settings: HistoryPipelineSettings) -> None:
        """Compaction (raw -> job_history) and the report, each with a role of its own."""
        package = assets.Asset(
            self,
            "Package",
            path=str(GLUE_DIR),
            exclude=[*ASSET_EXCLUDES, "*.py", "*.md", "!sundial_history/*.py"],
        )
        curated_uri = f"s3://{buckets.curated.bucket_name}/{JOB_HISTORY.name}/"
        self.compaction_role = self._role("CompactionRole", "compact_history")
        self.compaction = self._job(
            "Compaction",
            script="compact_history.py",
            role=self.compaction_role,
            package=package,
            settings=settings,
            description="Raw job history -> job_history Parquet (deduplicated, by day)",
            arguments={
                "--raw_path": f"s3://{buckets.raw.bucket_name}/{RAW_PREFIX}/",
                "--curated_path": curated_uri,
                "--dates": "auto",
            },
        )
        self._read(self.compaction_role, buckets.raw, f"{RAW_PREFIX}/*")
        self._write(self.compaction_role, buckets.curated, f"{JOB_HISTORY.name}*")

        self.report_role = self._role("ReportRole", "history_report")
        self.report = self._job(
            "Report",
            script="history_report.py",
            role=self.report_role,
            package=package,
            settings=settings,
            description="job_history -> report tables (Parquet) and the human report",
            arguments={
                "--curated_path": curated_uri,
                "--reports_path": f"s3://{buckets.reports.bucket_name}/",
                "--dates": "auto",
                "--report_days": str(settings.report_days),
                "--additional-python-modules": f"{CHART_MODULE}=={locked_version(CHART_MODULE)}",
            },
        )
        self._read(self.report_role, buckets.curated, f"{JOB_HISTORY.name}*")
        # Each report table's folder and the human report's (sundial_history.jobs.run_report).
        for prefix in (*(spec.name for spec in REPORT_TABLES), HUMAN_REPORT_PREFIX):
            self._write(self.report_role, buckets.reports, f"{prefix}*")

    def _add_workflow(self, settings: HistoryPipelineSettings) -> None:
        """Daily: the compaction, then the report once the compaction succeeded."""
        self.workflow = glue.CfnWorkflow(
            self,
            "Workflow",
            description="Daily: compact yesterday's job history, then build the report",
            max_concurrent_runs=1,
        )
        self.daily_trigger = glue.CfnTrigger(
            self,
            "Daily",
            type="SCHEDULED",
            schedule=settings.schedule,
            start_on_creation=True,
            workflow_name=self.workflow.ref,
            description="Starts the daily history compaction",
            actions=[glue.CfnTrigger.ActionProperty(job_name=self.compaction.ref)],
        )
        self.after_compaction = glue.CfnTrigger(
            self,
            "AfterCompaction",
            type="CONDITIONAL",
            start_on_creation=True,
            workflow_name=self.workflow.ref,
            description="Starts the report once the compaction succeeded",
            predicate=glue.CfnTrigger.PredicateProperty(
                conditions=[
                    glue.CfnTrigger.ConditionProperty(
                        job_name=self.compaction.ref, logical_operator="EQUALS", state="SUCCEEDED"
                    )
                ]
            ),
            actions=[glue.CfnTrigger.ActionProperty(job_name=self.report.ref)],
        )

    # -- catalog ----------------------------------------------------------------------------

    def _table(self, spec: TableSpec, bucket: s3.IBucket) -> glue.CfnTable:
        """An external Parquet table whose `dt` partitions Athena finds by partition
        projection: no crawler and no partition maintenance after each run."""
        location = f"s3://{bucket.bucket_name}/{spec.name}/"
        table = glue.CfnTable(
            self,
            f"Table-{spec.name}",
            catalog_id=Aws.ACCOUNT_ID,
            database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=spec.name,
                description=spec.description,
                table_type="EXTERNAL_TABLE",
                parameters={
                    "classification": "parquet",
                    "projection.enabled": "true",
                    "projection.dt.type": "date",
                    "projection.dt.format": "yyyy-MM-dd",
                    "projection.dt.range": f"{PROJECTION_START},NOW",
                    "projection.dt.interval": "1",
                    "projection.dt.interval.unit": "DAYS",
                    "storage.location.template": location + "dt=${dt}/",
                },
                partition_keys=[
                    glue.CfnTable.ColumnProperty(name=name, type=kind)
                    for name, kind in spec.partition_keys
                ],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=location,
                    input_format=PARQUET_INPUT,
                    output_format=PARQUET_OUTPUT,
                    serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=PARQUET_SERDE),
                    columns=[
                        glue.CfnTable.ColumnProperty(name=name, type=kind)
                        for name, kind in spec.columns
                    ],
                ),
            ),
        )
        table.node.add_dependency(self.database)
        return table

    # -- jobs -------------------------------------------------------------------------------

    def _role(self, construct_id: str, job: str) -> iam.Role:
        role = iam.Role(
            self,
            construct_id,
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            description=f"Sundial Glue job {job}",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:AssociateKmsKey",
                ],
                resources=[
                    f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
                    f"log-group:{GLUE_LOG_GROUPS}"
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"],
                resources=[self.key.key_arn],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:"
            "<AWS::AccountId>:log-group:/aws-glue/*]",
            reason=(
                "Glue names its log groups and streams itself under /aws-glue/ (per security "
                "configuration, role and run), so the job may log there and nowhere else."
            ),
        )
        return role

    def _job(
        self,
        construct_id: str,
        *,
        script: str,
        role: iam.Role,
        package: assets.Asset,
        settings: HistoryPipelineSettings,
        description: str,
        arguments: dict[str, str],
    ) -> glue.CfnJob:
        script_asset = assets.Asset(self, f"{construct_id}Script", path=str(GLUE_DIR / script))
        for asset in (script_asset, package):
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    resources=[
                        f"arn:{Aws.PARTITION}:s3:::{asset.s3_bucket_name}/{asset.s3_object_key}"
                    ],
                )
            )
        job = glue.CfnJob(
            self,
            construct_id,
            description=description,
            role=role.role_arn,
            glue_version=GLUE_VERSION,
            command=glue.CfnJob.JobCommandProperty(
                name="glueetl", python_version="3", script_location=script_asset.s3_object_url
            ),
            worker_type=settings.glue_worker_type,
            number_of_workers=settings.glue_workers,
            timeout=JOB_TIMEOUT_MINUTES,
            # Each run recomputes whole days and overwrites them, so a retry is safe.
            max_retries=1,
            execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=1),
            security_configuration=self.security_configuration.ref,
            default_arguments={
                "--job-language": "python",
                "--extra-py-files": package.s3_object_url,
                # Idempotence comes from recompacting whole days (dynamic partition
                # overwrite), not from bookmarks: a re-run must see every file of the day.
                "--job-bookmark-option": "job-bookmark-disable",
                "--enable-continuous-cloudwatch-log": "true",
                **arguments,
            },
        )
        # The job must not start before its role's policy exists. CDK renders that as DependsOn
        # [role, policy]; the role entry repeats the GetAtt dependency, which cfn-lint flags
        # (W3005), so only that check is skipped (as for the functions).
        job.node.add_dependency(role)
        job.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
        return job

    @staticmethod
    def _read(role: iam.Role, bucket: s3.IBucket, objects: str) -> None:
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[bucket.arn_for_objects(objects)]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn])
        )
        _acknowledge_objects(role, bucket, objects)

    @staticmethod
    def _write(role: iam.Role, bucket: s3.IBucket, objects: str) -> None:
        """Spark's commit writes, reads back and deletes temporary objects under the output."""
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                resources=[bucket.arn_for_objects(objects)],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn])
        )
        _acknowledge_objects(role, bucket, objects)


def _acknowledge_objects(role: iam.Role, bucket: s3.IBucket, objects: str) -> None:
    resource = bucket.node.default_child
    assert isinstance(resource, s3.CfnBucket)
    bucket_id = Stack.of(role).get_logical_id(resource)
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{objects}]",
        reason=(
            "A Spark job reads and writes many objects whose keys it makes per run (dt= "
            f"partitions, part files); access is limited to this one key prefix ({objects}), "
            "a table's folder or the human report's."
        ),
    )
