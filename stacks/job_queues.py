"""The job queues: per configured queue name, an SQS queue with a dead-letter queue."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.settings import QueueSettings

DLQ_RETENTION = Duration.days(14)
# The dead-letter indexer drains every DLQ; 6x its 10 s timeout (stacks/consumers.py).
DLQ_VISIBILITY_TIMEOUT = Duration.seconds(60)


class JobQueues(Construct):
    """One SQS queue per team queue name, each redriving to its own DLQ after max_receive_count.

    `queues` maps the queue name (as used in the API's `queue` field) to its SQS queue, and
    `dead_letter_queues` maps the same names to their DLQs (SUNDIAL_DEAD_LETTER_URLS; the
    consumer SDK sends dead jobs there itself, besides SQS's redrive).

    A queue configured with `priority_queue` also gets `<name>-priority` (and its own DLQ,
    `<name>-priority-dlq`), in `priority_queues` / `priority_dead_letter_queues`: its critical
    and high jobs are sent there (SUNDIAL_PRIORITY_QUEUE_URLS). Dead jobs still go to the
    queue's main DLQ; the priority DLQ catches only messages SQS itself redrives.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue_settings: Mapping[str, QueueSettings],
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        # Retained by default: a destroy or a replacement must not take the jobs already
        # handed to SQS, or 14 days of dead letters, with it.
        self._removal_policy = removal_policy
        self.queues: dict[str, sqs.Queue] = {}
        self.dead_letter_queues: dict[str, sqs.Queue] = {}
        self.priority_queues: dict[str, sqs.Queue] = {}
        self.priority_dead_letter_queues: dict[str, sqs.Queue] = {}
        for name, settings in sorted(queue_settings.items()):
            self.queues[name], self.dead_letter_queues[name] = self._queue_pair(name, settings)
            if settings.priority_queue:
                pair = self._queue_pair(f"{name}-priority", settings)
                self.priority_queues[name], self.priority_dead_letter_queues[name] = pair

    @staticmethod
    def send_targets(queue: sqs.IQueue) -> list[sqs.IQueue]:
        """Every SQS queue a job of `queue` may be sent to: `queue` itself and, when it is a
        JobQueues queue with a priority queue, that one too (its critical and high jobs go
        there). For granting send to whatever may hand a job of `queue` to SQS."""
        owner = queue.node.scope
        if isinstance(owner, JobQueues):
            for name, candidate in owner.queues.items():
                if candidate is queue and name in owner.priority_queues:
                    return [queue, owner.priority_queues[name]]
        return [queue]

    def _queue_pair(self, name: str, settings: QueueSettings) -> tuple[sqs.Queue, sqs.Queue]:
        dlq = sqs.Queue(
            self,
            f"{name}-dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
            visibility_timeout=DLQ_VISIBILITY_TIMEOUT,
            removal_policy=self._removal_policy,
        )
        queue = sqs.Queue(
            self,
            name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(settings.visibility_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=dlq,
                max_receive_count=settings.max_receive_count,
            ),
            removal_policy=self._removal_policy,
        )
        return queue, dlq
