"""The example consumer Lambda (on the consumer SDK) driven by real SQS event shapes."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.model.job import Status
from sundial.model.submission import SubmitJob
from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext, load_handler, sqs_event

consumer_lambda = load_handler("example_consumer")
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:default"


@pytest.fixture
def handler_clock(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    monkeypatch.setattr(consumer_lambda, "clock", clock)
    # The SDK reads the process's dependencies lazily; start from the test's.
    monkeypatch.setattr(consumer_lambda.job_consumer, "_attempts", None)
    return clock


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """What the handler's Powertools Logger writes (JSON lines; stdout in Lambda)."""
    handler = consumer_lambda.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


def _deliver(deps: Dependencies) -> dict[str, Any]:
    sqs = boto3.client("sqs")
    url = deps.settings.queue_urls["default"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    response: dict[str, Any] = consumer_lambda.handler(
        sqs_event(messages, QUEUE_ARN), FakeLambdaContext()
    )
    return response


def _ran(logs: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in logs.getvalue().splitlines() if x.startswith("{")]
    return [line for line in lines if line.get("message") == "job ran"]


def test_jobs_run_once_and_succeed_with_their_lateness(
    deps: Dependencies, handler_clock: ManualClock, logs: io.StringIO
) -> None:
    # Given two jobs due in 2 s, and the consumer running 2.25 s later
    ids = [deps.jobs.submit(SubmitJob(queue="default", delay_seconds=2)).job.id for _ in range(2)]
    handler_clock.advance(ms=2250)
    # When the example consumer handles the batch
    assert _deliver(deps) == {"batchItemFailures": []}
    # Then each ran once, was logged with its lateness, and is succeeded with that result
    ran = _ran(logs)
    assert sorted(line["id"] for line in ran) == sorted(ids)
    assert {line["lateness_ms"] for line in ran} == {250}
    for job_id in ids:
        job = deps.jobs.get(job_id)
        assert job.status is Status.SUCCEEDED
        assert json.loads(job.result_json or "{}") == {"lateness_ms": 250}


def test_a_job_asked_to_fail_is_retried(
    deps: Dependencies, handler_clock: ManualClock, logs: io.StringIO
) -> None:
    job_id = deps.jobs.submit(
        SubmitJob(queue="default", delay_seconds=0, payload={"fail": True})
    ).job.id
    assert _deliver(deps) == {"batchItemFailures": []}  # handled: a retry is scheduled
    job = deps.jobs.get(job_id)
    assert (job.status, job.attempts) == (Status.FAILED, 1)
    assert job.last_error is not None and job.last_error.error_type == "AskedToFailError"


def test_only_a_body_that_is_not_an_envelope_is_reported_failed(
    deps: Dependencies, handler_clock: ManualClock
) -> None:
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0))
    boto3.client("sqs").send_message(
        QueueUrl=deps.settings.queue_urls["default"], MessageBody='{"id": "x"}'
    )
    response = _deliver(deps)
    assert len(response["batchItemFailures"]) == 1
