"""Plays the SQS event source mapping around a consumer, against moto and the injected clock."""

from __future__ import annotations

import json
import random
from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.consumer import MAX_RESULT_BYTES, ConsumerDeps, JobConsumer
from sundial.dispatch.sweeper import Sweeper
from sundial.model.submission import SubmitJob
from sundial.services.dag_progress import DagProgress
from sundial.store.attempts import AttemptStore
from sundial.store.dag_nodes import DagNodeStore
from sundial.store.jobs import JobStore
from sundial.transport.envelope import Envelope
from sundial.transport.sender import QueueSender
from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext, SentMessages, WriteMeter, sqs_event

ALL_SHARDS = list(range(8))


class Harness:
    """Plays the SQS event source mapping: receive, invoke the consumer, delete what it acked."""

    def __init__(
        self, deps: Dependencies, clock: ManualClock, function: Any, **options: Any
    ) -> None:
        self.deps, self.clock = deps, clock
        self.session = boto3.Session()
        self.meter = WriteMeter(self.session)
        self.sent = SentMessages(self.session)  # as the meter: before any client is made
        dynamodb, sqs = self.session.client("dynamodb"), self.session.client("sqs")
        self.sqs = sqs
        self.dynamodb = dynamodb  # the consumer's own client: a test may hook its calls
        store = JobStore(dynamodb, deps.settings.table_name)
        # Wired as the sweeper Lambda is (schedules, queue pauses), on the metered session.
        wired = Dependencies(settings=deps.settings, clock=clock, session=self.session)
        self.sweeper: Sweeper = wired.sweeper
        self.calls: list[Envelope] = []
        # The Lambda context each invocation gets: its remaining time is the invocation's
        # deadline, which bounds the attempts it takes (a long job needs a long remaining time).
        self.context = FakeLambdaContext()

        def recorded(envelope: Envelope) -> Any:
            self.calls.append(envelope)
            return function(envelope)

        queues = QueueSender(sqs, deps.settings.queue_urls)
        self.dag_nodes = DagNodeStore(dynamodb, deps.settings.table_name)
        dag_progress = DagProgress(  # on the consumer's own clients, as the Lambda has them
            store=store,
            nodes=self.dag_nodes,
            sender=queues,
            clock=clock,
            retention_days=deps.settings.retention_days,
            inline_results_bytes=MAX_RESULT_BYTES,
            releaser=wired.releaser,  # as the Lambdas are wired: a queue pause holds nodes
        )
        self.consumer = JobConsumer(
            recorded,
            deps=lambda: ConsumerDeps(
                store=store,
                attempt_store=AttemptStore(dynamodb, deps.settings.table_name),
                queues=queues,
                dead_letters=QueueSender(sqs, deps.settings.dead_letter_urls),
                settings=deps.settings,
                clock=clock,
                rng=random.Random(42),
                dags=lambda: dag_progress,
                payloads=wired.payloads,  # on the consumer's session, as the Lambda has it
            ),
            **options,
        )

    def poll(self, queue: str = "default") -> list[str]:
        """Deliver every visible message once. Returns the message ids the consumer failed."""
        url = self.deps.settings.queue_urls[queue]
        arn = f"arn:aws:sqs:us-east-1:123456789012:{queue}"
        failed: list[str] = []
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                return failed
            result = self.consumer.lambda_handler(sqs_event(messages, arn), self.context)
            not_done = {f["itemIdentifier"] for f in result["batchItemFailures"]}
            failed += sorted(not_done)
            for message in messages:
                if message["MessageId"] not in not_done:
                    self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def dead_letters(self, queue: str = "default") -> list[dict[str, Any]]:
        url = self.deps.settings.dead_letter_urls[queue]
        messages = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        return [json.loads(m["Body"]) for m in messages]


def delayed_job(deps: Dependencies, clock: ManualClock, harness: Harness, **fields: Any) -> str:
    """Submit a job an hour out, then sweep and wait until its message is visible."""
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600, **fields)).job.id
    clock.advance(seconds=3600 - 600)
    assert harness.sweeper.sweep(ALL_SHARDS).dispatched == 1
    clock.advance(seconds=601)
    return job_id
