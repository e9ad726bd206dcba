"""The Sundial Lambda functions and, per function, exactly the permissions it needs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.access import ENV_ACCESS, AccessLists
from stacks.grants import LEASE, QUEUE_DEPTH, grant_queue, grant_send
from stacks.job_table import grant_read_queue_states
from stacks.log_groups import operational_log_group
from stacks.nag import acknowledge
from stacks.paths import ASSET_EXCLUDES, LAMBDAS_DIR
from stacks.payload_bucket import PayloadBucket
from stacks.settings import (
    LAMBDA_ARCH,
    LAMBDA_RUNTIME,
    ObservabilitySettings,
    QueueSettings,
    SundialSettings,
)
from sundial.quotas import quotas_json
from sundial.timing import SUBMIT_TIMEOUT_MS, SWEEPER_TIMEOUT_MS

HANDLER = "handler.handler"
MEMORY_MB = 256
# Lambda gives CPU in proportion to memory (one vCPU at 1,769 MB). At 256 MB a submit's own
# time takes the pickup p99 to about 100 ms, and a sweeper dispatches about 130 jobs/s
# (BENCHMARKS.md, sections 3 and 4). The sweeper is CPU-bound, so a full vCPU costs about the
# same per job and dispatches 7 times as fast; the submit also waits on AWS, so it gets only
# what the pickup target needs.
SUBMIT_MEMORY_MB = 512
SWEEPER_MEMORY_MB = 1769

POWERTOOLS_ENVIRONMENT = {
    "POWERTOOLS_SERVICE_NAME": "sundial",
    "POWERTOOLS_METRICS_NAMESPACE": "Sundial",
}

_TRACING = {"active": lambda_.Tracing.ACTIVE, "pass_through": lambda_.Tracing.PASS_THROUGH}

# Environment variable names the handlers read (see lambdas/*/handler.py).
ENV_TABLE_NAME = "SUNDIAL_TABLE_NAME"
ENV_QUEUE_URLS = "SUNDIAL_QUEUE_URLS"
# JSON {queue name: URL of its DLQ}: where the consumer SDK sends dead jobs (and the API's
# retry/replay endpoints find them).
ENV_DEAD_LETTER_URLS = "SUNDIAL_DEAD_LETTER_URLS"
# JSON {queue name: URL of its priority queue}, for the queues configured with one: where
# critical and high jobs are sent.
ENV_PRIORITY_QUEUE_URLS = "SUNDIAL_PRIORITY_QUEUE_URLS"
# JSON {queue name: {max_attempts, initial_delay_seconds, factor, max_delay_seconds}}.
ENV_RETRY_DEFAULTS = "SUNDIAL_RETRY_DEFAULTS"
# The queues' quotas (sundial.quotas), for the functions that create jobs from a request.
ENV_QUOTAS = "SUNDIAL_QUOTAS"
ENV_SHARD_COUNT = "SUNDIAL_SHARD_COUNT"
ENV_RETENTION_DAYS = "SUNDIAL_RETENTION_DAYS"
ENV_SWEEPER_FUNCTION = "SUNDIAL_SWEEPER_FUNCTION"
ENV_SHARDS_PER_SWEEPER = "SUNDIAL_SHARDS_PER_SWEEPER"
# The sweeper's fair-dispatch settings per queue (sundial.settings.QueueDispatch).
ENV_DISPATCH = "SUNDIAL_DISPATCH"

# The API functions that may do more than a read and a write: a schedule's first 15 minutes
# of occurrences, a queue's catch-up (20 s of it; API Gateway waits 30 s for an integration).
API_TIMEOUT = Duration.seconds(29)

# The timing rules (sundial.timing) hold for these timeouts, so they come from there: a call
# that writes a job and then sends it ends within SUBMIT_TIMEOUT_MS, a sweeper within
# SWEEPER_TIMEOUT_MS.
WRITER_TIMEOUT = Duration.seconds(SUBMIT_TIMEOUT_MS // 1000)
SWEEPER_TIMEOUT = Duration.seconds(SWEEPER_TIMEOUT_MS // 1000)
FANOUT_TIMEOUT = Duration.seconds(30)

# Reserved concurrency of the dispatch path (settings.operations.reserve_dispatch_concurrency).
# A tick starts one sweeper per shard group; a sweeper may run up to its 60 s timeout, so the
# next tick's sweepers can overlap it, and Lambda's retries of a failed one add a few more:
# two ticks' worth. The fan-out runs for a second or two a minute: 2 covers an overlap.
SWEEPERS_RESERVED_PER_GROUP = 2
FANOUT_RESERVED = 2

# An HTTP API waits at most 30 s for its integration; a lease long-polls SQS up to 20 s.
WORKERS_TIMEOUT = Duration.seconds(29)
# The DLQs' visibility timeout is 6x this (stacks/job_queues.py), per AWS guidance.
DEAD_LETTER_INDEXER_TIMEOUT = Duration.seconds(10)

# The example consumer's timeout: a queue feeding it needs a visibility timeout of at least 6x
# this (stacks/consumers.py checks it), so 30 s for the 5 s here.
EXAMPLE_CONSUMER_TIMEOUT = Duration.seconds(5)


def sweepers_reserved(settings: SundialSettings) -> int:
    """The sweeper's reserved concurrency: two ticks' worth of shard groups."""
    groups = -(-settings.shard_count // settings.shards_per_sweeper)
    return SWEEPERS_RESERVED_PER_GROUP * groups


class SundialFunction(Construct):
    """One Python Lambda function with Sundial's runtime, layers, tracing and log group.

    Its role starts with no permissions except writing to its own log group; the caller grants
    the rest explicitly.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code_dir: str,
        description: str,
        timeout: Duration,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        memory_mb: int = MEMORY_MB,
        observability: ObservabilitySettings | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        observability = observability or ObservabilitySettings()
        self.log_group = operational_log_group(self, "Logs")
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Sundial {code_dir} function",
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=LAMBDA_RUNTIME,
            architecture=LAMBDA_ARCH,
            code=lambda_.Code.from_asset(str(LAMBDAS_DIR / code_dir), exclude=ASSET_EXCLUDES),
            handler=HANDLER,
            timeout=timeout,
            memory_size=memory_mb,
            reserved_concurrent_executions=reserved_concurrency,
            tracing=_TRACING[observability.tracing],
            log_group=self.log_group,
            role=self.role,
            layers=list(layers),
            environment={
                **POWERTOOLS_ENVIRONMENT,
                "POWERTOOLS_LOG_LEVEL": observability.log_level,
                **environment,
            },
        )
        self._acknowledge_findings()

    def _acknowledge_findings(self) -> None:
        """The cfn-lint and cdk-nag findings every Sundial function has, and why they stand."""
        # CDK renders DependsOn [role, role policy]; the role entry repeats the Fn::GetAtt
        # dependency, which cfn-lint flags (W3005). The policy entry is the one that matters: the
        # function must not run before its permissions exist. So only that check is skipped.
        _cfn_function(self.function).add_metadata(
            "cfn-lint", {"config": {"ignore_checks": ["W3005"]}}
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            reason=(
                "Only xray:PutTraceSegments and xray:PutTelemetryRecords, added by active "
                "tracing; X-Ray supports no resource-level permissions for them."
            ),
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            reason=(
                "Pinned to Python 3.13 on arm64: the dependencies layer (make deps) is built "
                "for exactly that runtime; upgrade stacks/settings.py and the Makefile together."
            ),
        )


class JobFunctions(Construct):
    """`submit`, `jobs`, `dags`, `fanout`, `sweeper`, `workers`, `dead_letter_indexer`,
    `schedules` and `queues` (`queue_control`), each granted least-privilege access, and the
    `example_consumer` when settings.example_consumer_queue is set (else None). The example
    consumer is granted nothing here: attaching it to its queue (stacks/consumers.py) grants it
    what consuming and the job lifecycle need.

    `queues` and `dead_letter_queues` map every configured queue name (settings.queues) to its
    SQS queue and to that queue's DLQ. One method per family of functions, each with the
    grants its functions need, next to them."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: SundialSettings,
        table: dynamodb.ITable,
        queues: Mapping[str, sqs.IQueue],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        layers: Sequence[lambda_.ILayerVersion],
        priority_queues: Mapping[str, sqs.IQueue] | None = None,
        payload_bucket: PayloadBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        priority_queues = dict(priority_queues or {})
        configured = sorted(settings.queues)
        if sorted(queues) != configured or sorted(dead_letter_queues) != configured:
            raise ValueError(
                f"{self.node.path}: queues {sorted(queues)} and dead_letter_queues "
                f"{sorted(dead_letter_queues)} must both name exactly the configured queues "
                f"{configured}"
            )
        self._layers = layers
        self._observability = settings.observability
        self._environment = _common_environment(
            Stack.of(self),
            settings,
            table=table,
            queues=queues,
            dead_letter_queues=dead_letter_queues,
            priority_queues=priority_queues,
        )
        # The API functions alone read the access lists (grants may add to them until synth),
        # and the queues' quotas: a queue's payload limit binds every route that takes a
        # payload (POST /jobs and /jobs/batch, PATCH /jobs/{id}, POST /dags, POST and PATCH
        # /schedules), whichever function serves it, so every API function has them; the
        # submission counters are written where a request creates jobs (submit, dags).
        self.access = AccessLists(settings.queues)
        self._api_environment = {
            **self._environment,
            ENV_ACCESS: self.access.environment_value(self),
            ENV_QUOTAS: quotas_json(settings.queues),
        }
        job_queues = [*queues.values(), *priority_queues.values()]
        self._add_api_functions(table, job_queues)
        self._add_dispatch(settings, table, job_queues)
        self._add_runners(table, queues, dead_letter_queues, priority_queues, job_queues)
        self._add_schedules_and_queues(table, job_queues, list(dead_letter_queues.values()))
        if payload_bucket is not None:
            self._add_payloads(payload_bucket)
        self.example_consumer = (
            self._function(
                "example_consumer",
                f"Example consumer: logs each job of the {settings.example_consumer_queue} queue",
                EXAMPLE_CONSUMER_TIMEOUT,
            ).function
            if settings.example_consumer_queue is not None
            else None
        )

    def _add_payloads(self, payloads: PayloadBucket) -> None:
        """Large payloads: submit (POST /jobs, batch) and jobs (PATCH /jobs/{id}, a new
        payload) store them; workers presign GETs of them for leased jobs of every queue. A
        consumer reads its own queue's (stacks/consumers.py). DAG nodes and schedules keep
        their payloads inline, so the dags and schedules functions get nothing."""
        for stores in (self.submit, self.jobs):
            payloads.bind(stores)
            payloads.grant_put(stores)
        payloads.bind(self.workers)
        payloads.grant_get(self.workers)

    def _function(
        self,
        code_dir: str,
        description: str,
        timeout: Duration,
        memory_mb: int = MEMORY_MB,
        reserved_concurrency: int | None = None,
        *,
        api: bool = False,
    ) -> SundialFunction:
        """`api`: an API function, which also reads the queues' access lists."""
        return SundialFunction(
            self,
            construct_name(code_dir),
            code_dir=code_dir,
            description=description,
            timeout=timeout,
            layers=self._layers,
            environment=self._api_environment if api else self._environment,
            memory_mb=memory_mb,
            observability=self._observability,
            reserved_concurrency=reserved_concurrency,
        )

    def _add_api_functions(self, table: dynamodb.ITable, job_queues: Sequence[sqs.IQueue]) -> None:
        """submit, jobs and dags: the API routes of jobs and DAGs."""
        self.submit = self._function(
            "submit", "POST /jobs, POST /jobs/batch", WRITER_TIMEOUT, SUBMIT_MEMORY_MB, api=True
        ).function
        self.jobs = self._function(
            "jobs",
            "GET, PATCH, DELETE /jobs/{job_id}; retry, pause, resume, run-now",
            WRITER_TIMEOUT,
            api=True,
        ).function
        self.dags = self._function(
            "dags",
            "POST /dags; GET, DELETE, pause and resume /dags/{dag_id}",
            WRITER_TIMEOUT,
            api=True,
        ).function
        # submit: store jobs (single and batch, idempotency lookups) and hand jobs due within
        # the SQS delay window straight to their queue.
        # A job due now on a paused queue is written in one transaction with a check that the
        # queue is still paused (ConditionCheckItem), and left to the queue's catch-up.
        table.grant(
            self.submit,
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:ConditionCheckItem",
        )
        # jobs: read, cancel (conditional update) and manually retry one job addressed by its id.
        # A retry (POST /jobs/{id}/retry) re-sends the job to its queue, or puts a retry-timer
        # item when the retry is due beyond the SQS delay window, as the consumer SDK does.
        # Dead letters (GET/DELETE /queues/{queue}/dead, POST .../replay): query a queue's
        # index items, delete replayed or purged ones; replay is a retry. Pause and resume
        # are conditional updates; a resumed job due soon is sent at once. A change of a job's
        # time (PATCH /jobs/{id}) is one transaction: put the job at its new key, put or update
        # the pointer at its origin, delete its previous item; sent at once if due soon.
        # GET of a pending job reads its shard's cursor item (BatchGetItem, as the sweeper
        # reads them): `queued` is derived, a job below the cursor or sent above it.
        table.grant(
            self.jobs,
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:UpdateItem",
            "dynamodb:PutItem",
            "dynamodb:Query",
            "dynamodb:DeleteItem",
        )
        # dags: write a DAG's nodes (batch), read them back (one range query on the DAG's shard),
        # claim and send its roots, cancel its nodes (conditional updates), and read parents'
        # results for a node released on resume. A root due now on a paused queue is written as
        # submit writes such a job: a Put in a transaction with a ConditionCheck of the pause.
        table.grant(
            self.dags,
            "dynamodb:BatchWriteItem",
            "dynamodb:Query",
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:PutItem",
            "dynamodb:ConditionCheckItem",
        )
        for queue in job_queues:
            grant_send(queue, self.submit)
            grant_send(queue, self.jobs)
            grant_send(queue, self.dags)

    def _add_dispatch(
        self, settings: SundialSettings, table: dynamodb.ITable, job_queues: Sequence[sqs.IQueue]
    ) -> None:
        """The timer path: the fan-out starts one sweeper per shard group every minute. Its
        async invocations' retries and failure queue are stacks/dispatch.py's."""
        reserve = settings.operations.reserve_dispatch_concurrency
        self.sweeper = self._function(
            "sweeper",
            "Claims due jobs of a shard group, sends them to SQS",
            SWEEPER_TIMEOUT,
            SWEEPER_MEMORY_MB,
            reserved_concurrency=sweepers_reserved(settings) if reserve else None,
        ).function
        self.sweeper.add_environment(ENV_DISPATCH, dispatch_json(settings.queues))
        fanout = self._function(
            "fanout",
            "Every minute: starts one sweeper per shard group",
            FANOUT_TIMEOUT,
            reserved_concurrency=FANOUT_RESERVED if reserve else None,
        )
        self.fanout = fanout.function
        self.fanout.add_environment(ENV_SWEEPER_FUNCTION, self.sweeper.function_name)
        self.fanout.add_environment(ENV_SHARDS_PER_SWEEPER, str(settings.shards_per_sweeper))
        # fanout: read and update its state item in the table, then start the sweepers.
        table.grant(self.fanout, "dynamodb:GetItem", "dynamodb:UpdateItem")
        self.sweeper.grant_invoke(self.fanout)
        acknowledge(
            fanout.role,
            f"AwsSolutions-IAM5[Resource::<{_logical_id(self.sweeper)}.Arn>:*]",
            reason=(
                "grant_invoke also allows the sweeper's own qualified ARNs (versions and "
                "aliases); the wildcard never reaches another function."
            ),
        )
        # sweeper: take a shard's lease on its cursor item (a conditional update), range-query
        # its due jobs, read their items (BatchGetItem) and send them to their queues, then
        # move the cursor and release the lease. For a schedule's occurrence it reads the
        # schedule and puts the run record and the next occurrence; it reads the queue states
        # (paused queues).
        # An occurrence of a paused schedule is parked in a transaction that checks the pause
        # (ConditionCheckItem).
        table.grant(
            self.sweeper,
            "dynamodb:Query",
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:UpdateItem",
            "dynamodb:PutItem",
            "dynamodb:ConditionCheckItem",
        )
        for queue in job_queues:
            grant_send(queue, self.sweeper)

    def _add_runners(
        self,
        table: dynamodb.ITable,
        queues: Mapping[str, sqs.IQueue],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        priority_queues: Mapping[str, sqs.IQueue],
        job_queues: Sequence[sqs.IQueue],
    ) -> None:
        """Attempts run outside a consumer Lambda: workers lease jobs over the API; the
        dead-letter indexer ends the attempts SQS redrove."""
        self.workers = self._function(
            "workers",
            "Lease, heartbeat, ack and nack jobs for workers outside Lambda",
            WORKERS_TIMEOUT,
            api=True,
        ).function
        self.dead_letter_indexer = self._function(
            "dead_letters",
            "Indexes every DLQ message in the job table",
            DEAD_LETTER_INDEXER_TIMEOUT,
        ).function
        # workers: lease (receive with a visibility timeout), heartbeat (change visibility),
        # ack/nack (delete); the job lifecycle as the consumer SDK runs it: read and
        # conditionally update the job, put a retry timer, send retries and dead jobs.
        # A DAG node's ack releases its children, on any queue: the queue states say which
        # are paused (their pause holds the child), and any queue may be sent to.
        table.grant(self.workers, "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem")
        grant_read_queue_states(table, self.workers)
        for name, queue in queues.items():
            grant_queue(queue, self.workers, LEASE)
            grant_send(queue, self.workers)
            grant_send(dead_letter_queues[name], self.workers)
        for queue in priority_queues.values():  # leased first: critical and high jobs
            grant_queue(queue, self.workers, LEASE)
            grant_send(queue, self.workers)
        # dead_letters: read the job, mark a redriven one dead, put the index item. Its DLQ
        # event sources (stacks/dead_letters.py) grant consuming the DLQs. A redriven DAG node's
        # death is applied to its DAG: its descendants are cancelled (updates) or, with
        # on_failure=continue, released, i.e. sent to their queues.
        table.grant(
            self.dead_letter_indexer,
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:PutItem",
        )
        grant_read_queue_states(table, self.dead_letter_indexer)  # as workers, for the release
        for queue in job_queues:
            grant_send(queue, self.dead_letter_indexer)

    def _add_schedules_and_queues(
        self,
        table: dynamodb.ITable,
        job_queues: Sequence[sqs.IQueue],
        dead_letter_queues: Sequence[sqs.IQueue],
    ) -> None:
        """schedules: put and update schedules, query their runs (and read the runs' jobs), put
        an occurrence and its run record, and send occurrences due within the direct window.
        queues: read the sweep cursors (pause), update the queue state, and on resume
        range-query the shards and release what the pause held back (as schedules do)."""
        self.schedules = self._function(
            "schedules",
            "/schedules: recurring jobs, their runs, pause, resume",
            API_TIMEOUT,
            api=True,
        ).function
        self.queue_control = self._function(
            "queues",
            "GET /queues/{queue}, pause and resume (with its catch-up)",
            API_TIMEOUT,
            api=True,
        ).function
        for api_function in (self.schedules, self.queue_control):
            table.grant(
                api_function,
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:Query",
                "dynamodb:BatchGetItem",
            )
            for queue in job_queues:
                grant_send(queue, api_function)
        # A schedule's occurrence while it is paused is parked in a transaction that checks the
        # pause (ConditionCheckItem): by the schedules function, and by a queue's resume when
        # its catch-up meets an occurrence of a schedule paused meanwhile.
        table.grant(self.schedules, "dynamodb:ConditionCheckItem")
        # A delete marks the schedule deleted and deletes its item in the queue's schedule
        # index (GET /schedules?queue=) in one transaction.
        table.grant(self.schedules, "dynamodb:DeleteItem")
        table.grant(self.queue_control, "dynamodb:ConditionCheckItem")
        # GET /queues: each queue's depth (its queue, priority queue and DLQ), read-only.
        for queue in [*job_queues, *dead_letter_queues]:
            grant_queue(queue, self.queue_control, QUEUE_DEPTH)


def _common_environment(
    stack: Stack,
    settings: SundialSettings,
    *,
    table: dynamodb.ITable,
    queues: Mapping[str, sqs.IQueue],
    dead_letter_queues: Mapping[str, sqs.IQueue],
    priority_queues: Mapping[str, sqs.IQueue],
) -> dict[str, str]:
    """What every job function reads (sundial.settings.Settings)."""

    def urls(named: Mapping[str, sqs.IQueue]) -> str:
        return stack.to_json_string(
            {name: queue.queue_url for name, queue in sorted(named.items())}
        )

    return {
        ENV_TABLE_NAME: table.table_name,
        ENV_QUEUE_URLS: urls(queues),
        ENV_DEAD_LETTER_URLS: urls(dead_letter_queues),
        ENV_PRIORITY_QUEUE_URLS: urls(priority_queues),
        ENV_RETRY_DEFAULTS: retry_defaults_json(settings.queues),
        ENV_SHARD_COUNT: str(settings.shard_count),
        ENV_RETENTION_DAYS: str(settings.retention_days),
    }


def retry_defaults_json(queue_settings: Mapping[str, QueueSettings]) -> str:
    """SUNDIAL_RETRY_DEFAULTS: {queue name: {max_attempts, initial_delay_seconds, factor,
    max_delay_seconds}} as compact JSON with sorted keys (plain values, no CloudFormation tokens).
    """
    return json.dumps(
        {name: settings.retry.model_dump() for name, settings in queue_settings.items()},
        sort_keys=True,
        separators=(",", ":"),
    )


def dispatch_json(queue_settings: Mapping[str, QueueSettings]) -> str:
    """SUNDIAL_DISPATCH: {queue name: {max_per_second, weight}} as compact JSON with sorted
    keys, for the queues that differ from the defaults (uncapped, weight 1)."""
    return json.dumps(
        {
            name: {"max_per_second": q.max_dispatch_per_second, "weight": q.dispatch_weight}
            for name, q in queue_settings.items()
            if q.max_dispatch_per_second is not None or q.dispatch_weight != 1
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def construct_name(code_dir: str) -> str:
    """The construct id of the function in lambdas/<code_dir>: "sweeper" -> "Sweeper",
    "example_consumer" -> "ExampleConsumer"."""
    return "".join(part.capitalize() for part in code_dir.split("_"))


def _cfn_function(function: lambda_.Function) -> lambda_.CfnFunction:
    resource = function.node.default_child
    assert isinstance(resource, lambda_.CfnFunction)
    return resource


def _logical_id(function: lambda_.Function) -> str:
    """The CloudFormation logical id of a function, as cdk-nag prints it in finding ids."""
    return Stack.of(function).get_logical_id(_cfn_function(function))
