"""Create, read, pause, resume and delete recurring schedules: the domain behind /schedules.

The occurrences themselves are dispatched by the sweeper (services.chain tells how a schedule
moves on). This service only starts a chain (its first occurrence), and stops and restarts it:
- pause: the schedule stops advancing (a sweeper parks its next occurrence when it comes up),
  and occurrences already handed to SQS but not yet due are paused too: their messages still
  arrive and the consumer skips them. So nothing runs while a schedule is paused;
- resume: every paused occurrence is released: those still ahead are sent for their time; the
  missed ones fall under the misfire policy: `fire_once` runs one of them now (the latest),
  `skip` none; then the schedule carries on from now.
- update (PATCH): new settings from the next undecided occurrence on (`update` tells how).

Where the chain stands (`_position`): the head is the one occurrence nothing has decided yet.
It is the successor named by the newest run record, unless an update came since (that record
is of an older revision), when it is the update's first occurrence (`first_at`). Records of
occurrences an update replaced are passed over: they are not decisions of the chain.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from sundial.clock import Clock
from sundial.errors import (
    Conflict,
    InvalidInput,
    QueueNotFound,
    ScheduleNotFound,
    Unavailable,
)
from sundial.ids import JobKey
from sundial.model.job import Job, Status
from sundial.model.placement import due_soon, make_direct
from sundial.model.schedule import (
    CreateSchedule,
    Misfire,
    RunOutcome,
    RunRecord,
    Schedule,
    ScheduleState,
    UpdateSchedule,
    check_schedule_id,
    legacy_schedule_id,
    schedule_id_for,
)
from sundial.retry import DEFAULT_MAX_ATTEMPTS
from sundial.services.admission import Admission
from sundial.services.chain import MISFIRE_GRACE_MS, OccurrenceChain, occurrences_at_once
from sundial.services.cursors import decode_cursor, encode_cursor
from sundial.services.release import Releaser
from sundial.store.jobs import JobStore
from sundial.store.schedules import Parked, Revised, ScheduleStore
from sundial.timing import SUBMIT_IN_FLIGHT_MS

_RUN_PAGE = 100
_FIRST_RECORDS = 4
# How far back a repeated create or resume looks for occurrences its first call took and did
# not send.
UNSENT_LOOKBACK_MS = 6 * 3_600_000
# An update that loses its transaction to a racing write (a sweep deciding the head, a pause,
# another update) reads again and retries this many times before answering 409.
_UPDATE_ATTEMPTS = 5
# What a head may be for an update to replace it: not yet decided (nothing claimed it).
_REPLACEABLE = frozenset({Status.PENDING, Status.PAUSED, Status.CANCELLED})
# What a pause may park (JobStore.park_write's condition, with attempts = 0).
_PARKABLE = frozenset({Status.PENDING, Status.QUEUED})


@dataclass(frozen=True, slots=True)
class CreatedSchedule:
    schedule: Schedule
    created: bool  # False when an idempotency key returned an earlier schedule


@dataclass(frozen=True, slots=True)
class ScheduleView:
    schedule: Schedule
    next_run_at_ms: int | None  # the next occurrence from now; None if paused or ended
    # The newest occurrence decided whose time has come (never one sent ahead for later).
    last_run: RunRecord | None


@dataclass(frozen=True, slots=True)
class UpdatedSchedule:
    schedule: Schedule
    # The first occurrence with the new settings (the new head, or for a repeat that changed
    # nothing, the first occurrence of the current revision).
    applies_from_ms: int
    replaced: str | None  # the job id of the occurrence it replaced; None if nothing changed


@dataclass(frozen=True, slots=True)
class ChainPosition:
    schedule: Schedule  # as read for this
    head_at_ms: int | None  # the occurrence nothing has decided yet; None once ended
    head_revision: int
    last: RunRecord | None  # the newest decided occurrence (of any revision)

    @property
    def head_key(self) -> JobKey | None:
        at = self.head_at_ms
        return None if at is None else self.schedule.occurrence_key(at, self.head_revision)


class RunsWhen(StrEnum):
    """Which of a schedule's runs a listing holds, by the occurrence's time against now."""

    PAST = "past"  # its time has come (at or before now)
    UPCOMING = "upcoming"  # decided (sent ahead with an SQS delay, or parked), not yet due


@dataclass(frozen=True, slots=True)
class PausedOccurrences:
    """What a resume finds (ScheduleService._paused)."""

    late: list[Job]  # missed by more than MISFIRE_GRACE: cancelled
    ahead: list[Job]  # sent again: those still ahead, and one missed one under fire_once
    head: Job | None  # the occurrence nothing has decided yet


@dataclass(frozen=True, slots=True)
class RunView:
    run: RunRecord
    job: Job | None  # None once the job's retention has ended
    upcoming: bool  # the occurrence's time is still ahead of now


class ScheduleService:
    def __init__(
        self,
        *,
        schedules: ScheduleStore,
        store: JobStore,
        releaser: Releaser,
        chain: OccurrenceChain,
        clock: Clock,
        queues: Collection[str],
        default_attempts: Mapping[str, int],
        shard_count: int,
        retention_days: int,
        rng: random.Random | None = None,
        admission: Admission | None = None,
    ) -> None:
        """`admission`: the queues' quotas; a schedule's payload must fit its queue's
        max_payload_bytes (its occurrences are not counted against a submission limit)."""
        self._schedules = schedules
        self._store = store
        self._releaser = releaser
        self._chain = chain
        self._clock = clock
        self._queues = frozenset(queues)
        self._default_attempts = dict(default_attempts)
        self._shard_count = shard_count
        self._retention_s = retention_days * 86_400
        self._rng = rng or random.Random()
        self._admission = admission

    # -- create -----------------------------------------------------------------------------

    def create(self, request: CreateSchedule) -> CreatedSchedule:
        now = self._clock.now_ms()
        if request.queue not in self._queues:
            known = ", ".join(sorted(self._queues))
            raise InvalidInput("queue", f"unknown queue '{request.queue}' (known: {known})")
        if self._admission is not None:  # 413 before anything is written
            self._admission.check_payload(
                field="", queue=request.queue, payload_json=request.payload_json
            )
        schedule_id = schedule_id_for(request.queue, request.idempotency_key)
        if request.idempotency_key is not None:
            earlier = self._earlier(schedule_id, request)
            if earlier is not None:
                return self._repeat(earlier, request, now)
        schedule = Schedule(
            id=schedule_id,
            name=request.name,
            cron=request.cron,
            rate=request.rate,
            timezone=request.timezone,
            queue=request.queue,
            payload_json=request.payload_json,
            priority=request.priority,
            max_attempts=request.max_attempts,
            retry=request.retry,
            start_at_ms=request.start_ms,
            end_at_ms=request.end_ms,
            misfire=request.misfire,
            shard=self._rng.randrange(self._shard_count),
            created_at_ms=now,
            anchor_ms=request.start_ms if request.start_ms is not None else now,
            first_at_ms=0,
            fingerprint=request.fingerprint(),
        )
        first = schedule.next_after(now - 1)  # an occurrence due this very moment fires now
        if first is None:
            field = "end_at" if request.end_at is not None else "cron"
            raise InvalidInput(field, "the schedule has no occurrence from now on")
        schedule.first_at_ms = first
        # The schedule and its first occurrence in one transaction: a sweep never finds the
        # occurrence without its schedule (it would drop it), and a crash never leaves a
        # schedule without its chain. A first occurrence due within the direct window is this
        # call's to send (direct: no sweeper claims it; the cursor may have passed it).
        head = self._occurrence(schedule, first, now)
        if due_soon(head.due_ms, now):
            make_direct(head, taken_at_ms=now)  # another call may take it over once stale
        self._admit(schedule, first, now)  # 429 or 413 before anything is written
        earlier = self._schedules.create(schedule, self._store.new_job_write(head))
        if earlier is not None:
            return self._repeat(earlier, request, now)  # a racing repeat wrote it first
        if head.direct:
            released = self._releaser.release([head], owned=True, by="schedule")
            if released.failed:
                raise Unavailable(
                    f"schedule {schedule.id}: its occurrence could not be sent; retry"
                )
        return CreatedSchedule(schedule, created=True)

    def _earlier(self, schedule_id: str, request: CreateSchedule) -> Schedule | None:
        """The schedule this queue created with the request's key, if any: at the id derived
        from (queue, key), or, made before keys were per queue, at the key's legacy id (one
        more read for a key not seen before). A legacy schedule of another queue is not this
        queue's: the create goes on as if there were none, so nothing tells its caller that
        another queue used the key."""
        assert request.idempotency_key is not None
        earlier = self._schedules.get(schedule_id)
        if earlier is None:
            earlier = self._schedules.get(legacy_schedule_id(request.idempotency_key))
        return earlier if earlier is not None and earlier.queue == request.queue else None

    def _repeat(self, earlier: Schedule, request: CreateSchedule, now: int) -> CreatedSchedule:
        if earlier.fingerprint != request.fingerprint():
            raise Conflict("idempotency_key was already used for a different schedule")
        if earlier.state is not ScheduleState.DELETED:
            self._release_head(earlier)  # finish the first request's work if it died
        return CreatedSchedule(earlier, created=False)

    def _admit(
        self, schedule: Schedule, first_ms: int | None, now: int, *, sent_again: int = 0
    ) -> None:
        """Count what this call writes at once against the queue's submission quota
        (services.admission): the chain from `first_ms` (its occurrences due within the direct
        window, and the next), and `sent_again` occurrences written before that it sends again.
        A 429 or a 413 before anything is written."""
        if self._admission is None or not self._admission.rate_limited(schedule.queue):
            return
        count = sent_again
        if first_ms is not None:
            count += occurrences_at_once(schedule, first_ms, now_ms=now)
        self._admission.admit_at_once(
            schedule.queue,
            count,
            field="rate" if schedule.rate is not None else "cron",
            what="this schedule",
        )

    def _occurrence(self, schedule: Schedule, at_ms: int, now: int) -> Job:
        default = self._default_attempts.get(schedule.queue, DEFAULT_MAX_ATTEMPTS)
        return schedule.occurrence(at_ms, now_ms=now, default_attempts=default)

    def _release_head(self, schedule: Schedule) -> None:
        """Send the waiting occurrence (and its successors) if due within the direct window:
        a sweep may already have passed its time, so nobody else would."""
        now = self._clock.now_ms()
        # Occurrences the first request took and did not send (it died): sent by this repeat.
        # Ones it took less than SUBMIT_IN_FLIGHT ago may still be on their way: the client
        # comes back (answering 200 would leave them to nobody if that request had died).
        unsent = self._releaser.release(self._unsent(schedule, now), owned=False, by="schedule")
        if unsent.failed:
            raise Unavailable(f"schedule {schedule.id}: its occurrences could not be sent; retry")
        sent = {job.id for job in unsent.sent}  # (a successor of one is met again: ours)
        if any(job.id not in sent for job in unsent.busy):
            raise Conflict("a request for this schedule is in progress; retry shortly")
        head = self._head(schedule)
        if head is None or head.status is not Status.PENDING:
            return
        if not due_soon(head.due_ms, now):
            return  # ahead of every sweep cursor: the sweeper takes it
        if head.direct and now - head.created_at_ms < SUBMIT_IN_FLIGHT_MS:
            raise Conflict("a request for this schedule is in progress; retry shortly")
        # A direct head is the creator's (or an update's), which died before sending it: this
        # repeat takes it over (a conditional take, so of two repeats only one sends it).
        released = self._releaser.release([head], owned=False, by="schedule")
        if released.failed:
            raise Unavailable(f"schedule {schedule.id}: its occurrence could not be sent; retry")

    # -- read -------------------------------------------------------------------------------

    def find(self, schedule_id: str) -> Schedule:
        """The schedule, deleted or not (a delete may be repeated): its queue authorizes a
        request addressed to it (sundial.api.authorization)."""
        schedule = self._schedules.get(check_schedule_id(schedule_id))
        if schedule is None:
            raise ScheduleNotFound(schedule_id)
        return schedule

    def of_queue(
        self, queue: str, *, limit: int, cursor: str | None
    ) -> tuple[list[Schedule], str | None]:
        """A page of the queue's schedules, oldest first, and the cursor of the next page (None
        on the last). Cost: one Query of the queue's listing (small items: `limit` of them in
        about one read unit) and one BatchGetItem of the schedule items (a read unit per 4 KB
        of each, consistent)."""
        if queue not in self._queues:
            raise QueueNotFound(queue)
        after = decode_cursor(cursor, queue, listing="schedules") if cursor else None
        ids, last = self._schedules.listing_page(queue, limit=limit, after_sk=after)
        found = self._schedules.get_many(ids)
        # A listing item exists only while its schedule is live (created and deleted in the
        # same transactions); the check keeps a list exact even if one were left over.
        page = [found[i] for i in ids if i in found and found[i].state is not ScheduleState.DELETED]
        return page, encode_cursor(queue, last, listing="schedules") if last else None

    def _live(self, schedule_id: str, *, read: Schedule | None = None) -> Schedule:
        """The schedule unless deleted; `read`: as read earlier in this request (consistently)."""
        schedule = read or self._schedules.get(check_schedule_id(schedule_id))
        if schedule is None or schedule.state is ScheduleState.DELETED:
            raise ScheduleNotFound(schedule_id)
        return schedule

    def _position(self, schedule: Schedule) -> ChainPosition:
        """Where the chain stands now (see the module docstring). The schedule is read again:
        an update since the caller's read moves the head."""
        current = self._schedules.get(schedule.id) or schedule
        last = next(
            (r for r in self._records(current.id) if r.outcome is not RunOutcome.REPLACED), None
        )
        if (
            last is not None
            and last.next_revision == current.revision
            and last.at_ms >= current.first_at_ms
        ):
            return ChainPosition(current, last.next_at_ms, current.revision, last)
        return ChainPosition(current, current.first_at_ms, current.revision, last)

    def _records(self, schedule_id: str, *, before_ms: int | None = None) -> Iterator[RunRecord]:
        """Run records newest first (older than `before_ms` if given), a page at a time: a
        small first page, as the newest decided one is nearly always among the first few
        (behind one `replaced` per update)."""
        before = before_ms
        limit = _FIRST_RECORDS
        while True:
            records, before = self._schedules.runs(schedule_id, limit=limit, before_ms=before)
            yield from records
            if before is None:
                return
            limit = _RUN_PAGE

    def _head(self, schedule: Schedule) -> Job | None:
        key = self._position(schedule).head_key
        return None if key is None else self._store.get(key)

    def get(self, schedule_id: str, *, read: Schedule | None = None) -> ScheduleView:
        """`read`: the schedule as this request read it already (for its authorization)."""
        schedule = self._live(schedule_id, read=read)
        position = self._position(schedule)
        schedule = position.schedule
        ended = position.head_at_ms is None
        running = schedule.state is not ScheduleState.PAUSED and not ended
        return ScheduleView(
            schedule=schedule,
            next_run_at_ms=self._next_run_ms(position) if running else None,
            last_run=self._last_run(position),
        )

    def _last_run(self, position: ChainPosition) -> RunRecord | None:
        """The newest decided occurrence whose time has come. Those due within the direct
        window are decided (sent with an SQS delay) ahead of their time: they are upcoming, not
        run, so the records are read again, from now back, only when the newest is ahead."""
        now = self._clock.now_ms()
        last = position.last
        if last is None or last.at_ms <= now:
            return last
        return next(
            (
                record
                for record in self._records(position.schedule.id, before_ms=now + 1)
                if record.outcome is not RunOutcome.REPLACED
            ),
            None,
        )

    def _next_run_ms(self, position: ChainPosition) -> int | None:
        """When the schedule runs next (strictly after now, as a cron's next time is): the
        earliest occurrence already decided and still ahead
        (sent early, or kept as it was by an update), else its head (the first occurrence
        nothing decided yet: after an update the new settings apply from there, not from now).
        A head already overdue (a sweep is about to take it, or its misfire policy to skip it)
        gives the next time from now. Reads the run records again only when the newest decided
        one is still ahead."""
        now = self._clock.now_ms()
        schedule, head, last = position.schedule, position.head_at_ms, position.last
        assert head is not None
        upcoming = head if head > now else schedule.next_after(now)
        if last is None or last.at_ms <= now:
            return upcoming
        ahead = [
            record.at_ms
            for record in itertools.takewhile(
                lambda record: record.at_ms > now, self._records(schedule.id)
            )
            if record.outcome is RunOutcome.FIRED
        ]
        return min([*ahead, *([upcoming] if upcoming is not None else [])], default=None)

    def runs(
        self,
        schedule_id: str,
        *,
        limit: int,
        before_ms: int | None = None,
        when: RunsWhen | None = None,
    ) -> tuple[list[RunView], int | None]:
        """Runs newest first, each with its job and whether its time is still ahead; and where
        the next page starts. `when`: only the past ones, or only the upcoming ones."""
        schedule = self._live(schedule_id)
        now = self._clock.now_ms()
        after_ms = None
        if when is RunsWhen.PAST:
            before_ms = min(before_ms, now + 1) if before_ms is not None else now + 1
        elif when is RunsWhen.UPCOMING:
            after_ms = now
        records, more = self._schedules.runs(
            schedule.id, limit=limit, before_ms=before_ms, after_ms=after_ms
        )
        jobs = self._schedules.jobs([JobKey.from_job_id(r.job_id) for r in records])
        views = [RunView(r, jobs.get(JobKey.from_job_id(r.job_id)), r.at_ms > now) for r in records]
        return views, more

    def _recent(self, schedule: Schedule) -> Iterator[tuple[RunRecord, Job | None]]:
        """Runs newest first, with their jobs, a page at a time."""
        before: int | None = None
        while True:
            records, before = self._schedules.runs(schedule.id, limit=_RUN_PAGE, before_ms=before)
            jobs = self._schedules.jobs([JobKey.from_job_id(r.job_id) for r in records])
            for record in records:
                yield record, jobs.get(JobKey.from_job_id(record.job_id))
            if before is None:
                return

    # -- update ------------------------------------------------------------------------------

    def update(self, schedule_id: str, request: UpdateSchedule) -> UpdatedSchedule:
        """New settings from the next undecided occurrence on (services.chain: "An update").

        The head H (the one occurrence nothing has decided: no run record) is replaced in one
        transaction with the new settings: H's record says "replaced" and names the new
        settings' first occurrence N, H is cancelled, N is written (ScheduleStore.revise).
        N is the new recurrence's first occurrence after both the newest decided occurrence
        and min(H, now) - 1: an overdue H stays overdue (the misfire policy decides it, as it
        would have decided H), a future one gives way to the first new time from now.
        Occurrences decided before (run recorded: sent, or being sent) keep their old time
        and payload. N due within the direct window is sent by this call. Repeating an update
        that was applied changes nothing and finishes its send if the first call died."""
        check_schedule_id(schedule_id)
        if self._admission is not None and "payload" in request.model_fields_set:
            read = self._schedules.get(schedule_id)
            if read is not None:  # 413 before anything is written
                self._admission.check_payload(
                    field="", queue=read.queue, payload_json=request.payload_json
                )
        counted = False  # the quota counts the request once, however many rounds it takes
        for _ in range(_UPDATE_ATTEMPTS):
            read = self._schedules.get(schedule_id)
            if read is None:
                raise ScheduleNotFound(schedule_id)
            position = self._position(read)
            current = position.schedule
            if current.state is ScheduleState.DELETED:
                raise Conflict("schedule is deleted; nothing to update")
            head_key = position.head_key
            if head_key is None:
                raise Conflict("schedule has ended: no occurrence is left to update")
            now = self._clock.now_ms()
            updated = _with_changes(current, request)
            if _settings(updated) == _settings(current):
                # Already so (a repeat): finish the first call's send if it died. These
                # settings have applied since the first occurrence of this revision.
                self._release_head(current)
                return UpdatedSchedule(current, current.first_at_ms, replaced=None)
            outcome, new_head, admitted = self._revise(
                current, updated, position, head_key, now, admit=not counted
            )
            counted = counted or admitted
            if outcome is Revised.REVISED:
                if new_head.direct:
                    released = self._releaser.release([new_head], owned=True, by="schedule")
                    if released.failed:
                        raise Unavailable(
                            f"schedule {schedule_id}: its occurrence could not be sent; "
                            "update again to finish"
                        )
                return UpdatedSchedule(updated, new_head.due_ms, replaced=head_key.job_id)
            # A sweep decided the head, or a pause, resume, delete or another update landed
            # between the read and the transaction: nothing was written; read again.
        raise Conflict("schedule changed concurrently; retry", status=None)

    def _revise(
        self,
        current: Schedule,
        updated: Schedule,
        position: ChainPosition,
        head_key: JobKey,
        now: int,
        *,
        admit: bool,
    ) -> tuple[Revised, Job, bool]:
        """The update's transaction. `admit`: count the new chain's first occurrences against
        the queue's quota first (not yet counted by an earlier round of this request). Returns
        how it ended, the new head, and whether it counted."""
        assert position.head_at_ms is not None
        head = self._store.get(head_key)
        after = position.last.at_ms if position.last is not None else None
        start = min(position.head_at_ms, now)
        if updated.rate is not None and (updated.rate, None) != (current.rate, current.cron):
            # A new rate counts from the newest run, or from the start of this update.
            updated.anchor_ms = after if after is not None else start
        updated.revision = current.revision + 1
        first = updated.next_after(start - 1 if after is None else max(after, start - 1))
        if first is None:
            field = "rate" if updated.rate is not None else "cron"
            raise InvalidInput(field, "the schedule would have no occurrence from now on")
        updated.first_at_ms = first
        new_head = self._occurrence(updated, first, now)
        if due_soon(first, now):
            make_direct(new_head, taken_at_ms=now)  # a repeat takes it over once stale
        expires = now // 1000 + self._retention_s
        if head is not None:
            if head.status not in _REPLACEABLE:
                # Claimed since: its record is written.
                return Revised.HEAD_DECIDED, new_head, False
            head_write = self._store.replace_write(head_key, now_ms=now, expires_at_s=expires)
        else:
            # Decided-for but not written yet (a sweep between its record and its successor):
            # written cancelled, so that sweep's write finds it and adds nothing.
            gone = self._occurrence(current, position.head_at_ms, now)
            gone = replace(
                gone,
                key=head_key,
                status=Status.CANCELLED,
                chained=True,
                cancelled_at_ms=now,
                expires_at_s=expires,
            )
            head_write = self._store.new_job_write(gone)
        replaced = RunRecord(
            schedule_id=current.id,
            at_ms=position.head_at_ms,
            job_id=head_key.job_id,
            outcome=RunOutcome.REPLACED,
            decided_at_ms=now,
            next_at_ms=first,
            next_revision=updated.revision,
            revised=not current.is_original(head_key),
        )
        if admit:
            self._admit(updated, first, now)  # 429 or 413 before anything is written
        outcome = self._schedules.revise(
            updated,
            read_revision=current.revision,
            replaced=replaced,
            expires_at_s=position.head_at_ms // 1000 + self._retention_s,
            head_write=head_write,
            new_head_write=self._store.new_job_write(new_head),
        )
        return outcome, new_head, admit

    # -- pause, resume, delete --------------------------------------------------------------

    def pause(self, schedule_id: str) -> Schedule:
        """No occurrence runs until resumed. Pausing a paused schedule repeats the work (in
        case a first pause died part-way) and changes nothing else."""
        schedule = self._live(schedule_id)
        now = self._clock.now_ms()
        if schedule.state is not ScheduleState.PAUSED:
            _, current = self._schedules.set_state(
                schedule.id,
                to=ScheduleState.PAUSED,
                when=[ScheduleState.ACTIVE, ScheduleState.RESUMING],
                now_ms=now,
            )
            if current is None or current.state is not ScheduleState.PAUSED:
                raise Conflict("schedule changed concurrently; retry", status=None)
            schedule = current
        # Occurrences already sent for a time still ahead: hold them (the consumer skips a
        # paused job). Then the one waiting in the table, which a sweeper may be advancing
        # from right now: holding it makes that sweeper's claim fail.
        # The holds are written in as few transactions as TransactWriteItems allows (one for
        # the densest schedule), each conditional on the schedule still being paused
        # (ScheduleStore.park_all): a resume that overtakes this pause must not find its
        # occurrences parked after it. Those already run, cancelled or gone are skipped.
        ahead = [job for record, job in self._recent_ahead(schedule, now) if job is not None]
        head = self._head(schedule)
        if head is not None and head.status is Status.PENDING:
            ahead.append(head)
        # Only what the park's condition admits, as read: a run or held one would only cost a
        # transaction that fails and is written again without it.
        parkable = [j for j in ahead if j.status in _PARKABLE and j.attempts == 0]
        writes = [self._store.park_write(job.key, now_ms=now) for job in parkable]
        if self._schedules.park_all(schedule.id, writes) is Parked.NOT_PAUSED:
            raise Conflict("schedule was resumed while this pause ran; retry", status=None)
        return schedule

    def _recent_ahead(self, schedule: Schedule, now: int) -> Iterator[tuple[RunRecord, Job | None]]:
        """Runs for a time still ahead of `now` (occurrences already sent early), newest first."""
        for record, job in self._recent(schedule):
            if record.at_ms <= now:
                return
            yield record, job

    def resume(self, schedule_id: str) -> Schedule:
        schedule = self._live(schedule_id)
        if schedule.state is ScheduleState.ACTIVE:
            raise Conflict("schedule is active; only a paused schedule can be resumed")
        now = self._clock.now_ms()
        self._admit_resume(schedule, now)  # 429 or 413 before anything is written
        if schedule.state is ScheduleState.PAUSED:
            _, current = self._schedules.set_state(
                schedule.id, to=ScheduleState.RESUMING, when=[ScheduleState.PAUSED], now_ms=now
            )
            if current is None or current.state is not ScheduleState.RESUMING:
                raise Conflict("schedule changed concurrently; retry")
            schedule = current
        self._release_paused(schedule, now)
        _, current = self._schedules.set_state(
            schedule.id, to=ScheduleState.ACTIVE, when=[ScheduleState.RESUMING], now_ms=now
        )
        return current or schedule

    def _admit_resume(self, schedule: Schedule, now: int) -> None:
        """Count what the resume will send against the queue's quota: the paused occurrences
        it sends again, and the chain from the waiting occurrence if that is due within the
        direct window. Read before the resume's first write (a refusal writes nothing); its
        work reads them again after marking the schedule resuming (a sweep may park the head
        in between, which counts the same). Costs nothing on a queue without a limit."""
        if self._admission is None or not self._admission.rate_limited(schedule.queue):
            return
        paused = self._paused(schedule, now)
        head = paused.head
        first = (
            head.due_ms
            if head is not None
            and head.status in (Status.PAUSED, Status.PENDING)
            and due_soon(head.due_ms, now)
            else None
        )
        self._admit(schedule, first, now, sent_again=len(paused.ahead))

    def _paused(self, schedule: Schedule, now: int) -> PausedOccurrences:
        """The paused occurrences a resume finds, and what it does with each."""
        held = []
        # Every paused one in the lookback, not just the newest run of them: a later occurrence
        # may have been released meanwhile (a queue's catch-up) while earlier ones stay parked.
        for record, job in self._recent(schedule):
            if record.at_ms < now - UNSENT_LOOKBACK_MS:
                break
            if job is not None and job.status is Status.PAUSED:
                held.append(job)  # newest first
        head = self._head(schedule)
        late = [job for job in held if now - job.due_ms > MISFIRE_GRACE_MS]
        ahead = [job for job in held if job not in late]
        head_missed = (
            head is not None
            and head.status is Status.PAUSED
            and now - head.due_ms > MISFIRE_GRACE_MS
        )
        # Missed occurrences already sent before the pause: one catch-up at most, and none if
        # the waiting occurrence is itself missed (it is then the catch-up, via the chain).
        if late and schedule.misfire is Misfire.FIRE_ONCE and not head_missed:
            ahead.append(late.pop(0))  # the latest missed one runs now
        return PausedOccurrences(late=late, ahead=ahead, head=head)

    def _release_paused(self, schedule: Schedule, now: int) -> None:
        """Resume's work, repeatable: every paused occurrence is released or skipped."""
        paused = self._paused(schedule, now)
        late, ahead, head = paused.late, paused.ahead, paused.head
        expires = now // 1000 + self._retention_s
        for job in late:
            self._store.cancel(job.key, now_ms=now, expires_at_s=expires, chained=True)
        owned = [
            resumed
            for job in ahead
            if (resumed := self._resume(job.key, now, direct=True)) is not None
        ]
        if head is not None and head.status is Status.PAUSED:
            direct = due_soon(head.due_ms, now)
            resumed_head = self._resume(head.key, now, direct=direct)
            if resumed_head is not None and direct:
                owned.append(resumed_head)
        released = self._releaser.release(owned, owned=True, by="schedule")
        if released.failed:
            raise Unavailable(f"schedule {schedule.id}: occurrences could not be sent; retry")
        self._repair_head(schedule, now)

    def _repair_head(self, schedule: Schedule, now: int) -> None:
        """The waiting occurrence a paused schedule leaves behind may need moving on: one that
        was cancelled while parked (skipping one run) sits where no sweep will come again, so
        advance the schedule from it here, as a sweep would have (idempotent, services.chain).
        A pending one due within the window (a resume that died after advancing) is sent."""
        head = self._head(schedule)
        if head is not None and head.status is Status.CANCELLED and not head.chained:
            head = self._chain.advance(head, now_ms=now).successor
        owed = self._unsent(schedule, now)
        if head is not None and head.status is Status.PENDING:
            owed.append(head)
        released = self._releaser.release(owed, owned=False, by="schedule")
        if released.failed:
            raise Unavailable(f"schedule {schedule.id}: its occurrence could not be sent")

    def _unsent(self, schedule: Schedule, now: int) -> list[Job]:
        """Occurrences already decided (fired) but still pending and direct: an earlier call
        took them to send and died first (looking back UNSENT_LOOKBACK: a client repeats a
        request that got no answer well within that). A repeat of that call (a create or a
        resume) sends them; the release takes each only once its taker is SUBMIT_IN_FLIGHT
        late, so a live one is left to finish."""
        unsent = []
        for record, job in self._recent(schedule):
            if record.at_ms < now - UNSENT_LOOKBACK_MS:
                break
            fired = record.outcome is RunOutcome.FIRED
            if fired and job is not None and job.status is Status.PENDING and job.direct:
                unsent.append(job)
        return unsent

    def _resume(self, key: JobKey, now: int, *, direct: bool) -> Job | None:
        resumed, job = self._store.resume(
            key, now_ms=now, direct=direct, stale_before_ms=now - SUBMIT_IN_FLIGHT_MS
        )
        return job if resumed else None

    def delete(self, schedule_id: str) -> None:
        """The schedule is gone: nothing more runs. Deleting again repeats the clean-up."""
        schedule = self._schedules.get(check_schedule_id(schedule_id))
        if schedule is None:
            raise ScheduleNotFound(schedule_id)
        now = self._clock.now_ms()
        expires = now // 1000 + self._retention_s
        if schedule.state is not ScheduleState.DELETED:
            # The state and the queue's listing in one transaction (ScheduleStore.delete).
            self._schedules.delete(
                schedule,
                when=[ScheduleState.ACTIVE, ScheduleState.PAUSED, ScheduleState.RESUMING],
                now_ms=now,
                expires_at_s=expires,
            )
            schedule = self._schedules.get(schedule.id) or schedule
        for record, job in self._recent(schedule):
            unfinished = job is not None and job.status in (
                Status.PENDING,
                Status.QUEUED,
                Status.PAUSED,
            )
            if record.at_ms <= now and not (job is not None and job.status is Status.PAUSED):
                break
            if job is not None and unfinished:
                self._store.cancel(job.key, now_ms=now, expires_at_s=expires)
        head = self._head(schedule)
        if head is not None:
            self._store.cancel(head.key, now_ms=now, expires_at_s=expires)


def _settings(schedule: Schedule) -> tuple[object, ...]:
    return tuple(
        getattr(schedule, name)
        for name in (
            "name",
            "cron",
            "rate",
            "timezone",
            "payload_json",
            "priority",
            "max_attempts",
            "retry",
        )
    )


def _with_changes(schedule: Schedule, request: UpdateSchedule) -> Schedule:
    """A copy of `schedule` with the fields the request gives (cron and rate replace each
    other)."""
    given = request.model_fields_set
    changes: dict[str, Any] = {
        name: getattr(request, name)
        for name in ("name", "timezone", "priority", "max_attempts", "retry")
        if name in given
    }
    if "payload" in given:
        changes["payload_json"] = request.payload_json
    if "cron" in given:
        changes |= {"cron": request.cron, "rate": None}
    if "rate" in given:
        changes |= {"rate": request.rate, "cron": None}
    return replace(schedule, **changes)
