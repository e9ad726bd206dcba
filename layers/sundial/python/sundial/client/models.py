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

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainSerializer, PrivateAttr

Status = Literal[
    "pending", "queued", "running", "succeeded", "failed", "dead", "cancelled", "blocked", "paused"
]
Priority = Literal["critical", "high", "normal", "low"]
PayloadStorage = Literal["auto", "s3"]
DagStatus = Literal["running", "paused", "succeeded", "failed", "cancelled"]
ScheduleState = Literal["active", "paused", "resuming", "deleted"]
RunOutcome = Literal["fired", "skipped", "cancelled", "replaced"]
RunsWhen = Literal["past", "upcoming"]
Misfire = Literal["fire_once", "skip"]
OnFailure = Literal["cancel_descendants", "continue"]
ParentResults = Literal["reference", "inline"]


def format_rfc3339(moment: datetime) -> str:
    """A time as the API writes every time: RFC 3339 in UTC with milliseconds and `Z`
    (2026-11-21T09:00:00.000Z), the form of sundial.clock.to_rfc3339 (a test holds them
    together; the client imports no server code). The CLI prints every time with this."""
    if moment.tzinfo is None:
        raise ValueError("give a timezone-aware datetime (e.g. datetime.now(UTC))")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# A time, written back (model_dump_json, the CLI's tables) as the API writes it.
Timestamp = Annotated[
    datetime, PlainSerializer(format_rfc3339, return_type=str, when_used="json-unless-none")
]


class ApiModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    # The JSON the API answered with: the whole body's text, or this item's part of it.
    _api_text: str | None = PrivateAttr(default=None)
    _api_value: Any = PrivateAttr(default=None)

    def api_json(self) -> str:
        """This answer's JSON exactly as the API sent it (`sundial ... --json` prints it):
        the body's text for a whole answer; for an item of one (a page's item, a DAG's node)
        its part of the body, in compact JSON; the model's own JSON for one the client built."""
        if self._api_text is not None:
            return self._api_text
        if self._api_value is not None:
            return json.dumps(self._api_value, separators=(",", ":"), ensure_ascii=False)
        return self.model_dump_json()


Model = TypeVar("Model", bound=BaseModel)


def from_api(model: type[Model], body: bytes) -> Model:
    """The answer `body` as `model`, each ApiModel in it keeping its JSON (api_json)."""
    parsed = model.model_validate_json(body)
    if isinstance(parsed, ApiModel):
        parsed._api_text = body.decode()
        _keep_json(parsed, json.loads(body))
    return parsed


def _keep_json(model: ApiModel, value: Any) -> None:
    if model._api_text is None:
        model._api_value = value
    if not isinstance(value, dict):
        return
    for name in type(model).model_fields:
        child, raw = getattr(model, name), value.get(name)
        if isinstance(child, ApiModel):
            _keep_json(child, raw)
        elif isinstance(child, list) and isinstance(raw, list):
            for item, part in zip(child, raw, strict=False):
                if isinstance(item, ApiModel):
                    _keep_json(item, part)
        elif isinstance(child, dict) and isinstance(raw, dict):
            for key, item in child.items():
                if isinstance(item, ApiModel):
                    _keep_json(item, raw.get(key))


class JobSummary(ApiModel):
    id: str
    queue: str
    status: Status
    run_at: Timestamp
    priority: Priority
    created_at: Timestamp


class AttemptErrorView(ApiModel):
    attempt: int
    at: Timestamp
    error_type: str
    message: str
    traceback_head: str


class MoveView(ApiModel):
    at: Timestamp
    from_run_at: Timestamp
    to_run_at: Timestamp
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
    queued_at: Timestamp | None = None
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    next_attempt_at: Timestamp | None = None
    cancelled_at: Timestamp | None = None
    paused_at: Timestamp | None = None
    due_at: Timestamp
    retried_at: Timestamp | None = None
    schedule_id: str | None = None
    result: JsonValue = None
    last_error: AttemptErrorView | None = None
    history: list[AttemptErrorView] = Field(default_factory=list)
    dag_id: str | None = None
    dag_node: str | None = None
    revision: int = 0
    moves: list[MoveView] = Field(default_factory=list)


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
    dead_at: Timestamp
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
    run_at: Timestamp
    attempt: int
    max_attempts: int
    priority: Priority
    created_at: Timestamp
    dag: DagContext | None = None
    correlation_id: str | None = None
    revision: int = 0
    payload_ref: PayloadRefView | None = None


class LeasedJobView(ApiModel):
    job: Envelope
    lease: str
    lease_expires_at: Timestamp
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
    released_at: Timestamp | None = None
    queued_at: Timestamp | None = None
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    cancelled_at: Timestamp | None = None
    paused: bool = False
    last_error: AttemptErrorView | None = None


class DagDetail(ApiModel):
    id: str
    name: str
    status: DagStatus
    on_failure: OnFailure
    parent_results: ParentResults
    run_at: Timestamp
    created_at: Timestamp
    finished_at: Timestamp | None = None
    counts: dict[str, int]
    nodes: dict[str, DagNodeView]


class DagSummary(ApiModel):
    id: str
    name: str
    status: DagStatus
    run_at: Timestamp
    created_at: Timestamp
    finished_at: Timestamp | None = None
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
    scheduled_for: Timestamp
    job_id: str
    outcome: RunOutcome
    decided_at: Timestamp


class RunDetail(RunSummary):
    status: Status | None
    attempts: int | None = None
    finished_at: Timestamp | None = None
    upcoming: bool = False  # the occurrence's time is still ahead (sent early, or parked)


class RunsPage(ApiModel):
    runs: list[RunDetail]
    next_before: Timestamp | None


class ScheduleSummary(ApiModel):
    id: str
    name: str | None
    cron: str | None
    rate: str | None
    timezone: str
    queue: str
    priority: Priority
    state: ScheduleState
    created_at: Timestamp
    paused_at: Timestamp | None
    revision: int


class ScheduleDetail(ScheduleSummary):
    payload: JsonValue
    max_attempts: int | None
    retry: RetryPolicy | None
    start_at: Timestamp | None
    end_at: Timestamp | None
    misfire: Misfire
    next_run_at: Timestamp | None
    last_run: RunSummary | None


class SchedulePage(ApiModel):
    items: list[ScheduleSummary]
    next_cursor: str | None


class UpdatedScheduleDetail(ScheduleDetail):
    applies_from: Timestamp
    replaced_job_id: str | None


class Deleted(ApiModel):
    id: str
    state: ScheduleState


class QueueDetail(ApiModel):
    queue: str
    paused: bool
    paused_at: Timestamp | None
    catching_up: bool
    dispatched: int | None = None


class MessageCounts(ApiModel):
    visible: int
    in_flight: int
    delayed: int


class QueueSummary(ApiModel):
    queue: str
    paused: bool
    paused_at: Timestamp | None
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
    run_at: Timestamp | None
    priority: Priority | None
    attempts: int | None
    created_at: Timestamp | None
    dead_at: Timestamp | None = None
    error_type: str | None = None


class ListedJobsPage(ApiModel):
    items: list[ListedJob]
    next_cursor: str | None
    window_from: Timestamp
    window_to: Timestamp
