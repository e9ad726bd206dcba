"""History capture: the job table's stream feeds the history Lambda, which writes every job
state change to the raw history bucket (sundial.history.capture)."""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.functions import ENV_TABLE_NAME, SundialFunction
from stacks.history_buckets import RAW_PREFIX
from stacks.nag import acknowledge
from stacks.payload_bucket import PayloadBucket
from stacks.settings import HistoryPipelineSettings, ObservabilitySettings
from sundial.history.replay import FAILED_BATCHES_PREFIX, REPLAYED_PREFIX

ENV_HISTORY_BUCKET = "SUNDIAL_HISTORY_BUCKET"
ENV_HISTORY_PREFIX = "SUNDIAL_HISTORY_PREFIX"
HISTORY_TIMEOUT = Duration.seconds(60)
# The custom metric the history function writes when it fails records (lambdas/history; the
# stack alarms on it: stacks.monitoring.WatchedStream).
HISTORY_FAILED_RECORDS_METRIC = "HistoryRecordsFailed"
# Failed batches are replayed into history/ hourly, so they are there before the daily
# compaction of their day; a replay that fails is retried by the next one.
REPLAY_SCHEDULE = events.Schedule.rate(Duration.hours(1))
REPLAY_RETRY_ATTEMPTS = 2
# Retries of a failing batch, bisected on each error, before it goes to the on-failure
# destination. A record older than MAX_RECORD_AGE goes there too: well inside the stream's
# 24-hour retention, so a stuck shard never loses records to the stream's trimming.
RETRY_ATTEMPTS = 10
MAX_RECORD_AGE = Duration.hours(12)
# Only job items can become history: Lambda's event filtering drops every other item kind of
# the table (cursors, idempotency keys, meta items...) before an invocation is paid for.
JOB_ITEMS_FILTER = {"dynamodb": {"Keys": {"pk": {"S": lambda_.FilterRule.begins_with("shard#")}}}}


def grant_job_retention(table: dynamodb.ITable, grantee: iam.IGrantable) -> iam.Grant:
    """DeleteItem and Query on the job table, for what an expired job owned: a moved job's
    pointer, its idempotency record, its DAG's listing entry (once a Query of the DAG's nodes
    finds none left on its queue). IAM cannot tell these items from jobs by key; each delete is
    conditional on the item still naming the expired job, or follows that Query."""
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["dynamodb:DeleteItem", "dynamodb:Query"],
        resource_arns=[table.table_arn],
    )


@jsii.implements(lambda_.IEventSourceDlq)
class _FailedBatchesInS3:
    """Lambda's S3 on-failure destination for a stream event source: a failed batch lands in
    the bucket with its records (an SQS or SNS destination would get only their sequence
    numbers, useless once the stream has trimmed them). Unlike the CDK's
    S3OnFailureDestination, which grants read and write on the whole bucket, this grants only
    what Lambda needs to deliver there."""

    def __init__(self, bucket: s3.IBucket) -> None:
        self._bucket = bucket

    def bind(
        self, _target: lambda_.IEventSourceMapping, target_handler: lambda_.IFunction
    ) -> lambda_.DlqDestinationConfig:
        target_handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                resources=[self._bucket.arn_for_objects(f"{FAILED_BATCHES_PREFIX}/*")],
            )
        )
        target_handler.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self._bucket.bucket_arn])
        )
        return lambda_.DlqDestinationConfig(destination=self._bucket.bucket_arn)


class HistoryCapture(Construct):
    """The history Lambda on the job table's stream (NEW_AND_OLD_IMAGES).

    The event source mapping batches records (settings), reports partial batch failures (the
    function names the first record it could not read; Lambda resumes there), bisects a batch
    whose invocation fails, retries RETRY_ATTEMPTS times, and then puts the batch into the raw
    bucket under aws/lambda/ so no history is lost. It reads from the oldest record
    (TRIM_HORIZON), so a new deployment captures what the stream still holds.

    The function may write objects under history/ in the raw bucket, and nothing else there."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        raw_bucket: s3.IBucket,
        layers: Sequence[lambda_.ILayerVersion],
        settings: HistoryPipelineSettings,
        observability: ObservabilitySettings | None = None,
        payloads: PayloadBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if table.table_stream_arn is None:
            raise ValueError(f"{self.node.path}: the job table needs a stream (NEW_AND_OLD_IMAGES)")
        self.raw_bucket = raw_bucket
        recorder = SundialFunction(
            self,
            "Function",
            code_dir="history",
            description="Job table stream -> job history (gzip JSON lines) in S3",
            timeout=HISTORY_TIMEOUT,
            layers=layers,
            environment={
                ENV_HISTORY_BUCKET: raw_bucket.bucket_name,
                ENV_HISTORY_PREFIX: RAW_PREFIX,
                ENV_TABLE_NAME: table.table_name,
            },
            observability=observability,
        )
        self.function = recorder.function
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                resources=[raw_bucket.arn_for_objects(f"{RAW_PREFIX}/*")],
            )
        )
        # What an expired job owned goes with it (its TTL removal comes through the stream;
        # sundial.services.job_retention): its pointer, idempotency record and DAG listing
        # entry (DeleteItem; a Query of its DAG's nodes), and its payload object.
        grant_job_retention(table, self.function)
        if payloads is not None:
            payloads.bind(self.function)
            payloads.grant_retention(self.function)
        self.event_source = event_sources.DynamoEventSource(
            table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=settings.stream_batch_size,
            max_batching_window=Duration.seconds(settings.stream_batching_window_seconds),
            bisect_batch_on_error=True,
            retry_attempts=RETRY_ATTEMPTS,
            max_record_age=MAX_RECORD_AGE,
            report_batch_item_failures=True,
            on_failure=_FailedBatchesInS3(raw_bucket),
            filters=[lambda_.FilterCriteria.filter(JOB_ITEMS_FILTER)],
        )
        self.function.add_event_source(self.event_source)
        self._replay_failed_batches(raw_bucket)
        _acknowledge_findings(recorder.role, raw_bucket)

    def _replay_failed_batches(self, raw_bucket: s3.IBucket) -> None:
        """Every hour the function replays failed batches into history/ and marks each one
        under replayed/ (sundial.history.replay). It lists the bucket with the s3:ListBucket
        the on-failure destination already needs, reads failed batches, writes markers."""
        self.replay_rule = events.Rule(
            self,
            "ReplayFailedBatches",
            description="Sundial history: replay failed stream batches into history/",
            schedule=REPLAY_SCHEDULE,
            targets=[
                targets.LambdaFunction(
                    self.function,
                    event=events.RuleTargetInput.from_object({"replay_failed_batches": True}),
                    retry_attempts=REPLAY_RETRY_ATTEMPTS,
                )
            ],
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[raw_bucket.arn_for_objects(f"{FAILED_BATCHES_PREFIX}/*")],
            )
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                resources=[raw_bucket.arn_for_objects(f"{REPLAYED_PREFIX}/*")],
            )
        )


def _acknowledge_findings(role: iam.IRole, raw_bucket: s3.IBucket) -> None:
    """The recorder's cdk-nag findings, and why they stand."""
    bucket_id = Stack.of(role).get_logical_id(_cfn(raw_bucket))
    for resource in (
        f"<{bucket_id}.Arn>/{RAW_PREFIX}/*",
        f"<{bucket_id}.Arn>/{FAILED_BATCHES_PREFIX}/*",
        f"<{bucket_id}.Arn>/{REPLAYED_PREFIX}/*",
    ):
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{resource}]",
            reason=(
                "Object keys are made per batch (history/dt=<day>/<time>-<digest>.json.gz; "
                "Lambda's own aws/lambda/<mapping>/<shard>/... for failed batches, which the "
                "replay reads, and replayed/<that key> for its markers), so each action is "
                "granted on its prefix and on nothing else in the bucket."
            ),
        )
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        reason=(
            "dynamodb:ListStreams (added by the DynamoDB event source) and the X-Ray "
            "actions of active tracing support no resource-level permissions."
        ),
    )


def _cfn(bucket: s3.IBucket) -> s3.CfnBucket:
    resource = bucket.node.default_child
    assert isinstance(resource, s3.CfnBucket)
    return resource
