"""Submit, get and cancel: the domain behind the HTTP API."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from ulid import ULID

from sundial.clock import Clock
from sundial.errors import (
    Conflict,
    InvalidInput,
    JobNotFound,
    SundialError,
    Unavailable,
)
from sundial.ids import DagKey, JobKey
from sundial.model.job import FINISHED, Job, OnFailure, Status
from sundial.model.payloads import PayloadRef, PayloadStorage
from sundial.model.placement import Where, due_soon, make_direct, place
from sundial.model.submission import MAX_HORIZON_S, SubmitJob
from sundial.retry import DEFAULT_MAX_ATTEMPTS, QueueRetryDefaults
from sundial.services.admission import Admission
from sundial.services.chain import OccurrenceChain
from sundial.services.direct import DirectSender
from sundial.store.attempts import AttemptStore
from sundial.store.idempotency import IdempotencyKeys, IdempotencyRecord
from sundial.store.jobs import JobStore
from sundial.store.payloads import PayloadStore, store_payload
from sundial.store.queue_states import MAX_HOLD_BATCH, Hold, QueueStateStore
from sundial.timing import SUBMIT_IN_FLIGHT_MS
from sundial.transport.sender import Outgoing, QueueSender

# A resume that finds the job moved looks again where it went; a job moved on every look is
# a 503 "retry" (moves are rare and each is one transaction, so a second look nearly always
# finds it still).
_RESUME_TRIES = 3


@dataclass(frozen=True, slots=True)
class Submitted:
    job: Job
    created: bool  # False when an idempotency key returned an earlier job


class JobService:
    def __init__(
        self,
        *,
        store: JobStore,
        attempt_store: AttemptStore,
        idempotency: IdempotencyKeys,
        sender: QueueSender,
        clock: Clock,
        queues: Collection[str],
        retry_defaults: Mapping[str, QueueRetryDefaults] | None = None,
        shard_count: int,
        retention_days: int,
        rng: random.Random | None = None,
        on_cancelled: Callable[[Job], None] | None = None,
        queue_states: QueueStateStore | None = None,
        chain: OccurrenceChain | None = None,
        admission: Admission | None = None,
        payloads: PayloadStore | None = None,
    ) -> None:
        """`on_cancelled` is called with a job just cancelled (or found cancelled on a repeat),
        so a DAG node's cancellation reaches its descendants (services.dags). `chain` moves a
        schedule on past a cancelled occurrence that is retried (sundial.services.chain).
        `admission` applies the queues' quotas before a submit writes anything
        (sundial.services.admission); None: no quotas. `payloads`: the payload bucket, where a
        payload over the inline limit (or asked for) is stored; None: such a payload is a 413."""
        self._store = store
        self._attempt_store = attempt_store
        self._idempotency = idempotency
        self._sender = sender
        self._clock = clock
        self._queues = frozenset(queues)
        self._retry_defaults = dict(retry_defaults or {})
        self._shard_count = shard_count
        self._retention_s = retention_days * 86_400
        self._rng = rng or random.Random()
        self._on_cancelled = on_cancelled
        self._direct = DirectSender(store=store, sender=sender, clock=clock)
        self._queue_states = queue_states
        self._chain = chain
        self._admission = admission
        self._payloads = payloads

    # -- submit -----------------------------------------------------------------------------

    def submit(self, request: SubmitJob, *, correlation_id: str | None = None) -> Submitted:
        result = self.submit_many([request], field_prefix="", correlation_id=correlation_id)[0]
        if isinstance(result, SundialError):
            raise result
        return result

    def submit_many(
        self,
        requests: Sequence[SubmitJob],
        *,
        field_prefix: str = "jobs",
        correlation_id: str | None = None,
    ) -> list[Submitted | SundialError]:
        """Submit jobs together. Invalid input rejects the whole call before anything is written;
        after that each job has its own result (a Submitted, or the error for that job).
        `correlation_id`: the submitting request's id, kept with each job (Job.correlation_id)."""
        now = self._clock.now_ms()
        first_with_key: dict[tuple[str, str], int] = {}
        for index, request in enumerate(requests):
            prefix = f"{field_prefix}[{index}]." if field_prefix else ""
            self.check(request, now, prefix)
            if request.idempotency_key is not None:
                # Two jobs of one call with one key would race each other for it.
                first = first_with_key.setdefault((request.queue, request.idempotency_key), index)
                if first != index:
                    raise InvalidInput(
                        f"{prefix}idempotency_key",
                        f"repeats {field_prefix}[{first}]'s key on queue '{request.queue}': "
                        "each job of a batch needs a key of its own",
                    )
        self.admit(
            [(f"{field_prefix}[{i}]." if field_prefix else "", r) for i, r in enumerate(requests)],
            count_field=field_prefix,
        )
        for index, request in enumerate(requests):  # a 413 now, before anything is written
            field = f"{field_prefix}[{index}].payload" if field_prefix else "payload"
            self.store_payload(
                request.queue,
                "",
                request.payload_json,
                request.payload_storage,
                field=field,
                check_only=True,
            )
        keys = [self.new_key(request, now) for request in requests]
        results: list[Submitted | SundialError | None] = [None] * len(requests)
        for index, (request, key) in enumerate(zip(requests, keys, strict=True)):
            if request.idempotency_key is None:
                continue
            earlier = self._idempotency.remember(
                queue=request.queue,
                key=request.idempotency_key,
                record=IdempotencyRecord(key.job_id, request.fingerprint(), now),
            )
            if earlier is not None:
                results[index] = self._repeat_or_error(request, earlier)
        fresh = [i for i, result in enumerate(results) if result is None]
        # A new job's payload for S3 is stored before the job is written, under its job's key:
        # a crash between leaves an object still tagged unreferenced, which the bucket's
        # lifecycle removes (sundial.store.payloads). A repeat stores nothing.
        refs = {
            i: self.store_payload(
                requests[i].queue,
                keys[i].ulid,
                requests[i].payload_json,
                requests[i].payload_storage,
                field=f"{field_prefix}[{i}].payload" if field_prefix else "payload",
            )
            for i in fresh
        }
        paused = self.paused_queues(
            {requests[i].queue for i in fresh if due_soon(requests[i].due_ms(now), now)}
        )
        jobs = {
            i: self.new_job(
                requests[i],
                now,
                keys[i],
                held=requests[i].queue in paused,
                correlation_id=correlation_id,
                payload_ref=refs[i],
            )
            for i in fresh
        }
        written = self.write_new(list(jobs.values()), now)
        self.mark_payloads_referenced(list(jobs.values()))
        failed = {job.id for job in self.dispatch_direct(written)}
        for index, job in jobs.items():
            results[index] = (
                Unavailable(f"job {job.id} could not be handed to SQS; retry the submit")
                if job.id in failed
                else Submitted(job, created=True)
            )
        return [r for r in results if r is not None]

    def write_new(self, jobs: Sequence[Job], now: int) -> list[Job]:
        """Write new jobs so that none is left pending below a sweep cursor with nobody to send
        it (THE OWNER RULE, docs/invariants.md). Returns the direct ones: the caller sends them.

        A due-soon job of a paused queue (built with `held`: not direct) is written in one
        transaction that holds only while the queue is paused (its resume's catch-up then
        finds it). If the queue was resumed since it was read, the job is made direct instead and
        the caller sends it. Every other job goes through JobStore.put_new, which refuses a
        due-soon job that is not direct."""
        waiting: dict[str, list[Job]] = {}
        for job in jobs:
            if job.status is Status.PENDING and not job.direct and due_soon(job.due_ms, now):
                waiting.setdefault(job.queue, []).append(job)
        for queue, held in sorted(waiting.items()):
            assert self._queue_states is not None  # only a paused queue's jobs are built held
            for start in range(0, len(held), MAX_HOLD_BATCH):
                chunk = held[start : start + MAX_HOLD_BATCH]
                writes = [self._store.new_job_write(job) for job in chunk]
                hold = self._queue_states.hold_with(queue, writes)
                if hold is Hold.JOB_CHANGED:  # a fresh ULID already taken: never expected
                    raise Unavailable("a job id collided; retry the submit")
                if hold is Hold.NOT_PAUSED:
                    for job in chunk:  # resumed meanwhile: send them here, as for any queue
                        make_direct(job, retention_s=self._retention_s)
        held_ids = {job.id for held in waiting.values() for job in held if not job.direct}
        self._store.put_new(
            [job for job in jobs if job.id not in held_ids], now_ms=self._clock.now_ms()
        )
        return [job for job in jobs if job.direct]

    def check(self, request: SubmitJob, now: int, prefix: str) -> None:
        if request.queue not in self._queues:
            known = ", ".join(sorted(self._queues))
            raise InvalidInput(
                f"{prefix}queue", f"unknown queue '{request.queue}' (known: {known})"
            )
        if request.due_ms(now) > now + MAX_HORIZON_S * 1000:
            raise InvalidInput(f"{prefix}run_at", "more than 366 days ahead")

    def store_payload(
        self,
        queue: str,
        job_ulid: str,
        payload_json: str,
        storage: PayloadStorage,
        *,
        field: str,
        check_only: bool = False,
    ) -> PayloadRef | None:
        """The payload stored in S3 if it goes there: its reference, or None (inline).
        `check_only`: only the 413 of a payload for S3 in a deployment without the bucket."""
        return store_payload(
            self._payloads,
            queue,
            job_ulid,
            payload_json,
            storage,
            field=field,
            check_only=check_only,
        )

    def mark_payloads_referenced(self, jobs: Sequence[Job]) -> None:
        """Once jobs are written: their stored payloads are theirs for as long as they live
        (a crash before this leaves it to the history Lambda's backstop; sundial.store.payloads)."""
        for job in jobs:
            if job.payload_ref is not None and self._payloads is not None:
                self._payloads.mark_referenced(job.payload_ref)

    def admit(self, jobs: Sequence[tuple[str, SubmitJob]], *, count_field: str) -> None:
        """The queues' quotas, after validation and before any write: a payload over its
        queue's limit is a 413, a full submission window a 429 (sundial.services.admission).
        `jobs`: (the job's field prefix in the request, the job)."""
        if self._admission is not None:
            self._admission.admit(jobs, count_field=count_field)

    def paused_queues(self, queues: set[str]) -> set[str]:
        """Which of `queues` are paused: their due-soon jobs wait in the table, unsent, for the
        queue's resume to catch them up (sundial.store.queue_states)."""
        if self._queue_states is None:
            return set()
        return {queue for queue in sorted(queues) if self._queue_states.get(queue).paused}

    def new_job(
        self,
        request: SubmitJob,
        now: int,
        key: JobKey | None = None,
        *,
        held: bool = False,
        correlation_id: str | None = None,
        payload_ref: PayloadRef | None = None,
    ) -> Job:
        """The job `request` asks for; `payload_ref`: where its payload was stored in S3
        (store_payload), None for an inline payload."""
        if key is None:
            key = self.new_key(request, now)
        job = Job(
            key=key,
            queue=request.queue,
            payload_json="null" if payload_ref is not None else request.payload_json,
            payload_ref=payload_ref,
            priority=request.priority,
            max_attempts=request.max_attempts or self._default_attempts(request.queue),
            retry=request.retry,
            created_at_ms=now,
            idempotency_key=request.idempotency_key,
            correlation_id=correlation_id,
        )
        if place(key.due_ms, now, queue_paused=held).where is Where.SEND:
            # An unacknowledged direct job (its submit died before claiming it) must not linger.
            make_direct(job, retention_s=self._retention_s)
        return job

    def new_key(self, request: SubmitJob, now: int) -> JobKey:
        """A new job's key: a random shard, its due time, a fresh ULID."""
        return JobKey(
            shard=self._rng.randrange(self._shard_count),
            due_ms=request.due_ms(now),
            ulid=str(ULID.from_timestamp(now / 1000)),
        )

    def _default_attempts(self, queue: str) -> int:
        defaults = self._retry_defaults.get(queue)
        return defaults.max_attempts if defaults else DEFAULT_MAX_ATTEMPTS

    def dispatch_direct(self, jobs: Sequence[Job], *, by: str = "submit") -> list[Job]:
        """Send due-soon jobs now, then mark them queued. Returns the jobs SQS refused.

        Send comes before the claim so a crash can never leave a job marked queued but unsent;
        the sweeper never touches direct jobs, so nobody else sends them meanwhile.
        """
        return self._direct.send(jobs, by=by)

    def _repeat(self, request: SubmitJob, earlier: IdempotencyRecord) -> Submitted:
        """A submit whose idempotency key was seen before: return the first job, finishing
        the first request's work if it died part-way."""
        if earlier.fingerprint != request.fingerprint():
            raise Conflict("idempotency_key was already used for a different request")
        now = self._clock.now_ms()
        key = JobKey.from_job_id(earlier.job_id)
        job = self._store.get(key)
        first_may_be_running = now - earlier.created_at_ms < SUBMIT_IN_FLIGHT_MS
        if job is None:
            if first_may_be_running:
                raise Conflict("a request with this idempotency_key is in progress; retry shortly")
            # The first request stored its payload before its key record, tagged unreferenced;
            # stored again here (the same object) in case the lifecycle took it since.
            ref = self.store_payload(
                request.queue,
                key.ulid,
                request.payload_json,
                request.payload_storage,
                field="payload",
            )
            job = self.new_job(request, now, key=key, payload_ref=ref)
            job.created_at_ms = earlier.created_at_ms
            if not self._store.put_if_absent(job, now_ms=self._clock.now_ms()):
                job = self._store.get(key)
                if job is None:
                    raise Unavailable("job changed concurrently; retry")
        if job.direct and job.status is Status.PENDING:
            if first_may_be_running:
                raise Conflict("a request with this idempotency_key is in progress; retry shortly")
            if self.dispatch_direct([job]):
                raise Unavailable(f"job {job.id} could not be handed to SQS; retry the submit")
        if not first_may_be_running:
            self.mark_payloads_referenced([job])  # the first request may have died before it
        return Submitted(job, created=False)

    def _repeat_or_error(
        self, request: SubmitJob, earlier: IdempotencyRecord
    ) -> Submitted | SundialError:
        try:
            return self._repeat(request, earlier)
        except SundialError as error:
            return error

    # -- get and cancel ---------------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        job = self._store.get(JobKey.from_job_id(job_id))
        if job is None:
            raise JobNotFound(job_id)
        return job

    def retry(self, job_id: str, *, only_dead: bool = False) -> Job:
        """Re-queue a dead, failed or cancelled job (only a dead one with `only_dead`) now, with
        the queue's attempt budget again. Repeating it is harmless: the job is then queued, and
        a second retry is a 409. Counted as one submission on its queue (a 429 when its window
        is full: sundial.services.admission)."""
        key = JobKey.from_job_id(job_id)
        now = self._clock.now_ms()
        current = self._store.get(key)
        if current is None:
            raise JobNotFound(job_id)
        key = current.key  # where it is now, if it was moved (a job in these states stays put)
        self._check_parents_done(current)
        retryable = {Status.DEAD} if only_dead else {Status.DEAD, Status.FAILED, Status.CANCELLED}
        if self._admission is not None and current.status in retryable:
            # It runs again: one submission on its queue (a 429 before anything is written).
            # A job in another state is answered 409 below, uncounted.
            self._admission.admit_at_once(current.queue, 1, field="", what="this retry")
        occurrence = current.schedule_id is not None
        unchained = occurrence and current.status is Status.CANCELLED and not current.chained
        if unchained and self._chain is not None:
            # A schedule's occurrence cancelled before its time: a sweep reaching it would move
            # the schedule on from it, but once retried (direct) no sweep ever will. So move it
            # on here first, as that sweep would (idempotent: a sweep or an earlier retry that
            # got there first decided the same), so a crash next leaves it cancelled for one.
            self._chain.advance(current, now_ms=now)
        requeued, job = self._attempt_store.requeue(
            key,
            extra_attempts=self._default_attempts(current.queue),
            now_ms=now,
            stale_before_ms=now - SUBMIT_IN_FLIGHT_MS,
            only_dead=only_dead,
        )
        if not requeued or job is None:
            status = job.status if job else current.status
            allowed = "dead" if only_dead else "dead, failed or cancelled"
            reason = f"job is {status}; only {allowed} jobs can be retried"
            raise Conflict(reason, status=status)
        # Its next attempt is attempts + 1: the consumer's fence accepts a pending, direct job
        # for exactly that attempt, so the send may come before the claim (as on submit).
        if self._sender.send([Outgoing(job, attempt=job.attempts + 1, due_ms=now)], now_ms=now):
            raise Unavailable(f"job {job.id} could not be handed to SQS; retry the request")
        token = f"retry:{ULID.from_timestamp(now / 1000)}"
        if self._store.claim(key, token=token, now_ms=now, lease_ms=0, chained=occurrence):
            job.status, job.queued_at_ms = Status.QUEUED, now
        return job

    def _check_parents_done(self, node: Job) -> None:
        """409 for a DAG node whose parents have not all finished as its DAG needs (succeeded;
        or finished at all, under on_failure=continue): retried now, it would run before them.
        A node cancelled while blocked, or by its DAG's cancel_descendants after a parent died,
        is retried once its parents are (retry them first). Reads each parent (a few reads)."""
        dag = node.dag
        if dag is None or not dag.parents:
            return
        key = DagKey.from_dag_id(dag.dag_id)
        done = FINISHED if dag.on_failure is OnFailure.CONTINUE else {Status.SUCCEEDED}
        waiting = []
        for name, index in dag.parents:
            parent = self._store.get(key.node_key(index))
            status = parent.status if parent is not None else "expired"
            if status not in done:
                waiting.append(f"'{name}' is {status}")
        if waiting:
            raise Conflict(
                f"job is node '{dag.node}' of DAG {dag.dag_id} and would run before its parents: "
                f"{', '.join(waiting)}; retry it once they have "
                + ("finished" if dag.on_failure is OnFailure.CONTINUE else "succeeded"),
                status=node.status,
            )

    def pause(self, job_id: str) -> Job:
        """Hold a pending job in the table: it is not dispatched until resumed. One conditional
        write. Only a pending job can be paused (409 otherwise): once handed to SQS it is on
        its way, and a job whose submit is still sending it is not yet pausable."""
        key = JobKey.from_job_id(job_id)
        now = self._clock.now_ms()
        paused, job = self._store.pause(key, now_ms=now)
        if job is None:
            raise JobNotFound(job_id)
        if not paused:
            reason = f"job is {job.status}; only pending jobs can be paused"
            if job.status is Status.PENDING and job.schedule_id is not None:
                reason = f"job is an occurrence of schedule {job.schedule_id}; pause the schedule"
            elif job.status is Status.PENDING:
                reason = "job is being handed to SQS; only pending jobs can be paused"
            raise Conflict(reason, status=job.status)
        return job

    def resume(self, job_id: str) -> Job:
        """paused -> pending. A job due within the direct window (or overdue) is sent now, by
        the path submit uses: the sweeper's cursor may already have passed its due time, and
        no sweep goes back. A later job waits for the sweeper, ahead of every cursor. On a
        paused queue a due-soon job is made pending and recorded for the queue's catch-up in
        one transaction. Resuming again is harmless: a job already waiting answers as the
        first resume did."""
        now = self._clock.now_ms()
        key = JobKey.from_job_id(job_id)
        for _ in range(_RESUME_TRIES):
            soon = due_soon(key.due_ms, now)
            if soon and self._queue_states is not None:
                current = self._store.get(key)  # follows a moved job's pointer
                if current is None:
                    raise JobNotFound(job_id)
                if current.key != key:
                    key = current.key  # moved: decide "due soon" from where it is now
                    continue
                if current.status is Status.PAUSED and self.paused_queues({current.queue}):
                    write = self._store.resume_write(key, now_ms=now)
                    hold = self._queue_states.hold_with(current.queue, [write], record=[key.job_id])
                    if hold is Hold.HELD:
                        current.status, current.paused_at_ms = Status.PENDING, None
                        return current
                    # The queue was resumed meanwhile (resume it as on a running queue), or
                    # the job changed (answered below from its state).
            # Not following a pointer: `direct` was decided from this key's due time.
            resumed, job = self._store.resume(
                key, now_ms=now, direct=soon, stale_before_ms=now - SUBMIT_IN_FLIGHT_MS
            )
            if job is None:
                # Nothing at `key` but a moved job's pointer (or nothing): find the job. Only
                # moved jobs pay this read; a job that never moved costs one write, as before.
                current = self._store.get(JobKey.from_job_id(job_id))
                if current is None:
                    raise JobNotFound(job_id)
                key = current.key
                continue
            if not resumed:
                if job.status is Status.PENDING and not job.direct:
                    return job  # already resumed (a retried request): nothing more to do
                reason = f"job is {job.status}; only paused jobs can be resumed"
                if job.status is Status.PENDING and job.direct:
                    reason = "job is being resumed; retry shortly"
                raise Conflict(reason, status=job.status)
            if soon and self.dispatch_direct([job], by="resume"):
                raise Unavailable(f"job {job.id} could not be handed to SQS; retry the resume")
            return job
        raise Unavailable(f"job {job_id} kept moving while it was being resumed; retry")

    def cancel(self, job_id: str) -> Status:
        """Cancel a pending, queued, failed, blocked or paused job. A queued job's message may
        still reach its consumer, whose attempt-taking write then fails, so the function never
        runs: a 200 `cancelled` means the effect never happens. A running job is a 409 (its
        attempt has started). Cancelling twice is harmless."""
        key = JobKey.from_job_id(job_id)
        now = self._clock.now_ms()
        _, current = self._store.cancel(
            key, now_ms=now, expires_at_s=now // 1000 + self._retention_s
        )
        if current is None:
            raise JobNotFound(job_id)
        if current.status is Status.CANCELLED:
            if self._on_cancelled is not None:
                self._on_cancelled(current)  # again on a repeat: it may not have finished
            return Status.CANCELLED
        if current.status is Status.RUNNING:
            raise Conflict(
                "job is running: its attempt has started, so cancelling can no longer stop it",
                status=current.status,
            )
        raise Conflict(
            f"job is {current.status}; only pending, queued, failed, blocked or paused jobs can"
            " be cancelled",
            status=current.status,
        )
