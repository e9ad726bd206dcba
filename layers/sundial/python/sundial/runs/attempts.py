"""How an attempt of a job begins and ends, whoever runs it: the consumer SDK inside an
SQS-triggered Lambda, or a worker outside Lambda that leases jobs over the HTTP API.

- `admit` is the fence: it says whether this delivery of attempt N may run, and repairs the
  follow-up work (a retry message, the DLQ copy) that a runner which died part-way left undone.
- `start` takes the attempt: `running`, with this runner recorded as its one holder until its
  lease (sundial.store.attempts). A running attempt is taken over only once its holder's lease
  is past, whatever message asks; `extend` is a worker's heartbeat.
- `succeed` and `fail` end the attempt with one conditional write each, by its holder only, so
  an illegal transition (succeeded → running on a duplicate delivery, a runner that lost its
  attempt ending it) is refused. `fail` schedules
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
import secrets
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aws_lambda_powertools import Logger

from sundial.clock import Clock
from sundial.model.job import AttemptError, Job, Status, retry_timer
from sundial.model.placement import Where, place
from sundial.settings import Settings
from sundial.store.attempts import AttemptStore
from sundial.store.jobs import JobStore, may_be_behind_a_sweep
from sundial.timing import CLOCK_SKEW_MS, LEGACY_RUNNER_MS
from sundial.transport.sender import Outgoing, QueueSender

if TYPE_CHECKING:
    from sundial.store.payloads import PayloadStore

MAX_RESULT_BYTES = 16_384  # results larger than this are not stored (the job still succeeds)
MAX_ERROR_MESSAGE = 500
MAX_TRACEBACK_HEAD = 1_000

logger = Logger(child=True)


class AttemptBusyError(Exception):
    """Another delivery of the same attempt is running it now; SQS will deliver this again.
    `free_at_ms`: the earliest time a take-over can happen, if the holder stops renewing."""

    def __init__(self, message: str, *, free_at_ms: int) -> None:
        super().__init__(message)
        self.free_at_ms = free_at_ms


@dataclass(frozen=True, slots=True)
class Held:
    """An attempt this runner took (Attempts.start): its number, when it started, and the
    holder token that alone may extend or end it."""

    attempt: int
    started_ms: int
    runner: str


def new_runner_token() -> str:
    """A holder token: random and unguessable (a worker's lease token carries it, and whoever
    holds it may end the attempt)."""
    return secrets.token_urlsafe(16)


def holder_lease_end(job: Job) -> int:
    """Until when a running attempt's holder is provably alive: its lease (an attempt taken
    before holders were recorded: by a Lambda, which lives at most LEGACY_RUNNER_MS)."""
    if job.runner_until_ms is not None:
        return job.runner_until_ms
    return (job.started_at_ms or 0) + LEGACY_RUNNER_MS


def holder_stopped(job: Job, now_ms: int) -> bool:
    """Whether a running attempt's holder has provably stopped: its lease is past by more than
    the clocks' skew (the same bound as the take-over's write, sundial.store.attempts)."""
    return holder_lease_end(job) < now_ms - CLOCK_SKEW_MS


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

    def admit(self, job: Job, attempt: int, *, revision: int = 0, queue: str) -> bool:
        """The fence. False means: acknowledge this delivery without running the job.
        `queue`: the queue the message was delivered on; a message naming a job of another
        queue (anyone who may send to a queue can put any body on it) never touches that job.
        `revision`: the envelope's (the job's revision when the message was sent); a message
        sent before the job was changed (a move, a retry by id) is stale: its time or payload
        is not the job's any more, and the change sent or will send the job anew.
        AttemptBusyError: the attempt's holder is alive; the delivery is to come back later."""
        if job.queue != queue:
            logger.warning(
                "skipped: the message names a job of another queue",
                extra={"id": job.id, "job_queue": job.queue, "delivered_on": queue},
            )
            return False
        if revision != job.revision:
            extra = {"id": job.id, "revision": revision, "job_revision": job.revision}
            logger.info("skipped: the job was changed after this message was sent", extra=extra)
            return False
        if job.dag is not None and job.dag.held:
            # Its DAG is paused (the pause may have come between the node's send and this
            # delivery): it does not run; the DAG's resume sends it again.
            logger.info("skipped: the job's DAG is paused", extra={"id": job.id})
            return False
        return self._admit_attempt(job, attempt)

    def _admit_attempt(self, job: Job, attempt: int) -> bool:
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
            # died in between): schedule it again. A duplicate retry message is harmless: its
            # attempt is taken once (mark_running), and a duplicate timer is the same item.
            assert job.next_attempt_at_ms is not None
            self.schedule_retry(job, attempt + 1, job.next_attempt_at_ms)
            return False
        if job.attempts == attempt and job.status is Status.DEAD:
            self.to_dead_letter_queue(job, attempt)  # again, in case the first send was lost
            self._node_stopped(job)  # likewise the DAG's reaction, for a DAG node
            return False
        if job.attempts == attempt and job.status is Status.RUNNING:
            if not holder_stopped(job, self.deps.clock.now_ms()):
                raise AttemptBusyError(
                    f"job {job.id} attempt {attempt} is running elsewhere",
                    free_at_ms=holder_lease_end(job) + CLOCK_SKEW_MS + 1,
                )
            logger.warning("taking over an attempt whose holder's lease ran out", extra=extra)
            return True
        # A pending job is run if a direct send owns it, or if it is due: a sweep sends under
        # its shard's lease without writing the job (sundial.store.attempts, the take).
        waiting = job.status is Status.PENDING and (
            job.direct or job.key.due_ms <= self.deps.clock.now_ms() + CLOCK_SKEW_MS
        )
        if job.attempts == attempt - 1 and (
            job.status in (Status.QUEUED, Status.FAILED) or waiting
        ):
            return True
        logger.info("skipped: not this attempt's turn (duplicate or stale)", extra=extra)
        return False

    def start(self, job: Job, attempt: int, *, lease_until_ms: int) -> Held | None:
        """Take the attempt: mark it running with this runner as its holder, provably alive
        until `lease_until_ms`. None if another runner has it, or it was cancelled since."""
        started = self.deps.clock.now_ms()
        runner = new_runner_token()
        running, current = self.deps.attempt_store.mark_running(
            job.key,
            attempt=attempt,
            now_ms=started,
            runner=runner,
            runner_until_ms=lease_until_ms,
            revision=job.revision,
            take_over=job.attempts == attempt and job.status is Status.RUNNING,
        )
        if not running:
            logger.info("attempt taken by another runner", extra=_ids(job, attempt, current))
            return None
        return Held(attempt=attempt, started_ms=started, runner=runner)

    def extend(self, job: Job, held: Held, *, lease_until_ms: int) -> bool:
        """A holder's heartbeat: the attempt stays its own until `lease_until_ms`. False if it
        lost the attempt (ended, or taken over after its lease ran out)."""
        extended, _ = self.deps.attempt_store.extend_runner(
            job.key, attempt=held.attempt, runner=held.runner, until_ms=lease_until_ms
        )
        return extended

    def succeed(self, job: Job, held: Held, *, result: Any) -> bool:
        """End the attempt as succeeded, storing a small result. False if refused."""
        now = self.deps.clock.now_ms()
        result_json = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
        if len(result_json.encode()) > MAX_RESULT_BYTES:
            logger.warning("result not stored: over the limit", extra={"id": job.id})
            result_json = json.dumps({"omitted": f"result over {MAX_RESULT_BYTES} bytes"})
        written, current = self.deps.attempt_store.record_attempt(
            job.key,
            attempt=held.attempt,
            runner=held.runner,
            outcome=Status.SUCCEEDED,
            started_at_ms=held.started_ms,
            now_ms=now,
            result_json=result_json if result is not None else None,
            expires_at_s=self._expiry(now),
        )
        if written:
            # One line per job that succeeded is the largest part of the consumer's log bill and
            # tells an operator what the status already does: DEBUG. Failures stay at WARNING.
            logger.debug("job succeeded", extra={"id": job.id, "attempt": held.attempt})
            if job.dag is not None:
                self.dags.node_succeeded(job, result_json if result is not None else None)
        else:
            logger.warning(
                "job ran but its status had moved on", extra=_ids(job, held.attempt, current)
            )
            if current is not None and current.status is Status.SUCCEEDED and current.dag:
                # A repeated report (a worker's retried ack): finish a release cut short.
                self.dags.node_succeeded(current, current.result_json)
        return written

    def fail(
        self,
        job: Job,
        held: Held,
        *,
        error: AttemptError,
        retryable: bool = True,
        retry_delay_ms: int | None = None,
    ) -> Status | None:
        """End the attempt as failed (a retry is scheduled, after `retry_delay_ms` or the retry
        policy's backoff) or dead. Returns the new status, or None if the write was refused."""
        deps = self.deps
        now = deps.clock.now_ms()
        attempt = held.attempt
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
            runner=held.runner,
            outcome=outcome,
            started_at_ms=held.started_ms,
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
        """Send attempt `attempt` for `at_ms`: with SQS DelaySeconds when that is within 15
        minutes, else as a timer item the sweeps dispatch at its time. A timer's placement is
        checked by the clock after its write, not before: a write slow enough for a sweep to
        have passed its time since (botocore's retries under throttling) is followed by the
        send here, so the retry is never stranded (a second message of it runs once: the
        attempt's take)."""
        deps = self.deps
        if place(at_ms, deps.clock.now_ms()).where is Where.SWEEP:
            self._put_timer(job, attempt, at_ms)
            if not may_be_behind_a_sweep(at_ms, written_by_ms=deps.clock.now_ms()):
                return
            logger.warning(
                "a retry timer was written late: its retry is sent now too", extra={"id": job.id}
            )
        now = deps.clock.now_ms()
        if deps.queues.send([Outgoing(job, attempt=attempt, due_ms=at_ms)], now_ms=now):
            raise RuntimeError(f"could not send the retry of job {job.id}; SQS will redeliver")

    def _put_timer(self, job: Job, attempt: int, at_ms: int) -> None:
        """The timer item of attempt `attempt`: one PutItem (a consumer role's one kind of
        PutItem). Its key is the same for the same attempt and time (retry_timer), so a repair
        of a runner that died after scheduling (the fence, on the failed attempt's redelivery)
        writes no second timer."""
        deps = self.deps
        timer = retry_timer(job, attempt=attempt, at_ms=at_ms)
        deps.store.put_if_absent(timer, now_ms=deps.clock.now_ms())

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
