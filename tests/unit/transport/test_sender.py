"""The sender against moto: each SendMessageBatch's DelaySeconds counts from just before that
request, so a long flush does not make its last messages late, and none is ever early."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from ulid import ULID

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.transport.sender import Outgoing, QueueSender
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


def _failing_entries(sqs: Any, failures: dict[int, dict[str, Any]]) -> None:
    """SQS reports these entries (by position in the request) as Failed, withholding them."""
    withheld: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def withhold(params: dict[str, Any], **_: Any) -> None:
        entries = params["Entries"]
        withheld[:] = [(entries[i], failures[i]) for i in sorted(failures) if i < len(entries)]
        params["Entries"] = [e for i, e in enumerate(entries) if i not in failures]

    def report(parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("Failed", []).extend({"Id": e["Id"], **f} for e, f in withheld)

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", withhold)
    sqs.meta.events.register("after-call.sqs.SendMessageBatch", report)


def test_a_job_of_an_unconfigured_queue_is_rejected_and_the_others_are_sent(
    deps: Dependencies, clock: ManualClock
) -> None:
    sqs = boto3.client("sqs")
    good = _jobs(clock.now_ms(), 3)
    orphan = _jobs(clock.now_ms(), 1)[0]
    orphan = Outgoing(replace(orphan.job, queue="removed"))
    result = QueueSender(sqs, deps.settings.queue_urls).dispatch(
        [good[0], orphan, *good[1:]], now_ms=clock.now_ms()
    )
    assert result.retry == []
    assert [(r.message, r.error_type) for r in result.rejected] == [(orphan, "UnknownQueue")]
    assert "'removed'" in result.rejected[0].reason
    assert len(receive_all(sqs, deps.settings.queue_urls["default"])) == 3


def test_sender_faults_are_rejected_and_sqs_faults_are_retried(
    deps: Dependencies, clock: ManualClock
) -> None:
    sqs = boto3.client("sqs")
    _failing_entries(
        sqs,
        {
            1: {"SenderFault": True, "Code": "InvalidParameterValue", "Message": "bad body"},
            3: {"SenderFault": False, "Code": "InternalError"},
        },
    )
    jobs = _jobs(clock.now_ms(), 5)
    sender = QueueSender(sqs, deps.settings.queue_urls)
    result = sender.dispatch(jobs, now_ms=clock.now_ms())
    assert result.retry == [jobs[3]]
    assert [(r.message, r.error_type) for r in result.rejected] == [
        (jobs[1], "InvalidParameterValue")
    ]
    assert "bad body" in result.rejected[0].reason
    # send() reports both as not accepted, as before
    assert {o.job.id for o in result.failed} == {jobs[1].job.id, jobs[3].job.id}
    assert len(receive_all(sqs, deps.settings.queue_urls["default"])) == 3


def test_a_failed_call_retries_every_message_and_rejects_none(
    deps: Dependencies, clock: ManualClock
) -> None:
    sqs = boto3.client("sqs")

    def throttle(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "RequestThrottled", "Message": "slow down"}}, "SendMessageBatch"
        )

    sqs.meta.events.register("before-call.sqs.SendMessageBatch", throttle)
    jobs = _jobs(clock.now_ms(), 12)
    result = QueueSender(sqs, deps.settings.queue_urls).dispatch(jobs, now_ms=clock.now_ms())
    assert result.retry == jobs and result.rejected == []


def test_a_job_that_cannot_be_made_into_a_message_is_rejected(
    deps: Dependencies, clock: ManualClock
) -> None:
    jobs = _jobs(clock.now_ms(), 2)
    broken = Outgoing(replace(jobs[0].job, created_at_ms=10**17))  # beyond any date
    sqs = boto3.client("sqs")
    result = QueueSender(sqs, deps.settings.queue_urls).dispatch(
        [broken, jobs[1]], now_ms=clock.now_ms()
    )
    assert [(r.message, r.error_type) for r in result.rejected] == [(broken, "MalformedJob")]
    assert len(receive_all(sqs, deps.settings.queue_urls["default"])) == 1


def test_on_a_pool_the_requests_go_together_and_report_as_if_sent_in_turn(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 35 jobs (4 requests), and SQS withholding the second entry of every request
    sqs = boto3.client("sqs")
    _failing_entries(sqs, {1: {"SenderFault": False, "Code": "InternalError"}})
    in_flight: list[int] = []
    most = [0]
    arrivals = itertools.count()
    lock = threading.Lock()
    # Generous: a loaded machine may start the second thread late. Only the first two
    # requests meet here (counting arrivals, not those in flight: a later request finding one
    # of the first two still in flight once waited for a partner that never came).
    gate = threading.Barrier(2, timeout=60)

    def overlap(**_: Any) -> None:
        with lock:
            arrival = next(arrivals)
            in_flight.append(1)
            most[0] = max(most[0], len(in_flight))
        if arrival < 2:
            gate.wait()  # the first two requests are in flight at the same time
        with lock:
            in_flight.pop()

    sqs.meta.events.register("before-call.sqs.SendMessageBatch", overlap)
    jobs = _jobs(clock.now_ms(), 35)
    # When they are sent on a pool of threads
    with ThreadPoolExecutor(4) as pool:
        result = QueueSender(sqs, deps.settings.queue_urls).dispatch(
            jobs, now_ms=clock.now_ms, pool=pool
        )
    # Then requests overlapped, and the result is the same as in turn: the second entry of
    # each request to retry, in request order, nothing rejected, the rest in the queue
    assert most[0] >= 2
    assert result.retry == [jobs[1], jobs[11], jobs[21], jobs[31]]
    assert result.rejected == []
    assert len(receive_all(sqs, deps.settings.queue_urls["default"])) == 31
