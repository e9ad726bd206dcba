"""What a new user stumbled on (issue 17's papercuts), each through the real handlers."""

from __future__ import annotations

import boto3

from sundial.clock import ManualClock
from sundial.wiring import Dependencies
from tests.support import TABLE, call_api, load_handler

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")
schedules_lambda = load_handler("schedules")


def _items() -> int:
    return int(boto3.client("dynamodb").scan(TableName=TABLE, Select="COUNT")["Count"])


def test_a_replay_without_a_body_replays_everything(deps: Dependencies) -> None:
    route = "/queues/{queue}/dead/replay"
    path = "/queues/email/dead/replay"
    without = call_api(jobs_lambda, "POST", path, route=route)
    assert without == call_api(jobs_lambda, "POST", path, route=route, body={})
    assert without[0] == 200 and without[1]["more"] is False


def test_an_unknown_route_answers_the_usual_error_shape(deps: Dependencies) -> None:
    status, error = call_api(jobs_lambda, "GET", "/nowhere")
    assert (status, error) == (404, {"message": "no such route", "errors": []})


def test_a_batch_repeating_an_idempotency_key_is_a_400_naming_it(deps: Dependencies) -> None:
    # Given two jobs of one batch with the same key
    job = {"queue": "email", "delay_seconds": 1200, "idempotency_key": "order-1"}
    status, error = call_api(submit_lambda, "POST", "/jobs/batch", body={"jobs": [job, job]})
    # Then the batch is refused, naming the second job's key (not "in progress, retry")
    assert status == 400
    assert error["errors"][0]["field"] == "jobs[1].idempotency_key"
    assert "repeats jobs[0]'s key" in error["errors"][0]["reason"]
    assert _items() == 0
    # And the same key on two queues is two keys
    other = {**job, "queue": "default"}
    status, result = call_api(submit_lambda, "POST", "/jobs/batch", body={"jobs": [job, other]})
    assert status == 200 and [r["status_code"] for r in result["results"]] == [201, 201]


def test_cron_errors_name_the_field_and_an_eventbridge_cron_is_explained(
    deps: Dependencies,
) -> None:
    status, error = call_api(
        schedules_lambda, "POST", "/schedules", body={"queue": "email", "cron": "0 6 * * ? *"}
    )
    assert status == 400 and "looks like an EventBridge cron" in error["message"]
    assert "write '0 6 * * *'" in error["message"]
    status, error = call_api(
        schedules_lambda, "POST", "/schedules", body={"queue": "email", "cron": "0 25 * * *"}
    )
    assert status == 400 and "the hour field '25'" in error["message"]
    assert "is not acceptable" not in error["message"]  # croniter's own words do not leak
    assert _items() == 0


def test_a_retried_job_shows_when_it_runs_now(deps: Dependencies, clock: ManualClock) -> None:
    # Given a job due in an hour, cancelled
    _, job = call_api(
        submit_lambda, "POST", "/jobs", body={"queue": "email", "delay_seconds": 3600}
    )
    route = "/jobs/{job_id}"
    assert call_api(jobs_lambda, "DELETE", f"/jobs/{job['id']}", route=route)[0] == 200
    # When it is retried two hours later
    clock.advance(seconds=7200)
    status, retried = call_api(
        jobs_lambda, "POST", f"/jobs/{job['id']}/retry", route="/jobs/{job_id}/retry"
    )
    # Then its run_at is the retry's time, and GET keeps the time it was first due
    assert status == 200 and retried["run_at"] == "2026-11-21T14:00:00.000Z"
    _, shown = call_api(jobs_lambda, "GET", f"/jobs/{job['id']}", route=route)
    assert shown["run_at"] == shown["retried_at"] == "2026-11-21T14:00:00.000Z"
    assert shown["due_at"] == job["run_at"] == "2026-11-21T13:00:00.000Z"
