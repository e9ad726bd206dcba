"""Jobs for workers outside Lambda: lease (long-poll SQS), heartbeat, ack, nack.

A lease is an SQS receive with the queue's visibility timeout (or the worker's choice): while
it lasts no one else receives the message. Each leased job passes the same fence as the Lambda
consumer SDK and is taken (`running`) with the lease as its holder's lease: the job item records
the holder's random token and until when the lease runs (sundial.store.attempts). The lease
token carries the receipt handle and the holder token, so the API keeps no state of its own and
nobody but the worker it was given to can use it (Lease). A heartbeat extends the holder's lease
and the message's visibility; ack and nack end the attempt with the same conditional writes
(sundial.runs.attempts), by its holder only, then delete the message. A worker that dies stops
heartbeating, its lease runs out, SQS delivers the message again, and the next lease takes the
attempt over; the dead worker's token, if it comes back, ends nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from sundial.errors import Conflict, InvalidInput, JobNotFound, QueueNotFound
from sundial.ids import JobKey
from sundial.model.job import AttemptError, Job
from sundial.model.payloads import PayloadUnavailable, queue_prefix
from sundial.retry import integral
from sundial.runs.attempts import MAX_ERROR_MESSAGE, AttemptBusyError, Attempts, Held
from sundial.transport.envelope import Envelope, PayloadRefView
from sundial.transport.receiver import (
    SQS_MAX_RECEIVE,
    SQS_MAX_VISIBILITY_S,
    SQS_MAX_WAIT_S,
    LeaseExpired,
    QueueReceiver,
)

logger = Logger(child=True)

DEFAULT_LEASE_S = 60
MAX_TRACEBACK_CHARS = 1_000


class LeaseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    wait: int = Field(
        default=SQS_MAX_WAIT_S,
        ge=0,
        le=SQS_MAX_WAIT_S,
        strict=True,
        description="Seconds to wait for a job when none is ready (long poll)",
    )
    max: int = Field(default=1, ge=1, le=SQS_MAX_RECEIVE, strict=True, description="Most jobs")
    lease_seconds: int = Field(
        default=DEFAULT_LEASE_S,
        ge=1,
        le=SQS_MAX_VISIBILITY_S,
        strict=True,
        description="How long the jobs are yours before another worker may get them; "
        "extend it with heartbeats",
    )

    _integral = integral("wait", "max", "lease_seconds")


class HeartbeatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lease: str = Field(min_length=1, max_length=8_192)
    lease_seconds: int = Field(default=DEFAULT_LEASE_S, ge=1, le=SQS_MAX_VISIBILITY_S, strict=True)

    _integral = integral("lease_seconds")


class AckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lease: str = Field(min_length=1, max_length=8_192)
    result: JsonValue = Field(default=None, description="Stored on the job (at most 16 KiB)")


class NackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lease: str = Field(min_length=1, max_length=8_192)
    error_type: str = Field(default="WorkerError", min_length=1, max_length=200)
    message: str = Field(default="", max_length=MAX_ERROR_MESSAGE)
    traceback: str = Field(default="", max_length=100_000)
    retry_after_seconds: int | None = Field(
        default=None,
        ge=0,
        le=366 * 86_400,
        strict=True,
        description="Retry after this long instead of the retry policy's backoff",
    )
    retryable: bool = Field(default=True, description="false: the job goes straight to dead")

    _integral = integral("retry_after_seconds")


@dataclass(frozen=True, slots=True)
class Lease:
    """What a lease token carries. The API keeps no state of its own: the token is checked
    against the attempt as stored, whose holder (`runner`, a random token recorded when the
    lease took the attempt) only the worker given the token knows, so a made-up or altered
    token can end, extend or nack nothing; and its queue must be the job's."""

    job_id: str
    queue: str
    attempt: int
    receipt_handle: str
    runner: str

    def token(self) -> str:
        raw = json.dumps(
            {
                "j": self.job_id,
                "q": self.queue,
                "a": self.attempt,
                "r": self.receipt_handle,
                "h": self.runner,
            },
            separators=(",", ":"),
        ).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def held(self, job: Job) -> Held:
        return Held(attempt=self.attempt, started_ms=job.started_at_ms or 0, runner=self.runner)

    @classmethod
    def parse(cls, token: str, job_id: str) -> Lease:
        try:
            value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            lease = cls(
                job_id=str(value["j"]),
                queue=str(value["q"]),
                attempt=int(value["a"]),
                receipt_handle=str(value["r"]),
                runner=str(value["h"]),
            )
        except (binascii.Error, ValueError, KeyError, TypeError, RecursionError):
            raise InvalidInput("lease", "not a lease token returned by /lease") from None
        if lease.token() != token:
            # Only the exact token /lease returned: the decoder also takes '+', '/', padding
            # and reordered or reformatted JSON, none of which is a token Sundial wrote.
            raise InvalidInput("lease", "not a lease token returned by /lease")
        if lease.job_id != job_id:
            raise InvalidInput("lease", "this lease is for another job")
        return lease


@dataclass(frozen=True, slots=True)
class LeasedJob:
    envelope: Envelope
    lease: Lease
    lease_expires_at_ms: int
    # For a payload stored in S3: a presigned GET URL of it, valid for the lease.
    payload_url: str | None = None


class LeaseService:
    def __init__(self, *, attempts: Attempts, receiver: QueueReceiver) -> None:
        self._attempts = attempts
        self._receiver = receiver
        self._deps = attempts.deps

    def lease(self, queue: str, request: LeaseRequest) -> list[LeasedJob]:
        """Up to `max` jobs, waiting up to `wait` seconds for the first. Deliveries the fence
        turns away (cancelled, duplicate, already finished) are removed and not returned, so
        a lease may return fewer jobs than were received, or none."""
        if queue not in self._deps.settings.queue_urls:
            raise QueueNotFound(queue)
        messages = self._receiver.receive(
            queue,
            wait_s=request.wait,
            max_messages=request.max,
            visibility_s=request.lease_seconds,
        )
        now = self._deps.clock.now_ms()
        until = now + request.lease_seconds * 1000
        leased = []
        for message in messages:
            admitted = self._admit(queue, message.body, message.receipt_handle, until)
            if admitted is not None:
                envelope, job, held = admitted
                lease = Lease(job.id, queue, envelope.attempt, message.receipt_handle, held.runner)
                url = self._payload_url(job, request.lease_seconds)
                # The reference the job item holds (the one presigned), not the message's.
                ref = PayloadRefView(**job.payload_ref.as_json()) if job.payload_ref else None
                envelope = envelope.model_copy(update={"payload_ref": ref})
                leased.append(LeasedJob(envelope, lease, until, url))
        return leased

    def _payload_url(self, job: Job, lease_seconds: int) -> str | None:
        """A presigned GET of the job's stored payload, expiring with the lease (a heartbeat
        extends the lease, not the URL: the worker fetches the payload as it starts). Only the
        object the job item references, under its own queue's prefix: never one a message
        names (anyone able to send to the queue could name another team's object)."""
        ref = job.payload_ref
        if ref is None or self._deps.payloads is None:
            return None  # no bucket: the worker reports the payload unavailable (a nack)
        if not ref.key.startswith(queue_prefix(job.queue)):
            raise PayloadUnavailable(f"job {job.id}'s payload is not under its queue's prefix")
        return self._deps.payloads.presigned_get(ref, expires_s=lease_seconds)

    def _admit(
        self, queue: str, body: str, receipt_handle: str, until_ms: int
    ) -> tuple[Envelope, Job, Held] | None:
        try:
            envelope = Envelope.model_validate_json(body)
        except ValidationError:
            # Left in flight: after maxReceiveCount SQS moves it to the DLQ, where it is indexed.
            logger.warning("message is not an envelope; leaving it for the DLQ")
            return None
        job = self._deps.store.get(JobKey.from_job_id(envelope.id))
        try:
            runnable = job is not None and self._attempts.admit(
                job, envelope.attempt, revision=envelope.revision, queue=queue
            )
        except AttemptBusyError as busy:
            # Another worker holds the attempt: the message comes back when its lease could
            # have run out, and a lease then takes the attempt over only if it did.
            wait_ms = busy.free_at_ms - self._deps.clock.now_ms()
            self._receiver.extend(queue, receipt_handle, max(1, -(-wait_ms // 1000)))
            return None
        held = (
            self._attempts.start(job, envelope.attempt, lease_until_ms=until_ms)
            if runnable and job is not None
            else None
        )
        if held is None or job is None:
            self._receiver.delete(queue, receipt_handle)
            return None
        return envelope, job, held

    def heartbeat(self, job_id: str, request: HeartbeatRequest) -> Job:
        """Extend the lease: the attempt stays this worker's (a conditional write on its holder)
        and its message invisible. Returns the job, so a worker sees e.g. that it still runs.
        409 once the attempt is not this lease's any more (it ended, or another worker took it
        over after this lease ran out)."""
        lease, job = self._lease(job_id, request.lease)
        until = self._deps.clock.now_ms() + request.lease_seconds * 1000
        if not self._attempts.extend(job, lease.held(job), lease_until_ms=until):
            raise Conflict("the lease has expired; another worker may have the job")
        try:
            self._receiver.extend(lease.queue, lease.receipt_handle, request.lease_seconds)
        except LeaseExpired:
            # The attempt is still this worker's (above); a delivery of its message meanwhile
            # finds it held and is turned away as busy.
            logger.info("heartbeat: the message's receipt expired; the attempt is still held")
        return self._job(job_id)

    def ack(self, job_id: str, request: AckRequest) -> Job:
        """The attempt succeeded: store the result, remove the message."""
        lease, job = self._lease(job_id, request.lease)
        written = self._attempts.succeed(job, lease.held(job), result=request.result)
        self._remove(lease)
        if not written:
            raise Conflict(
                f"job is {self._job(job_id).status}; this lease's attempt is over",
                status=job.status,
            )
        return self._job(job_id)

    def nack(self, job_id: str, request: NackRequest) -> Job:
        """The attempt failed: record it and schedule the retry (or mark the job dead)."""
        lease, job = self._lease(job_id, request.lease)
        now = self._deps.clock.now_ms()
        error = AttemptError(
            attempt=lease.attempt,
            at_ms=now,
            error_type=request.error_type,
            message=request.message,
            traceback_head=request.traceback[:MAX_TRACEBACK_CHARS],
        )
        delay_ms = (
            request.retry_after_seconds * 1000 if request.retry_after_seconds is not None else None
        )
        outcome = self._attempts.fail(
            job,
            lease.held(job),
            error=error,
            retryable=request.retryable,
            retry_delay_ms=delay_ms,
        )
        self._remove(lease)
        if outcome is None:
            raise Conflict(
                f"job is {self._job(job_id).status}; this lease's attempt is over",
                status=job.status,
            )
        return self._job(job_id)

    def _lease(self, job_id: str, token: str) -> tuple[Lease, Job]:
        """The lease a token names, and its job; 400 unless the token is well formed and names
        this job and the job's own queue (its receipt handle is used on that queue only)."""
        JobKey.from_job_id(job_id)  # a malformed id is a 400 before anything else
        lease = Lease.parse(token, job_id)
        if lease.queue not in self._deps.settings.queue_urls:
            raise InvalidInput("lease", "names an unknown queue")
        job = self._job(job_id)
        if lease.queue != job.queue:
            raise InvalidInput("lease", "names another queue than the job's")
        return lease, job

    def _job(self, job_id: str) -> Job:
        job = self._deps.store.get(JobKey.from_job_id(job_id))
        if job is None:
            raise JobNotFound(job_id)
        return job

    def _remove(self, lease: Lease) -> None:
        try:
            self._receiver.delete(lease.queue, lease.receipt_handle)
        except LeaseExpired:
            # The attempt is recorded either way; a redelivery meets the fence and is dropped.
            logger.info("lease expired before ack/nack; the fence drops the redelivery")
