"""Priorities: a backlog is dispatched highest priority first (and nothing is sent twice when
the sweep that did so left its cursor behind), an immediate critical job reaches SQS within
the submit call, and critical and high jobs go to their queue's priority queue if it has one."""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.model.job import Priority
from sundial.model.submission import SubmitJob
from sundial.timing import SWEEP_LEASE_MS
from sundial.wiring import Dependencies
from tests.support import receive_all

ALL_SHARDS = list(range(8))
RANK = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}


def _arrivals(deps: Dependencies, queue: str = "default") -> list[dict[str, object]]:
    return receive_all(boto3.client("sqs"), deps.settings.queue_urls[queue])


def test_a_backlog_is_dispatched_highest_priority_first(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 240 jobs of mixed priorities on one shard, due over 20 minutes, and no sweep for
    # an hour: a backlog, all overdue at once
    one_shard = Dependencies(
        settings=deps.settings.model_copy(update={"shard_count": 1}), clock=clock
    )
    rng = random.Random(7)
    priorities = [rng.choice(list(Priority)) for _ in range(240)]
    ids = {
        one_shard.jobs.submit(
            SubmitJob(queue="default", delay_seconds=960 + 5 * i, priority=p)
        ).job.id: p
        for i, p in enumerate(priorities)
    }
    clock.advance(seconds=3600)
    # When a sweep has time for only 60 of them
    budget = iter([60_000] * 61 + [1_000] * 10_000)  # one look per shard, one per job
    first = one_shard.sweeper.sweep([0], remaining_ms=lambda: next(budget))
    sent_first = [str(e["id"]) for e in _arrivals(deps)]
    # Then it sent exactly the 60 most urgent: critical before high before normal before low,
    # earlier due first within a priority
    most_urgent = sorted(ids, key=lambda i: (RANK[ids[i]], JobKey.from_job_id(i).sk))[:60]
    assert first.dispatched == len(sent_first) == 60
    assert set(sent_first) == set(most_urgent)
    assert {ids[i] for i in sent_first} == {Priority.CRITICAL}
    # And the next sweeps send the rest, each once, even after the first sweep's claims
    # expire while the cursor is held below them
    one_shard.sweeper.sweep([0])
    clock.advance(ms=SWEEP_LEASE_MS + 60_000)
    one_shard.sweeper.sweep([0])
    clock.advance(seconds=60)
    one_shard.sweeper.sweep([0])
    every = Counter(sent_first) + Counter(str(e["id"]) for e in _arrivals(deps))
    assert every == Counter(dict.fromkeys(ids, 1))


def test_a_backlog_across_shards_is_dispatched_highest_priority_first(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 320 overdue jobs of mixed priorities spread over a sweeper's 8 shards, about 10% of
    # them critical. The shards are chosen by a seeded generator: with about 32 critical jobs,
    # an unseeded choice leaves some shard without one about one run in ten.
    rng = random.Random(11)
    deps = Dependencies(settings=deps.settings, clock=clock, rng=random.Random(11))
    priorities = [rng.choices(list(Priority), weights=[10, 20, 50, 20])[0] for _ in range(320)]
    ids = {
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=960 + i, priority=p)).job.id: p
        for i, p in enumerate(priorities)
    }
    critical = {i for i, p in ids.items() if p is Priority.CRITICAL}
    assert {JobKey.from_job_id(i).shard for i in critical} == set(ALL_SHARDS)
    clock.advance(seconds=3600)
    # When the sweep has time for only as many jobs as there are critical ones
    looks = len(ALL_SHARDS) + len(critical)
    budget = iter([60_000] * looks + [1_000] * 10_000)  # one look per shard, one per job
    first = deps.sweeper.sweep(ALL_SHARDS, remaining_ms=lambda: next(budget))
    sent_first = [str(e["id"]) for e in _arrivals(deps)]
    # Then it sent the critical jobs of every shard, and nothing else: the first shard's
    # normal jobs did not go ahead of the last shard's critical ones
    assert first.dispatched == len(sent_first) == len(critical)
    assert set(sent_first) == critical
    # And the next sweeps send the rest, each once
    clock.advance(seconds=60)
    deps.sweeper.sweep(ALL_SHARDS)
    every = Counter(sent_first) + Counter(str(e["id"]) for e in _arrivals(deps))
    assert every == Counter(dict.fromkeys(ids, 1))


def test_a_held_cursor_never_resends_what_was_sent(deps: Dependencies, clock: ManualClock) -> None:
    # Given a sweep whose first SendMessageBatch fails for one entry (fault injection around
    # the real moto call), so its shard's cursor stays held at that job, below others it sent
    ids = [
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=905 + i)).job.id
        for i in range(30)
    ]
    clock.advance(seconds=100)
    session = boto3.Session()
    withheld: list[dict[str, object]] = []
    # A flush's requests go out together on the sweeper's pool: a call's two hooks run on its
    # own thread, so the call that withheld the entry is the one that reports it
    this_call = threading.local()

    def withhold(params: dict[str, Any], **_: Any) -> None:
        this_call.withheld = None
        if not withheld:
            withheld.append(params["Entries"][-1])
            this_call.withheld = params["Entries"][-1]
            params["Entries"] = params["Entries"][:-1]

    def report_failed(parsed: dict[str, Any], **_: Any) -> None:
        if getattr(this_call, "withheld", None) is not None:
            failed = {"Id": this_call.withheld["Id"], "SenderFault": False, "Code": "InternalError"}
            parsed.setdefault("Failed", []).append(failed)

    session.events.register("provide-client-params.sqs.SendMessageBatch", withhold)
    session.events.register("after-call.sqs.SendMessageBatch", report_failed)
    sweeper = Dependencies(settings=deps.settings, clock=clock, session=session).sweeper
    report = sweeper.sweep(ALL_SHARDS)
    assert report.send_failures == 1 and report.held_shards
    # When sweeps go on long past the shard's lease, the cursor held below what was sent
    for _ in range(12):
        clock.advance(seconds=60)
        sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=900)
    # Then every job arrived exactly once
    assert Counter(e["id"] for e in _arrivals(deps)) == Counter(dict.fromkeys(ids, 1))


def test_an_immediate_critical_job_is_in_sqs_when_submit_returns(deps: Dependencies) -> None:
    submitted = deps.jobs.submit(
        SubmitJob(queue="default", delay_seconds=0, priority=Priority.CRITICAL, payload="now")
    )
    # No sweep and no clock movement: the submit call itself sent it
    [envelope] = _arrivals(deps)
    assert envelope["id"] == submitted.job.id and envelope["priority"] == "critical"


def test_critical_and_high_jobs_go_to_the_priority_queue(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given `email`, which has a priority queue, and jobs of every priority: half sent by the
    # submit call (due in 10 s), half by the sweeper (due in 20 minutes)
    ids = {
        (p, delay): deps.jobs.submit(
            SubmitJob(queue="email", delay_seconds=delay, priority=p)
        ).job.id
        for p in Priority
        for delay in (10, 1200)
    }
    clock.advance(seconds=600)
    deps.sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=700)
    # Then critical and high went to the priority queue, normal and low to the queue itself
    sqs = boto3.client("sqs")
    urgent = {e["id"] for e in receive_all(sqs, deps.settings.priority_queue_urls["email"])}
    usual = {e["id"] for e in receive_all(sqs, deps.settings.queue_urls["email"])}
    assert urgent == {i for (p, _), i in ids.items() if p in (Priority.CRITICAL, Priority.HIGH)}
    assert usual == {i for (p, _), i in ids.items() if p in (Priority.NORMAL, Priority.LOW)}


def test_an_immediate_critical_job_reaches_the_priority_queue_within_the_submit_call(
    deps: Dependencies,
) -> None:
    job = deps.jobs.submit(
        SubmitJob(queue="email", delay_seconds=0, priority=Priority.CRITICAL)
    ).job
    url = deps.settings.priority_queue_urls["email"]
    [envelope] = receive_all(boto3.client("sqs"), url)
    assert envelope["id"] == job.id


def test_the_heartbeat_renews_a_message_of_the_priority_queue(deps: Dependencies) -> None:
    # Given a critical job's message, received from the priority queue
    deps.jobs.submit(SubmitJob(queue="email", delay_seconds=0, priority=Priority.CRITICAL))
    sqs = boto3.client("sqs")
    url = deps.settings.priority_queue_urls["email"]
    [message] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=5)["Messages"]
    # When its visibility is renewed as the consumer's heartbeat does it
    deps.sender.extend_visibility("email", message["ReceiptHandle"], 600, Priority.CRITICAL)
    # Then the message stays invisible (a renewal on the wrong queue would have failed)
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
