"""Response bodies of the HTTP API (requests are in sundial.model.submission)."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from sundial.clock import to_rfc3339
from sundial.model.job import AttemptError, Job, Move, Priority, Status
from sundial.model.submission import parse_rfc3339
from sundial.retry import integral
from sundial.runs.leases import LeasedJob
from sundial.services.dead_letters import MAX_PER_REQUEST, DeadLetterFilter
from sundial.store.dead_letters import DeadLetter
from sundial.transport.envelope import Envelope, PayloadRefView


def _time(ms: int | None) -> str | None:
    return to_rfc3339(ms) if ms is not None else None


class JobSummary(BaseModel):
    id: str
    queue: str
    status: Status
    run_at: str = Field(
        description="When it runs, RFC 3339 UTC: its due time, or for a retried job when the "
        "retry re-queued it"
    )
    priority: Priority
    created_at: str

    @classmethod
    def of(cls, job: Job) -> JobSummary:
        return cls(
            id=job.id,
            queue=job.queue,
            status=job.status,
            run_at=to_rfc3339(job.retried_at_ms or job.due_ms),
            priority=job.priority,
            created_at=to_rfc3339(job.created_at_ms),
        )


class AttemptErrorView(BaseModel):
    attempt: int
    at: str
    error_type: str
    message: str
    traceback_head: str

    @classmethod
    def of(cls, error: AttemptError) -> AttemptErrorView:
        return cls(
            attempt=error.attempt,
            at=to_rfc3339(error.at_ms),
            error_type=error.error_type,
            message=error.message,
            traceback_head=error.traceback_head,
        )


class MoveView(BaseModel):
    at: str = Field(description="When the change was made")
    from_run_at: str = Field(description="Its due time before the change")
    to_run_at: str = Field(description="Its due time after the change")
    changed: list[str] = Field(description="The fields the change set: run_at, priority, ...")

    @classmethod
    def of(cls, move: Move) -> MoveView:
        return cls(
            at=to_rfc3339(move.at_ms),
            from_run_at=to_rfc3339(move.from_run_at_ms),
            to_run_at=to_rfc3339(move.to_run_at_ms),
            changed=list(move.changed),
        )


class JobDetail(JobSummary):
    attempts: int
    max_attempts: int
    payload: JsonValue = Field(
        description="The payload; null for a payload stored in S3, which `payload_ref` names "
        "(GET /jobs/{id} does not return megabytes: a consumer gets it in its envelope)"
    )
    payload_ref: PayloadRefView | None = Field(
        default=None, description="Where a payload stored in S3 is: its key, sha256 and size"
    )
    idempotency_key: str | None = None
    queued_at: str | None = None
    started_at: str | None = Field(default=None, description="Start of the latest attempt")
    finished_at: str | None = None
    next_attempt_at: str | None = Field(default=None, description="When a failed job retries")
    cancelled_at: str | None = None
    paused_at: str | None = Field(default=None, description="When a paused job was paused")
    due_at: str = Field(
        description="The time it is due: as submitted, or as its last change (PATCH) set it"
    )
    retried_at: str | None = Field(default=None, description="When a retry last re-queued it")
    schedule_id: str | None = Field(
        default=None, description="The schedule this job is an occurrence of, if any"
    )
    result: JsonValue = Field(default=None, description="What the consumer returned (≤ 16 KiB)")
    last_error: AttemptErrorView | None = None
    failed_attempts: list[AttemptErrorView] = Field(
        default_factory=list,
        description="Every failed attempt's error, oldest first (empty for a job that never "
        "failed). The job's whole history, every state change, is the job history in S3",
    )
    history: list[AttemptErrorView] = Field(
        default_factory=list,
        description="Deprecated: the same list as failed_attempts, under its first name (kept "
        "for existing clients). Failed attempts only, not the job's whole history",
        json_schema_extra={"deprecated": True},
    )
    dag_id: str | None = Field(default=None, description="For a DAG node: GET /dags/{id}")
    dag_node: str | None = Field(default=None, description="For a DAG node: its name")
    revision: int = Field(
        default=0, description="How many times it was changed (PATCH /jobs/{id}); 0: never"
    )
    moves: list[MoveView] = Field(
        default_factory=list, description="Its changes (PATCH /jobs/{id}), oldest first"
    )

    @classmethod
    def of(cls, job: Job) -> JobDetail:
        return cls(
            **JobSummary.of(job).model_dump(),
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            payload=json.loads(job.payload_json),
            payload_ref=PayloadRefView(**job.payload_ref.as_json()) if job.payload_ref else None,
            idempotency_key=job.idempotency_key,
            queued_at=_time(job.queued_at_ms),
            started_at=_time(job.started_at_ms),
            finished_at=_time(job.finished_at_ms),
            next_attempt_at=_time(job.next_attempt_at_ms),
            cancelled_at=_time(job.cancelled_at_ms),
            paused_at=_time(job.paused_at_ms),
            due_at=to_rfc3339(job.due_ms),
            retried_at=_time(job.retried_at_ms),
            schedule_id=job.schedule_id,
            result=json.loads(job.result_json) if job.result_json is not None else None,
            last_error=AttemptErrorView.of(job.last_error) if job.last_error else None,
            failed_attempts=[AttemptErrorView.of(error) for error in job.history],
            history=[AttemptErrorView.of(error) for error in job.history],
            dag_id=job.dag.dag_id if job.dag else None,
            dag_node=job.dag.node if job.dag else None,
            revision=job.revision,
            moves=[MoveView.of(move) for move in job.moves],
        )


class Cancelled(BaseModel):
    id: str
    status: Status


class FieldError(BaseModel):
    field: str = Field(description="Where the problem is, e.g. run_at or jobs[3].queue")
    reason: str


class ErrorBody(BaseModel):
    message: str
    errors: list[FieldError] = Field(default_factory=list)


class BatchItemResult(BaseModel):
    index: int
    status_code: int = Field(description="201 created, 200 earlier job (idempotency), 409, 503")
    job: JobSummary | None = None
    error: ErrorBody | None = None


class BatchResult(BaseModel):
    results: list[BatchItemResult]


class DeadLetterView(BaseModel):
    queue: str
    job_id: str | None = Field(description="null when the message was not a Sundial envelope")
    dead_at: str
    attempt: int | None
    error_type: str = Field(
        description="The last attempt's error type; DeliveryLimitExceeded when SQS redrove "
        "the message; InvalidEnvelope for a body that is not a Sundial envelope"
    )
    message: str
    envelope: JsonValue = Field(description="The message body as it reached the DLQ")

    @classmethod
    def of(cls, letter: DeadLetter) -> DeadLetterView:
        try:
            envelope: JsonValue = json.loads(letter.body)
        except ValueError:
            envelope = letter.body
        return cls(
            queue=letter.queue,
            job_id=letter.job_id,
            dead_at=to_rfc3339(letter.dead_at_ms),
            attempt=letter.attempt,
            error_type=letter.error_type,
            message=letter.message,
            envelope=envelope,
        )


class DeadLetterPage(BaseModel):
    items: list[DeadLetterView]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null at end")


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    since: str | None = Field(default=None, description="Only letters dead at or after (RFC 3339)")
    until: str | None = Field(default=None, description="Only letters dead before (RFC 3339)")
    error_type: str | None = Field(default=None, min_length=1, max_length=200)
    job_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="Only this job's letter (the admin UI's replay of one letter); give since "
        "and until around its dead_at so only that moment is read",
    )
    limit: int = Field(default=MAX_PER_REQUEST, ge=1, le=MAX_PER_REQUEST, strict=True)

    _integral = integral("limit")

    @field_validator("since", "until")
    @classmethod
    def _is_rfc3339(cls, value: str | None) -> str | None:
        if value is not None:
            parse_rfc3339(value)
        return value

    def which(self) -> DeadLetterFilter:
        return DeadLetterFilter(
            since_ms=parse_rfc3339(self.since) if self.since else None,
            until_ms=parse_rfc3339(self.until) if self.until else None,
            error_type=self.error_type,
            job_id=self.job_id,
        )


class ReplayResult(BaseModel):
    replayed: list[str] = Field(description="Ids of the jobs re-queued")
    skipped: int = Field(description="Letters whose job was no longer dead (replayed before)")
    unreplayable: int = Field(description="Letters that are not Sundial envelopes (kept)")
    more: bool = Field(description="The limit was reached: repeat the request to go on")
    in_flight: int = Field(
        description="Letters kept because another call is retrying their job right now; "
        "replay again after 30 seconds to finish them (if that call died, the replay takes "
        "the job over)"
    )


class PurgeResult(BaseModel):
    purged: int
    more: bool = Field(description="The limit was reached: repeat the request to go on")


class LeasedJobView(BaseModel):
    job: Envelope
    lease: str = Field(description="Pass to heartbeat, ack and nack")
    lease_expires_at: str
    payload_url: str | None = Field(
        default=None,
        description="For a payload stored in S3 (job.payload_ref): a presigned HTTPS GET URL "
        "of it, valid until the lease expires; check its bytes against payload_ref.sha256 "
        "(sundial.worker does both)",
    )

    @classmethod
    def of(cls, leased: LeasedJob) -> LeasedJobView:
        return cls(
            job=leased.envelope,
            lease=leased.lease.token(),
            lease_expires_at=to_rfc3339(leased.lease_expires_at_ms),
            payload_url=leased.payload_url,
        )


class LeaseResult(BaseModel):
    jobs: list[LeasedJobView]
