"""Pausing and resuming a whole queue (GET/POST /queues/{queue}...), and the catch-up a resume
runs. The rules, and why they lose nothing, are in sundial.store.queue_states.

Interleavings of a catch-up. A queue's catch-up (a resume, or a sweeper finishing one) takes each
held job (`direct`, a conditional write) before sending it. Two overlapping catch-ups: the second
leaves a job the first took less than CATCH_UP_STALE ago (services.queues) and keeps it on the
`held` list, so it is sent once; only a job sent, gone or finished is struck off. Likewise a shard
of the catch-up range is struck off only when none of its jobs is left taken by another caller that
has not sent it (Released.busy): that caller may have died (a resume that crashed after its take),
and the next pass takes the job once the take is SUBMIT_IN_FLIGHT old.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from sundial.clock import Clock
from sundial.errors import QueueNotFound
from sundial.ids import JobKey, due_sk_bound, shard_pk
from sundial.model.job import Job, Status
from sundial.model.placement import window_end
from sundial.services.release import Releaser
from sundial.store.dead_letters import DeadLetterStore
from sundial.store.jobs import JobStore
from sundial.store.queue_states import QueueState, QueueStateStore
from sundial.store.sweeps import SweepStore
from sundial.timing import SWEEP_MARGIN_MS
from sundial.transport.depths import QueueDepth, QueueDepths

# A submit may read the clock a little before the pause lands (clocks of different Lambdas
# agree to well within this); jobs due from this long before the pause are caught up.
CLOCK_MARGIN_MS = SWEEP_MARGIN_MS
# A resume's own catch-up runs this long at most inside the API call (API Gateway allows an
# integration 30 s); the sweepers finish the rest, once the catch-up is this old.
CATCH_UP_BUDGET_MS = 20_000
CATCH_UP_STALE_MS = 120_000


@dataclass(frozen=True, slots=True)
class CatchUpReport:
    dispatched: int = 0
    held_released: int = 0
    shards_done: int = 0
    finished: bool = True


class CatchUp:
    """Releases a resumed queue's pending jobs that the sweepers passed while it was paused."""

    def __init__(
        self, *, states: QueueStateStore, releaser: Releaser, store: JobStore, clock: Clock
    ) -> None:
        self._states = states
        self._releaser = releaser
        self._store = store
        self._clock = clock

    def run(
        self,
        state: QueueState,
        *,
        shards: Collection[int] | None = None,
        has_time: Callable[[], bool] = lambda: True,
    ) -> CatchUpReport:
        """Catch up `state` on `shards` (default: every shard still owed), while `has_time`."""
        if state.paused or not state.catching_up:
            return CatchUpReport()
        mine = sorted(state.catch_shards if shards is None else state.catch_shards & set(shards))
        dispatched, released = 0, 0
        held = sorted(
            job_id
            for job_id in state.held
            if shards is None or JobKey.from_job_id(job_id).shard in shards
        )
        if held:
            released = self._release_held(state.name, held)
        done: list[int] = []
        for shard in mine:
            if not has_time():
                break
            assert state.catch_from is not None and state.catch_to is not None
            jobs = list(
                self._states.pending_jobs(
                    state.name, shard_pk(shard), from_sk=state.catch_from, to_sk=state.catch_to
                )
            )
            outcome = self._releaser.release(jobs, owned=False, by="catch-up")
            dispatched += len(outcome.sent)
            if outcome.failed or outcome.busy:
                # SQS refused some, or another caller took some and has not sent them yet (it
                # may have died: a resume that crashed): the shard stays owed, done again later.
                break
            done.append(shard)
            self._states.strike(state.name, shards=[shard])
        return CatchUpReport(
            dispatched=dispatched + released,
            held_released=released,
            shards_done=len(done),
            finished=len(done) == len(mine),
        )

    def _release_held(self, queue: str, job_ids: Sequence[str]) -> int:
        now = self._clock.now_ms()
        owned: list[Job] = []
        settled: list[str] = []  # nothing more to do for these: strike them off
        for job_id in job_ids:
            # Held jobs are pending and not direct (QueueStateStore.hold_with). One that is
            # direct was taken by another catch-up (an overlapping resume): left to it unless it
            # has been abandoned that long, and kept on the list meanwhile in case it dies.
            taken, job = self._store.take_direct(
                JobKey.from_job_id(job_id), now_ms=now, stale_before_ms=now - CATCH_UP_STALE_MS
            )
            if taken and job is not None:
                owned.append(job)
            elif job is None or job.status is not Status.PENDING or not job.direct:
                settled.append(job_id)  # gone, on its way, or a paused DAG's (its resume sends it)
        outcome = self._releaser.release(owned, owned=True, by="catch-up")
        # Held again (the queue was paused again meanwhile) or refused by SQS: still owed.
        owed = {job.id for job in [*outcome.failed, *outcome.held]}
        settled += [job.id for job in owned if job.id not in owed]
        if settled:
            self._states.strike(queue, held=settled)
        return len(outcome.sent)


# GET /queues counts each queue's indexed dead letters up to this many (a count reads them).
DEAD_LETTER_COUNT_CAP = 1_000


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """One queue at a glance: its state, its SQS depth, and its dead letters."""

    state: QueueState
    messages: QueueDepth
    dead_letters: int  # indexed (GET /queues/{queue}/dead lists them), counted up to a cap
    dead_letters_capped: bool  # there are more than `dead_letters`
    dead_letter_queue_messages: int | None  # in the DLQ, not yet indexed


@dataclass(frozen=True, slots=True)
class QueueView:
    state: QueueState
    dispatched: int = 0


class QueueControl:
    def __init__(
        self,
        *,
        states: QueueStateStore,
        sweeps: SweepStore,
        catch_up: CatchUp,
        clock: Clock,
        queues: Collection[str],
        shard_count: int,
    ) -> None:
        self._states = states
        self._sweeps = sweeps
        self._catch_up = catch_up
        self._clock = clock
        self._queues = frozenset(queues)
        self._shard_count = shard_count

    def _check(self, queue: str) -> None:
        if queue not in self._queues:
            raise QueueNotFound(queue)

    def _shards(self) -> list[int]:
        return list(range(max(self._shard_count, self._sweeps.recorded_shard_count())))

    def get(self, queue: str) -> QueueState:
        self._check(queue)
        return self._states.get(queue)

    def overview(
        self, queues: Collection[str], *, depths: QueueDepths, dead_letters: DeadLetterStore
    ) -> list[QueueOverview]:
        """`queues` (those the caller may read) in name order: one query for every queue's
        state, then per queue one SQS read per queue (and priority queue and DLQ) and a capped
        count of its dead-letter index."""
        states = self._states.all()
        overviews = []
        for name in sorted(set(queues) & self._queues):
            counted, capped = dead_letters.count(name, cap=DEAD_LETTER_COUNT_CAP)
            overviews.append(
                QueueOverview(
                    state=states.get(name) or QueueState(name=name),
                    messages=depths.messages(name),
                    dead_letters=counted,
                    dead_letters_capped=capped,
                    dead_letter_queue_messages=depths.dead_letter_messages(name),
                )
            )
        return overviews

    def pause(self, queue: str) -> QueueState:
        """Stop dispatching the queue's jobs. Pausing a paused queue changes nothing."""
        self._check(queue)
        now = self._clock.now_ms()
        # Read the cursors BEFORE the pause lands: a sweeper that sees the pause starts after
        # it, from a cursor at least this far on, so everything it passes is >= pause_from.
        cursors = self._sweeps.read_cursors(self._shards())
        lowest = min([*cursors.values(), due_sk_bound(now - CLOCK_MARGIN_MS, upper=False)])
        if len(cursors) < len(self._shards()):
            lowest = due_sk_bound(0, upper=False)  # a shard never swept: from its start
        _, state = self._states.pause(queue, now_ms=now, pause_from=lowest)
        return state

    def resume(self, queue: str, *, has_time: Callable[[], bool] | None = None) -> QueueView:
        """Dispatch again, and release at once what the pause held back. Resuming a running
        queue finishes a catch-up an earlier resume left unfinished, and is otherwise a no-op."""
        self._check(queue)
        now = self._clock.now_ms()
        state = self._states.get(queue)
        if state.paused:
            assert state.pause_from is not None
            catch_from = min(filter(None, [state.pause_from, state.catch_from]))
            _, state = self._states.resume(
                queue,
                now_ms=now,
                catch_from=catch_from,
                catch_to=due_sk_bound(window_end(now), upper=True),
                shards=self._shards(),
            )
        if state.paused or not state.catching_up:
            return QueueView(state)
        deadline = now + CATCH_UP_BUDGET_MS
        report = self._catch_up.run(
            state, has_time=has_time or (lambda: self._clock.now_ms() < deadline)
        )
        return QueueView(self._states.get(queue), dispatched=report.dispatched)
