"""The API Lambdas driven by real API Gateway HTTP API (v2) event shapes."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from sundial.ids import JobKey
from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext, http_api_event, load_handler

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")


def _call(method: str, path: str, body: Any = None, *, raw: str | None = None) -> tuple[int, Any]:
    route = "/jobs/{job_id}" if path.count("/") == 2 and not path.endswith("/batch") else None
    text = raw if raw is not None else (json.dumps(body) if body is not None else None)
    event = http_api_event(method, path, body=text, route=route)
    target = submit_lambda if method == "POST" else jobs_lambda
    response = target.handler(event, FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def _item_count(deps: Dependencies) -> int:
    return boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"]


def test_submit_get_cancel(deps: Dependencies) -> None:
    # When a job is submitted
    status, created = _call(
        "POST", "/jobs", {"queue": "default", "delay_seconds": 3600, "payload": {"to": "a@b.c"}}
    )
    # Then it is 201 with the contract's fields
    assert status == 201
    assert created["queue"] == "default"
    assert created["status"] == "pending"
    assert created["run_at"] == "2026-11-21T13:00:00.000Z"
    # And GET returns it in full
    status, job = _call("GET", f"/jobs/{created['id']}")
    assert status == 200
    assert job["id"] == created["id"]
    assert job["attempts"] == 0 and job["max_attempts"] == 3
    assert job["created_at"] == "2026-11-21T12:00:00.000Z"
    assert job["payload"] == {"to": "a@b.c"}
    # And DELETE cancels it, twice over
    assert _call("DELETE", f"/jobs/{created['id']}") == (
        200,
        {"id": created["id"], "status": "cancelled"},
    )
    assert _call("DELETE", f"/jobs/{created['id']}")[0] == 200
    assert _call("GET", f"/jobs/{created['id']}")[1]["status"] == "cancelled"


def test_submit_with_run_at_and_priority(deps: Dependencies) -> None:
    status, created = _call(
        "POST",
        "/jobs",
        {"queue": "email", "run_at": "2026-11-22T09:00:00+01:00", "priority": "critical"},
    )
    assert status == 201
    assert created["run_at"] == "2026-11-22T08:00:00.000Z"
    assert created["priority"] == "critical"


def test_an_immediate_job_is_queued(deps: Dependencies) -> None:
    status, created = _call("POST", "/jobs", {"queue": "default", "delay_seconds": 0})
    assert (status, created["status"]) == (201, "queued")


def test_idempotent_repeat_returns_the_first_job_with_200(deps: Dependencies) -> None:
    body = {"queue": "default", "delay_seconds": 3600, "idempotency_key": "invoice-7"}
    first_status, first = _call("POST", "/jobs", body)
    count = _item_count(deps)
    again_status, again = _call("POST", "/jobs", body)
    assert (first_status, again_status) == (201, 200)
    assert again["id"] == first["id"]
    assert _item_count(deps) == count
    reused_status, reused = _call("POST", "/jobs", {**body, "payload": "other"})
    assert reused_status == 409 and "idempotency_key" in reused["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"payload": 1, "delay_seconds": 1}, "queue"),
        ({"queue": "nope", "delay_seconds": 1}, "queue"),
        ({"queue": "default"}, "run_at"),
        ({"queue": "default", "delay_seconds": 1, "run_at": "2026-11-21T13:00:00Z"}, "run_at"),
        ({"queue": "default", "run_at": "21/11/2026 13:00"}, "run_at"),
        ({"queue": "default", "run_at": "2026-11-21 13:00:00"}, "run_at"),
        ({"queue": "default", "delay_seconds": -5}, "delay_seconds"),
        ({"queue": "default", "delay_seconds": 1, "priority": "asap"}, "priority"),
        ({"queue": "default", "delay_seconds": 1, "extra": True}, "extra"),
        ([1, 2], "body"),
        ("just a string", "body"),
    ],
)
def test_bad_submit_is_400_naming_the_field_and_changes_nothing(
    deps: Dependencies, body: Any, field: str
) -> None:
    status, error = _call("POST", "/jobs", body)
    assert status == 400, error
    assert field in {e["field"] for e in error["errors"]}, error
    assert error["message"]
    assert _item_count(deps) == 0


@pytest.mark.parametrize("raw", ["{not json", "", "null"])
def test_unparseable_body_is_400(deps: Dependencies, raw: str) -> None:
    status, error = _call("POST", "/jobs", raw=raw)
    assert status == 400, error
    assert error["errors"][0]["field"] in {"body", "queue"}
    assert _item_count(deps) == 0


def test_batch_returns_a_result_per_job(deps: Dependencies) -> None:
    jobs = [{"queue": "default", "delay_seconds": i * 600, "payload": i} for i in range(5)]
    jobs.append({"queue": "email", "delay_seconds": 60, "idempotency_key": "b-1"})
    status, result = _call("POST", "/jobs/batch", {"jobs": jobs})
    assert status == 200
    assert [r["index"] for r in result["results"]] == list(range(6))
    assert {r["status_code"] for r in result["results"]} == {201}
    statuses = [r["job"]["status"] for r in result["results"]]
    assert statuses == ["queued", "queued", "pending", "pending", "pending", "queued"]
    # A repeat of the keyed job inside a new batch returns the first one
    status, again = _call("POST", "/jobs/batch", {"jobs": [jobs[-1]]})
    assert again["results"][0]["status_code"] == 200
    assert again["results"][0]["job"]["id"] == result["results"][-1]["job"]["id"]


def test_batch_over_25_or_with_a_bad_job_is_400_and_writes_nothing(deps: Dependencies) -> None:
    job = {"queue": "default", "delay_seconds": 1}
    status, error = _call("POST", "/jobs/batch", {"jobs": [job] * 26})
    assert status == 400 and error["errors"][0]["field"] == "jobs"
    status, error = _call("POST", "/jobs/batch", {"jobs": [job, {**job, "delay_seconds": -1}]})
    assert status == 400 and error["errors"][0]["field"] == "jobs[1].delay_seconds"
    status, error = _call("POST", "/jobs/batch", {"jobs": [job, {**job, "queue": "zzz"}]})
    assert status == 400 and error["errors"][0]["field"] == "jobs[1].queue"
    assert _item_count(deps) == 0


def test_unknown_id_is_404_and_malformed_id_is_400(deps: Dependencies) -> None:
    unknown = JobKey(shard=2, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id
    for method in ("GET", "DELETE"):
        assert _call(method, f"/jobs/{unknown}")[0] == 404
        status, error = _call(method, "/jobs/garbage")
        assert status == 400 and error["errors"][0]["field"] == "job_id"
    assert _item_count(deps) == 0


@pytest.mark.parametrize("status", ["running", "succeeded", "dead"])
def test_cancel_running_or_finished_is_409(deps: Dependencies, status: str) -> None:
    _, created = _call("POST", "/jobs", {"queue": "default", "delay_seconds": 3600})
    key = JobKey.from_job_id(created["id"])
    boto3.client("dynamodb").update_item(
        TableName=deps.settings.table_name,
        Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": status}},
    )
    code, error = _call("DELETE", f"/jobs/{created['id']}")
    assert code == 409 and status in error["message"]


def test_a_json_body_sent_with_a_form_content_type_is_read_as_json(deps: Dependencies) -> None:
    # Given curl -d, which labels the body application/x-www-form-urlencoded
    event = http_api_event("POST", "/jobs", body='{"queue": "default", "delay_seconds": 60}')
    event["headers"]["content-type"] = "application/x-www-form-urlencoded"
    # Then the job is accepted as if it were labelled JSON
    response = submit_lambda.handler(event, FakeLambdaContext())
    assert response["statusCode"] == 201, response["body"]


def test_retry_over_http(deps: Dependencies) -> None:
    _, created = _call("POST", "/jobs", {"queue": "default", "delay_seconds": 3600})

    def retry(job_id: str) -> tuple[int, Any]:
        event = http_api_event("POST", f"/jobs/{job_id}/retry", route="/jobs/{job_id}/retry")
        event["pathParameters"] = {"job_id": job_id}
        response = jobs_lambda.handler(event, FakeLambdaContext())
        return response["statusCode"], json.loads(response["body"])

    status, error = retry(created["id"])
    assert status == 409 and "pending" in error["message"]
    _call("DELETE", f"/jobs/{created['id']}")
    status, job = retry(created["id"])
    assert (status, job["status"]) == (200, "queued")
    assert retry("garbage")[0] == 400
    unknown = JobKey(shard=2, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id
    assert retry(unknown)[0] == 404
