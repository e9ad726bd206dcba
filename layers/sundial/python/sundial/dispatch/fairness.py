"""Fair dispatch: how one shard's sweep shares SQS visibility and its own time between queues.
Pure: no AWS, no clock; dispatch.shard_sweep applies it (the write and hold rules are
below, "FAIR DISPATCH").

- **Pacing** (a queue's `max_per_second`). The cap is global per queue, but each shard is swept
  on its own, so each shard paces the queue at `max_per_second / shard_count`: its jobs of the
  queue get send slots at least `1000 * shard_count / max_per_second` ms apart, each at
  `max(due, the shard's next free slot)`, so a job is never visible before it is due and is
  late only when jobs due before it (or at its second with a higher priority) filled the
  slots. Slots are given out in due order, by due second, then priority, then due time. A slot
  more than SQS's 15 minutes ahead cannot be set with DelaySeconds: such a job is `deferred`,
  left pending and unsent, and the release records where its queue is read again
  (`deferred_from`, sundial.store.sweeps), so a later sweep places it. The
  shard's next free slot per queue is kept on its cursor item between sweeps. The division is
  an approximation: jobs are spread over shards at random, so a flood's shards finish within a
  few slots of each other, and in any window of W seconds a queue gets at most
  `max_per_second * W + shard_count` jobs visible (one slot per shard may fall in the window's
  first second).
- **Weighted round-robin** (a queue's `weight`). A sweep sends in groups: priority
  first, as before, then the moment the job is due, a minute wide: the first moment is
  everything overdue or due before the next sweep (MOMENT_MS after this one; a paced job
  counts at its slot), which this sweep must send in time; the next, the minute after; and so
  on. Within a group, queues take turns, `weight` jobs each per round, each queue's jobs in
  due order; queues enter a round in the order of their earliest job. So a flood of one queue
  delays another queue's job due at the same moment by at most one round, not by the whole
  flood, and a job due in the next seconds does not wait behind an overdue backlog. A job due
  in a later moment is sent with DelaySeconds long before it is due, so its place matters only
  when the sweep runs out of time (then the cursor holds, and the next sweep goes on).

FAIR DISPATCH (sundial.dispatch.fairness; a queue's max_dispatch_per_second and weight). The
write and hold sequence of one shard's sweep (under its lease: sundial.store.sweeps):
1. Read the cursor item: the cursor, the shard's pacing state (each capped queue's next free
   send slot) and where each capped queue's deferred jobs begin (`deferred_from`). Read the
   due range, and each such queue's pending jobs from its marker up to the cursor.
2. Plan: each pending job of a capped queue that this sweep would send gets a slot, at
   max(due, next free slot), the next slot a per-shard gap later, in due order (by due
   second, then priority). A job whose slot would be more than 15 minutes ahead (SQS's longest
   DelaySeconds) is deferred: left `pending`, unsent, the lowest of its queue's recorded in
   the release; it does not hold the cursor. The rest is ordered: priority, then the
   minute-wide moment it is due (its slot if paced), then the queues' weighted turns.
3. Send; a paced job's message has DelaySeconds to its slot, counted from just before its
   request, so it is visible at its slot, never before it, and a slot is never before the due
   time: nothing is visible before due.
4. Release (THE CURSOR RULE): the one write that moves the cursor also stores the pacing state
   if it placed any job, and the deferred markers; no write per job.
Why the invariants hold, against what it interleaves with:
- Nothing is lost: a deferred job is pending at or above its queue's marker, which the next
  sweep reads again; pacing places a queue's jobs in due order, so its jobs between its marker
  and the cursor are deferred ones (a job of the same second placed ahead of a deferred one
  by its priority is read again and sent again: a duplicate, a no-op at the take).
- No duplicate: pacing changes only the order of sends and their DelaySeconds. Two sweeps of a
  shard cannot both send: the lease decides who holds it.
- Cancel: a deferred job is pending, so a cancel takes it (200) and no sweep sends it after; a
  paced job already sent is pending until taken, and its take fails once it is cancelled. A
  slot's delay only makes the job run later, after any cancel that answered 200 first.
- Pause and resume of a job: a paused job is not pending, so it is not paced; its resume sends
  it itself if due soon (services.release), unpaced.
- A queue's pause: its jobs are passed over (not planned, no slot), deferred ones included, and
  its marker is kept; the pause recorded the lowest of cursors and markers
  (SweepStore.read_cursors), so its resume's catch-up reads them and sends them. The catch-up
  is not paced (it sends what a pause held back; docs/api.md, Fair dispatch, says so).
- A schedule's successor written during the sweep (OccurrenceChain.advance): if its queue is
  capped it is placed after every planned job, or deferred, before its chain is decided, so
  nothing is written for an occurrence this sweep does not send.
- Catch-up after an outage: overdue jobs count as due now: the capped queue's get slots from
  now on (a next free slot in the past is now, so idle time is not a burst), and the queues'
  turns share the sweep between them, so one queue's backlog does not delay another's.
- A crashed holder: its pacing state and markers were not stored; the next holder reads the
  last release's and sends again from the cursor (what the dead one sent: duplicates, not
  paced anew: a job named as sent by the last holder is not placed again). The rate may
  briefly exceed the cap after a crash; nothing else changes.
- Direct sends (the submit's, a release's, a consumer's retries and DAG children) are not
  paced: a job due within 15 minutes of its submission is bounded by the submission quota.
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
    paceable: bool  # the sweep would send it as a new dispatch (pending, not owned elsewhere)


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
