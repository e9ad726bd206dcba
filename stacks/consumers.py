"""Consumers: a Lambda function attached to one Sundial queue by an SQS event source mapping,
with the permissions the consumer SDK (sundial.consumer) needs for the job lifecycle."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.grants import HEARTBEAT, PolledQueue, grant_queue, grant_send
from stacks.job_queues import JobQueues
from stacks.job_table import grant_read_queue_states, grant_runner_items
from stacks.payload_bucket import PayloadBucket

# AWS guidance: a queue's visibility timeout should be at least six times the timeout of the
# function it triggers, so a batch can be retried after a throttle before it becomes visible
# again to another poller (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
VISIBILITY_TO_TIMEOUT_RATIO = 6
# AWS limits of an SQS event source mapping (standard queue).
MIN_BATCH_SIZE, MAX_BATCH_SIZE = 1, 10_000
MIN_MAX_CONCURRENCY, MAX_MAX_CONCURRENCY = 2, 1_000
# No batching window by default: Lambda's pollers invoke as soon as a receive returns messages
# (up to the batch size), so a job's start follows its visibility instead of waiting up to the
# window for a fuller batch (BENCHMARKS.md, section 2). A busy queue still fills its batches;
# a window of a few seconds saves invocations on a quiet one, at that much lateness.
DEFAULT_MAX_BATCHING_WINDOW = Duration.seconds(0)


class QueueConsumer(Construct):
    """Feeds `queue` to `function` in batches, with partial batch failures.

    The function must return `{"batchItemFailures": [...]}` (Powertools' `BatchProcessor` does):
    only the records it lists are retried, and SQS redrives each to the queue's DLQ after the
    queue's `max_receive_count`.

    Permissions, and nothing else: the event source grants what Lambda's poller needs on this
    queue (receive, delete, queue attributes), plus change visibility for the SDK's heartbeats;
    the function may also get, update and put job items in `table` within the attributes the
    SDK writes (stacks/job_table.py, grant_runner_items) and query its queue states, send
    to `queue` (retries, as new messages with DelaySeconds) and, if given, send to
    `dead_letter_queue`
    (jobs that are dead) and to each of `dag_child_queues`: when a job of this queue is a DAG
    node, its success releases its children by sending them to their queues (sundial.services.dags),
    so list the queues of the nodes that can follow this queue's nodes (none: this queue runs
    no DAG nodes with children on other queues). A queue of Sundial's `JobQueues` that has a
    priority queue brings it along (JobQueues.send_targets): a critical or high job of it,
    a retry or a released child, is sent there.

    `priority_queue` (the queue's priority queue, if it has one: stacks/job_queues.py) is fed
    to the same function by a second event source with its own `priority_max_concurrency`, so
    critical and high jobs have consumers a backlog of normal and low jobs cannot take up.

    `payload_bucket` and `queue_name` (the Sundial queue's name, as in cdk.json): the stack's
    payload bucket, whose objects of this queue the function may read (s3:GetObject on
    payloads/<queue_name>/*), and its name is set as SUNDIAL_PAYLOAD_BUCKET on a Function; the
    consumer SDK fetches a job's payload stored in S3 with it. Without them, such a job fails
    for good (to the DLQ) in this consumer.

    `function_timeout` and `queue_visibility_timeout` are passed in because neither an
    `IFunction` nor an `IQueue` exposes them; they must be the values actually configured. The
    props are checked at synth: the visibility timeout must be at least 6 x the function timeout,
    `batch_size` 1..10000 and `max_concurrency` 2..1000. A bad value raises ValueError.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: sqs.IQueue,
        function: lambda_.IFunction,
        table: dynamodb.ITable,
        dead_letter_queue: sqs.IQueue | None = None,
        dag_child_queues: Sequence[sqs.IQueue] = (),
        function_timeout: Duration,
        queue_visibility_timeout: Duration,
        batch_size: int = 10,
        max_batching_window: Duration = DEFAULT_MAX_BATCHING_WINDOW,
        max_concurrency: int = 2,
        priority_queue: sqs.IQueue | None = None,
        priority_max_concurrency: int = 2,
        payload_bucket: PayloadBucket | None = None,
        queue_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if (payload_bucket is None) != (queue_name is None):
            raise ValueError(f"{self.node.path}: give payload_bucket and queue_name together")
        _check_props(
            self.node.path,
            function_timeout=function_timeout,
            queue_visibility_timeout=queue_visibility_timeout,
            batch_size=batch_size,
            max_concurrency=max_concurrency,
            priority_max_concurrency=priority_max_concurrency,
        )
        self.queue = queue
        self.function = function
        self.table = table
        self.dead_letter_queue = dead_letter_queue
        self.event_source = _event_source(queue, batch_size, max_batching_window, max_concurrency)
        # The poller's receive, delete and GetQueueAttributes; the SDK's heartbeat.
        function.add_event_source(self.event_source)
        grant_queue(queue, function, HEARTBEAT)
        # The job table: read the job (the fence), update its attempt and DAG bookkeeping, put
        # retry timers (a retry beyond SQS's 15 minutes, a DAG node deferred by its queue's
        # pause), on job items only (grant_runner_items); query the queue states (which are
        # paused: a DAG node's success must not send a child whose queue is paused).
        grant_runner_items(table, function)
        grant_read_queue_states(table, function)
        if dead_letter_queue is not None:
            grant_send(dead_letter_queue, function)
        # Each queue once: retries (the queue's own, its priority queue's) and DAG children
        targets: list[sqs.IQueue] = []
        for target_queue in (queue, *dag_child_queues):
            for target in JobQueues.send_targets(target_queue):
                if not any(target is known for known in targets):
                    targets.append(target)
        for target in targets:
            grant_send(target, function)
        self.priority_queue = priority_queue
        self.priority_event_source: PolledQueue | None = None
        if priority_queue is not None:
            self.priority_event_source = _event_source(
                priority_queue, batch_size, max_batching_window, priority_max_concurrency
            )
            function.add_event_source(self.priority_event_source)
            grant_queue(priority_queue, function, HEARTBEAT)
            if not any(priority_queue is target for target in targets):
                grant_send(priority_queue, function)  # retries of critical and high jobs
        if payload_bucket is not None and queue_name is not None:
            # Payloads stored in S3: this queue's only (its priority queue's jobs are its own).
            payload_bucket.grant_get(function, queue_name)
            if isinstance(function, lambda_.Function):
                payload_bucket.bind(function)


def _check_props(
    path: str,
    *,
    function_timeout: Duration,
    queue_visibility_timeout: Duration,
    batch_size: int,
    max_concurrency: int,
    priority_max_concurrency: int,
) -> None:
    """Refuse (ValueError) props that would lose or starve messages, at synth."""
    timeout_s = function_timeout.to_seconds(integral=False)
    visibility_s = queue_visibility_timeout.to_seconds(integral=False)
    if visibility_s < VISIBILITY_TO_TIMEOUT_RATIO * timeout_s:
        raise ValueError(
            f"{path}: the queue visibility timeout ({visibility_s:g} s) must be at "
            f"least {VISIBILITY_TO_TIMEOUT_RATIO} x the function timeout ({timeout_s:g} s), "
            f"i.e. >= {VISIBILITY_TO_TIMEOUT_RATIO * timeout_s:g} s"
        )
    if not MIN_BATCH_SIZE <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(
            f"{path}: batch_size must be {MIN_BATCH_SIZE}..{MAX_BATCH_SIZE}, got {batch_size}"
        )
    for name, value in (
        ("max_concurrency", max_concurrency),
        ("priority_max_concurrency", priority_max_concurrency),
    ):
        if not MIN_MAX_CONCURRENCY <= value <= MAX_MAX_CONCURRENCY:
            raise ValueError(
                f"{path}: {name} must be {MIN_MAX_CONCURRENCY}..{MAX_MAX_CONCURRENCY}, got {value}"
            )


def _event_source(
    queue: sqs.IQueue, batch_size: int, max_batching_window: Duration, max_concurrency: int
) -> PolledQueue:
    """Partial batch responses: a failed job is retried alone, not its whole batch."""
    return PolledQueue(
        queue,
        batch_size=batch_size,
        max_batching_window=max_batching_window,
        max_concurrency=max_concurrency,
        report_batch_item_failures=True,
    )
