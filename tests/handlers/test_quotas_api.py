"""Per-queue quotas through the API functions (submit, dags, schedules), with HTTP API v2 events
and the manual clock: 429 with Retry-After and 413, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock, to_rfc3339
from sundial.model.submission import SubmitJob
from sundial.wiring import Dependencies
from tests.support import DAILY_REPORT, FakeLambdaContext, http_api_event, load_handler

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")
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


def _call(
    handler: Any, method: str, path: str, route: str, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, JSON body) of a call to a route addressed by id."""
    event = http_api_event(
        method, path, body=json.dumps(body) if body is not None else None, route=route
    )
    response = handler.handler(event, FakeLambdaContext())
    return response["statusCode"], response.get("headers", {}), json.loads(response["body"])


def _jobs_on(deps: Dependencies, queue: str) -> int:
    items = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]
    return sum(1 for item in items if item.get("queue", {}).get("S") == queue and "status" in item)


def test_ten_fast_schedules_in_one_second_are_held_to_the_submission_quota(
    deps: Dependencies, clock: ManualClock
) -> None:
    # The review's attack: ten POST /schedules with rate(10 seconds) in one second on a queue
    # that admits 3 submissions a second. Each create sends every occurrence due within 15
    # minutes itself (91) and writes the next: 92 jobs; all ten used to be admitted (920 jobs).
    answers = [
        _post(schedules_lambda, "/schedules", {"queue": "email", "rate": "10 seconds"})
        for _ in range(10)
    ]
    # Then the first is created, and counted as its 92 jobs over the next 31 seconds (3 a
    # second: it could not be split as a batch can)
    assert answers[0][0] == 201, answers[0][2]
    assert _jobs_on(deps, "email") == 92 and _messages(deps, "email") == 91
    # And the nine others are 429s naming the queue, the limit and why, and say when the
    # quota is free again; none of them wrote anything
    for status, headers, body in answers[1:]:
        assert status == 429, body
        assert "queue 'email' accepts at most 3 submissions per second" in body["message"]
        assert "this request writes 92 jobs at once" in body["message"]
        assert headers["Retry-After"] == "30"  # the 31st second has room for 1 of them
    assert _listed(deps, "email") == [answers[0][2]["id"]]
    assert _jobs_on(deps, "email") == 92
    # And those seconds admit nothing else on `email`: a job 10 seconds later is refused
    clock.advance(seconds=10)
    assert _post(submit_lambda, "/jobs", _job())[0] == 429
    # When the 31 seconds have passed, the queue admits again
    clock.advance(seconds=21)
    assert _post(submit_lambda, "/jobs", _job())[0] == 201


def _listed(deps: Dependencies, queue: str) -> list[str]:
    schedules, _ = deps.schedules.of_queue(queue, limit=100, cursor=None)
    return [schedule.id for schedule in schedules]


def test_a_schedule_that_starts_later_than_15_minutes_counts_one(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 2 of `email`'s 3 submissions of this second taken
    for _ in range(2):
        assert _post(submit_lambda, "/jobs", _job())[0] == 201
    # When a 10-second schedule starting in 20 minutes is created: it writes its first
    # occurrence only (the sweepers write the rest, as the occurrences come)
    later = to_rfc3339(clock.now_ms() + 20 * 60_000)
    body = {"queue": "email", "rate": "10 seconds", "start_at": later}
    status, _, created = _post(schedules_lambda, "/schedules", body)
    # Then it is created, counted as one: the window is now full
    assert status == 201, created
    assert _post(submit_lambda, "/jobs", _job())[0] == 429
    # And on a queue with no limit nothing is counted
    assert _post(schedules_lambda, "/schedules", {**body, "queue": "default"})[0] == 201


def test_a_schedule_update_and_resume_count_what_they_send(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an hourly schedule on `email` (it sends its first occurrence: 2 jobs counted)
    status, _, created = _post(schedules_lambda, "/schedules", {"queue": "email", "rate": "1 hour"})
    assert status == 201, created
    path, route = f"/schedules/{created['id']}", "/schedules/{schedule_id}"
    clock.advance(seconds=1)
    # When an update makes it every 10 seconds while the second's window is full
    for _ in range(3):
        assert _post(submit_lambda, "/jobs", _job())[0] == 201
    before = _written(deps)
    status, headers, body = _call(schedules_lambda, "PATCH", path, route, {"rate": "10 seconds"})
    # Then it is a 429 that changed nothing
    assert (status, headers["Retry-After"]) == (429, "1"), body
    assert "this request writes 91 jobs at once" in body["message"]
    assert _written(deps) == before
    # And the next second it is applied, counted over the seconds after
    clock.advance(seconds=1)
    status, _, updated = _call(schedules_lambda, "PATCH", path, route, {"rate": "10 seconds"})
    assert (status, updated["revision"]) == (200, 1), updated
    assert _post(submit_lambda, "/jobs", _job())[0] == 429
    # When it is paused and, once the quota is free, its window is filled and it is resumed
    assert _call(schedules_lambda, "POST", f"{path}/pause", f"{route}/pause")[0] == 200
    clock.advance(seconds=40)
    for _ in range(3):
        assert _post(submit_lambda, "/jobs", _job())[0] == 201
    before = _written(deps)
    status, headers, body = _call(schedules_lambda, "POST", f"{path}/resume", f"{route}/resume")
    # Then the resume is refused too (it would send its paused occurrences again and the new
    # ones within 15 minutes), and the schedule stays paused, unchanged
    assert status == 429, body
    assert _written(deps) == before
    # And the next second it resumes
    clock.advance(seconds=1)
    status, _, resumed = _call(schedules_lambda, "POST", f"{path}/resume", f"{route}/resume")
    assert (status, resumed["state"]) == (200, "active"), resumed


def test_a_move_a_run_now_and_a_retry_by_id_count_one_each(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a job on `email` an hour out, and a cancelled one
    status, _, waiting = _post(submit_lambda, "/jobs", _job(delay_seconds=3600))
    assert status == 201
    cancelled = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=3600)).job
    deps.jobs.cancel(cancelled.id)
    clock.advance(seconds=1)
    job, route = f"/jobs/{waiting['id']}", "/jobs/{job_id}"
    # When a move, a run-now and a retry by id come in one second, then a fourth change
    answers = [
        _call(jobs_lambda, "PATCH", job, route, {"delay_seconds": 1800}),
        _call(jobs_lambda, "POST", f"{job}/run-now", f"{route}/run-now"),
        _call(jobs_lambda, "POST", f"/jobs/{cancelled.id}/retry", f"{route}/retry"),
    ]
    assert [status for status, _, _ in answers] == [200, 200, 200], answers
    before = _written(deps)
    # (not {"delay_seconds": 0}: within 15 minutes of the run-now, that is a repeat of it)
    status, headers, body = _call(jobs_lambda, "PATCH", job, route, {"delay_seconds": 60})
    # Then the fourth is refused: each counted as one submission on `email`
    assert (status, headers["Retry-After"]) == (429, "1"), body
    assert "queue 'email' accepts at most 3 submissions per second" in body["message"]
    assert _written(deps) == before
    # And a request refused for another reason takes no quota: the next second, a retry of
    # the job just retried (queued now) is a 409, then 3 changes are admitted
    clock.advance(seconds=1)
    assert _call(jobs_lambda, "POST", f"/jobs/{cancelled.id}/retry", f"{route}/retry")[0] == 409
    for delay in (600, 1200, 1800):
        status, _, body = _call(jobs_lambda, "PATCH", job, route, {"delay_seconds": delay})
        assert status == 200, body


def test_openapi_documents_413_and_429_with_retry_after() -> None:
    paths = json.loads(OPENAPI.read_text())["paths"]
    counted = [
        ("/jobs", "post"),
        ("/jobs/batch", "post"),
        ("/dags", "post"),
        ("/schedules", "post"),
        ("/schedules/{schedule_id}", "patch"),
        ("/schedules/{schedule_id}/resume", "post"),
        ("/jobs/{job_id}", "patch"),
        ("/jobs/{job_id}/run-now", "post"),
        ("/jobs/{job_id}/retry", "post"),
        ("/queues/{queue}/dead/replay", "post"),
    ]
    for path, method in counted:
        responses = paths[path][method]["responses"]
        assert "429" in responses, path
        header = responses["429"]["headers"]["Retry-After"]
        assert header["schema"]["type"] == "integer"
    for path, method in counted[:6]:
        assert "413" in paths[path][method]["responses"], path


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
