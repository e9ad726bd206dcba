"""Where a job goes: the one decision every path that writes, resumes, moves, retries,
releases, replays or catches up a job makes, and the one place the direct window is compared.

A sweep claims jobs due up to now + SWEEP_LOOKAHEAD and moves its shard's cursor to that
frontier; it never goes back. So a job written, or made pending again, due within the direct
window may already be behind a cursor: nothing but its writer will send it (THE OWNER RULE,
docs/invariants.md). `place` says what the writer does with it:

- SEND: due within the window (or overdue): the writer makes it `direct` (no sweeper claims it)
  and sends it now, with DelaySeconds to its due second (`delay_s`; SQS allows 15 minutes).
- SWEEP: due after the window: written pending, above every cursor; a sweep sends it.
- HOLD: due within the window on a paused queue: written pending and recorded in the queue's
  `held` set in the same transaction (QueueStateStore.hold_with); the queue's resume sends it.
- PARK: an occurrence of a paused schedule: parked, whatever its time (ScheduleStore.park);
  the schedule's resume places it again.
- PAUSED: the job itself is paused (a move of a paused job): it waits, unsent, for its resume,
  which places it again.

The writers that carry a SEND out are JobService.write_new (new jobs), DirectSender.send (the
send and the claim that marks it queued) and Releaser.release (a job made pending again);
`make_direct` sets a job built in memory as its writer's (a submit, a schedule's create or
update). A job already in the table is made direct by a conditional write (JobStore.take_direct,
JobStore.resume), so that no sweeper that read it earlier claims it too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sundial.model.job import Job
from sundial.timing import DIRECT_WINDOW_MS

SQS_MAX_DELAY_S = 900
# A job placed SEND is visible at its due second with one DelaySeconds (a retry's too).
assert DIRECT_WINDOW_MS <= SQS_MAX_DELAY_S * 1000


class Where(StrEnum):
    SEND = "send"
    SWEEP = "sweep"
    HOLD = "hold"
    PARK = "park"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class Placement:
    where: Where
    delay_s: int = 0  # SEND: the DelaySeconds that makes it visible at its due second


def due_soon(due_ms: int, now_ms: int) -> bool:
    """Whether a job due at `due_ms` is within the direct window at `now_ms` (overdue counts):
    a sweep may already have passed it. The only comparison with DIRECT_WINDOW_MS."""
    return due_ms <= window_end(now_ms)


def window_end(now_ms: int) -> int:
    """The last due time, at `now_ms`, that is within the direct window."""
    return now_ms + DIRECT_WINDOW_MS


def delay_seconds(due_ms: int, now_ms: int) -> int:
    """Whole seconds to delay so the message is visible at, never before, the due time."""
    remaining_ms = due_ms - now_ms
    if remaining_ms <= 0:
        return 0
    return min(SQS_MAX_DELAY_S, -(-remaining_ms // 1000))


def place(
    due_ms: int,
    now_ms: int,
    *,
    queue_paused: bool | Callable[[], bool] = False,
    schedule_paused: bool = False,
    job_paused: bool = False,
) -> Placement:
    """Where a job due at `due_ms` goes at `now_ms`. `queue_paused` may be a callable (a read):
    it is asked only for a job due within the window, the one case it decides."""
    if job_paused:
        return Placement(Where.PAUSED)
    if schedule_paused:
        return Placement(Where.PARK)
    if not due_soon(due_ms, now_ms):
        return Placement(Where.SWEEP)
    if queue_paused() if callable(queue_paused) else queue_paused:
        return Placement(Where.HOLD)
    return Placement(Where.SEND, delay_s=delay_seconds(due_ms, now_ms))


def make_direct(job: Job, *, retention_s: int | None = None, taken_at_ms: int | None = None) -> Job:
    """Make `job` its writer's to send (Where.SEND): `direct`, so no sweeper claims it.
    `retention_s`: it expires that long after its due time (an unacknowledged direct job must
    not linger); `taken_at_ms`: when a call took it (`resumed_at`), so another may take it over
    once SUBMIT_IN_FLIGHT has passed."""
    job.direct = True
    if retention_s is not None:
        job.expires_at_s = job.due_ms // 1000 + retention_s
    if taken_at_ms is not None:
        job.resumed_at_ms = taken_at_ms
    return job
