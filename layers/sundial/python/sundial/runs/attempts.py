"""How an attempt of a job begins and ends, whoever runs it: the consumer SDK inside an
SQS-triggered Lambda, or a worker outside Lambda that leases jobs over the HTTP API.

- `admit` is the fence: it says whether this delivery of attempt N may run, and repairs the
  follow-up work (a retry message, the DLQ copy) that a runner which died part-way left undone.
- `start` marks the attempt `running` (one more write; optional for the Lambda consumer).
- `succeed` and `fail` end the attempt with one conditional write each, so an illegal
  transition (succeeded → running on a duplicate delivery, say) is refused. `fail` schedules
  the retry (SQS DelaySeconds up to 15 minutes, a timer item in the table beyond) or, when the
  attempts run out or the error is not retryable, marks the job `dead` and sends it to its
  queue's DLQ.
- For a DAG node, a success releases the children it completes, and a death applies the DAG's
  on_failure rule (`DagHooks`: sundial.services.dag_progress, handed in by the composition
  root and built on the first DAG node, so a runner of plain jobs never loads the DAG engine);
  the fence repeats either on a redelivery, in case the runner died before finishing it.
"""

from __future__ import annotations

import json
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aws_lambda_powertools import Logger

from sundial.clock import Clock
from sundial.model.job import AttemptError, Job, Status, retry_timer
from sundial.settings import Settings
from sundial.store.attempts import AttemptStore
from sundial.store.jobs import JobStore
from sundial.store.payloads import PayloadStore
from sundial.transport.sender import SQS_MAX_DELAY_S, Outgoing, QueueSender

MAX_RESULT_BYTES = 16_384  # results larger than this are not stored (the job still succeeds)
MAX_ERROR_MESSAGE = 500
MAX_TRACEBACK_HEAD = 1_000
# A `running` job whose runner has been silent this long is taken to be dead.
RUNNING_TAKEOVER_MS = 15 * 60 * 1000

logger = Logger(child=True)


class AttemptBusyError(Exception):
    """Another delivery of the same attempt is running it now; SQS will deliver this again."""


class DagHooks(Protocol):
    """How a DAG moves on when one of its nodes ends (sundial.services.dag_progress)."""

    def node_succeeded(self, node: Job, result_json: str | None) -> None: ...

    def node_stopped(self, node: Job) -> None: ...


class _NoDags:
    """For a runner built without DAG support: a DAG node is an error, not silently dropped."""

    def node_succeeded(self, node: Job, result_json: str | None) -> None:
        raise RuntimeError(f"job {node.id} is a DAG node but this runner has no DAG support")

    def node_stopped(self, node: Job) -> None:
        self.node_succeeded(node, None)


@dataclass(frozen=True)
class LifecycleDeps:
    store: JobStore
    attempt_store: AttemptStore  # the attempt's own writes
    queues: QueueSender  # the job queues, for retries
    dead_letters: QueueSender  # the DLQs
    settings: Settings
    clock: Clock
    rng: random.Random
    # Builds the DAG engine on the first DAG node this runner meets; None: this runner
    # refuses DAG nodes (an error, so SQS delivers the node again elsewhere).
    dags: Callable[[], DagHooks] | None = None
    # The payload bucket, to fetch a payload stored in S3 (sundial.store.payloads); None: this
    # runner has no access to it, and such a job's attempt fails (PayloadUnavailable).
    payloads: PayloadStore | None = None


def attempt_error(error: BaseException, *, attempt: int, at_ms: int) -> AttemptError:
    """The record kept in the job's history for a failed attempt."""
    return AttemptError(
        attempt=attempt,
        at_ms=at_ms,
        error_type=type(error).__name__,
        message=str(error)[:MAX_ERROR_MESSAGE],
        traceback_head="".join(traceback.format_exception(error))[:MAX_TRACEBACK_HEAD],
    )


class Attempts:
    def __init__(self, deps: LifecycleDeps) -> None:
        self.deps = deps
        self._dags: DagHooks | None = None

    @property
    def dags(self) -> DagHooks:
        """Moves a DAG on when one of its nodes ends."""
        if self._dags is None:
            self._dags = self.deps.dags() if self.deps.dags is not None else _NoDags()
        return self._dags

    def _node_stopped(self, job: Job) -> None:
        if job.dag is not None:  # only a DAG node needs (and loads) the DAG engine
            self.dags.node_stopped(job)

    def admit(
        self, job: Job, attempt: int, *, revision: int = 0, redelivered: bool = False
    ) -> bool:
        """The fence. False means: acknowledge this delivery without running the job.
        `revision`: the envelope's (the job's revision when the message was sent); a message
        sent before the job was changed (PATCH /jobs/{id}) is stale: its time or payload is
        not the job's any more, and the change sent or will send the job anew.
        `redelivered`: SQS delivered this message before and its visibility ran out, so a
        runner that still shows the attempt `running` has stopped extending its lease."""
        if revision != job.revision:
            extra = {"id": job.id, "revision": revision, "job_revision": job.revision}
            logger.info("skipped: the job was changed after this message was sent", extra=extra)
            return False
        return self._admit_attempt(job, attempt, redelivered=redelivered)

    def _admit_attempt(self, job: Job, attempt: int, *, redelivered: bool) -> bool:
        """The fence for a message of the job's current revision (admit)."""
        extra = {"id": job.id, "status": str(job.status), "attempt": attempt}
        if job.status in (Status.CANCELLED, Status.SUCCEEDED):
            logger.info("skipped: job is already finished", extra=extra)
            if job.status is Status.SUCCEEDED and job.dag is not None:
                # The runner may have died before releasing the children: do it again.
                self.dags.node_succeeded(job, job.result_json)
            return False
        if job.attempts == attempt and job.status is Status.FAILED:
            # This attempt failed before but the retry may not have been scheduled (the runner
            # died in between): schedule it again. A duplicate retry message is harmless.
            assert job.next_attempt_at_ms is not None
            self.schedule_retry(job, attempt + 1, job.next_attempt_at_ms)
            return False
        if job.attempts == attempt and job.status is Status.DEAD:
            self.to_dead_letter_queue(job, attempt)  # again, in case the first send was lost
            self._node_stopped(job)  # likewise the DAG's reaction, for a DAG node
            return False
        if job.attempts == attempt and job.status is Status.RUNNING:
            started = job.started_at_ms or 0
            if not redelivered and self.deps.clock.now_ms() - started < RUNNING_TAKEOVER_MS:
                raise AttemptBusyError(f"job {job.id} attempt {attempt} is running elsewhere")
            logger.warning("taking over an attempt whose runner went silent", extra=extra)
            return True
        direct_pending = job.status is Status.PENDING and job.direct
        if job.attempts == attempt - 1 and (
            job.status in (Status.QUEUED, Status.FAILED) or direct_pending
        ):
            return True
        logger.info("skipped: not this attempt's turn (duplicate or stale)", extra=extra)
        return False

    def start(self, job: Job, attempt: int) -> int | None:
        """Mark the attempt running. Returns its start time, or None if another runner has it."""
        started = self.deps.clock.now_ms()
        taking_over = job.attempts == attempt and job.status is Status.RUNNING
        running, current = self.deps.attempt_store.mark_running(
            job.key,
            attempt=attempt,
            now_ms=started,
            revision=job.revision,
            taking_over_from_ms=(job.started_at_ms or 0) if taking_over else None,
        )
        if not running:
            logger.info("attempt taken by another runner", extra=_ids(job, attempt, current))
            return None
        return started

    def succeed(self, job: Job, attempt: int, *, started_ms: int, result: Any) -> bool:
        """End the attempt as succeeded, storing a small result. False if refused."""
        now = self.deps.clock.now_ms()
        result_json = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
        if len(result_json.encode()) > MAX_RESULT_BYTES:
            logger.warning("result not stored: over the limit", extra={"id": job.id})
            result_json = json.dumps({"omitted": f"result over {MAX_RESULT_BYTES} bytes"})
        written, current = self.deps.attempt_store.record_attempt(
            job.key,
            attempt=attempt,
            outcome=Status.SUCCEEDED,
            started_at_ms=started_ms,
            now_ms=now,
            result_json=result_json if result is not None else None,
            expires_at_s=self._expiry(now),
        )
        if written:
            logger.info("job succeeded", extra={"id": job.id, "attempt": attempt})
            if job.dag is not None:
                self.dags.node_succeeded(job, result_json if result is not None else None)
        else:
            logger.warning("job ran but its status had moved on", extra=_ids(job, attempt, current))
            if current is not None and current.status is Status.SUCCEEDED and current.dag:
                # A repeated report (a worker's retried ack): finish a release cut short.
                self.dags.node_succeeded(current, current.result_json)
        return written

    def fail(
        self,
        job: Job,
        attempt: int,
        *,
        started_ms: int,
        error: AttemptError,
        retryable: bool = True,
        retry_delay_ms: int | None = None,
    ) -> Status | None:
        """End the attempt as failed (a retry is scheduled, after `retry_delay_ms` or the retry
        policy's backoff) or dead. Returns the new status, or None if the write was refused."""
        deps = self.deps
        now = deps.clock.now_ms()
        next_at: int | None = None
        if retryable and attempt < job.max_attempts:
            if retry_delay_ms is None:
                policy = job.retry or deps.settings.retry_defaults_for(job.queue).policy()
                retry_delay_ms = policy.delay_ms(attempt, deps.rng)
            next_at = now + retry_delay_ms
        outcome = Status.FAILED if next_at is not None else Status.DEAD
        written, current = deps.attempt_store.record_attempt(
            job.key,
            attempt=attempt,
            outcome=outcome,
            started_at_ms=started_ms,
            now_ms=now,
            error=error,
            next_attempt_at_ms=next_at,
            expires_at_s=None if next_at is not None else self._expiry(now),
        )
        if not written:
            logger.warning("attempt failed; status had moved on", extra=_ids(job, attempt, current))
            if current is not None and current.status is Status.DEAD:
                self._node_stopped(current)  # a repeated report: finish the DAG's reaction
            return None
        if next_at is not None:
            logger.warning("attempt failed; retry scheduled", extra=_failure(job, error, next_at))
            self.schedule_retry(job, attempt + 1, next_at)
        else:
            logger.error("job is dead", extra=_failure(job, error, None))
            self.to_dead_letter_queue(job, attempt)
            self._node_stopped(job)
        return outcome

    def schedule_retry(self, job: Job, attempt: int, at_ms: int) -> None:
        deps = self.deps
        now = deps.clock.now_ms()
        if at_ms - now <= SQS_MAX_DELAY_S * 1000:
            if deps.queues.send([Outgoing(job, attempt=attempt, due_ms=at_ms)], now_ms=now):
                raise RuntimeError(f"could not send the retry of job {job.id}; SQS will redeliver")
            return
        # Beyond SQS's 15-minute delay: a timer item the sweeper dispatches at the time. It is
        # written more than 15 minutes ahead, so no sweep can have passed it (see timing.py).
        if job.payload_ref is not None and deps.payloads is not None:
            # The retry may be far out (a worker's retry_after, a long backoff): its stored
            # payload's lifecycle restarts first, as a move's does.
            deps.payloads.refresh(job.payload_ref)
        timer = retry_timer(
            job, attempt=attempt, at_ms=at_ms, now_ms=now, expires_at_s=self._expiry(at_ms)
        )
        deps.store.put_if_absent(timer)  # a consumer role's one kind of PutItem (a timer)

    def to_dead_letter_queue(self, job: Job, attempt: int) -> None:
        deps = self.deps
        if job.queue not in deps.settings.dead_letter_urls:
            logger.warning("no DLQ configured for queue", extra={"queue": job.queue})
            return
        now = deps.clock.now_ms()
        if deps.dead_letters.send([Outgoing(job, attempt=attempt, due_ms=now)], now_ms=now):
            raise RuntimeError(f"could not send dead job {job.id} to the DLQ; SQS will redeliver")

    def _expiry(self, now_ms: int) -> int:
        return now_ms // 1000 + self.deps.settings.retention_days * 86_400


def _ids(job: Job, attempt: int, current: Job | None) -> dict[str, Any]:
    return {
        "id": job.id,
        "attempt": attempt,
        "status": str(current.status) if current else None,
    }


def _failure(job: Job, error: AttemptError, next_at: int | None) -> dict[str, Any]:
    return {
        "id": job.id,
        "attempt": error.attempt,
        "error_type": error.error_type,
        "error": error.message,
        "next_attempt_at": next_at,
    }
