"""Bad input is a bounded 400 that changes nothing, never a 500 (issue 15, item 8): each class of
input a fuzz once turned into a 500 or a wrong acceptance, through the real handlers."""

from __future__ import annotations

import base64
import json
from typing import Any

import boto3
import pytest

from sundial.api.body import MAX_BODY_BYTES, MAX_JSON_DEPTH
from sundial.wiring import Dependencies
from tests.support import TABLE, FakeLambdaContext, call_api, http_api_event, load_handler

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")
dags_lambda = load_handler("dags")
schedules_lambda = load_handler("schedules")
workers_lambda = load_handler("workers")

# The largest 400 answer any of these may give: a few KB whatever the input's size or depth.
MAX_ANSWER_BYTES = 4_096

# Every route that reads a body, with the function that serves it.
BODY_ROUTES: list[tuple[Any, str, str, str | None]] = [
    (submit_lambda, "POST", "/jobs", None),
    (submit_lambda, "POST", "/jobs/batch", None),
    (dags_lambda, "POST", "/dags", None),
    (schedules_lambda, "POST", "/schedules", None),
    (workers_lambda, "POST", "/queues/default/lease", "/queues/{queue}/lease"),
    (jobs_lambda, "POST", "/queues/default/dead/replay", "/queues/{queue}/dead/replay"),
]


def _items() -> int:
    return int(boto3.client("dynamodb").scan(TableName=TABLE, Select="COUNT")["Count"])


def _send(
    handler: Any, method: str, path: str, route: str | None, body: str, *, base64_body: bool
) -> tuple[int, dict[str, Any], int]:
    event = http_api_event(method, path, body=body, route=route)
    event["isBase64Encoded"] = base64_body
    response = handler.handler(event, FakeLambdaContext())
    text = response["body"]
    return response["statusCode"], json.loads(text), len(text.encode())


def _refused(status: int, answer: dict[str, Any], size: int, field: str, reason: str) -> None:
    assert status == 400, answer
    assert size <= MAX_ANSWER_BYTES, size
    assert set(answer) == {"message", "errors"}
    assert any(e["field"] == field and reason in e["reason"] for e in answer["errors"]), answer


def test_a_body_that_is_not_utf8_is_400_on_every_route_with_a_body(deps: Dependencies) -> None:
    # Given a body of bytes that are not UTF-8, as API Gateway passes it (base64-encoded)
    raw = base64.b64encode(b'{"queue": "default", "payload": "\xff\xfe"}').decode()
    for handler, method, path, route in BODY_ROUTES:
        # When it reaches each route that reads a body
        status, answer, size = _send(handler, method, path, route, raw, base64_body=True)
        # Then each answers a bounded 400 naming the body, and nothing is written
        _refused(status, answer, size, "body", "not valid UTF-8")
    assert _items() == 0


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 600, 1_000, 100_000])
def test_deeply_nested_json_is_a_short_400(deps: Dependencies, depth: int) -> None:
    # Given a payload nested past the limit (600 once made a ~6 KB answer, 1,000 a 500)
    body = '{"queue": "default", "delay_seconds": 5, "payload": ' + "[" * depth + "]" * depth + "}"
    # When it is submitted
    status, answer, size = _send(submit_lambda, "POST", "/jobs", None, body, base64_body=False)
    # Then the answer is a short 400 and no job exists
    _refused(status, answer, size, "body", f"the limit is {MAX_JSON_DEPTH}")
    assert _items() == 0


def test_json_at_the_depth_limit_is_accepted(deps: Dependencies) -> None:
    # The payload sits one level below the body object, so it may nest one level less.
    inner = MAX_JSON_DEPTH - 1
    body = '{"queue": "default", "delay_seconds": 5, "payload": ' + "[" * inner + "]" * inner + "}"
    status, _, _ = _send(submit_lambda, "POST", "/jobs", None, body, base64_body=False)
    assert status == 201


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        ("9" * 5_001, "more than 100 characters"),  # once a ValueError from int()
        ("1" + "0" * 200 + ".5", "more than 100 characters"),
        ("1e999", "out of range"),  # parses to inf, which JSON cannot carry back
        ("NaN", "is not JSON"),
        ("-Infinity", "is not JSON"),
    ],
)
def test_numbers_json_cannot_carry_are_400(deps: Dependencies, number: str, reason: str) -> None:
    body = '{"queue": "default", "delay_seconds": 5, "payload": {"n": ' + number + "}}"
    status, answer, size = _send(submit_lambda, "POST", "/jobs", None, body, base64_body=False)
    _refused(status, answer, size, "body", reason)
    assert _items() == 0


def test_a_huge_integer_in_a_bounded_field_is_400(deps: Dependencies) -> None:
    status, answer, size = _send(
        submit_lambda,
        "POST",
        "/jobs",
        None,
        '{"queue": "default", "delay_seconds": ' + "9" * 5_001 + "}",
        base64_body=False,
    )
    _refused(status, answer, size, "body", "more than 100 characters")
    assert _items() == 0


def test_an_unpaired_surrogate_is_400(deps: Dependencies) -> None:
    body = '{"queue": "default", "delay_seconds": 5, "payload": "\\ud800"}'
    status, answer, size = _send(submit_lambda, "POST", "/jobs", None, body, base64_body=False)
    _refused(status, answer, size, "body", "unpaired surrogate")
    assert _items() == 0


def test_a_body_over_the_size_limit_is_400(deps: Dependencies) -> None:
    body = json.dumps({"queue": "default", "delay_seconds": 5, "payload": "x" * MAX_BODY_BYTES})
    status, answer, size = _send(submit_lambda, "POST", "/jobs", None, body, base64_body=False)
    _refused(status, answer, size, "body", f"over {MAX_BODY_BYTES} bytes")
    assert _items() == 0


def test_many_field_errors_make_a_bounded_answer(deps: Dependencies) -> None:
    # 25 jobs, each wrong in several fields: the answer lists the first errors and counts the rest
    jobs = [{"queue": "", "max_attempts": 0, "priority": "x" * 500}] * 25
    status, answer = call_api(submit_lambda, "POST", "/jobs/batch", body={"jobs": jobs})
    assert status == 400
    assert len(json.dumps(answer)) <= MAX_ANSWER_BYTES
    assert answer["message"].endswith("more")


@pytest.mark.parametrize("name", ["America", "Etc", "Europe/", "../etc/passwd", "europe/london"])
def test_a_time_zone_that_is_not_a_zone_key_is_400(deps: Dependencies, name: str) -> None:
    # "America" and "Etc" are folders of the zone database: ZoneInfo once raised
    # IsADirectoryError on them (a 500)
    status, answer = call_api(
        schedules_lambda,
        "POST",
        "/schedules",
        body={"rate": "5 minutes", "timezone": name, "queue": "default"},
    )
    assert status == 400, answer
    assert answer["errors"][0]["field"] == "timezone"
    assert _items() == 0


@pytest.mark.parametrize("offset", ["+14:61", "+24:00", "-99:00", "+00:60"])
def test_run_at_with_an_offset_outside_rfc3339_is_400(deps: Dependencies, offset: str) -> None:
    # +14:61 was once read as +15:01; RFC 3339 allows hours 00-23 and minutes 00-59
    status, answer = call_api(
        submit_lambda,
        "POST",
        "/jobs",
        body={"queue": "default", "run_at": f"2026-11-21T13:00:00{offset}"},
    )
    assert status == 400, answer
    assert answer["errors"][0]["field"] == "run_at"
    assert _items() == 0


def test_the_widest_valid_offsets_are_accepted(deps: Dependencies) -> None:
    for offset in ("+23:59", "-23:59", "+00:00"):
        status, answer = call_api(
            submit_lambda,
            "POST",
            "/jobs",
            body={"queue": "default", "run_at": f"2026-11-22T13:00:00{offset}"},
        )
        assert status == 201, answer


def _respell(token: str, *, slash: bool = False) -> str:
    """The same bytes in the alphabet Python's decoder also takes: '-' as '+' (and '_' as '/',
    which in a path would only make another route)."""
    token = token.replace("-", "+")
    return token.replace("_", "/") if slash else token


def _with_dash(make: Any) -> str:
    """An id (from `make`) that has a '-' in it, so a respelling differs."""
    for _ in range(200):
        token: str = make()
        if "-" in token:
            return token
    raise AssertionError("no id with a - in 200 tries")


def test_a_job_id_respelled_with_plus_is_refused(deps: Dependencies) -> None:
    # Given a real job whose id has a '-' or '_'
    def submit() -> str:
        status, job = call_api(
            submit_lambda, "POST", "/jobs", body={"queue": "default", "delay_seconds": 3600}
        )
        assert status == 201
        return str(job["id"])

    job_id = _with_dash(submit)
    cancelled = {"status": "cancelled"}
    # When it is addressed with the same bytes spelled '+' and '/'
    for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/pause"), ("POST", "/retry")):
        status, answer = call_api(
            jobs_lambda,
            method,
            f"/jobs/{_respell(job_id)}{suffix}",
            route=f"/jobs/{{job_id}}{suffix}",
        )
        # Then it is a 400 naming job_id: no other spelling addresses the job
        assert status == 400, (method, suffix, answer)
        assert answer["errors"][0]["field"] == "job_id"
    # And the job itself is untouched
    status, job = call_api(jobs_lambda, "GET", f"/jobs/{job_id}", route="/jobs/{job_id}")
    assert status == 200
    assert job["status"] != cancelled["status"]


def test_a_dag_id_respelled_is_refused(deps: Dependencies) -> None:
    def submit() -> str:
        status, dag = call_api(
            dags_lambda,
            "POST",
            "/dags",
            body={
                "name": "d",
                "run_at": "2026-11-22T12:00:00Z",
                "nodes": {"a": {"queue": "default"}},
            },
        )
        assert status == 201, dag
        return str(dag["id"])

    dag_id = _with_dash(submit)
    for method in ("GET", "DELETE"):
        status, answer = call_api(
            dags_lambda, method, f"/dags/{_respell(dag_id)}", route="/dags/{dag_id}"
        )
        assert status == 400, answer
        assert answer["errors"][0]["field"] == "dag_id"
    status, dag = call_api(dags_lambda, "GET", f"/dags/{dag_id}", route="/dags/{dag_id}")
    assert status == 200
    assert dag["status"] != "cancelled"


def test_a_schedule_id_in_lower_case_is_refused(deps: Dependencies) -> None:
    status, schedule = call_api(
        schedules_lambda, "POST", "/schedules", body={"rate": "1 hour", "queue": "default"}
    )
    assert status == 201
    schedule_id = schedule["id"]
    for respelled in (schedule_id.lower(), schedule_id.replace("0", "O").replace("1", "I")):
        if respelled == schedule_id:
            continue
        status, answer = call_api(
            schedules_lambda,
            "DELETE",
            f"/schedules/{respelled}",
            route="/schedules/{schedule_id}",
        )
        assert status == 400, answer
        assert answer["errors"][0]["field"] == "schedule_id"
    status, schedule = call_api(
        schedules_lambda, "GET", f"/schedules/{schedule_id}", route="/schedules/{schedule_id}"
    )
    assert status == 200
    assert schedule["state"] == "active"


def test_a_lease_token_respelled_is_refused(deps: Dependencies) -> None:
    # Given a leased job
    status, _ = call_api(
        submit_lambda, "POST", "/jobs", body={"queue": "default", "delay_seconds": 0}
    )
    assert status == 201
    status, leased = call_api(
        workers_lambda,
        "POST",
        "/queues/default/lease",
        route="/queues/{queue}/lease",
        body={"wait": 0},
    )
    assert status == 200
    [entry] = leased["jobs"]
    job_id, lease = entry["job"]["id"], entry["lease"]
    padded = lease + "=" * (-len(lease) % 4)
    for respelled in {_respell(lease, slash=True), padded} - {lease}:
        # When it is acked with another spelling of its lease token
        status, answer = call_api(
            workers_lambda,
            "POST",
            f"/jobs/{job_id}/ack",
            route="/jobs/{job_id}/ack",
            body={"lease": respelled},
        )
        # Then it is a 400 naming the lease, and the job still runs
        assert status == 400, answer
        assert answer["errors"][0]["field"] == "lease"
    status, job = call_api(jobs_lambda, "GET", f"/jobs/{job_id}", route="/jobs/{job_id}")
    assert job["status"] == "running"
