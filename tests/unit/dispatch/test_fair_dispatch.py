"""Fair dispatch through the real sweeper on moto, with the manual clock: a capped queue's flood
is paced and deferred without holding other queues back, queues due at the same moment take
turns by weight, across every shard of the sweeper's group (sundial.dispatch.fairness)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from ulid import ULID

import sundial.dispatch.sweeper
from sundial.clock import ManualClock
from sundial.dispatch.sweeper import Sweeper
from sundial.ids import JobKey
from sundial.model.job import Job, Priority, Status
from sundial.settings import QueueDispatch
from sundial.store.jobs import JobStore
from sundial.store.sweeps import SweepStore
from sundial.timing import SWEEP_LOOKAHEAD_MS
from sundial.transport.sender import QueueSender
from sundial.wiring import Dependencies


@dataclass(frozen=True)
class Sent:
    job_id: str
    queue: str
    visible_ms: int  # when SQS makes it visible: the request's time plus its DelaySeconds


class Recorder:
    """Every entry the sweeper's SendMessageBatch requests carry, with its visibility time."""

    def __init__(self, sqs: Any, clock: ManualClock, urls: dict[str, str]) -> None:
        self.sent: list[Sent] = []
        self._clock = clock
        self._queue_of_url = {url: name for name, url in urls.items()}
        sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", self._record)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        now = self._clock.now_ms()
        for entry in params["Entries"]:
            self.sent.append(
                Sent(
                    json.loads(entry["MessageBody"])["id"],
                    self._queue_of_url[params["QueueUrl"]],
                    now + entry["DelaySeconds"] * 1000,
                )
            )

    def of(self, queue: str) -> list[Sent]:
        return [s for s in self.sent if s.queue == queue]


def _sweeper(
    deps: Dependencies, clock: ManualClock, dispatch: dict[str, QueueDispatch], shard_count: int
) -> tuple[Sweeper, Recorder, SweepStore]:
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    urls = deps.settings.queue_urls
    sweeps = SweepStore(dynamodb, deps.settings.table_name)
    sweeper = Sweeper(
        store=JobStore(dynamodb, deps.settings.table_name),
        sweeps=sweeps,
        sender=QueueSender(sqs, urls),
        clock=clock,
        queue_states=deps.queue_states,
        catch_up=deps.catch_up,
        dispatch=dispatch,
        shard_count=shard_count,
    )
    return sweeper, Recorder(sqs, clock, dict(urls)), sweeps


def _put(
    deps: Dependencies,
    clock: ManualClock,
    *,
    queue: str,
    shard: int,
    due_in_s: float,
    count: int = 1,
    priority: Priority = Priority.NORMAL,
) -> list[Job]:
    """Pending jobs on a chosen shard (submitted long ago, so due-soon ones are not direct)."""
    now = clock.now_ms()
    jobs = [
        Job(
            key=JobKey(shard=shard, due_ms=now + round(due_in_s * 1000), ulid=str(ULID())),
            queue=queue,
            payload_json="{}",
            priority=priority,
            max_attempts=3,
            created_at_ms=now - 86_400_000,
        )
        for _ in range(count)
    ]
    deps.store.put_new(jobs, now_ms=now - 86_400_000)
    return jobs


def _budget(jobs: int, shards: int) -> Iterator[int]:
    """A sweep's remaining time, read once per shard before its range and once per job: time
    for `jobs` jobs, then short of it."""
    yield from [60_000] * (shards + jobs)
    while True:
        yield 1_000


def test_a_capped_flood_is_paced_and_another_queue_is_not_held_back(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given `default` capped at 1 job a second over 64 shards (one slot every 64 s per shard),
    # 20 of its jobs due in a minute on shard 0, and an `email` job due just after them there
    sweeper, sent, sweeps = _sweeper(
        deps, clock, {"default": QueueDispatch(max_per_second=1)}, shard_count=64
    )
    flood = _put(deps, clock, queue="default", shard=0, due_in_s=60, count=20)
    quiet = _put(deps, clock, queue="email", shard=0, due_in_s=61)[0]
    due = flood[0].due_ms
    # When the sweeper runs
    report = sweeper.sweep([0])
    # Then `default` gets one slot every 64 s from its due time, in due order, as far as SQS's
    # 15 minutes reach (14 slots: now + 60 s + 13 x 64 s); the other 6 stay pending, unsent
    paced = sent.of("default")
    assert [s.visible_ms for s in paced] == [due + k * 64_000 for k in range(14)]
    assert [s.job_id for s in paced] == [j.id for j in flood[:14]]
    assert {deps.jobs.get(j.id).status for j in flood[14:]} == {Status.PENDING}
    assert (report.paced, report.deferred, report.held_shards) == (13, 6, [0])
    # And the email job went out in the same sweep, visible at its own due second
    assert sent.of("email") == [Sent(quiet.id, "email", quiet.due_ms)]
    # And the shard's next free slot is kept on its cursor item; the cursor passed the jobs
    # left over, and the item records where the next sweep reads their queue again
    state = sweeps.read_sweep_states([0])[0]
    assert state.paced == {"default": due + 14 * 64_000}
    assert state.cursor is not None and state.cursor > quiet.key.sk
    assert state.deferred == {"default": flood[14].key.sk}
    assert deps.sweeps.read_cursors([0]) == {0: flood[14].key.sk}


def test_later_sweeps_place_the_rest_never_early_never_twice(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given the same flood, one of whose deferred jobs is cancelled before a sweep reaches it
    sweeper, sent, _ = _sweeper(
        deps, clock, {"default": QueueDispatch(max_per_second=1)}, shard_count=64
    )
    flood = _put(deps, clock, queue="default", shard=0, due_in_s=60, count=20)
    sweeper.sweep([0])
    assert deps.jobs.cancel(flood[17].id) is Status.CANCELLED
    # When the sweeper runs every minute for 20 minutes
    for _ in range(20):
        clock.advance(seconds=60)
        sweeper.sweep([0])
    # Then every other job was sent once, 64 s apart across sweeps, none before its due time
    ids = [s.job_id for s in sent.of("default")]
    assert Counter(ids) == Counter(j.id for j in flood if j is not flood[17])
    visible = [s.visible_ms for s in sent.of("default")]
    assert all(b - a >= 64_000 for a, b in itertools.pairwise(visible))
    assert all(s.visible_ms >= flood[0].due_ms for s in sent.of("default"))
    # And the cursor is past them all
    assert deps.sweeps.read_cursors([0])[0] > flood[-1].key.sk


def test_a_deferred_job_of_a_queue_paused_meanwhile_is_caught_up_by_its_resume(
    deps: Dependencies, clock: ManualClock
) -> None:
    sweeper, _sent, _ = _sweeper(
        deps, clock, {"default": QueueDispatch(max_per_second=1)}, shard_count=64
    )
    flood = _put(deps, clock, queue="default", shard=0, due_in_s=60, count=20)
    sweeper.sweep([0])
    # When the queue is paused with 6 jobs deferred, swept past, then resumed
    deps.queue_control.pause("default")
    clock.advance(seconds=60)
    assert sweeper.sweep([0]).paused == 6
    deps.queue_control.resume("default")
    for _ in range(3):
        clock.advance(seconds=60)
        sweeper.sweep([0])
    # Then every job was sent: the resume's catch-up sends the deferred ones. The 14 sent
    # before the pause and not yet taken are pending (a sweep writes no job): the catch-up,
    # which sends what its range holds pending, sends them again, a duplicate the consumer's
    # take makes a no-op (dispatch.shard_sweep); nothing else is sent twice
    arrived = Counter(e["id"] for e in _received(deps, "default"))
    assert set(arrived) == {j.id for j in flood}
    assert {i for i, n in arrived.items() if n > 1} <= {j.id for j in flood[:14]}
    assert max(arrived.values()) == 2


def _received(deps: Dependencies, queue: str) -> list[dict[str, Any]]:
    """Every envelope sent to `queue`, visible or delayed (moto's backend, read directly)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID  # noqa: PLC0415
    from moto.sqs.models import sqs_backends  # noqa: PLC0415

    name = deps.settings.queue_urls[queue].rsplit("/", 1)[1]
    backend = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_queue(name)
    return [json.loads(m.body) for m in backend._messages]


def test_queues_due_at_the_same_moment_take_turns_by_weight(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an overdue backlog on one shard: 60 `default` jobs, then 10 `email` jobs due after
    # all of them; `default` has weight 3
    sweeper, sent, _ = _sweeper(deps, clock, {"default": QueueDispatch(weight=3)}, shard_count=8)
    _put(deps, clock, queue="default", shard=0, due_in_s=-600, count=60)
    _put(deps, clock, queue="email", shard=0, due_in_s=-300, count=10)
    # When a sweep has time for only 20 of them
    budget = _budget(20, shards=1)
    report = sweeper.sweep([0], remaining_ms=lambda: next(budget))
    # Then they shared it 3 to 1, instead of `default` taking all 20 for being due first
    assert report.dispatched == 20
    assert Counter(s.queue for s in sent.sent) == {"default": 15, "email": 5}


def test_a_flood_on_the_first_shards_does_not_hold_back_the_last_shard(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given turns of 5 jobs per shard, 20 overdue `default` jobs on each of 8 shards, and one
    # overdue `email` job on the last shard, due after all of them
    monkeypatch.setattr(sundial.dispatch.sweeper, "SHARD_TURN", 5)
    sweeper, sent, _ = _sweeper(deps, clock, {}, shard_count=8)
    for shard in range(8):
        _put(deps, clock, queue="default", shard=shard, due_in_s=-600, count=20)
    quiet = _put(deps, clock, queue="email", shard=7, due_in_s=-1)[0]
    # When a sweep has time for 40 jobs (a quarter of the backlog)
    budget = _budget(40, shards=8)
    report = sweeper.sweep(list(range(8)), remaining_ms=lambda: next(budget))
    # Then the email job is among them: every shard took turns in the backlog's moment
    assert report.dispatched == 40
    assert [s.job_id for s in sent.of("email")] == [quiet.id]
    assert Counter(s.queue for s in sent.sent)["default"] == 39


def test_priority_comes_first_then_the_moment_then_turns(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given on one shard 3 overdue `default` jobs, an `email` job due in 30 s (before the next
    # sweep: the same moment) and one due in 90 s; and a critical job due in 10 minutes
    sweeper, sent, _ = _sweeper(deps, clock, {}, shard_count=8)
    soon = _put(deps, clock, queue="email", shard=0, due_in_s=30)[0]
    later = _put(deps, clock, queue="email", shard=0, due_in_s=90)[0]
    overdue = _put(deps, clock, queue="default", shard=0, due_in_s=-60, count=3)
    critical = _put(deps, clock, queue="default", shard=1, due_in_s=600, priority=Priority.CRITICAL)
    assert SWEEP_LOOKAHEAD_MS > 600_000  # the critical job is inside the range
    # When a sweep has time for only 3 jobs
    budget = _budget(3, shards=2)
    sweeper.sweep([0, 1], remaining_ms=lambda: next(budget))
    # Then it took the critical job, then the first moment's jobs with the queues taking turns
    # (`default` first: its earliest job is due first); the next moment's waits
    assert {s.job_id for s in sent.sent} == {critical[0].id, overdue[0].id, soon.id}
    # And the next sweep sends the rest
    sweeper.sweep([0, 1])
    assert {s.job_id for s in sent.sent} == {j.id for j in [*critical, *overdue, soon, later]}
