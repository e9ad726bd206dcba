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

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    PrivateAttr,
    model_validator,
)

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
    # The answer this came in, as the API sent it: the body of a whole answer; for a part of
    # one (a page's item, a DAG's node), the whole answer and where in it this part is.
    _api_body: bytes | None = PrivateAttr(default=None)
    _api_parsed: Any = PrivateAttr(default=None)
    _api_root: ApiModel | None = PrivateAttr(default=None)
    _api_path: tuple[str | int, ...] = PrivateAttr(default=())

    def api_json(self) -> str:
        """This answer's JSON exactly as the API sent it (`sundial ... --json` prints it):
        the body's text for a whole answer; for an item of one (a page's item, a DAG's node)
        its part of the body, in compact JSON; the model's own JSON for one the client built.
        The body is parsed as JSON only when a part is asked for (a lease's 5 MiB payloads
        are not parsed twice for nothing)."""
        if self._api_body is not None:
            return self._api_body.decode()
        root = self._api_root
        if root is None or root._api_body is None:
            return self.model_dump_json()
        if root._api_parsed is None:
            root._api_parsed = json.loads(root._api_body)
        value = root._api_parsed
        try:
            for step in self._api_path:
                value = value[step]
        except (KeyError, IndexError, TypeError):
            return self.model_dump_json()
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


Model = TypeVar("Model", bound=BaseModel)


def from_api(model: type[Model], body: bytes) -> Model:
    """The answer `body` as `model`; it and each ApiModel in it can give back its JSON as the
    API sent it (api_json)."""
    parsed = model.model_validate_json(body)
    if isinstance(parsed, ApiModel):
        parsed._api_body = body
        _link_parts(parsed, parsed, ())
    return parsed


def _link_parts(model: ApiModel, root: ApiModel, path: tuple[str | int, ...]) -> None:
    """Each ApiModel inside `model` learns where in `root`'s answer it is."""
    for name in type(model).model_fields:
        child = getattr(model, name)
        parts: list[tuple[tuple[str | int, ...], Any]] = [((name,), child)]
        if isinstance(child, list):
            parts = [((name, i), item) for i, item in enumerate(child)]
        elif isinstance(child, dict):
            parts = [((name, key), item) for key, item in child.items()]
        for steps, part in parts:
            if isinstance(part, ApiModel):
                part._api_root, part._api_path = root, path + steps
                _link_parts(part, root, path + steps)


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
