"""The sender against moto: each SendMessageBatch's DelaySeconds counts from just before that
request, so a long flush does not make its last messages late, and none is ever early."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from ulid import ULID

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.models import Job, Priority
from sundial.sender import Outgoing, QueueSender
from sundial.wiring import Dependencies
from tests.support import receive_all

REQUEST_MS = 400  # how long each SendMessageBatch takes to reach SQS, here


def _jobs(due_ms: int, count: int) -> list[Outgoing]:
    return [
        Outgoing(
            Job(
                key=JobKey(shard=0, due_ms=due_ms, ulid=str(ULID())),
                queue="default",
                payload_json="{}",
                priority=Priority.NORMAL,
                max_attempts=3,
                created_at_ms=due_ms - 60_000,
            )
        )
        for _ in range(count)
    ]


def _slow_sqs(clock: ManualClock) -> tuple[Any, list[int]]:
    """An SQS client whose requests each take REQUEST_MS of the (injected) clock to arrive;
    returns it and the DelaySeconds of each request's first entry."""
    sqs = boto3.client("sqs")
    delays: list[int] = []

    def in_flight(params: dict[str, Any], **_: Any) -> None:
        delays.append(params["Entries"][0]["DelaySeconds"])
        clock.advance(ms=REQUEST_MS)

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", in_flight)
    return sqs, delays


@pytest.mark.parametrize(("per_request", "expected"), [(True, [11, 10, 10]), (False, [11, 11, 11])])
def test_each_batch_counts_its_delay_from_just_before_it_is_sent(
    deps: Dependencies, clock: ManualClock, per_request: bool, expected: list[int]
) -> None:
    # Given 25 jobs due 10.3 s from now (3 requests of at most 10), each request 400 ms in flight
    start = clock.now_ms()
    due = start + 10_300
    sqs, delays = _slow_sqs(clock)
    sender = QueueSender(sqs, deps.settings.queue_urls)
    # When they are sent with the clock (read before each request), or with one reading
    assert not sender.send(_jobs(due, 25), now_ms=clock.now_ms if per_request else start)
    # Then the delays are as computed at each request's start
    assert delays == expected
    # And each request's messages surface its delay after it reached SQS: never before the
    # due time, and with the clock, at most one request's flight plus a second after it
    visible = [start + (n + 1) * REQUEST_MS + delay * 1000 for n, delay in enumerate(delays)]
    assert min(visible) >= due
    assert (max(visible) - due < REQUEST_MS + 1000) is per_request
    url = deps.settings.queue_urls["default"]
    clock.set(due - 1)
    assert receive_all(sqs, url) == []
    clock.set(max(visible) + 1)
    assert len(receive_all(sqs, url)) == 25
