"""The occurrence chain: how a schedule moves from one occurrence to the next.

A schedule has, at any time, one occurrence waiting in the table (the head). Whoever dispatches
the head (the sweeper, or an API call for a head the cursor may have passed) first advances the
chain, in this order, so a crash at any step skips nothing and a race creates nothing twice:
1. read the schedule (deleted -> drop the occurrence; paused -> park it, nothing advances);
2. decide: on time -> fire it, successor = the next occurrence after it; missed (more than
   MISFIRE_GRACE late) -> fire it (`fire_once`) or skip it (`skip`), successor = the next
   occurrence after now;
3. write that decision as the occurrence's run record, put-if-absent: if one exists (a racing
   sweeper, or an attempt that crashed), its decision holds instead;
4. put the successor, put-if-absent (its key is derived from the schedule and its time);
5. only then the caller claims the occurrence (fire) or cancels it (skip). Until that write the
   occurrence stays pending, so whoever comes next repeats steps 1-4 and reaches the same state.
A waiting schedule costs nothing: no scan, no timer, just its head item in the table.

How the chain interleaves with a schedule's pause, update and resume:
- Parking a paused schedule's occurrence (a sweep reaching it, a release, or the schedule's pause
  itself) is one transaction with a check that the schedule is still paused (ScheduleStore.park).
  A resume that lands first makes the park fail; the parker decides again (the occurrence fires)
  and a pause answers 409 "resumed while this pause ran". So a resumed schedule never keeps a
  parked occurrence, whatever the order of pause, resume and sweep.
  A pause parks all its occurrences (those sent for a time still ahead, and the waiting head)
  in as few transactions as TransactWriteItems takes: the check and up to 99 parks in each
  (ScheduleStore.park_all; one transaction for the densest schedule, every 10 s: at most 91
  occurrences in 15 minutes; it was one per occurrence). The rule holds per transaction:
  - A resume landing between two of them: the earlier ones are written and the later ones fail
    their check (409). The resume flips the state first and reads the occurrences after, so it
    sees every park written before its flip and releases it; none is written after it.
  - An occurrence that stops being parkable while the pause runs (a consumer took it, a cancel,
    a sweep's own park) fails its entry: the whole transaction is cancelled, and written again
    without it (it is left as the other write made it, as a lone park that failed would have
    left it). Each round leaves one out, so the rounds end. The pause parks only what it read
    as parkable, so such a round is rare.
  - A crash between two transactions leaves the earlier parks and a paused schedule: what a
    crash after some of the one-by-one parks left. Pausing again repeats the work.
- An update of a schedule (PATCH, ScheduleService.update) replaces the chain's head H, the one
  occurrence no run record decides yet, in ONE transaction (ScheduleStore.revise): the schedule's
  new settings, conditional on the revision read and on not being deleted; H's run record,
  put-if-absent, outcome `replaced`, naming the new first occurrence N and its revision; H
  cancelled and `chained`, conditional on pending, paused or cancelled (or, if a sweep decided
  H's predecessor and has not written H yet, H put cancelled, if absent); N put, if absent.
  "Decided" means a run record exists: every sender writes it before it claims or sends an
  occurrence (services.chain), so the record is where a sweep or a release and an update meet.
  If a sweep decides H first, the transaction fails and the update reads again: H keeps its
  settings and runs, and the update replaces H's successor instead (if it is not written yet,
  the sweep's later put finds the cancelled item and adds nothing). If the update commits
  first, a sweep that read H before (pending) decides it after: its record put finds
  `replaced` (it cancels H, a no-op) and its successor is N, already written; a sweep that read
  the old schedule writes nothing of it. So after a 200, an occurrence of the old settings
  runs only if it was decided before the update. Each update starts a new revision whose
  occurrences have keys (and run records) of their own, so an old occurrence and a new one
  never share an item, even at the same time. N is after the newest decided occurrence (no
  duplicate run of a time) and, unless H was overdue, not before now; the head is found from
  the newest decided record, or the schedule's `first_at` (N) once an update came after it.
  N due within DIRECT_WINDOW is direct and the update sends it (services.release, which decides
  it through the chain: a paused schedule parks it, a paused queue holds it); a crash after the
  commit leaves it direct: the client's repeat of the update changes nothing (same settings)
  and sends it once SUBMIT_IN_FLIGHT has passed (a conditional take: two repeats send it once),
  answering 409 "retry shortly" while it may still be on its way. Two updates: one commits,
  the other's revision condition fails and it reads again and applies its fields on top (or
  409 after a few rounds). A delete commits first (the update's condition fails: 409 deleted)
  or after (the delete reads the head after its own write and cancels N). A pause or resume
  does not conflict on the schedule item; on the head they are serialised by its conditions:
  a park before the update is replaced with it; N then meets the paused schedule (the sweep or
  the update's release parks it); a resume that released H first decided it (the update moves
  on), one that finds H cancelled finds N as the head.
- A schedule's resume moves the chain on from an occurrence cancelled while parked (a client
  skipping one run): no sweep comes back to it, its time is behind the cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from sundial.clock import Clock
from sundial.ids import JobKey
from sundial.model.job import Job, Status
from sundial.model.placement import due_soon
from sundial.model.schedule import Misfire, RunOutcome, RunRecord, Schedule, ScheduleState
from sundial.store.jobs import JobStore
from sundial.store.schedules import Parked, ScheduleStore

# An occurrence found still pending this long after its time was missed (nothing dispatched it
# while it was due: an outage, a paused queue); the misfire policy decides its fate. A healthy
# sweeper claims an occurrence about 14 minutes ahead, so an on-time one is never this late.
MISFIRE_GRACE_MS = 60_000


def occurrences_at_once(schedule: Schedule, first_ms: int, *, now_ms: int) -> int:
    """How many occurrences a call that starts `schedule`'s chain at `first_ms` (a create, an
    update, a resume) writes at once, as the chain decides them: every one due within the direct
    window (the call sends them: services.release follows the chain) and the first one after it
    (written, for the sweepers). What the submission quota counts (services.admission). At most
    (DIRECT_WINDOW + MISFIRE_GRACE) / MIN_INTERVAL + 2 steps: 98."""
    count = 0
    at: int | None = first_ms
    while at is not None:
        count += 1
        if not due_soon(at, now_ms):
            break
        missed = now_ms - at > MISFIRE_GRACE_MS
        at = schedule.next_after(now_ms if missed else at)
    return count


class Action(StrEnum):
    FIRE = "fire"  # the caller dispatches the occurrence (claim, send)
    SKIP = "skip"  # the caller cancels it: missed and skipped by the misfire policy
    PARK = "park"  # the schedule is paused: the caller pauses it; nothing advanced
    DROP = "drop"  # the schedule is gone: the caller cancels it; nothing advanced
    NONE = "none"  # the occurrence was already finished (e.g. cancelled); the chain advanced


class Occurrence(Protocol):
    """What the chain reads of an occurrence: a Job, or the sweeper's DueRef of one."""

    @property
    def key(self) -> JobKey: ...
    @property
    def id(self) -> str: ...
    @property
    def due_ms(self) -> int: ...
    @property
    def status(self) -> Status: ...
    @property
    def schedule_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Advance:
    action: Action
    successor: Job | None = None  # the next occurrence, as stored (pending unless handled)
    successor_created: bool = False


class OccurrenceChain:
    def __init__(
        self,
        *,
        schedules: ScheduleStore,
        store: JobStore,
        clock: Clock,
        retention_days: int,
        default_attempts: dict[str, int] | None = None,
    ) -> None:
        self._schedules = schedules
        self._store = store
        self._clock = clock
        self._retention_s = retention_days * 86_400
        self._default_attempts = default_attempts or {}

    def advance(
        self, occurrence: Occurrence, *, now_ms: int, schedule: Schedule | None = None
    ) -> Advance:
        """Steps 1-4 above for `occurrence` (pending, or finished without having fired)."""
        assert occurrence.schedule_id is not None
        current = self._schedules.get(occurrence.schedule_id) if schedule is None else schedule
        if current is None or current.state is ScheduleState.DELETED:
            return Advance(Action.DROP)
        if current.state is ScheduleState.PAUSED and occurrence.status is Status.PENDING:
            return Advance(Action.PARK)
        run = self._schedules.record_run(
            self._decide(current, occurrence, now_ms),
            expires_at_s=occurrence.due_ms // 1000 + self._retention_s,
        )
        successor: Job | None = None
        created = False
        if run.next_at_ms is not None:
            template = self._template(current, run.next_revision)
            created, successor = self._store.put_or_existing(
                template.occurrence(
                    run.next_at_ms,
                    now_ms=now_ms,
                    default_attempts=self._default_attempts.get(current.queue, 3),
                    revision=run.next_revision,
                )
            )
        if occurrence.status is not Status.PENDING:
            action = Action.NONE
        else:
            action = Action.FIRE if run.outcome is RunOutcome.FIRED else Action.SKIP
        return Advance(action, successor, created)

    def _template(self, read: Schedule, revision: int) -> Schedule:
        """The settings a successor of `revision` is written with. The record that names it
        may be newer than the schedule this call read (an update landed in between): read
        again. If the schedule is newer still, a later update already wrote that successor
        (an update replaces the head, written or not: ScheduleService.update), so the write
        below only finds it."""
        if read.revision == revision:
            return read
        return self._schedules.get(read.id) or read

    def decide(self, occurrence: Occurrence, *, now_ms: int) -> Advance:
        """`advance`, parking the occurrence itself when its schedule is paused. The park holds
        only while the schedule is still paused; if a resume landed in between, decide again
        (so it fires). Returns the action the caller still has to carry out: FIRE, SKIP or DROP
        (PARK means: parked, nothing more to do; NONE: the occurrence had moved on)."""
        assert occurrence.schedule_id is not None
        while True:
            advance = self.advance(occurrence, now_ms=now_ms)
            if advance.action is not Action.PARK:
                return advance
            write = self._store.park_write(occurrence.key, now_ms=now_ms)
            parked = self._schedules.park(occurrence.schedule_id, write)
            if parked is Parked.PARKED:
                return advance
            if parked is Parked.GONE:
                return Advance(Action.NONE)

    def _decide(self, schedule: Schedule, occurrence: Occurrence, now_ms: int) -> RunRecord:
        missed = now_ms - occurrence.due_ms > MISFIRE_GRACE_MS
        if occurrence.status is not Status.PENDING:
            outcome = RunOutcome.CANCELLED
        elif missed and schedule.misfire is Misfire.SKIP:
            outcome = RunOutcome.SKIPPED
        else:
            outcome = RunOutcome.FIRED
        return RunRecord(
            schedule_id=schedule.id,
            at_ms=occurrence.due_ms,
            job_id=occurrence.id,
            outcome=outcome,
            decided_at_ms=now_ms,
            next_at_ms=schedule.next_after(now_ms if missed else occurrence.due_ms),
            next_revision=schedule.revision,
            revised=not schedule.is_original(occurrence.key),
        )

    def close(self, occurrence: JobKey, action: Action, *, now_ms: int) -> None:
        """Cancel an occurrence the chain decided not to run (SKIP: its successor is written,
        so it is `chained`; DROP: its schedule is gone)."""
        assert action in (Action.SKIP, Action.DROP)
        self._store.cancel(
            occurrence,
            now_ms=now_ms,
            expires_at_s=self.expiry(now_ms),
            chained=action is Action.SKIP,
        )

    def expiry(self, now_ms: int) -> int:
        """When a finished occurrence's item may go (DynamoDB TTL, epoch seconds)."""
        return now_ms // 1000 + self._retention_s
