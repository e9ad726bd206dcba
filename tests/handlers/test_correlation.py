"""One job followed end to end by the id of the API request that submitted it: the job keeps it,
the sweeper logs it with the job, the envelope carries it, the consumer logs it on every line
of the job's run, and the history event has it (docs/operations.md, "Follow one job")."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext, http_api_event, load_handler, sqs_event

submit_lambda = load_handler("submit")
sweeper_lambda = load_handler("sweeper")
consumer_lambda = load_handler("example_consumer")
REQUEST_ID = "JKJaXmPLvHcESHA="  # tests.support.http_api_event's requestContext.requestId


@pytest.fixture
def consumer_logs(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    monkeypatch.setattr(consumer_lambda, "clock", clock)
    monkeypatch.setattr(consumer_lambda.job_consumer, "_attempts", None)
    handler = consumer_lambda.logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    yield buffer
    handler.setStream(previous)


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _submit(body: dict[str, Any], path: str = "/jobs") -> dict[str, Any]:
    response = submit_lambda.handler(
        http_api_event("POST", path, body=json.dumps(body)), FakeLambdaContext()
    )
    assert response["statusCode"] in (200, 201), response
    result: dict[str, Any] = json.loads(response["body"])
    return result


def test_a_job_carries_its_submit_requests_id_to_its_consumer(
    deps: Dependencies,
    clock: ManualClock,
    consumer_logs: io.StringIO,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a job submitted over the API, due in 1000 s (so the sweeper sends it)
    job_id = _submit({"queue": "default", "delay_seconds": 1000, "payload": {"n": 1}})["id"]
    # Then the stored job keeps the request's id
    stored = deps.store.get(JobKey.from_job_id(job_id))
    assert stored is not None and stored.correlation_id == REQUEST_ID
    # When the sweeper sends it
    clock.advance(seconds=1000)
    caplog.set_level(logging.INFO, logger="sundial.dispatch.shard_sends")
    assert (
        sweeper_lambda.handler({"shards": list(range(8))}, FakeLambdaContext())["dispatched"] == 1
    )
    # Then its log names the job with the request's id
    [sent] = [r for r in caplog.records if r.getMessage() == "jobs sent"]
    assert sent.__dict__["jobs"] == {job_id: REQUEST_ID}
    # And the envelope carries it
    url = deps.settings.queue_urls["default"]
    [message] = boto3.client("sqs").receive_message(QueueUrl=url)["Messages"]
    assert json.loads(message["Body"])["correlation_id"] == REQUEST_ID
    # And every log line of the consumer's run of it has the job and the request
    consumer_lambda.handler(
        sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:default"), FakeLambdaContext()
    )
    lines = [line for line in _lines(consumer_logs.getvalue()) if "job_id" in line]
    # ("job ran" is the example function's own line: the job's code logs with them too)
    assert "job ran" in {line["message"] for line in lines}
    assert all((line["job_id"], line["correlation_id"]) == (job_id, REQUEST_ID) for line in lines)
    # And the next record of the batch starts without them
    assert "job_id" not in consumer_lambda.logger.thread_safe_get_current_keys()


def test_every_job_of_a_batch_and_every_node_of_a_dag_has_its_requests_id(
    deps: Dependencies, clock: ManualClock
) -> None:
    batch = _submit(
        {"jobs": [{"queue": "default", "delay_seconds": 60 * n} for n in (1, 30)]}, "/jobs/batch"
    )
    for result in batch["results"]:
        stored = deps.store.get(JobKey.from_job_id(result["job"]["id"]))
        assert stored is not None and stored.correlation_id == REQUEST_ID
    dags_lambda = load_handler("dags")
    body = {
        "name": "etl",
        "nodes": {"a": {"queue": "default"}, "b": {"queue": "default", "depends_on": ["a"]}},
    }
    response = dags_lambda.handler(
        http_api_event("POST", "/dags", body=json.dumps(body)), FakeLambdaContext()
    )
    assert response["statusCode"] == 201, response
    for node in json.loads(response["body"])["nodes"].values():
        stored = deps.store.get(JobKey.from_job_id(node["id"]))
        assert stored is not None and stored.correlation_id == REQUEST_ID
