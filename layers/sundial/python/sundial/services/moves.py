"""Changing a waiting job (PATCH /jobs/{id}, POST /jobs/{id}/run-now): its time, priority,
payload or attempt budget, keeping its id.

A job's key holds its due time (sundial.ids), so a job moved in time moves to a new item at
its new due time, where the sweeps find it as any job; the item its id names becomes a pointer
to it (sundial.store.job_items), so every call by id keeps working. The move is ONE transaction
conditional on the job being exactly as read (JobStore.move_writes): a racing sweep's claim,
cancel, pause, resume or second move makes it fail as a whole (409, or a retry of the read when
the job is still movable), never leaving zero or two copies. Every move raises the job's
`revision`; its messages carry it, and the consumer's fence and attempt-taking write refuse a
message of an older revision (sundial.runs.attempts), so a job already handed to SQS can be
moved until its first attempt starts, and its old message never runs it.

Where the job lands follows submit's rules (THE OWNER RULE, docs/invariants.md): due within the
direct window, it is written `direct` and sent here (or, on a paused queue, recorded for the
queue's catch-up in the same transaction); later, it waits for the sweepers, ahead of every
cursor. A paused job stays paused at its new time.

MOVES (PATCH /jobs/{id}, POST /jobs/{id}/run-now; sundial.services.moves). A job waiting for its
first attempt (pending, paused, or queued with attempts = 0) is changed by ONE TransactWriteItems
built from the job as read (JobStore.move_writes): put the job at its new key (its new due time;
same shard and ULID), turn its origin (the key its id names) into a pointer to it or update that
pointer, and delete its previous item; each entry is conditional on what it replaces being as
read (status, revision, claim token, direct owner, the pointer's target). Every move raises the
job's `revision`; a message carries the revision it was sent at, and both the consumer's fence
and the attempt's take (mark_running) refuse a message of another revision. Placement follows
submit: due within DIRECT_WINDOW, the job is written `direct` and the move sends it (then claims
it), or, on a paused queue, it is written pending and recorded in the queue's `held` set in the
same transaction (QueueStateStore.hold_with, by its physical id); later, it is written pending
beyond now + DIRECT_WINDOW, so above every cursor (the same margin as submit's, the move being
an API call under SUBMIT_TIMEOUT). What it interleaves with, and why the invariants hold:
- A sweep's send (under its shard's lease; it writes no job item). The sweep reads the item
  right before sending: if the move landed first, it finds the old key gone or a pointer (not
  pending), sends nothing, and the cursor may pass: the job is above every cursor, or direct.
  If the send came first, the item is still pending, attempts 0: the move goes on and the
  sweep's message is stale (older revision) at the fence and the take.
- A consumer's run of the old message. The fence reads the job through the pointer: another
  revision, skipped. If the move lands between the fence's read and the take, the take's
  condition (revision) fails: the job never runs from the old message, and a move that answered
  200 has landed before any run of it. If the take lands first, the job is running and the move
  is a 409.
- A cancel, pause or resume by id follows the pointer (one more conditional write at the job's
  key). Whichever lands first on the job's item wins; the other's condition fails (the move
  reads again and, for a cancelled job, answers 409; a cancel that finds the old item gone reads
  the pointer again). A cancel that answered 200 came first, so the move is a 409 and the job
  never runs.
- A second move: both are conditional on the revision read; one lands, the other fails and
  reads again (at most _MOVE_TRIES times, then 409 "retry").
- A submit's or resume's direct send: a pending, direct job is refused (409 "retry in 30 s")
  while its sender may be sending; once SUBMIT_IN_FLIGHT old, the move takes it over (its
  condition includes the direct owner's resumed_at), and a message that sender did send is stale.
- A crash. Before the transaction: nothing changed. After it, before the send of a due-soon job:
  the job is pending and direct at its new key, as after a submit that died before its send; the
  client's repeat (the API answered nothing, or 503) takes it over once SUBMIT_IN_FLIGHT old and
  sends it. A crash never leaves two items of one job: the transaction is all or nothing.
- A queue's catch-up: it reads pending jobs by range (a moved job is found at its new key;
  pointers are not pending) and held ids (physical keys: a job moved again since is gone from
  that key and struck off; if it was due soon on the paused queue, its move recorded it again).
- A retry timer of a moved job names the job's origin (its id) and carries its revision.
Reads by id follow the pointer (a moved job costs one more read); due-range queries leave
pointers out (a FilterExpression). The pointer has no expiry of its own (a paused or retried job
lives for any time, and its id must keep working): when DynamoDB's TTL removes the job's item,
the history Lambda, reading that removal from the stream, deletes the pointer, conditional on
it still naming that item (a job moved on or back since keeps its pointer). A crash or a failed
batch repeats the delete (stream retries); a pointer is never deleted while its job's item
lives, because the item only expires after its job ended and was kept for its retention. The
job's history keeps every move (at most MAX_MOVES). The same stream reading removes the job's
idempotency record and its DAG's listing entries (sundial.services.job_retention): neither has
an expiry of its own, since a job lives any time.
"""

from __future__ import annotations

import dataclasses

from sundial.clock import Clock
from sundial.errors import Conflict, InvalidInput, JobNotFound, Unavailable
from sundial.ids import JobKey
from sundial.model.job import FINISHED, MAX_MOVES, Job, Move, Status
from sundial.model.placement import Where, place
from sundial.model.submission import MAX_HORIZON_S, ChangeJob
from sundial.services.admission import Admission
from sundial.services.direct import DirectSender
from sundial.store.jobs import JobStore
from sundial.store.payloads import PayloadStore, store_payload
from sundial.store.queue_states import Hold, QueueStateStore
from sundial.timing import SUBMIT_IN_FLIGHT_MS

# A move that loses a race to a write that leaves the job movable (a direct sender marking it
# queued, a take by a catch-up) reads it again and tries once more, this many times in all.
_MOVE_TRIES = 3
# A change with the same body as the job's last change, within this long of it, is a client's
# repeat of that change (a request that got no answer, a 503): it finishes that change instead
# of making another one (docs/api.md, "Changing a waiting job").
REPEAT_WINDOW_MS = 15 * 60 * 1000


class JobMover:
    def __init__(
        self,
        *,
        store: JobStore,
        direct: DirectSender,
        clock: Clock,
        retention_days: int,
        queue_states: QueueStateStore | None = None,
        admission: Admission | None = None,
        payloads: PayloadStore | None = None,
    ) -> None:
        """`payloads`: where a new payload over the inline limit (or asked for) is stored."""
        self._store = store
        self._direct = direct
        self._clock = clock
        self._retention_s = retention_days * 86_400
        self._queue_states = queue_states
        self._admission = admission
        self._payloads = payloads

    def move(self, job_id: str, change: ChangeJob) -> Job:
        """Apply `change` to the job; returns the job as changed (and sent, if now due soon).
        409 with the reason when the job's state does not allow it. A repeat of the job's last
        change (REPEAT_WINDOW_MS) is that change: it finishes what the change left undone."""
        key = JobKey.from_job_id(job_id)
        request = change.fingerprint()
        admitted = False
        for _ in range(_MOVE_TRIES):
            current = self._store.get(key)
            if current is None:
                raise JobNotFound(job_id)
            now = self._clock.now_ms()
            last = current.moves[-1] if current.moves else None
            if last is not None and last.request == request and now - last.at_ms < REPEAT_WINDOW_MS:
                return self._finish(current, now)
            self._check_movable(current, now)
            due = change.due_ms(now)
            if due is not None and due > now + MAX_HORIZON_S * 1000:
                raise InvalidInput(change.time_field, "more than 366 days ahead")
            if not admitted:  # once per request, before anything (a payload too) is written
                self._admit(current.queue, change)
                admitted = True
            moved = self._moved(current, change, now, request)
            if self._write(current, moved, now):
                break
        else:
            raise Conflict("job changed while it was being moved, several times; retry")
        self._swap_payloads(current, moved)
        if moved.direct and self._direct.send([moved], by="move"):
            raise Unavailable(f"job {moved.id} could not be handed to SQS; retry the change")
        return moved

    def _swap_payloads(self, before: Job, after: Job) -> None:
        """Once a move is written: a new stored payload is the job's (tagged referenced), and
        the one it replaced is no job's (tagged unreferenced: the lifecycle removes it). Old
        messages naming it are stale (the revision), so nothing reads it again. A crash before
        leaves the history Lambda to tag the new one (its backstop) and the old one kept."""
        if self._payloads is None or after.payload_ref == before.payload_ref:
            return
        if after.payload_ref is not None:
            self._payloads.mark_referenced(after.payload_ref)
        if before.payload_ref is not None:
            self._payloads.mark_unreferenced(before.payload_ref)

    def _finish(self, job: Job, now: int) -> Job:
        """A repeat of the change that landed last: not made again, nor counted against
        MAX_MOVES. If that change made the job due soon and its call died before the send (or
        SQS refused it), the job is sent here, once that call is certainly over."""
        if not (job.status is Status.PENDING and job.direct):
            return job  # the change's work is done (sent, held for its queue, or waiting)
        self._refuse_in_flight(job, now)
        return self._take_over(job, now) or job

    def _take_over(self, job: Job, now: int) -> Job | None:
        """Send a pending, direct job whose sender died (SUBMIT_IN_FLIGHT_MS old): take it
        (a conditional write: two repeats send it once) and send it. None if it was not taken:
        another call took it, or it is not such a job any more."""
        taken, current = self._store.take_direct(
            # `resumed_at` at most now - SUBMIT_IN_FLIGHT_MS, as _refuse_in_flight lets through
            job.key,
            now_ms=now,
            stale_before_ms=now - SUBMIT_IN_FLIGHT_MS + 1,
        )
        if not taken or current is None:
            return None
        if self._direct.send([current], by="move"):
            raise Unavailable(f"job {current.id} could not be handed to SQS; retry the change")
        return current

    @staticmethod
    def _refuse_in_flight(job: Job, now: int) -> None:
        """409 while the call that made a pending job direct may still be sending it."""
        since = max(filter(None, (job.created_at_ms, job.resumed_at_ms, job.retried_at_ms)))
        if now - since < SUBMIT_IN_FLIGHT_MS:
            raise Conflict(
                "job is being handed to SQS by the call that made it due; retry in "
                f"{SUBMIT_IN_FLIGHT_MS // 1000} seconds",
                status=job.status,
            )

    def _admit(self, queue: str, change: ChangeJob) -> None:
        """The queue's quotas: a new payload over its limit is a 413; then the move counts as
        one submission (it writes the job anew, and sends it again if due soon), a 429 when
        the queue's window is full (sundial.services.admission)."""
        if self._admission is None:
            return
        if change.changes_payload:
            self._admission.check_payload(field="", queue=queue, payload_json=change.payload_json)
        self._admission.admit_at_once(queue, 1, field="", what="this change")

    def _check_movable(self, job: Job, now: int) -> None:
        """409 unless the job waits for its first attempt: pending, paused, or queued with its
        message not yet taken by a runner. Raised before anything is written."""
        if job.dag is not None:
            raise Conflict(
                f"job is node '{job.dag.node}' of DAG {job.dag.dag_id}: it runs when its parents "
                "are done, so it cannot be moved",
                status=job.status,
            )
        if job.schedule_id is not None:
            raise Conflict(
                f"job is an occurrence of schedule {job.schedule_id}: change the schedule "
                "(PATCH /schedules/{id}) or cancel this occurrence",
                status=job.status,
            )
        if job.retry_of is not None:  # never addressed by id; guarded all the same
            raise Conflict("a retry timer cannot be moved", status=job.status)
        if len(job.moves) >= MAX_MOVES:
            if job.status is Status.PENDING and job.direct and job.attempts == 0:
                # The last allowed change made it due soon and its call died before the send:
                # sent here, so the limit never strands it.
                self._refuse_in_flight(job, now)
                self._take_over(job, now)
            raise Conflict(
                f"job was changed {MAX_MOVES} times already, the most one job keeps; cancel it "
                "and submit a new one",
                status=job.status,
            )
        if job.status in (Status.RUNNING, Status.BLOCKED) or job.status in FINISHED:
            reason = {
                Status.RUNNING: "its attempt has started",
                Status.BLOCKED: "it waits for its DAG parents",
            }.get(job.status, "it has finished")
            raise Conflict(
                f"job is {job.status}: {reason}; only pending, paused or queued jobs whose "
                "first attempt has not started can be changed",
                status=job.status,
            )
        if job.attempts > 0:
            raise Conflict(
                f"job is {job.status} and its first attempt has run: only a job waiting for its "
                "first attempt can be changed; cancel it and submit a new one",
                status=job.status,
            )
        if job.status is Status.PENDING and job.direct:
            self._refuse_in_flight(job, now)
            # Older: that call died before its send, and the move takes the job over.
        # Pending (in the table), paused, or queued for its first attempt: once moved, its
        # message is of an older revision, which the fence and the attempt's take refuse.

    def _moved(self, job: Job, change: ChangeJob, now: int, request: str) -> Job:
        """The job as `change` makes it (not yet written; its time checked by `move`)."""
        due = change.due_ms(now)
        if due is None:
            due = job.due_ms
        payload_json, payload_ref = job.payload_json, job.payload_ref
        if change.changes_payload:
            payload_json = change.payload_json  # within the queue's limit (_admit)
            # Stored before the move's transaction, tagged unreferenced (as on submit:
            # sundial.store.payloads); the tags change once the move is written (_swap_payloads).
            payload_ref = store_payload(
                self._payloads,
                job.queue,
                job.key.ulid,
                payload_json,
                change.payload_storage,
                field="payload",
            )
            if payload_ref is not None:
                payload_json = "null"
        origin = job.origin or job.key
        key = JobKey(shard=job.key.shard, due_ms=due, ulid=job.key.ulid)
        paused = job.status is Status.PAUSED
        # A paused queue's due-soon job is held instead, decided with its write (_write).
        direct = place(due, now, job_paused=paused).where is Where.SEND
        return dataclasses.replace(
            job,
            key=key,
            origin=None if key == origin else origin,
            status=Status.PAUSED if paused else Status.PENDING,
            payload_json=payload_json,
            payload_ref=payload_ref,
            priority=change.priority or job.priority,
            max_attempts=change.max_attempts or job.max_attempts,
            direct=direct,
            resumed_at_ms=now if direct else None,
            # An unsent direct job must not linger forever (as on submit, sundial.services.jobs).
            expires_at_s=due // 1000 + self._retention_s if direct else None,
            claim_token=None,
            lease_until_ms=None,
            queued_at_ms=None,
            revision=job.revision + 1,
            moves=[*job.moves, Move(now, job.due_ms, due, change.changed_fields, request)],
        )

    def _write(self, current: Job, moved: Job, now: int) -> bool:
        """Write the move. False if the job changed since it was read (nothing written)."""
        held = (
            moved.direct
            and self._queue_states is not None
            and self._queue_states.get(moved.queue).paused
        )
        if held:
            # A paused queue's due-soon job is not sent: it is written pending and recorded for
            # the queue's catch-up, in one transaction that holds only while the queue is paused
            # (THE OWNER RULE, docs/invariants.md); by its physical key, which the catch-up takes.
            assert self._queue_states is not None
            waiting = dataclasses.replace(
                moved, direct=False, resumed_at_ms=None, expires_at_s=None
            )
            writes = self._store.move_writes(current, waiting)
            hold = self._queue_states.hold_with(moved.queue, writes, record=[waiting.key.job_id])
            if hold is Hold.HELD:
                moved.direct, moved.resumed_at_ms, moved.expires_at_s = False, None, None
                return True
            if hold is Hold.JOB_CHANGED:
                return False
            # The queue was resumed meanwhile: send the job here, as on a running queue.
        return self._store.move(current, moved)
