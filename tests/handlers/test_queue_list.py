"""GET /queues: every queue the caller may read, with its state, SQS depth and dead letters;
GET /queues/{queue}/jobs: a queue's jobs of one status."""

from __future__ import annotations

import json
from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.store.dead_letters import dead_pk
from sundial.wiring import Dependencies
from tests.support import call_api, load_handler

submit_lambda = load_handler("submit")
queues_lambda = load_handler("queues")
jobs_lambda = load_handler("jobs")


def test_queues_are_listed_with_their_depth_and_dead_letters(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given email paused, one job sent ahead to default (due in a minute: delayed in SQS), a
    # critical one to email's priority queue, and a message waiting in email's DLQ
    call_api(queues_lambda, "POST", "/queues/email/pause", route="/queues/{queue}/pause")
    for body in (
        {"queue": "default", "delay_seconds": 60},
        {"queue": "email", "delay_seconds": 0, "priority": "critical"},
    ):
        assert call_api(submit_lambda, "POST", "/jobs", body=body)[0] == 201
    dlq = deps.settings.dead_letter_urls["email"]
    boto3.client("sqs").send_message(QueueUrl=dlq, MessageBody=json.dumps({"id": "x"}))
    # When the queues are listed
    status, listing = call_api(queues_lambda, "GET", "/queues")
    # Then each shows its state and counts
    assert status == 200
    by_name = {queue["queue"]: queue for queue in listing["queues"]}
    assert list(by_name) == ["default", "email"]
    assert by_name["default"]["paused"] is False
    assert by_name["default"]["messages"] == {"visible": 0, "in_flight": 0, "delayed": 1}
    assert by_name["email"]["paused"] is True
    assert by_name["email"]["paused_at"] == "2026-11-21T12:00:00.000Z"
    # the critical job of the paused queue waits in the table for the resume, not in SQS
    assert by_name["email"]["messages"] == {"visible": 0, "in_flight": 0, "delayed": 0}
    assert by_name["email"]["dead_letter_queue_messages"] == 1
    assert (by_name["email"]["dead_letters"], by_name["email"]["dead_letters_capped"]) == (0, False)
    # And once resumed, the critical job is in email's priority queue and counted
    call_api(queues_lambda, "POST", "/queues/email/resume", route="/queues/{queue}/resume")
    _, listing = call_api(queues_lambda, "GET", "/queues")
    email = next(queue for queue in listing["queues"] if queue["queue"] == "email")
    assert email["messages"]["visible"] == 1 and email["paused"] is False


def test_dead_letters_are_counted_up_to_the_cap(deps: Dependencies) -> None:
    store = deps.dead_letter_store
    # Given three index items for email, counted with a cap of two
    client = boto3.client("dynamodb")
    for n in range(3):
        client.put_item(
            TableName=deps.settings.table_name,
            Item={"pk": {"S": dead_pk("email")}, "sk": {"S": f"0000{n}"}, "body": {"S": "{}"}},
        )
    assert store.count("email", cap=2) == (2, True)
    assert store.count("email", cap=3) == (3, False)
    assert store.count("default", cap=2) == (0, False)


def _jobs_of(query: str) -> tuple[int, Any]:
    return call_api(
        queues_lambda, "GET", f"/queues/default/jobs?{query}", route="/queues/{queue}/jobs"
    )


def test_a_queues_jobs_are_listed_by_status_and_a_moved_job_once(deps: Dependencies) -> None:
    # Given two pending jobs of `default` (one then moved later), one of `email`
    def submit(queue: str, delay: int) -> str:
        status, body = call_api(
            submit_lambda, "POST", "/jobs", body={"queue": queue, "delay_seconds": delay}
        )
        assert status == 201, body
        return str(body["id"])

    moved, kept = submit("default", 3_600), submit("default", 7_200)
    submit("email", 3_600)
    status, body = call_api(
        jobs_lambda,
        "PATCH",
        f"/jobs/{moved}",
        route="/jobs/{job_id}",
        body={"delay_seconds": 10_800},
    )
    assert status == 200, body
    # When `default`'s pending jobs are listed
    status, page = _jobs_of("status=pending")
    # Then each comes once in due order (the moved one at its new time, its pointer left out)
    assert status == 200, page
    assert [(job["id"], job["run_at"]) for job in page["items"]] == [
        (kept, "2026-11-21T14:00:00.000Z"),
        (moved, "2026-11-21T15:00:00.000Z"),
    ]
    assert page["next_cursor"] is None
    assert (page["window_from"], page["window_to"]) == (
        "2026-11-20T12:00:00.000Z",
        "2026-11-22T12:00:00.000Z",
    )
    # And a window given by `from` and `to` holds only the jobs due in it
    status, page = _jobs_of("status=pending&from=2026-11-21T14:30:00Z&to=2026-11-21T16:00:00Z")
    assert status == 200 and [job["id"] for job in page["items"]] == [moved], page


def test_listing_jobs_by_status_refuses_bad_input(deps: Dependencies) -> None:
    assert _jobs_of("")[0] == 400  # no status
    assert _jobs_of("status=moved")[0] == 400  # a pointer is not a status
    status, error = _jobs_of("status=pending&from=2026-11-01T00:00:00Z&to=2026-11-21T00:00:00Z")
    assert status == 400 and "to" in str(error), error
    assert _jobs_of("status=pending&from=yesterday")[0] == 400
    assert _jobs_of("status=pending&cursor=bogus")[0] == 400
    status, _ = call_api(
        queues_lambda, "GET", "/queues/nope/jobs?status=pending", route="/queues/{queue}/jobs"
    )
    assert status == 404
