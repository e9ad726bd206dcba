"""The example consumer Lambda driven by real SQS event shapes: logs each job, reports bad ones."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from ulid import ULID

from sundial.clock import ManualClock
from sundial.envelope import envelope_body
from sundial.ids import JobKey
from sundial.models import Job, Priority
from tests.support import FakeLambdaContext, load_handler

consumer_lambda = load_handler("example_consumer")

DUE_MS = int(datetime(2026, 11, 21, 12, 0, tzinfo=UTC).timestamp() * 1000)
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:Sundial-demo"


def _job(priority: Priority = Priority.HIGH) -> Job:
    return Job(
        key=JobKey(shard=3, due_ms=DUE_MS, ulid=str(ULID())),
        queue="demo",
        payload_json='{"n":1}',
        priority=priority,
        max_attempts=3,
        created_at_ms=DUE_MS - 60_000,
    )


def _record(message_id: str, body: str) -> dict[str, Any]:
    """One SQS record exactly as the Lambda event source mapping delivers it."""
    return {
        "messageId": message_id,
        "receiptHandle": f"AQEB{message_id}Zg==",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(DUE_MS - 1_000),
            "SenderId": "AROAIWPX5BD2BHG722MW4:sundial-sweeper",
            "ApproximateFirstReceiveTimestamp": str(DUE_MS + 5),
        },
        "messageAttributes": {},
        "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def _event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """The handler's clock, 250 ms after the jobs' due time."""
    manual = ManualClock(DUE_MS + 250)
    monkeypatch.setattr(consumer_lambda, "clock", manual)
    return manual


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """What the handler's Powertools Logger writes (JSON lines; stdout in Lambda). Its stream
    handler was bound to sys.stdout at import, before capsys could swap it, so swap it here."""
    handler = consumer_lambda.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


def _json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def _jobs_ran(logs: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in _json_lines(logs.getvalue()) if line.get("message") == "job ran"]


def test_a_batch_of_valid_envelopes_all_succeed(clock: ManualClock, logs: io.StringIO) -> None:
    # Given an SQS batch of three valid Sundial envelopes
    jobs = [_job(), _job(Priority.LOW), _job(Priority.CRITICAL)]
    event = _event(*(_record(f"m{n}", envelope_body(job, attempt=1)) for n, job in enumerate(jobs)))

    # When the consumer handles it
    response = consumer_lambda.handler(event, FakeLambdaContext())

    # Then no record is reported failed, so SQS deletes the whole batch
    assert response == {"batchItemFailures": []}
    # And each job is logged once, with its envelope fields and its lateness
    ran = _jobs_ran(logs)
    assert [line["id"] for line in ran] == [job.id for job in jobs]
    assert ran[0]["queue"] == "demo"
    assert ran[0]["attempt"] == 1
    assert ran[0]["priority"] == "high"
    assert ran[0]["run_at"] == "2026-11-21T12:00:00.000Z"
    assert ran[0]["lateness_ms"] == 250
    assert ran[0]["message_id"] == "m0"


def test_only_the_bad_record_is_reported_failed(clock: ManualClock, logs: io.StringIO) -> None:
    # Given a batch of three where the middle body is not an envelope (no run_at, attempt, ...)
    good = [_job(), _job()]
    event = _event(
        _record("good-1", envelope_body(good[0], attempt=1)),
        _record("bad", json.dumps({"id": "x", "queue": "demo"})),
        _record("good-2", envelope_body(good[1], attempt=2)),
    )

    # When the consumer handles it
    response = consumer_lambda.handler(event, FakeLambdaContext())

    # Then exactly that message is reported, so only it is retried (and, after the queue's
    # max_receive_count, redriven to the DLQ)
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad"}]}
    # And the good jobs still ran
    ran = _jobs_ran(logs)
    assert [(line["id"], line["attempt"]) for line in ran] == [(good[0].id, 1), (good[1].id, 2)]


def test_jobs_run_metric_counts_the_jobs_that_ran(
    clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a batch of two good envelopes and one body that is not JSON at all
    event = _event(
        _record("a", envelope_body(_job(), attempt=1)),
        _record("b", "not json"),
        _record("c", envelope_body(_job(), attempt=1)),
    )

    # When the consumer handles it
    consumer_lambda.handler(event, FakeLambdaContext())

    # Then the EMF blob it prints to stdout counts two JobsRun
    metrics = [line for line in _json_lines(capsys.readouterr().out) if "_aws" in line]
    assert len(metrics) == 1
    assert metrics[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Sundial"
    assert metrics[0]["JobsRun"] == [1.0, 1.0]


def test_a_batch_with_no_valid_envelope_fails_the_invocation(clock: ManualClock) -> None:
    # Given a batch in which no body is an envelope
    event = _event(_record("x", "{}"), _record("y", "[]"))

    # When the consumer handles it
    # Then Powertools fails the whole invocation (every record failed), so SQS retries them all:
    # the same outcome as listing each in batchItemFailures
    with pytest.raises(BatchProcessingError, match="All records failed processing"):
        consumer_lambda.handler(event, FakeLambdaContext())
