"""Pausing and resuming a whole queue: nothing dispatched while paused (sweeper, submit,
resume and schedule paths), other queues unaffected, resume catches up at once, and a catch-up
cut short is finished by the sweepers. Nothing lost, nothing sent twice."""

from __future__ import annotations

import itertools
from collections import Counter

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.errors import QueueNotFound
from sundial.ids import JobKey
from sundial.model.job import Status, retry_timer
from sundial.model.schedule import CreateSchedule
from sundial.model.submission import SubmitJob
from sundial.services.queues import CATCH_UP_STALE_MS
from sundial.wiring import Dependencies
from tests.support import receive_all

ALL_SHARDS = list(range(8))


class Inbox:
    """Every envelope that reached a queue, and when it became visible."""

    def __init__(self, deps: Dependencies, clock: ManualClock, queue: str) -> None:
        self._sqs = boto3.client("sqs")
        self._url = deps.settings.queue_urls[queue]
        self._clock = clock
        self.ids: Counter[str] = Counter()
        self.visible_at: dict[str, int] = {}

    def read(self) -> None:
        for envelope in receive_all(self._sqs, self._url):
            self.ids[envelope["id"]] += 1
            self.visible_at.setdefault(envelope["id"], self._clock.now_ms())


def _submit(deps: Dependencies, queue: str, delay_s: int) -> str:
    return deps.jobs.submit(SubmitJob(queue=queue, delay_seconds=delay_s)).job.id


def _run(deps: Dependencies, clock: ManualClock, inboxes: list[Inbox], minutes: int) -> None:
    for _ in range(minutes):
        clock.advance(seconds=60)
        deps.sweeper.sweep(ALL_SHARDS)
        for inbox in inboxes:
            inbox.read()


def test_pausing_a_queue_with_100_jobs_then_resuming_it(
    deps: Dependencies, clock: ManualClock
) -> None:
    default, email = Inbox(deps, clock, "default"), Inbox(deps, clock, "email")
    # Given 60 jobs on `default` due in 16 to 45 minutes, and 20 on `email` on the same shards
    before = [_submit(deps, "default", 960 + 30 * i) for i in range(60)]
    others = [_submit(deps, "email", 970 + 90 * i) for i in range(20)]
    # When `default` is paused, and 40 more are submitted to it: 20 due at once or soon (which
    # would normally go straight to SQS), 20 due in 70 to 89 minutes
    state = deps.queue_control.pause("default")
    assert state.paused
    near = [_submit(deps, "default", 30 * i) for i in range(20)]
    far = [_submit(deps, "default", 4200 + 60 * i) for i in range(20)]
    assert {deps.jobs.get(i).status for i in near} == {Status.PENDING}
    # And the sweeper runs for an hour
    _run(deps, clock, [default, email], minutes=60)
    # Then nothing of `default` was dispatched: all 100 are pending, none reached SQS
    everything = before + near + far
    assert default.ids == Counter()
    assert {deps.jobs.get(i).status for i in everything} == {Status.PENDING}
    # And `email`, on the same shards, was not held back: every job arrived, on time
    assert email.ids == Counter(dict.fromkeys(others, 1))
    for job_id in others:
        assert email.visible_at[job_id] - JobKey.from_job_id(job_id).due_ms < 60_000
    # And the overdue paused jobs did not hold the cursors back
    cursors = deps.sweeps.read_cursors(ALL_SHARDS)
    for job_id in before:
        key = JobKey.from_job_id(job_id)
        assert cursors[key.shard] > key.sk
    assert deps.queue_control.get("default").paused
    # When the queue is resumed
    resumed_at = clock.now_ms()
    view = deps.queue_control.resume("default")
    # Then every overdue job is dispatched by the resume call itself, visible at once
    default.read()
    overdue = [i for i in everything if JobKey.from_job_id(i).due_ms <= resumed_at]
    assert len(overdue) == 80 and view.dispatched >= 80
    assert set(default.ids) >= set(overdue)
    assert not view.state.paused and not view.state.catching_up
    # And after another half hour every one of the 100 arrived exactly once
    _run(deps, clock, [default, email], minutes=30)
    assert default.ids == Counter(dict.fromkeys(everything, 1))
    assert email.ids == Counter(dict.fromkeys(others, 1))


def test_a_catch_up_cut_short_is_finished_by_the_sweepers(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 40 overdue jobs of a paused queue
    deps.queue_control.pause("default")
    ids = [_submit(deps, "default", 60 * (i % 10)) for i in range(40)]
    _run(deps, clock, [], minutes=15)
    # When its resume runs out of time after two shards
    budget = iter([True, True, False])
    view = deps.queue_control.resume("default", has_time=lambda: next(budget, False))
    assert view.state.catching_up and len(view.state.catch_shards) == 6
    inbox = Inbox(deps, clock, "default")
    inbox.read()
    first = set(inbox.ids)
    assert 0 < len(first) < 40
    # Then the sweepers finish it once the resume call must have ended
    _run(deps, clock, [inbox], minutes=1)
    assert set(inbox.ids) == first  # not before (the resume call might still be at it)
    clock.advance(ms=CATCH_UP_STALE_MS)
    _run(deps, clock, [inbox], minutes=2)
    assert inbox.ids == Counter(dict.fromkeys(ids, 1))
    assert not deps.queue_control.get("default").catching_up


def test_a_job_resumed_while_its_queue_is_paused_waits_for_the_queue(
    deps: Dependencies, clock: ManualClock
) -> None:
    job_id = _submit(deps, "default", 1200)
    deps.jobs.pause(job_id)
    deps.queue_control.pause("default")
    clock.advance(seconds=1500)
    deps.sweeper.sweep(ALL_SHARDS)
    # Resuming the job (overdue) does not send it while its queue is paused
    assert deps.jobs.resume(job_id).status is Status.PENDING
    inbox = Inbox(deps, clock, "default")
    _run(deps, clock, [inbox], minutes=5)
    assert inbox.ids == Counter()
    # Resuming the queue does
    deps.queue_control.resume("default")
    inbox.read()
    assert inbox.ids == Counter({job_id: 1})
    _run(deps, clock, [inbox], minutes=20)
    assert inbox.ids == Counter({job_id: 1})


def test_a_schedule_on_a_paused_queue_catches_up_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an every-minute schedule on a queue paused for an hour
    schedule = deps.schedules.create(
        CreateSchedule(queue="default", cron="* * * * *", start_at="2026-11-21T12:30:00Z")
    ).schedule
    deps.queue_control.pause("default")
    inbox = Inbox(deps, clock, "default")
    _run(deps, clock, [inbox], minutes=90)
    assert inbox.ids == Counter()
    # When the queue resumes: the schedule's waiting occurrence was missed: with fire_once it
    # runs now, once, and the schedule carries on from now
    resumed_at = clock.now_ms()
    deps.queue_control.resume("default")
    _run(deps, clock, [inbox], minutes=10)
    runs, _ = deps.schedules.runs(schedule.id, limit=100)
    fired = sorted(r.run.at_ms for r in runs if r.job and r.job.status is Status.QUEUED)
    assert fired[0] == schedule.first_at_ms  # the catch-up: 12:30, run at 13:30
    assert fired[1] > resumed_at
    assert all(b - a == 60_000 for a, b in itertools.pairwise(fired[1:]))
    due_by_now = {r.run.job_id for r in runs if r.run.at_ms in fired[:11]}
    assert inbox.ids == Counter(dict.fromkeys(due_by_now, 1))  # the catch-up + 13:31 to 13:40


def test_pause_and_resume_are_idempotent_and_unknown_queues_are_404(
    deps: Dependencies,
) -> None:
    first = deps.queue_control.pause("email")
    again = deps.queue_control.pause("email")
    assert first.paused and again.paused and again.paused_at_ms == first.paused_at_ms
    assert not deps.queue_control.resume("email").state.paused
    assert not deps.queue_control.resume("email").state.paused
    with pytest.raises(QueueNotFound):
        deps.queue_control.pause("nope")
    with pytest.raises(QueueNotFound):
        deps.queue_control.get("nope")
    assert not deps.queue_control.get("default").paused


def test_nothing_about_a_queue_is_written_until_it_is_paused(deps: Dependencies) -> None:
    deps.queue_control.get("default")
    scan = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)
    assert scan["Count"] == 0


def test_a_sweep_that_passed_over_a_paused_queue_keeps_its_cursor_if_the_queue_was_resumed(
    deps: Dependencies, clock: ManualClock
) -> None:
    """Found by the fairness simulation (seed 2): sweep A reads `default` paused and passes its
    job over; the queue is resumed; sweep B, which read it running, claims the job and dies
    before sending it. Had A moved its cursor past the job, no sweep would ever take B's claim
    over, and the resume's catch-up leaves a claimed job to its claimer: lost. A's cursor moves
    only while the queue is still paused, so the next sweep takes the claim over."""
    inbox = Inbox(deps, clock, "default")
    job_id = _submit(deps, "default", 1200)
    key = JobKey.from_job_id(job_id)
    deps.queue_control.pause("default")
    clock.advance(seconds=600)  # the job is within the sweeps' lookahead now
    session = boto3.Session()
    raced: list[bool] = []

    def before_the_cursor_moves(params: dict[str, object], **_: object) -> None:
        cursor = "cursor" in str(params.get("Key", "")) or "TransactItems" in params
        if cursor and not raced:
            raced.append(True)
            # Sweep B claims the job (it saw the queue running) and dies before sending it;
            # the queue's resume finds it claimed and leaves it.
            assert deps.store.claim(key, token="sweep:b", now_ms=clock.now_ms(), lease_ms=300_000)
            deps.queue_control.resume("default")

    for operation in ("UpdateItem", "TransactWriteItems"):
        session.events.register(
            f"provide-client-params.dynamodb.{operation}", before_the_cursor_moves
        )
    # (its clients are made after the hook, so they carry it)
    sweep_a = Dependencies(settings=deps.settings, clock=clock, session=session).sweeper
    assert sweep_a.sweep(ALL_SHARDS).paused == 1 and raced
    assert deps.sweeps.read_cursors([key.shard]).get(key.shard, "") <= key.sk
    # Then once B's claim has expired, a sweep takes it over and sends the job, once
    _run(deps, clock, [inbox], 12)
    assert inbox.ids == Counter({job_id: 1})


def test_a_retry_timer_sent_directly_carries_its_retrys_attempt(
    deps: Dependencies, clock: ManualClock
) -> None:
    """A queue's catch-up sends what a pause held back through DirectSender, retry timers
    included: a timer's message must carry its retry's attempt (its own `attempts` count
    nothing). Sent as attempt 1, the fence skipped it as stale and the timer was marked sent:
    the job stayed failed for good (seed 22 of `make chaos`, the long profile)."""
    job = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=3600)).job
    stored = deps.store.get(JobKey.from_job_id(job.id))
    assert stored is not None
    timer = retry_timer(stored, attempt=3, at_ms=clock.now_ms())
    assert deps.direct.send([timer], by="catch-up") == []
    [message] = receive_all(boto3.client("sqs"), deps.settings.queue_urls["email"])
    assert message["id"] == job.id
    assert message["attempt"] == 3
