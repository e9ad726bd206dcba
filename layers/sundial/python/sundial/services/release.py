"""Releasing due-soon jobs from an API call (a resume, a new schedule, a queue's catch-up):
jobs that a sweep may already have passed, so nothing but the caller will ever send them.

For each job: make it the caller's (`direct`, conditionally, so a sweeper that read it earlier
cannot claim it too), advance its schedule if it is an occurrence (services.chain), then send
it (services.direct). A schedule's successors that are due within the window too are released
the same way, one after another. A job of a paused queue is left pending and recorded for that
queue's catch-up instead.

Interleavings. A call that took due-soon jobs to send them itself (a job resume, a schedule create
or resume) and died before sending leaves them `direct` below the cursor: no sweep takes them. The
client's repeat of that call (the API asks for it: no answer, 503) finishes the work once
SUBMIT_IN_FLIGHT has passed: a job resume resumes a stale direct job again; a schedule's create or
resume sends every fired occurrence still pending in the window (ScheduleService._unsent).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from sundial.clock import Clock
from sundial.model.job import Job, Status
from sundial.model.placement import Where, place
from sundial.services.chain import Action, OccurrenceChain
from sundial.services.direct import DirectSender
from sundial.store.jobs import JobStore
from sundial.store.queue_states import Hold, QueueStateStore
from sundial.timing import SUBMIT_IN_FLIGHT_MS


@dataclass(slots=True)
class Released:
    sent: list[Job] = field(default_factory=list)
    failed: list[Job] = field(default_factory=list)  # SQS refused: still pending and direct
    held: list[Job] = field(default_factory=list)  # left for a paused queue's catch-up
    # Pending jobs another caller had taken (direct) less than SUBMIT_IN_FLIGHT ago: left to
    # it, but not yet sent; a caller that owes them (a catch-up) must come back for them.
    busy: list[Job] = field(default_factory=list)
    skipped: int = 0  # occurrences the misfire policy skipped, or parked or dropped


class Releaser:
    def __init__(
        self,
        *,
        store: JobStore,
        chain: OccurrenceChain,
        direct: DirectSender,
        queue_states: QueueStateStore,
        clock: Clock,
    ) -> None:
        self._store = store
        self._chain = chain
        self._direct = direct
        self._queue_states = queue_states
        self._clock = clock

    def release(self, jobs: Sequence[Job], *, owned: bool, by: str) -> Released:
        """Send `jobs` (pending) now. `owned`: the caller already made them direct (a resume);
        otherwise each is taken first, and one someone else holds is left to them."""
        now = self._clock.now_ms()
        result = Released()
        paused: dict[str, bool] = {}
        work = deque((job, owned) for job in jobs)
        to_send: list[Job] = []
        while work:
            job, is_owned = work.popleft()
            where = place(
                job.due_ms, now, queue_paused=partial(self._queue_paused, job.queue, paused)
            ).where
            if where is Where.SWEEP:
                continue  # far enough ahead for the sweeper
            if where is Where.HOLD:
                hold = self._hold(job, owned=is_owned)
                if hold is Hold.HELD:
                    result.held.append(job)
                    continue
                if hold is Hold.JOB_CHANGED:
                    continue  # no longer ours to send (cancelled meanwhile)
            taken = job if is_owned else self._take(job, now, result)
            if taken is None:
                continue  # someone else has it (a sweeper claimed it, or it is not pending)
            if taken.schedule_id is None or taken.chained:
                to_send.append(taken)
                continue
            advance = self._chain.decide(taken, now_ms=now)  # parks it if its schedule is paused
            if advance.action is Action.FIRE:
                to_send.append(taken)
            elif advance.action is Action.PARK:
                result.skipped += 1
            elif advance.action in (Action.SKIP, Action.DROP):
                self._chain.close(taken.key, advance.action, now_ms=now)
                result.skipped += 1
            successor = advance.successor
            if successor is not None and successor.status is Status.PENDING:
                work.append((successor, False))
        result.failed = self._direct.send(to_send, by=by)
        failed = {job.id for job in result.failed}
        result.sent = [job for job in to_send if job.id not in failed]
        return result

    def paused_queues(self) -> frozenset[str]:
        """The queues paused now: their jobs wait for the queue's catch-up, not for this."""
        return self._queue_states.paused()

    def _take(self, job: Job, now: int, result: Released) -> Job | None:
        taken, current = self._store.take_direct(
            job.key, now_ms=now, stale_before_ms=now - SUBMIT_IN_FLIGHT_MS
        )
        if taken:
            return current
        # Taken by another API call (it stamps resumed_at) that has not sent it yet, and may have
        # died: whoever owes it comes back after SUBMIT_IN_FLIGHT. (A direct job never taken is
        # a submit's or a create's that died before answering: its client's retry sends it.)
        if current is None or current.resumed_at_ms is None:
            return None
        if current.status is Status.PENDING and current.direct:
            result.busy.append(current)
        return None

    def _hold(self, job: Job, *, owned: bool) -> Hold:
        """Leave a job of a paused queue to its catch-up. One the caller owns (direct) is handed
        back in the same transaction that records it, so the catch-up may take it at once."""
        if not owned:
            held = self._queue_states.hold(job.queue, job.id)
            return Hold.HELD if held else Hold.NOT_PAUSED
        write = self._store.hand_back_write(job.key)
        return self._queue_states.hold_with(job.queue, [write], record=[job.id])

    def _queue_paused(self, queue: str, cache: dict[str, bool]) -> bool:
        if queue not in cache:
            cache[queue] = self._queue_states.get(queue).paused
        return cache[queue]
