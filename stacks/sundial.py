"""`Sundial`: the whole scheduler as one construct, and `SundialStack`, the deployable app."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Environment, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.access import Permission, grant_routes, principal_arn
from stacks.api import JobsApi
from stacks.consumers import QueueConsumer
from stacks.dead_letters import DeadLetterIndex
from stacks.dispatch import DispatchSchedule
from stacks.functions import (
    DEAD_LETTER_INDEXER_TIMEOUT,
    EXAMPLE_CONSUMER_TIMEOUT,
    FANOUT_TIMEOUT,
    SWEEPER_TIMEOUT,
    JobFunctions,
)
from stacks.history_buckets import HistoryBuckets
from stacks.history_capture import (
    HISTORY_FAILED_RECORDS_METRIC,
    HISTORY_TIMEOUT,
    HistoryCapture,
)
from stacks.history_glue import HistoryAnalytics
from stacks.job_queues import JobQueues
from stacks.job_table import JobTable
from stacks.layers import SundialLayers
from stacks.monitoring import SundialMonitoring, WatchedFunction, WatchedQueue, WatchedStream
from stacks.payload_bucket import PayloadBucket
from stacks.settings import SundialSettings

_REMOVAL_POLICIES = {"retain": RemovalPolicy.RETAIN, "destroy": RemovalPolicy.DESTROY}


class Sundial(Construct):
    """Job table, job queues, functions, the one-minute dispatch tick, the dead-letter index,
    the HTTP API, the example consumer on settings.example_consumer_queue (if set), and the
    job history: the table's stream to S3, and the Glue jobs that compact it and report on it.

    Usable as a construct library: drop it into any stack with a validated SundialSettings.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: SundialSettings) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        removal_policy = _REMOVAL_POLICIES[settings.operations.removal_policy]
        self.job_table = JobTable(
            self, "JobTable", capacity=settings.table_capacity, removal_policy=removal_policy
        )
        self.job_queues = JobQueues(
            self, "JobQueues", queue_settings=settings.queues, removal_policy=removal_policy
        )
        self.layers = SundialLayers(self, "Layers")
        self.history_buckets = HistoryBuckets(
            self,
            "HistoryBuckets",
            settings=settings.history,
            noncurrent_version_days=settings.operations.noncurrent_version_days,
        )
        # Large payloads (over the inline limit, or asked for) are stored here; its access is
        # logged with the history buckets'.
        self.payloads = PayloadBucket(
            self,
            "Payloads",
            access_logs=self.history_buckets.access_logs,
        )
        self.functions = JobFunctions(
            self,
            "Functions",
            settings=settings,
            table=self.job_table.table,
            queues=self.job_queues.queues,
            dead_letter_queues=self.job_queues.dead_letter_queues,
            layers=self.layers.all,
            priority_queues=self.job_queues.priority_queues,
            payload_bucket=self.payloads,
        )
        self.dispatch = DispatchSchedule(
            self,
            "Dispatch",
            fanout=self.functions.fanout,
            sweeper=self.functions.sweeper,
            removal_policy=removal_policy,
        )
        self.dead_letter_index = DeadLetterIndex(
            self,
            "DeadLetterIndex",
            function=self.functions.dead_letter_indexer,
            # A priority queue's DLQ too: it catches what SQS redrives from the priority queue.
            dead_letter_queues=self.job_queues.dead_letter_queues
            | {
                f"{name}-priority": dlq
                for name, dlq in self.job_queues.priority_dead_letter_queues.items()
            },
        )
        self.api = JobsApi(
            self,
            "Api",
            submit=self.functions.submit,
            jobs=self.functions.jobs,
            workers=self.functions.workers,
            dags=self.functions.dags,
            schedules=self.functions.schedules,
            queues=self.functions.queue_control,
            rate_limit=settings.api.throttle_rate_limit,
            burst_limit=settings.api.throttle_burst_limit,
        )
        self._add_history(settings)
        self.example_consumer = self._add_example_consumer(settings)
        self.monitoring = self._add_monitoring(settings)

    def _add_monitoring(self, settings: SundialSettings) -> SundialMonitoring:
        """Alarms on every queue, DLQ and background function, and the dashboard."""
        job_queues = self.job_queues
        watched_queues = [
            WatchedQueue(name, queue, job_queues.dead_letter_queues[name], settings.queues[name])
            for name, queue in sorted(job_queues.queues.items())
        ] + [
            WatchedQueue(
                f"{name}-priority",
                queue,
                job_queues.priority_dead_letter_queues[name],
                settings.queues[name],
                priority=True,
            )
            for name, queue in sorted(job_queues.priority_queues.items())
        ]
        functions = self.functions
        return SundialMonitoring(
            self,
            "Monitoring",
            settings=settings.operations,
            queues=watched_queues,
            functions=[
                WatchedFunction("fanout", functions.fanout, FANOUT_TIMEOUT),
                WatchedFunction("sweeper", functions.sweeper, SWEEPER_TIMEOUT),
                WatchedFunction(
                    "dead-letter-indexer",
                    functions.dead_letter_indexer,
                    DEAD_LETTER_INDEXER_TIMEOUT,
                ),
                WatchedFunction("history", self.history_capture.function, HISTORY_TIMEOUT),
            ],
            streams=[
                WatchedStream(
                    "history", self.history_capture.function, HISTORY_FAILED_RECORDS_METRIC
                )
            ],
            dispatch_failures=self.dispatch.failures,
            stage=self.api.stage,
            api_functions={
                "submit": functions.submit,
                "jobs": functions.jobs,
                "dags": functions.dags,
                "workers": functions.workers,
                "schedules": functions.schedules,
                "queues": functions.queue_control,
            },
        )

    def _add_history(self, settings: SundialSettings) -> None:
        """The job history: the table's stream to S3 (its buckets are made first: the payload
        bucket logs to their access-log bucket), and the Glue jobs on it."""
        self.history_capture = HistoryCapture(
            self,
            "HistoryCapture",
            table=self.job_table.table,
            raw_bucket=self.history_buckets.raw,
            layers=self.layers.all,
            settings=settings.history,
            observability=settings.observability,
            payloads=self.payloads,
        )
        self.history_analytics = HistoryAnalytics(
            self, "HistoryAnalytics", buckets=self.history_buckets, settings=settings.history
        )

    def _add_example_consumer(self, settings: SundialSettings) -> QueueConsumer | None:
        """The example consumer on settings.example_consumer_queue, if one is set."""
        example_queue = settings.example_consumer_queue
        if example_queue is not None and self.functions.example_consumer is not None:
            return QueueConsumer(
                self,
                "ExampleConsumer",
                queue=self.job_queues.queues[example_queue],
                function=self.functions.example_consumer,
                table=self.job_table.table,
                dead_letter_queue=self.job_queues.dead_letter_queues[example_queue],
                priority_queue=self.job_queues.priority_queues.get(example_queue),
                payload_bucket=self.payloads,
                queue_name=example_queue,
                function_timeout=EXAMPLE_CONSUMER_TIMEOUT,
                queue_visibility_timeout=Duration.seconds(
                    settings.queues[example_queue].visibility_timeout_seconds
                ),
            )
        return None

    # -- per-queue access (stacks/access.py; the model is sundial.access) -----------------------

    def grant(
        self, permission: Permission | str, queue: str, grantee: iam.IRole | iam.IUser
    ) -> iam.Grant:
        """Let `grantee` use `queue` for `permission`: adds it to the queue's access list and
        gives it execute-api:Invoke on the routes the permission uses, so the two agree. The
        queue must declare its access (cdk.json `"access": {}` or more): one that declares
        none is open to the whole account, and a grant on it raises ValueError saying what to
        write (stacks/access.py)."""
        permission = Permission(permission)
        self.functions.access.add(queue, permission, principal_arn(grantee))
        return grant_routes(
            self.api.http_api, self.api.stage.stage_name, permission, queue, grantee
        )

    def grant_submit(self, queue: str, grantee: iam.IRole | iam.IUser) -> iam.Grant:
        """POST /jobs, /jobs/batch, /dags and /schedules with jobs of `queue`."""
        return self.grant(Permission.SUBMIT, queue, grantee)

    def grant_read(self, queue: str, grantee: iam.IRole | iam.IUser) -> iam.Grant:
        """GET the queue's jobs, DAGs, schedules (and runs) and the queue's state."""
        return self.grant(Permission.READ, queue, grantee)

    def grant_control(self, queue: str, grantee: iam.IRole | iam.IUser) -> iam.Grant:
        """Cancel, retry, pause and resume the queue's jobs, DAGs and schedules."""
        return self.grant(Permission.CONTROL, queue, grantee)

    def grant_work(self, queue: str, grantee: iam.IRole | iam.IUser) -> iam.Grant:
        """Lease the queue's jobs and heartbeat, ack and nack them (a worker outside Lambda)."""
        return self.grant(Permission.WORK, queue, grantee)

    def grant_admin(self, queue: str, grantee: iam.IRole | iam.IUser) -> iam.Grant:
        """Everything, plus the queue's dead letters and pausing the whole queue."""
        return self.grant(Permission.ADMIN, queue, grantee)

    @property
    def table(self) -> dynamodb.Table:
        return self.job_table.table

    @property
    def queues(self) -> dict[str, sqs.Queue]:
        return self.job_queues.queues

    @property
    def dead_letter_queues(self) -> dict[str, sqs.Queue]:
        return self.job_queues.dead_letter_queues

    @property
    def api_url(self) -> str:
        return self.api.url


class SundialStack(Stack):
    """One Sundial deployment. Outputs the API URL, the table name and the queue URLs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: SundialSettings,
        description: str | None = None,
        env: Environment | None = None,
    ) -> None:
        super().__init__(scope, construct_id, description=description, env=env)
        self.sundial = Sundial(self, "Sundial", settings=settings)
        CfnOutput(self, "ApiUrl", value=self.sundial.api_url, description="Jobs API base URL")
        CfnOutput(self, "TableName", value=self.sundial.table.table_name, description="Job table")
        CfnOutput(
            self,
            "PriorityQueueUrls",
            value=self.to_json_string(
                {
                    name: queue.queue_url
                    for name, queue in sorted(self.sundial.job_queues.priority_queues.items())
                }
            ),
            description="JSON object {queue name: URL of its priority queue (critical, high)}",
        )
        CfnOutput(
            self,
            "QueueUrls",
            value=self.to_json_string(
                {name: queue.queue_url for name, queue in sorted(self.sundial.queues.items())}
            ),
            description="JSON object {queue name: SQS queue URL}, as in SUNDIAL_QUEUE_URLS",
        )
        history = self.sundial.history_buckets
        for name, bucket in (
            ("RawHistoryBucket", history.raw),
            ("CuratedHistoryBucket", history.curated),
            ("ReportsBucket", history.reports),
        ):
            CfnOutput(self, name, value=bucket.bucket_name)
        CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.sundial.monitoring.topic.topic_arn,
            description="SNS topic every Sundial alarm notifies: subscribe the on-call here",
        )
        CfnOutput(
            self,
            "DispatchFailuresQueueUrl",
            value=self.sundial.dispatch.failures.queue_url,
            description="Dispatch ticks and sweeper invocations that failed after retries",
        )
        CfnOutput(
            self,
            "HistoryDatabase",
            value=self.sundial.history_analytics.database_name,
            description="Glue database of the job_history and report tables (Athena)",
        )
