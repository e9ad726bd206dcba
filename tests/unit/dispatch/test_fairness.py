"""Fair dispatch's pure rules (sundial.dispatch.fairness): pacing slots and weighted round-robin,
without AWS."""

from __future__ import annotations

import itertools

import pytest

from sundial.dispatch.fairness import (
    SQS_DELAY_HORIZON_MS,
    DispatchPolicy,
    Due,
    Pacer,
    interleave,
    plan_dispatch,
)
from sundial.settings import QueueDispatch

NOW = 1_795_276_800_000


def _policy(shards: int = 1, **queues: QueueDispatch) -> DispatchPolicy:
    return DispatchPolicy(queues=queues, shard_count=shards)


def test_interleave_takes_weight_items_from_each_lane_per_round() -> None:
    # Given a flood lane of weight 3 and two quiet lanes of weight 1
    lanes: list[list[int | str]] = [list(range(10)), ["q1", "q2"], ["o1"]]
    # When interleaved
    merged = interleave(lanes, [3, 1, 1])
    # Then each round takes 3, 1, 1, and each lane keeps its own order
    assert merged == [0, 1, 2, "q1", "o1", 3, 4, 5, "q2", 6, 7, 8, 9]


def test_interleave_refuses_a_weight_below_one() -> None:
    with pytest.raises(ValueError, match="weight"):
        interleave([[1], [2]], [1, 0])


def test_a_pacer_spaces_slots_by_shards_over_rate_and_never_before_due() -> None:
    # Given a cap of 10 a second over 4 shards: this shard's share is one job every 400 ms
    pacer = Pacer(per_second=10, shard_count=4, next_free_ms=NOW, horizon_ms=NOW + 900_000)
    # When five jobs due at once are placed, then one due well after them
    slots = [pacer.place(NOW) for _ in range(5)] + [pacer.place(NOW + 10_000)]
    # Then they are 400 ms apart in due order, and the late one keeps its own due time
    assert slots == [NOW, NOW + 400, NOW + 800, NOW + 1200, NOW + 1600, NOW + 10_000]
    assert pacer.next_free_ms == NOW + 10_400
    assert pacer.placed == 6


def test_a_pacer_keeps_fractions_of_a_millisecond_so_high_rates_hold() -> None:
    # Given 64 shards at 100,000 a second: a slot every 0.64 ms per shard
    pacer = Pacer(per_second=100_000, shard_count=64, next_free_ms=NOW, horizon_ms=NOW + 10_000)
    # When 1,000 jobs due at once are placed
    slots = [slot for _ in range(1000) if (slot := pacer.place(NOW)) is not None]
    # Then the last is 640 ms on (not 1,000 ms, as whole-millisecond gaps would make it)
    assert slots[-1] == NOW + 640  # ceil(999 * 0.64)
    assert all(b >= a for a, b in itertools.pairwise(slots))


def test_a_pacer_gives_no_slot_beyond_the_horizon() -> None:
    pacer = Pacer(per_second=1, shard_count=1, next_free_ms=NOW, horizon_ms=NOW + 2_000)
    assert [pacer.place(NOW) for _ in range(4)] == [NOW, NOW + 1000, NOW + 2000, None]
    assert pacer.placed == 3


def test_a_next_free_slot_in_the_past_starts_now_so_idle_time_is_not_a_burst() -> None:
    policy = _policy(2, bulk=QueueDispatch(max_per_second=1))
    pacer = policy.pacer("bulk", next_free_ms=NOW - 3_600_000, now_ms=NOW)
    assert pacer is not None
    assert [pacer.place(NOW - 600_000) for _ in range(2)] == [NOW, NOW + 2000]
    assert policy.pacer("quiet", next_free_ms=0, now_ms=NOW) is None  # uncapped


def test_the_plan_interleaves_queues_due_at_the_same_moment_by_weight() -> None:
    # Given a backlog: 6 overdue jobs of `bulk` (weight 2), then 2 overdue `quiet` jobs due
    # after all of them, a `quiet` job due in 30 s, and one due in 90 s
    due = [Due("bulk", NOW - 60_000 + i, 2, True) for i in range(6)]
    due += [Due("quiet", NOW - 1_000, 2, True), Due("quiet", NOW - 500, 2, True)]
    due += [Due("quiet", NOW + 30_000, 2, True), Due("quiet", NOW + 90_000, 2, True)]
    policy = _policy(bulk=QueueDispatch(weight=2))
    # When planned (no cap)
    plan = plan_dispatch(due, policy=policy, pacers={}, now_ms=NOW)
    # Then overdue and due before the next sweep is one moment: bulk takes 2 for each of
    # quiet's, not 6 first; the job due in 90 s is in the next moment
    assert plan.order == [0, 1, 6, 2, 3, 7, 4, 5, 8, 9]
    assert plan.groups == [(2, 0)] * 9 + [(2, 1)]
    assert plan.slots == {} and plan.deferred == []


def test_the_plan_keeps_priority_first_across_queues() -> None:
    due = [Due("bulk", NOW, 2, True), Due("quiet", NOW + 5_000, 0, True)]
    plan = plan_dispatch(due, policy=_policy(), pacers={}, now_ms=NOW)
    assert plan.order == [1, 0]  # the critical job first, though due later


def test_the_plan_paces_a_capped_flood_and_defers_what_is_beyond_sqs_reach() -> None:
    # Given a cap of 1 a second on one shard, and 1,000 `bulk` jobs due now, with a `quiet`
    # job due in 2 s
    due = [Due("bulk", NOW, 2, True) for _ in range(1000)] + [Due("quiet", NOW + 2_000, 2, True)]
    policy = _policy(bulk=QueueDispatch(max_per_second=1))
    pacer = policy.pacer("bulk", next_free_ms=0, now_ms=NOW)
    assert pacer is not None
    # When planned
    plan = plan_dispatch(due, policy=policy, pacers={"bulk": pacer}, now_ms=NOW)
    # Then bulk gets one slot a second up to SQS's 15 minutes; the rest waits, unplanned
    assert [plan.slots[i] for i in range(3)] == [NOW, NOW + 1000, NOW + 2000]
    assert len(plan.slots) == SQS_DELAY_HORIZON_MS // 1000 + 1
    assert plan.deferred == list(range(901, 1000))
    assert set(plan.order) == set(range(901)) | {1000}
    # And the quiet job takes its turn in the first moment, with bulk's first minute of slots
    assert plan.groups[:61] == [(2, 0)] * 61
    assert plan.order[:3] == [0, 1000, 1]


def test_pacing_gives_slots_by_due_second_then_priority() -> None:
    # Given, in due order: a low job, then a critical one, in the same second, then a normal
    # one a second later
    due = [Due("bulk", NOW + 100, 3, True), Due("bulk", NOW + 900, 0, True)]
    due += [Due("bulk", NOW + 1_000, 2, True)]
    policy = _policy(bulk=QueueDispatch(max_per_second=1))
    pacer = policy.pacer("bulk", next_free_ms=0, now_ms=NOW)
    assert pacer is not None
    plan = plan_dispatch(due, policy=policy, pacers={"bulk": pacer}, now_ms=NOW)
    # Then the critical job has the first slot of its second, never before its due time
    assert plan.slots == {1: NOW + 900, 0: NOW + 1900, 2: NOW + 2900}


def test_jobs_the_sweep_will_not_claim_take_no_slot() -> None:
    # A job owned elsewhere (direct, a paused queue's, claimed by another sweep) is not paced
    due = [Due("bulk", NOW, 2, False), Due("bulk", NOW, 2, True)]
    policy = _policy(bulk=QueueDispatch(max_per_second=1))
    pacer = policy.pacer("bulk", next_free_ms=0, now_ms=NOW)
    assert pacer is not None
    plan = plan_dispatch(due, policy=policy, pacers={"bulk": pacer}, now_ms=NOW)
    assert plan.slots == {1: NOW}
    assert sorted(plan.order) == [0, 1]
