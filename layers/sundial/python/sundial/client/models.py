"""What the Sundial API answers, as the client reads it.

These mirror the response schemas of `openapi.json` field for field. They are defined here,
not imported from `sundial.api.models`, because those are built from the server's own types
(the job store, the lease service, the dead-letter filter) and importing them would load the
server into every client. `tests/unit/client/test_models.py` compares each model's fields, the
required ones and every enum with `openapi.json`, so the two cannot drift apart.

Unknown fields are ignored: the API adds fields, never renames them, so an older client keeps
working against a newer API. Times are parsed into timezone-aware datetimes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

Status = Literal[
    "pending", "queued", "running", "succeeded", "failed", "dead", "cancelled", "blocked", "paused"
]
Priority = Literal["critical", "high", "normal", "low"]
PayloadStorage = Literal["auto", "s3"]
DagStatus = Literal["running", "paused", "succeeded", "failed", "cancelled"]
ScheduleState = Literal["active", "paused", "resuming", "deleted"]
RunOutcome = Literal["fired", "skipped", "cancelled", "replaced"]
Misfire = Literal["fire_once", "skip"]
OnFailure = Literal["cancel_descendants", "continue"]
ParentResults = Literal["reference", "inline"]


class ApiModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class JobSummary(ApiModel):
    id: str
    queue: str
    status: Status
    run_at: datetime
    priority: Priority
    created_at: datetime


class AttemptErrorView(ApiModel):
    attempt: int
    at: datetime
    error_type: str
    message: str
    traceback_head: str


class MoveView(ApiModel):
    at: datetime
    from_run_at: datetime
    to_run_at: datetime
    changed: list[str]


class PayloadRefView(BaseModel):
    """Where a payload stored in S3 is (GET /jobs/{id} returns this, not the payload)."""

    key: str
    sha256: str
    bytes: int


class JobDetail(JobSummary):
    attempts: int
    max_attempts: int
    payload: JsonValue
    payload_ref: PayloadRefView | None = None
    idempotency_key: str | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    next_attempt_at: datetime | None = None
    cancelled_at: datetime | None = None
    paused_at: datetime | None = None
    due_at: datetime
    retried_at: datetime | None = None
    schedule_id: str | None = None
    result: JsonValue = None
    last_error: AttemptErrorView | None = None
    failed_attempts: list[AttemptErrorView] = Field(default_factory=list)
    history: list[AttemptErrorView] = Field(default_factory=list)  # deprecated: failed_attempts
    dag_id: str | None = None
    dag_node: str | None = None
    revision: int = 0
    moves: list[MoveView] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _failed_attempts_from_an_older_api(cls, data: Any) -> Any:
        """An API from before `failed_attempts` sent the same list as `history` only."""
        if isinstance(data, dict) and "failed_attempts" not in data and "history" in data:
            return {**data, "failed_attempts": data["history"]}
        return data


class Cancelled(ApiModel):
    id: str
    status: Status


class FieldError(ApiModel):
    field: str
    reason: str


class ErrorBody(ApiModel):
    message: str
    errors: list[FieldError] = Field(default_factory=list)


class BatchItemResult(ApiModel):
    index: int
    status_code: int
    job: JobSummary | None = None
    error: ErrorBody | None = None


class BatchResult(ApiModel):
    results: list[BatchItemResult]


class DeadLetterView(ApiModel):
    queue: str
    job_id: str | None
    dead_at: datetime
    attempt: int | None
    error_type: str
    message: str
    envelope: JsonValue


class DeadLetterPage(ApiModel):
    items: list[DeadLetterView]
    next_cursor: str | None


class ReplayResult(ApiModel):
    replayed: list[str]
    skipped: int
    unreplayable: int
    more: bool
    in_flight: int


class PurgeResult(ApiModel):
    purged: int
    more: bool


class DagParent(ApiModel):
    id: str
    succeeded: bool = True
    inlined: bool = False
    result: JsonValue = None


class DagContext(ApiModel):
    id: str
    name: str
    node: str
    parents: dict[str, DagParent] = Field(default_factory=dict)


class Envelope(ApiModel):
    """The job as a worker leases it: the same envelope a consumer Lambda reads from SQS."""

    v: int = 1
    id: str
    queue: str
    payload: JsonValue
    run_at: datetime
    attempt: int
    max_attempts: int
    priority: Priority
    created_at: datetime
    dag: DagContext | None = None
    correlation_id: str | None = None
    revision: int = 0
    payload_ref: PayloadRefView | None = None


class LeasedJobView(ApiModel):
    job: Envelope
    lease: str
    lease_expires_at: datetime
    payload_url: str | None = None


class LeaseResult(ApiModel):
    jobs: list[LeasedJobView]


class DagNodeView(ApiModel):
    id: str
    queue: str
    status: Status
    depends_on: list[str]
    attempts: int
    max_attempts: int
    released_at: datetime | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    cancelled_at: datetime | None = None
    paused: bool = False
    last_error: AttemptErrorView | None = None


class DagDetail(ApiModel):
    id: str
    name: str
    status: DagStatus
    on_failure: OnFailure
    parent_results: ParentResults
    run_at: datetime
    created_at: datetime
    finished_at: datetime | None = None
    counts: dict[str, int]
    nodes: dict[str, DagNodeView]


class DagSummary(ApiModel):
    id: str
    name: str
    status: DagStatus
    run_at: datetime
    created_at: datetime
    finished_at: datetime | None = None
    queues: list[str]
    counts: dict[str, int]


class DagPage(ApiModel):
    items: list[DagSummary]
    next_cursor: str | None


class RetryPolicy(ApiModel):
    """Backoff between a job's attempts (None: the queue's default from cdk.json)."""

    initial_delay_seconds: int | None = None
    factor: float | None = None
    max_delay_seconds: int | None = None


class RunSummary(ApiModel):
    scheduled_for: datetime
    job_id: str
    outcome: RunOutcome
    decided_at: datetime


class RunDetail(RunSummary):
    status: Status | None
    attempts: int | None = None
    finished_at: datetime | None = None


class RunsPage(ApiModel):
    runs: list[RunDetail]
    next_before: datetime | None


class ScheduleSummary(ApiModel):
    id: str
    name: str | None
    cron: str | None
    rate: str | None
    timezone: str
    queue: str
    priority: Priority
    state: ScheduleState
    created_at: datetime
    paused_at: datetime | None
    revision: int


class ScheduleDetail(ScheduleSummary):
    payload: JsonValue
    max_attempts: int | None
    retry: RetryPolicy | None
    start_at: datetime | None
    end_at: datetime | None
    misfire: Misfire
    next_run_at: datetime | None
    last_run: RunSummary | None


class SchedulePage(ApiModel):
    items: list[ScheduleSummary]
    next_cursor: str | None


class UpdatedScheduleDetail(ScheduleDetail):
    applies_from: datetime
    replaced_job_id: str | None


class Deleted(ApiModel):
    id: str
    state: ScheduleState


class QueueDetail(ApiModel):
    queue: str
    paused: bool
    paused_at: datetime | None
    catching_up: bool
    dispatched: int | None = None


class MessageCounts(ApiModel):
    visible: int
    in_flight: int
    delayed: int


class QueueSummary(ApiModel):
    queue: str
    paused: bool
    paused_at: datetime | None
    catching_up: bool
    messages: MessageCounts
    dead_letters: int
    dead_letters_capped: bool
    dead_letter_queue_messages: int | None


class QueueList(ApiModel):
    queues: list[QueueSummary]


class ListedJob(ApiModel):
    """A job of GET /queues/{queue}/jobs; a dead letter's has dead_at and error_type instead of
    run_at, priority and created_at."""

    id: str
    queue: str
    status: Status
    run_at: datetime | None
    priority: Priority | None
    attempts: int | None
    created_at: datetime | None
    dead_at: datetime | None = None
    error_type: str | None = None


class ListedJobsPage(ApiModel):
    items: list[ListedJob]
    next_cursor: str | None
    window_from: datetime
    window_to: datetime
