"""Plays the SQS event source mapping around a consumer, against moto and the injected clock."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.consumer import JobConsumer
from sundial.dispatch.sweeper import Sweeper
from sundial.model.submission import SubmitJob
from sundial.transport.envelope import Envelope
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
        # Wired as the Lambdas are, on the metered session: the sweeper (schedules, queue
        # pauses), and the consumer as sundial.consumer wires it (its role's limits: a DAG node
        # released onto a paused queue is deferred with a timer), or with `lifecycle="worker"`
        # as the workers function ends attempts (it may record a paused queue's holds).
        wired = Dependencies(settings=deps.settings, clock=clock, session=self.session)
        lifecycle = options.pop("lifecycle", "consumer")
        consumer = lifecycle == "consumer"
        # The consumer's own clients and DAG node store: a test may hook their calls
        self.sqs, self.dynamodb = wired.sqs, wired.dynamodb
        self.dag_nodes = wired.consumer_dag_nodes if consumer else wired.dag_nodes
        self.sweeper: Sweeper = wired.sweeper
        self.calls: list[Envelope] = []
        # The Lambda context each invocation gets: its remaining time is the invocation's
        # deadline, which bounds the attempts it takes (a long job needs a long remaining time).
        self.context = FakeLambdaContext()

        def recorded(envelope: Envelope) -> Any:
            self.calls.append(envelope)
            return function(envelope)

        runner = wired.consumer_lifecycle if consumer else wired.attempts.deps
        self.consumer = JobConsumer(
            recorded, deps=lambda: dataclasses.replace(runner, rng=random.Random(42)), **options
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
