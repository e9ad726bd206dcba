"""The consumer SDK: wrap a plain function to make it a Sundial consumer Lambda.

    from sundial.consumer import NonRetryableError, consumer

    @consumer(non_retryable=(InvalidAddress,))
    def handler(job: Envelope) -> dict:
        send_email(job.payload["to"])
        return {"sent": True}

For each SQS record (Powertools batch processing, partial batch responses):
1. decode and validate the envelope; a body that is not one fails the record, so SQS redrives
   it to the DLQ after maxReceiveCount;
2. fence: read the job; skip it if it was cancelled, already succeeded or is dead, or if this
   delivery is for an attempt that is no longer due (a duplicate);
3. optionally mark it `running` (track_running=True: one more write per attempt);
4. call the function;
5. end the attempt with one conditional write: `succeeded` with the result, or on an exception
   `failed` with the error and the retry scheduled (SQS DelaySeconds up to 15 minutes, a
   timer item in the table beyond), or `dead` when attempts run out or the error is
   non-retryable, and then the envelope goes to the queue's DLQ.
A failure of Sundial's own bookkeeping (DynamoDB or SQS unavailable) fails the record, so SQS
delivers it again and the fence picks up where it stopped. Nothing runs twice for a job that
succeeded: the fence sees `succeeded`, and the success write is conditional on the attempt.
"""

from __future__ import annotations

import json
import random
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import BotoCoreError, ClientError
from ulid import ULID

from sundial.clock import Clock
from sundial.envelope import Envelope
from sundial.ids import JobKey
from sundial.models import AttemptError, Job, Status
from sundial.retry import RetryPolicy
from sundial.sender import SQS_MAX_DELAY_S, Outgoing, QueueSender
from sundial.settings import Settings
from sundial.store import JobStore

MAX_RESULT_BYTES = 16_384  # results larger than this are not stored (the job still succeeds)
MAX_ERROR_MESSAGE = 500
MAX_TRACEBACK_HEAD = 1_000
# A `running` job whose runner has been silent this long is taken to be dead (track_running).
RUNNING_TAKEOVER_MS = 15 * 60 * 1000

logger = Logger(child=True)
JobFunction = Callable[[Envelope], Any]  # returns JSON-serialisable data, or None


class NonRetryableError(Exception):
    """Raise this (or a type listed in non_retryable) to send the job straight to `dead`."""


class ConsumerBusyError(Exception):
    """Another delivery of the same attempt is running it now; SQS will deliver this again."""


@dataclass(frozen=True)
class ConsumerDeps:
    store: JobStore
    queues: QueueSender  # the job queues, for retries
    dead_letters: QueueSender  # the DLQs
    settings: Settings
    clock: Clock
    rng: random.Random


class Heartbeat:
    """While a job runs, keeps its SQS message invisible: every third of the visibility
    timeout it pushes the visibility out by a whole timeout again. So a 10-minute job on a
    2-minute visibility timeout is not delivered a second time, while a consumer that dies
    stops beating and its message comes back within one timeout."""

    def __init__(
        self,
        *,
        queues: QueueSender,
        queue: str,
        receipt_handle: str,
        visibility_s: int,
        clock: Clock,
    ) -> None:
        self._queues, self._queue, self._receipt = queues, queue, receipt_handle
        self._visibility_s = visibility_s
        self._clock = clock
        self._stop = threading.Event()
        self._beat = threading.Condition()
        self.beats = 0
        self._thread = threading.Thread(target=self._run, name="sundial-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def wait_for_beats(self, count: int, timeout_s: float) -> bool:
        with self._beat:
            return self._beat.wait_for(lambda: self.beats >= count, timeout=timeout_s)

    def _run(self) -> None:
        interval_ms = self._visibility_s * 1000 // 3
        while self._clock.wait_until(self._clock.now_ms() + interval_ms, self._stop):
            try:
                self._queues.extend_visibility(self._queue, self._receipt, self._visibility_s)
            except (ClientError, BotoCoreError):
                logger.warning("heartbeat failed; the message may be delivered again")
            with self._beat:
                self.beats += 1
                self._beat.notify_all()


class JobConsumer:
    def __init__(
        self,
        function: JobFunction,
        *,
        non_retryable: tuple[type[BaseException], ...] = (),
        track_running: bool = False,
        visibility_timeout_s: int | None = 120,
        deps: Callable[[], ConsumerDeps] | None = None,
    ) -> None:
        """`visibility_timeout_s`: the queue's visibility timeout, which the heartbeat keeps
        renewing while the function runs; None turns the heartbeat off."""
        self._function = function
        self._visibility_s = visibility_timeout_s
        self.current_heartbeat: Heartbeat | None = None
        self._non_retryable: tuple[type[BaseException], ...] = (NonRetryableError, *non_retryable)
        self._track_running = track_running
        self._deps_factory = deps or default_deps
        self._deps: ConsumerDeps | None = None

    @property
    def deps(self) -> ConsumerDeps:
        if self._deps is None:
            self._deps = self._deps_factory()
        return self._deps

    def lambda_handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        # A batch whose every record failed is reported item by item too, not as an error.
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        response = process_partial_response(
            event=event, record_handler=self.handle_record, processor=processor, context=context
        )
        return dict(response)

    # -- one record -------------------------------------------------------------------------

    def handle_record(self, record: SQSRecord) -> None:
        envelope = Envelope.model_validate_json(record.body)
        attempt = envelope.attempt
        job = self.deps.store.get(JobKey.from_job_id(envelope.id))
        if job is None:
            logger.warning("job not found: expired or never accepted", extra={"id": envelope.id})
            return
        if not self._runnable(job, attempt, envelope):
            return
        started = self.deps.clock.now_ms()
        if self._track_running:
            running, current = self.deps.store.mark_running(
                job.key, attempt=attempt, now_ms=started
            )
            if not running:
                logger.info("attempt taken by another delivery", extra=_ids(envelope, current))
                return
        try:
            result = self._run_with_heartbeat(envelope, record.receipt_handle)
        except Exception as error:  # every failure of the job is recorded
            self._failed(job, envelope, started, error)
        else:
            self._succeeded(job, envelope, started, result)

    def _run_with_heartbeat(self, envelope: Envelope, receipt_handle: str) -> Any:
        if self._visibility_s is None or envelope.queue not in self.deps.settings.queue_urls:
            return self._function(envelope)
        heartbeat = Heartbeat(
            queues=self.deps.queues,
            queue=envelope.queue,
            receipt_handle=receipt_handle,
            visibility_s=self._visibility_s,
            clock=self.deps.clock,
        )
        self.current_heartbeat = heartbeat
        with heartbeat:
            return self._function(envelope)

    def _runnable(self, job: Job, attempt: int, envelope: Envelope) -> bool:
        """The fence. False means: acknowledge this delivery without running the job."""
        extra = {"id": job.id, "status": str(job.status), "attempt": attempt}
        if job.status in (Status.CANCELLED, Status.SUCCEEDED):
            logger.info("skipped: job is already finished", extra=extra)
            return False
        if job.attempts == attempt and job.status is Status.FAILED:
            # This attempt failed before but the retry may not have been scheduled (the consumer
            # died in between): schedule it again. A duplicate retry message is harmless.
            assert job.next_attempt_at_ms is not None
            self._schedule_retry(job, attempt + 1, job.next_attempt_at_ms)
            return False
        if job.attempts == attempt and job.status is Status.DEAD:
            self._to_dead_letter_queue(job, attempt)  # again, in case the first send was lost
            return False
        if job.attempts == attempt and job.status is Status.RUNNING:
            started = job.started_at_ms or 0
            if self.deps.clock.now_ms() - started < RUNNING_TAKEOVER_MS:
                raise ConsumerBusyError(f"job {job.id} attempt {attempt} is running elsewhere")
            logger.warning("taking over an attempt whose runner went silent", extra=extra)
            return True
        direct_pending = job.status is Status.PENDING and job.direct
        if job.attempts == attempt - 1 and (
            job.status in (Status.QUEUED, Status.FAILED) or direct_pending
        ):
            return True
        logger.info("skipped: not this attempt's turn (duplicate or stale)", extra=extra)
        return False

    def _succeeded(self, job: Job, envelope: Envelope, started: int, result: Any) -> None:
        now = self.deps.clock.now_ms()
        result_json = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
        if len(result_json.encode()) > MAX_RESULT_BYTES:
            logger.warning("result not stored: over the limit", extra={"id": job.id})
            result_json = json.dumps({"omitted": f"result over {MAX_RESULT_BYTES} bytes"})
        written, current = self.deps.store.record_attempt(
            job.key,
            attempt=envelope.attempt,
            outcome=Status.SUCCEEDED,
            started_at_ms=started,
            now_ms=now,
            result_json=result_json if result is not None else None,
            expires_at_s=self._expiry(now),
        )
        if written:
            logger.info("job succeeded", extra={"id": job.id, "attempt": envelope.attempt})
        else:
            logger.warning("job ran but its status had moved on", extra=_ids(envelope, current))

    def _failed(self, job: Job, envelope: Envelope, started: int, error: Exception) -> None:
        deps = self.deps
        now = deps.clock.now_ms()
        attempt = envelope.attempt
        record = AttemptError(
            attempt=attempt,
            at_ms=now,
            error_type=type(error).__name__,
            message=str(error)[:MAX_ERROR_MESSAGE],
            traceback_head="".join(traceback.format_exception(error))[:MAX_TRACEBACK_HEAD],
        )
        retryable = not isinstance(error, self._non_retryable)
        next_at: int | None = None
        if retryable and attempt < job.max_attempts:
            policy = job.retry or deps.settings.retry_defaults_for(job.queue).policy()
            next_at = now + policy.delay_ms(attempt, deps.rng)
        written, current = deps.store.record_attempt(
            job.key,
            attempt=attempt,
            outcome=Status.FAILED if next_at is not None else Status.DEAD,
            started_at_ms=started,
            now_ms=now,
            error=record,
            next_attempt_at_ms=next_at,
            expires_at_s=None if next_at is not None else self._expiry(now),
        )
        if not written:
            logger.warning("attempt failed; status had moved on", extra=_ids(envelope, current))
        elif next_at is not None:
            logger.warning("attempt failed; retry scheduled", extra=_failure(job, record, next_at))
            self._schedule_retry(job, attempt + 1, next_at)
        else:
            logger.error("job is dead", extra=_failure(job, record, None))
            self._to_dead_letter_queue(job, attempt)

    def _schedule_retry(self, job: Job, attempt: int, at_ms: int) -> None:
        deps = self.deps
        now = deps.clock.now_ms()
        if at_ms - now <= SQS_MAX_DELAY_S * 1000:
            if deps.queues.send([Outgoing(job, attempt=attempt, due_ms=at_ms)], now_ms=now):
                raise RuntimeError(f"could not send the retry of job {job.id}; SQS will redeliver")
            return
        # Beyond SQS's 15-minute delay: a timer item the sweeper dispatches at the time. It is
        # written more than 15 minutes ahead, so no sweep can have passed it (see timing.py).
        timer = Job(
            key=JobKey(
                shard=job.key.shard, due_ms=at_ms, ulid=str(ULID.from_timestamp(now / 1000))
            ),
            queue=job.queue,
            payload_json=job.payload_json,
            priority=job.priority,
            max_attempts=job.max_attempts,
            created_at_ms=job.created_at_ms,
            retry_of=job.key,
            retry_attempt=attempt,
            expires_at_s=self._expiry(at_ms),
        )
        deps.store.put_if_absent(timer)  # one PutItem: all the consumer's role may write

    def _to_dead_letter_queue(self, job: Job, attempt: int) -> None:
        deps = self.deps
        if job.queue not in deps.settings.dead_letter_urls:
            logger.warning("no DLQ configured for queue", extra={"queue": job.queue})
            return
        now = deps.clock.now_ms()
        if deps.dead_letters.send([Outgoing(job, attempt=attempt, due_ms=now)], now_ms=now):
            raise RuntimeError(f"could not send dead job {job.id} to the DLQ; SQS will redeliver")

    def _expiry(self, now_ms: int) -> int:
        return now_ms // 1000 + self.deps.settings.retention_days * 86_400


def consumer(
    *,
    non_retryable: tuple[type[BaseException], ...] = (),
    track_running: bool = False,
    visibility_timeout_s: int | None = 120,
) -> Callable[[JobFunction], Callable[[dict[str, Any], Any], dict[str, Any]]]:
    """Decorator: turns `def f(job: Envelope) -> JSON` into an SQS-triggered Lambda handler."""

    def wrap(function: JobFunction) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        job_consumer = JobConsumer(
            function,
            non_retryable=non_retryable,
            track_running=track_running,
            visibility_timeout_s=visibility_timeout_s,
        )
        return job_consumer.lambda_handler

    return wrap


def default_deps() -> ConsumerDeps:
    """What a consumer Lambda uses: the process's dependencies (sundial.wiring)."""
    from sundial.wiring import dependencies  # noqa: PLC0415 - wiring builds boto3 clients

    deps = dependencies()
    return ConsumerDeps(
        store=deps.store,
        queues=deps.sender,
        dead_letters=deps.dead_letter_sender,
        settings=deps.settings,
        clock=deps.clock,
        rng=random.Random(),
    )


def _ids(envelope: Envelope, current: Job | None) -> dict[str, Any]:
    return {
        "id": envelope.id,
        "attempt": envelope.attempt,
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


__all__ = [
    "ConsumerBusyError",
    "Envelope",
    "Heartbeat",
    "JobConsumer",
    "NonRetryableError",
    "RetryPolicy",
    "consumer",
]
