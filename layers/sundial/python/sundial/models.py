"""The job and its statuses, as the domain sees them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sundial.ids import JobKey


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

    @property
    def id(self) -> str:
        return self.key.job_id

    @property
    def due_ms(self) -> int:
        return self.key.due_ms
