"""PATCH /jobs/{job_id} and POST /jobs/{job_id}/run-now through the jobs function, with HTTP API
v2 events: the answers a client sees for each status, and what GET shows afterwards."""

from __future__ import annotations

from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.wiring import Dependencies
from tests.support import call_api, load_handler

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")


def _submit(delay_s: int, payload: Any = "first") -> str:
    status, created = call_api(
        submit_lambda,
        "POST",
        "/jobs",
        body={"queue": "default", "delay_seconds": delay_s, "payload": payload},
    )
    assert status == 201, created
    return str(created["id"])


def _patch(job_id: str, body: Any) -> tuple[int, Any]:
    return call_api(jobs_lambda, "PATCH", f"/jobs/{job_id}", route="/jobs/{job_id}", body=body)


def _get(job_id: str) -> dict[str, Any]:
    status, job = call_api(jobs_lambda, "GET", f"/jobs/{job_id}", route="/jobs/{job_id}")
    assert status == 200, job
    return dict(job)


def _table(deps: Dependencies) -> list[dict[str, Any]]:
    return boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]


def test_a_change_answers_the_job_as_it_is_now_and_get_shows_its_moves(
    deps: Dependencies, clock: ManualClock
) -> None:
    job_id = _submit(3600)
    status, changed = _patch(
        job_id, {"run_at": "2026-11-21T15:00:00Z", "payload": {"to": "x"}, "priority": "low"}
    )
    assert status == 200, changed
    assert (changed["id"], changed["status"], changed["run_at"]) == (
        job_id,
        "pending",
        "2026-11-21T15:00:00.000Z",
    )
    assert (changed["payload"], changed["priority"], changed["revision"]) == ({"to": "x"}, "low", 1)
    # A second change, later: GET by the same id shows both, oldest first
    clock.advance(seconds=60)
    assert _patch(job_id, {"delay_seconds": 7200})[0] == 200
    job = _get(job_id)
    assert job["run_at"] == job["due_at"] == "2026-11-21T14:01:00.000Z"
    assert [(m["from_run_at"], m["to_run_at"], m["changed"]) for m in job["moves"]] == [
        ("2026-11-21T13:00:00.000Z", "2026-11-21T15:00:00.000Z", ["run_at", "priority", "payload"]),
        ("2026-11-21T15:00:00.000Z", "2026-11-21T14:01:00.000Z", ["run_at"]),
    ]
    assert job["moves"][1]["at"] == "2026-11-21T12:01:00.000Z"


def test_run_now_hands_the_job_to_sqs_at_once(deps: Dependencies) -> None:
    job_id = _submit(3600)
    status, job = call_api(
        jobs_lambda, "POST", f"/jobs/{job_id}/run-now", route="/jobs/{job_id}/run-now"
    )
    assert status == 200, job
    assert (job["id"], job["status"], job["run_at"]) == (
        job_id,
        "queued",
        "2026-11-21T12:00:00.000Z",
    )
    # Once queued, it can still change until a runner takes it; run-now again is harmless
    assert (
        call_api(jobs_lambda, "POST", f"/jobs/{job_id}/run-now", route="/jobs/{job_id}/run-now")[0]
        == 200
    )


def test_refusals_name_the_reason_and_change_nothing(deps: Dependencies) -> None:
    job_id = _submit(3600)
    before = _table(deps)
    cases = [
        ({}, 400, "at least one of"),
        ({"run_at": "2026-11-22T09:00:00Z", "delay_seconds": 5}, 400, "at most one"),
        ({"priority": None}, 400, "cannot be null"),
        ({"queue": "email"}, 400, "queue"),
        ({"run_at": "tomorrow"}, 400, "RFC 3339"),
        ({"delay_seconds": 40_000_000}, 400, "delay_seconds"),
        ({"run_at": "2028-06-01T00:00:00Z"}, 400, "366 days"),
    ]
    for body, status, words in cases:
        answer, error = _patch(job_id, body)
        assert answer == status, (body, error)
        assert words in str(error), (body, error)
    assert _patch("not-a-job-id", {"delay_seconds": 5})[0] == 400
    unknown = JobKey(shard=3, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2")
    assert _patch(unknown.job_id, {"delay_seconds": 5})[0] == 404
    assert _table(deps) == before
    # A cancelled job is a 409 that says why
    call_api(jobs_lambda, "DELETE", f"/jobs/{job_id}", route="/jobs/{job_id}")
    status, error = _patch(job_id, {"delay_seconds": 5})
    assert status == 409 and "cancelled" in error["message"]
    assert "only pending, paused or queued" in error["message"]
