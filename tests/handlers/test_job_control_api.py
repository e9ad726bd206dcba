"""POST /jobs/{job_id}/pause and /resume through the jobs function, with HTTP API v2 events."""

from __future__ import annotations

from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.wiring import Dependencies
from tests.support import call_api, load_handler

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")


def _control(job_id: str, action: str) -> tuple[int, Any]:
    path = f"/jobs/{job_id}/{action}"
    return call_api(jobs_lambda, "POST", path, route=f"/jobs/{{job_id}}/{action}")


def test_pause_then_resume_over_http(deps: Dependencies, clock: ManualClock) -> None:
    # Given a job due in 20 minutes
    _, created = call_api(
        submit_lambda, "POST", "/jobs", body={"queue": "default", "delay_seconds": 1200}
    )
    # When it is paused, it answers 200 paused, and GET shows when
    status, paused = _control(created["id"], "pause")
    assert (status, paused["status"], paused["id"]) == (200, "paused", created["id"])
    _, job = call_api(jobs_lambda, "GET", f"/jobs/{created['id']}", route="/jobs/{job_id}")
    assert job["status"] == "paused" and job["paused_at"] == "2026-11-21T12:00:00.000Z"
    # And pausing again is a 409 naming the status
    status, error = _control(created["id"], "pause")
    assert status == 409 and "paused" in error["message"]
    # When it is resumed 10 minutes later (due in 10): it is sent at once
    clock.advance(seconds=600)
    status, resumed = _control(created["id"], "resume")
    assert (status, resumed["status"]) == (200, "queued")
    # And resuming again is a 409
    status, error = _control(created["id"], "resume")
    assert status == 409 and "queued" in error["message"]


def test_bad_and_unknown_ids(deps: Dependencies) -> None:
    unknown = JobKey(shard=2, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id
    for action in ("pause", "resume"):
        status, error = _control("garbage", action)
        assert status == 400 and error["errors"][0]["field"] == "job_id"
        assert _control(unknown, action)[0] == 404
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0
