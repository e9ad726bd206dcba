"""Per-queue quotas through the API functions (submit, dags, schedules), with HTTP API v2 events
and the manual clock: 429 with Retry-After and 413, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.wiring import Dependencies
from tests.support import DAILY_REPORT, FakeLambdaContext, http_api_event, load_handler

submit_lambda = load_handler("submit")
dags_lambda = load_handler("dags")
schedules_lambda = load_handler("schedules")

# `email` admits 3 jobs a second, each with a payload of at most 100 bytes; `default` is free.
QUOTAS = {"email": {"max_submissions_per_second": 3, "max_payload_bytes": 100}}
OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"


@pytest.fixture
def environ(environ: dict[str, str]) -> dict[str, str]:
    """The stack's environment, with SUNDIAL_QUOTAS as the stack sets it for these functions."""
    return {**environ, "SUNDIAL_QUOTAS": json.dumps(QUOTAS)}


def _post(handler: Any, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
    """(status, headers, JSON body) of a POST through the function."""
    event = http_api_event("POST", path, body=json.dumps(body))
    response = handler.handler(event, FakeLambdaContext())
    payload = response.get("body")
    return response["statusCode"], response.get("headers", {}), json.loads(payload or "null")


def _written(deps: Dependencies) -> list[dict[str, Any]]:
    """Every item a request writes (jobs, DAG nodes, idempotency records, schedules): all but
    the submission counters."""
    items = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]
    return [item for item in items if not item["pk"]["S"].startswith("quota#")]


def _messages(deps: Dependencies, queue: str) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=deps.settings.queue_urls[queue],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())


def _job(queue: str = "email", **fields: Any) -> dict[str, Any]:
    return {"queue": queue, "delay_seconds": 0, "payload": {"n": 1}, **fields}


def test_post_jobs_past_the_rate_is_429_with_retry_after_and_writes_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given `email`'s 3 submissions of this second taken
    for _ in range(3):
        assert _post(submit_lambda, "/jobs", _job())[0] == 201
    before, sent = _written(deps), _messages(deps, "email")
    # When a 4th job (due now, with an idempotency key) is submitted in the same second
    status, headers, body = _post(submit_lambda, "/jobs", _job(idempotency_key="k-4"))
    # Then it is 429, says when to come back, and names the queue and the limit
    assert status == 429
    assert headers["Retry-After"] == "1"
    assert "'email'" in body["message"] and "at most 3 submissions per second" in body["message"]
    # And nothing was written or sent: no job, no idempotency record, no message
    assert _written(deps) == before
    assert _messages(deps, "email") == sent
    # And a queue with no limit is not held back meanwhile
    assert _post(submit_lambda, "/jobs", _job("default"))[0] == 201
    # When the clock moves to the next second, the same request is admitted
    clock.advance(seconds=1)
    status, _, created = _post(submit_lambda, "/jobs", _job(idempotency_key="k-4"))
    assert (status, created["status"]) == (201, "queued")


def test_a_batch_is_counted_per_job_and_refused_whole(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a batch of 2 `email` jobs admitted (2 of the second's 3)
    status, _, results = _post(submit_lambda, "/jobs/batch", {"jobs": [_job(), _job()]})
    assert status == 200 and [r["status_code"] for r in results["results"]] == [201, 201]
    before = _written(deps)
    # When a batch with 2 more `email` jobs and a `default` one comes in the same second
    batch = {"jobs": [_job("default"), _job(), _job(delay_seconds=3600)]}
    status, headers, body = _post(submit_lambda, "/jobs/batch", batch)
    # Then the whole batch is 429, and none of it is written (not even the `default` job)
    assert (status, headers["Retry-After"]) == (429, "1")
    assert "'email'" in body["message"]
    assert _written(deps) == before
    # And the next second it is admitted whole
    clock.advance(seconds=1)
    status, _, results = _post(submit_lambda, "/jobs/batch", batch)
    assert status == 200 and [r["status_code"] for r in results["results"]] == [201] * 3


def test_a_batch_with_more_jobs_than_a_second_admits_is_413(deps: Dependencies) -> None:
    # When a batch carries 4 `email` jobs, more than the queue admits in a second
    status, headers, body = _post(submit_lambda, "/jobs/batch", {"jobs": [_job()] * 4})
    # Then it is 413 (no retry could pass it: split it), naming the list and the limit
    assert status == 413 and "Retry-After" not in headers
    assert body["errors"][0]["field"] == "jobs"
    assert "4 jobs for queue 'email'" in body["errors"][0]["reason"]
    assert "at most 3" in body["errors"][0]["reason"]
    # And nothing was written
    assert _written(deps) == []


def test_a_payload_over_its_queue_limit_is_413_on_every_route_that_creates_jobs(
    deps: Dependencies,
) -> None:
    big = {"text": "x" * 100}  # 111 bytes as compact JSON; `email` takes at most 100
    # When a job, a batch, a DAG and a schedule carry it to `email`
    answers = [
        _post(submit_lambda, "/jobs", _job(payload=big)),
        _post(submit_lambda, "/jobs/batch", {"jobs": [_job(), _job(payload=big)]}),
        _post(
            dags_lambda,
            "/dags",
            {
                **DAILY_REPORT,
                "nodes": {
                    **DAILY_REPORT["nodes"],
                    "load_cache": {**DAILY_REPORT["nodes"]["load_cache"], "payload": big},
                },
            },
        ),
        _post(schedules_lambda, "/schedules", {"queue": "email", "rate": "1 hour", "payload": big}),
    ]
    # Then each is 413 naming the field, the size, the queue and the limit
    reason = "payload is 111 bytes; queue 'email' accepts at most 100"
    fields = ["payload", "jobs[1].payload", "nodes.load_cache.payload", "payload"]
    for (status, _, body), field in zip(answers, fields, strict=True):
        assert status == 413, body
        assert body["errors"] == [{"field": field, "reason": reason}]
        assert body["message"] == f"{field}: {reason}"
    # And nothing was written, nor counted: the same payload is fine on a queue with no limit
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0
    assert _post(submit_lambda, "/jobs", _job("default", payload=big))[0] == 201


def test_a_dag_counts_each_node_on_its_queue(deps: Dependencies, clock: ManualClock) -> None:
    # Given 2 of `email`'s 3 submissions of this second taken
    for _ in range(2):
        assert _post(submit_lambda, "/jobs", _job())[0] == 201
    before = _written(deps)
    # When the daily_report DAG (2 nodes on `email`, 3 on `default`) is submitted
    status, headers, body = _post(dags_lambda, "/dags", DAILY_REPORT)
    # Then it is 429 and no node is written
    assert (status, headers["Retry-After"]) == (429, "1"), body
    assert _written(deps) == before
    # And the next second it is created
    clock.advance(seconds=1)
    status, _, created = _post(dags_lambda, "/dags", DAILY_REPORT)
    assert status == 201 and len(created["nodes"]) == 5


def test_schedules_and_their_occurrences_are_not_counted(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given `email`'s submissions of this second all taken
    for _ in range(3):
        assert _post(submit_lambda, "/jobs", _job())[0] == 201
    # When a schedule on `email` is created (its first occurrence due now is sent by the call)
    status, _, created = _post(
        schedules_lambda, "/schedules", {"queue": "email", "rate": "10 seconds"}
    )
    # Then it is created: a schedule's occurrences are not submissions
    assert status == 201, created


def test_openapi_documents_413_and_429_with_retry_after() -> None:
    paths = json.loads(OPENAPI.read_text())["paths"]
    for path in ("/jobs", "/jobs/batch", "/dags"):
        responses = paths[path]["post"]["responses"]
        assert {"413", "429"} <= set(responses), path
        header = responses["429"]["headers"]["Retry-After"]
        assert header["schema"]["type"] == "integer"
    assert "413" in paths["/schedules"]["post"]["responses"]


def test_a_schedule_update_over_its_queues_payload_limit_is_413_and_writes_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    status, _, created = _post(schedules_lambda, "/schedules", {"queue": "email", "rate": "1 hour"})
    assert status == 201, created
    before = _written(deps)
    # When an update gives a payload over `email`'s 100 bytes
    event = http_api_event(
        "PATCH",
        f"/schedules/{created['id']}",
        body=json.dumps({"payload": "x" * 120}),
        route="/schedules/{schedule_id}",
    )
    response = schedules_lambda.handler(event, FakeLambdaContext())
    # Then it is 413 naming the payload and the limit, and nothing changed
    body = json.loads(response["body"])
    assert response["statusCode"] == 413, body
    assert "queue 'email' accepts at most 100" in body["errors"][0]["reason"]
    assert _written(deps) == before
    assert (
        "413"
        in json.loads(OPENAPI.read_text())["paths"]["/schedules/{schedule_id}"]["patch"][
            "responses"
        ]
    )
