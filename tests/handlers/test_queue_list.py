"""GET /queues: every queue the caller may read, with its state, SQS depth and dead letters."""

from __future__ import annotations

import json

import boto3

from sundial.clock import ManualClock
from sundial.store.dead_letters import dead_pk
from sundial.wiring import Dependencies
from tests.support import call_api, load_handler

submit_lambda = load_handler("submit")
queues_lambda = load_handler("queues")


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
