"""The dead-letter indexer: every queue's DLQ feeds one function that indexes each message in
the job table (sundial.services.dead_letters), where the API browses, replays and purges them."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.grants import PolledQueue

BATCH_SIZE = 10
MAX_BATCHING_WINDOW = Duration.seconds(5)
MAX_CONCURRENCY = 2


class DeadLetterIndex(Construct):
    """Attaches `function` to every DLQ with partial batch failures: a letter that cannot be
    indexed stays in its DLQ (14 days' retention) and is tried again."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        dead_letter_queues: Mapping[str, sqs.IQueue],
    ) -> None:
        super().__init__(scope, construct_id)
        for _, dlq in sorted(dead_letter_queues.items()):
            # Receive, delete, GetQueueAttributes: granted by the event source, for the poller.
            function.add_event_source(
                PolledQueue(
                    dlq,
                    batch_size=BATCH_SIZE,
                    max_batching_window=MAX_BATCHING_WINDOW,
                    max_concurrency=MAX_CONCURRENCY,
                    report_batch_item_failures=True,
                )
            )
