"""Fair dispatch: how one shard's sweep shares SQS visibility and its own time between queues.
Pure: no AWS, no clock; dispatch.shard_sweep applies it (the write and hold rules are in
sundial.timing, "Fair dispatch").

- **Pacing** (a queue's `max_per_second`). The cap is global per queue, but each shard is swept
  on its own, so each shard paces the queue at `max_per_second / shard_count`: its jobs of the
  queue get send slots at least `1000 * shard_count / max_per_second` ms apart, each at
  `max(due, the shard's next free slot)`, so a job is never visible before it is due and is
  late only when jobs due before it (or at its second with a higher priority) filled the
  slots. Slots are given out in due order, by due second, then priority, then due time. A slot
  more than SQS's 15 minutes ahead cannot be set with DelaySeconds: such a job is `deferred`,
  left pending and unclaimed, and the cursor holds at it, so a later sweep places it. The
  shard's next free slot per queue is kept on its cursor item between sweeps. The division is
  an approximation: jobs are spread over shards at random, so a flood's shards finish within a
  few slots of each other, and in any window of W seconds a queue gets at most
  `max_per_second * W + shard_count` jobs visible (one slot per shard may fall in the window's
  first second).
- **Weighted round-robin** (a queue's `weight`). A sweep claims and sends in groups: priority
  first, as before, then the moment the job is due, a minute wide: the first moment is
  everything overdue or due before the next sweep (MOMENT_MS after this one; a paced job
  counts at its slot), which this sweep must send in time; the next, the minute after; and so
  on. Within a group, queues take turns, `weight` jobs each per round, each queue's jobs in
  due order; queues enter a round in the order of their earliest job. So a flood of one queue
  delays another queue's job due at the same moment by at most one round, not by the whole
  flood, and a job due in the next seconds does not wait behind an overdue backlog. A job due
  in a later moment is sent with DelaySeconds long before it is due, so its place matters only
  when the sweep runs out of time (then the cursor holds, and the next sweep goes on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from sundial.settings import QueueDispatch

T = TypeVar("T")

# SQS delays a message by at most 15 minutes: a slot further ahead than this cannot be set.
SQS_DELAY_HORIZON_MS = 900_000
# The width of a "moment" in the round-robin: the sweep interval (the EventBridge rule's rate),
# so the first moment holds what this sweep must send before the next one starts.
MOMENT_MS = 60_000
_MS = 1000


class Due(NamedTuple):
    """What planning needs of one job in a shard's due range."""

    queue: str
    due_ms: int
    rank: int  # priority rank: 0 is critical
    paceable: bool  # the sweep would claim it as a new dispatch (pending, not owned elsewhere)


@dataclass(frozen=True)
class DispatchPolicy:
    """The deployment's per-queue dispatch settings, and the shard count the caps divide by."""

    queues: Mapping[str, QueueDispatch] = field(default_factory=dict)
    shard_count: int = 1

    def weight(self, queue: str) -> int:
        settings = self.queues.get(queue)
        return settings.weight if settings is not None else 1

    def cap(self, queue: str) -> int | None:
        settings = self.queues.get(queue)
        return settings.max_per_second if settings is not None else None

    def pacer(self, queue: str, *, next_free_ms: int, now_ms: int) -> Pacer | None:
        """The shard's pacer for `queue` in a sweep at `now_ms`, None if the queue is uncapped.
        A next free slot in the past is now: unused time is not saved up for a burst."""
        cap = self.cap(queue)
        if cap is None:
            return None
        return Pacer(
            per_second=cap,
            shard_count=self.shard_count,
            next_free_ms=max(next_free_ms, now_ms),
            horizon_ms=now_ms + SQS_DELAY_HORIZON_MS,
        )


class Pacer:
    """One capped queue's send slots on one shard during one sweep."""

    def __init__(
        self, *, per_second: int, shard_count: int, next_free_ms: int, horizon_ms: int
    ) -> None:
        if per_second < 1 or shard_count < 1:
            raise ValueError("per_second and shard_count must be at least 1")
        # Kept in microseconds: at high rates a whole-millisecond gap would round the rate
        # far down (64 shards at 100,000/s is a slot every 0.64 ms per shard).
        self._gap_us = -(-1_000_000 * shard_count // per_second)
        self._next_us = next_free_ms * _MS
        self._horizon_ms = horizon_ms
        self.placed = 0

    @property
    def next_free_ms(self) -> int:
        """The earliest slot the next job may have (rounded up to a whole millisecond)."""
        return -(-self._next_us // _MS)

    def place(self, due_ms: int) -> int | None:
        """The job's slot (when it is to be visible, never before `due_ms`), or None when its
        slot would be beyond the horizon: then it keeps no slot and waits for a later sweep."""
        slot_us = max(due_ms * _MS, self._next_us)
        slot_ms = -(-slot_us // _MS)
        if slot_ms > self._horizon_ms:
            return None
        self._next_us = slot_us + self._gap_us
        self.placed += 1
        return slot_ms


@dataclass
class DispatchPlan:
    """One shard's sweep order. `order` holds indexes into the due range, most urgent first,
    with `groups[n]` the (priority rank, moment) group of `order[n]` (non-decreasing; moment 0
    is overdue or due within MOMENT_MS, 1 the minute after, ...)."""

    order: list[int] = field(default_factory=list)
    groups: list[tuple[int, int]] = field(default_factory=list)
    slots: dict[int, int] = field(default_factory=dict)  # index -> slot, for paced jobs
    deferred: list[int] = field(default_factory=list)  # indexes beyond the horizon


def plan_dispatch(
    due: Sequence[Due],
    *,
    policy: DispatchPolicy,
    pacers: Mapping[str, Pacer],
    now_ms: int,
) -> DispatchPlan:
    """Place the capped queues' jobs (with `pacers`, which keep their state for jobs placed
    later in the sweep) and order the rest: see the module docstring."""
    plan = DispatchPlan()
    deferred: set[int] = set()
    pace_order = sorted(
        (i for i, job in enumerate(due) if job.paceable and job.queue in pacers),
        key=lambda i: (due[i].due_ms // _MS, due[i].rank, due[i].due_ms, i),
    )
    for i in pace_order:
        slot = pacers[due[i].queue].place(due[i].due_ms)
        if slot is None:
            deferred.add(i)
        else:
            plan.slots[i] = slot
    plan.deferred = sorted(deferred)
    lanes: dict[tuple[int, int], dict[str, list[int]]] = {}
    for i, job in enumerate(due):
        if i in deferred:
            continue
        moment = max(plan.slots.get(i, job.due_ms) - now_ms, 0) // MOMENT_MS
        lanes.setdefault((job.rank, moment), {}).setdefault(job.queue, []).append(i)
    for group in sorted(lanes):
        by_queue = lanes[group]
        turns = interleave(list(by_queue.values()), [policy.weight(q) for q in by_queue])
        plan.order += turns
        plan.groups += [group] * len(turns)
    return plan


def interleave(lanes: Sequence[Sequence[T]], weights: Sequence[int]) -> list[T]:
    """Weighted round-robin: each round takes up to `weights[n]` items from `lanes[n]`, in lane
    order, until every lane is empty. Each lane keeps its own order."""
    if len(lanes) != len(weights) or any(w < 1 for w in weights):
        raise ValueError("one weight of at least 1 per lane")
    if len(lanes) == 1:
        return list(lanes[0])
    out: list[T] = []
    positions = [0] * len(lanes)
    left = sum(len(lane) for lane in lanes)
    while left:
        for n, lane in enumerate(lanes):
            take = lane[positions[n] : positions[n] + weights[n]]
            positions[n] += len(take)
            left -= len(take)
            out += take
    return out
