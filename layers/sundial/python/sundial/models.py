"""The job and its statuses, as the domain sees them."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from sundial.ids import JobKey
from sundial.retry import RetryPolicy


class Status(StrEnum):
    PENDING = "pending"  # waiting in the table for its due time
    QUEUED = "queued"  # handed to SQS
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # an attempt failed; a retry is due
    DEAD = "dead"
    CANCELLED = "cancelled"


CANCELLABLE = frozenset({Status.PENDING, Status.QUEUED, Status.FAILED})
FINISHED = frozenset({Status.SUCCEEDED, Status.DEAD, Status.CANCELLED})


@dataclass(frozen=True, slots=True)
class AttemptError:
    """What one failed attempt left behind, kept in the job's history."""

    attempt: int
    at_ms: int
    error_type: str
    message: str
    traceback_head: str


class Priority(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


@dataclass(slots=True)
class Job:
    """One job item. `payload_json` is kept as the JSON text the client sent (re-serialised
    compactly), so it is stored and forwarded without float or key-order surprises."""

    key: JobKey
    queue: str
    payload_json: str
    priority: Priority
    max_attempts: int
    created_at_ms: int
    status: Status = Status.PENDING
    attempts: int = 0
    # True when the submit Lambda itself sends the job to SQS (due within the direct window).
    # The sweeper leaves such jobs alone: the submit path owns them until it has claimed them.
    direct: bool = False
    idempotency_key: str | None = None
    queued_at_ms: int | None = None
    cancelled_at_ms: int | None = None
    claim_token: str | None = None
    lease_until_ms: int | None = None
    expires_at_s: int | None = None
    retry: RetryPolicy | None = None  # None: the queue's defaults
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    next_attempt_at_ms: int | None = None
    result_json: str | None = None
    history: list[AttemptError] = field(default_factory=list)
    # A retry timer: an item at the retry's due time that stands for attempt `retry_attempt`
    # of the job at `retry_of`. The sweeper dispatches it like a job, under that job's id.
    retry_of: JobKey | None = None
    retry_attempt: int | None = None

    @property
    def id(self) -> str:
        return self.key.job_id

    @property
    def due_ms(self) -> int:
        return self.key.due_ms

    @property
    def envelope_id(self) -> str:
        """The id consumers see: the job's own, or for a retry timer the job it retries."""
        return (self.retry_of or self.key).job_id

    @property
    def last_error(self) -> AttemptError | None:
        return self.history[-1] if self.history else None
