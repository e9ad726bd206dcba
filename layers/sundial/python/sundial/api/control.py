"""Pause and resume: one job (served by the jobs function) and a whole queue (the queues
function). Each route parses, calls the domain, and shapes the response."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, Field

from sundial.access import Permission
from sundial.api.authorization import permitted_queues
from sundial.api.models import ErrorBody, JobSummary
from sundial.api.routes import _INVALID, _UNKNOWN, JobId, _documented, metrics, time_query
from sundial.clock import to_rfc3339
from sundial.model.job import Job, Priority, Status
from sundial.services.cursors import MAX_LISTING_PAGE
from sundial.services.queues import DEAD_LETTER_COUNT_CAP, QueueOverview
from sundial.store.dead_letters import DeadLetter
from sundial.store.queue_states import QueueState
from sundial.wiring import dependencies

job_control_router = Router()  # type: ignore[no-untyped-call]


@job_control_router.post(
    "/jobs/<job_id>/pause",
    summary="Pause a job",
    description="Holds a pending job in the table: it is not dispatched until resumed. Only a "
    "pending job can be paused; once handed to SQS it is on its way (cancel it instead).",
    tags=["jobs"],
    responses={
        200: _documented(JobSummary, "Paused"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _documented(ErrorBody, "The job is not pending"),
    },
)
def pause_job(job_id: JobId) -> JobSummary:
    job = dependencies().jobs.pause(job_id)
    metrics.add_metric(name="JobsPaused", unit=MetricUnit.Count, value=1)
    return JobSummary.of(job)


@job_control_router.post(
    "/jobs/<job_id>/resume",
    summary="Resume a paused job",
    description="The job is pending again. If it is overdue or due within 15 minutes it is "
    "handed to SQS at once (to become visible at its due time, or now if that has passed).",
    tags=["jobs"],
    responses={
        200: _documented(JobSummary, "Resumed: pending, or queued if it was sent at once"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _documented(ErrorBody, "The job is not paused"),
        503: _documented(ErrorBody, "AWS was unavailable; retry the request"),
    },
)
def resume_job(job_id: JobId) -> JobSummary:
    job = dependencies().jobs.resume(job_id)
    metrics.add_metric(name="JobsResumed", unit=MetricUnit.Count, value=1)
    return JobSummary.of(job)


queues_router = Router()  # type: ignore[no-untyped-call]
QueueName = Annotated[str, Path(description="A queue declared in cdk.json", max_length=40)]
_UNKNOWN_QUEUE = _documented(ErrorBody, "Unknown queue")


class QueueDetail(BaseModel):
    queue: str
    paused: bool
    paused_at: str | None = Field(description="Since when, if paused")
    catching_up: bool = Field(
        description="A resume's catch-up is still releasing jobs held during the pause (the "
        "sweepers finish one that a resume could not)"
    )
    dispatched: int | None = Field(
        default=None, description="On resume: jobs the resume call handed to SQS itself"
    )

    @classmethod
    def of(cls, state: QueueState, dispatched: int | None = None) -> QueueDetail:
        return cls(
            queue=state.name,
            paused=state.paused,
            paused_at=to_rfc3339(state.paused_at_ms) if state.paused_at_ms else None,
            catching_up=state.catching_up,
            dispatched=dispatched,
        )


class MessageCounts(BaseModel):
    visible: int = Field(description="Ready to be received")
    in_flight: int = Field(description="Received by a consumer, not yet deleted")
    delayed: int = Field(description="Sent ahead with DelaySeconds, not visible yet")


class QueueSummary(BaseModel):
    queue: str
    paused: bool
    paused_at: str | None
    catching_up: bool
    messages: MessageCounts = Field(
        description="In the queue's SQS queue and priority queue (SQS's approximate counts)"
    )
    dead_letters: int = Field(
        description=f"Dead letters to browse (GET /queues/{{queue}}/dead), counted up to "
        f"{DEAD_LETTER_COUNT_CAP}"
    )
    dead_letters_capped: bool = Field(description="There are more dead letters than counted")
    dead_letter_queue_messages: int | None = Field(
        description="In the DLQ, not yet indexed (the indexer drains it within seconds)"
    )

    @classmethod
    def of(cls, overview: QueueOverview) -> QueueSummary:
        detail = QueueDetail.of(overview.state)
        depth = overview.messages
        return cls(
            queue=detail.queue,
            paused=detail.paused,
            paused_at=detail.paused_at,
            catching_up=detail.catching_up,
            messages=MessageCounts(
                visible=depth.visible, in_flight=depth.in_flight, delayed=depth.delayed
            ),
            dead_letters=overview.dead_letters,
            dead_letters_capped=overview.dead_letters_capped,
            dead_letter_queue_messages=overview.dead_letter_queue_messages,
        )


class ListedJob(BaseModel):
    id: str = Field(
        description="The job id (for a dead letter whose message was not a job's envelope, "
        "its SQS message id)"
    )
    queue: str
    status: Status
    run_at: str | None = Field(description="Its due time; null for a dead letter")
    priority: Priority | None = Field(description="Null for a dead letter")
    attempts: int | None = Field(description="Attempts made (for a dead letter, its last)")
    created_at: str | None = Field(description="Null for a dead letter")
    dead_at: str | None = Field(default=None, description="When it reached the dead-letter queue")
    error_type: str | None = Field(default=None, description="A dead letter's last error")

    @classmethod
    def of(cls, job: Job) -> ListedJob:
        return cls(
            id=job.id,
            queue=job.queue,
            status=job.status,
            run_at=to_rfc3339(job.due_ms),
            priority=job.priority,
            attempts=job.attempts,
            created_at=to_rfc3339(job.created_at_ms),
        )

    @classmethod
    def of_letter(cls, letter: DeadLetter) -> ListedJob:
        return cls(
            id=letter.job_id or letter.ref,
            queue=letter.queue,
            status=Status.DEAD,
            run_at=None,
            priority=None,
            attempts=letter.attempt,
            created_at=None,
            dead_at=to_rfc3339(letter.dead_at_ms),
            error_type=letter.error_type,
        )


class ListedJobsPage(BaseModel):
    items: list[ListedJob] = Field(description="In due order (dead letters: in order of death)")
    next_cursor: str | None = Field(
        description="Pass as ?cursor= (with the same status, from and to) for the next page; "
        "null at the window's end. A page may be short, even empty, before the end: one call "
        "reads a bounded number of items"
    )
    window_from: str = Field(description="The window's start (inclusive), defaults filled in")
    window_to: str = Field(description="The window's end (exclusive)")


class QueueList(BaseModel):
    queues: list[QueueSummary]


@queues_router.get(
    "/queues",
    summary="List queues",
    description="Every queue the caller may read, with its state, its SQS depth and its dead "
    "letters. Pending (not yet dispatched) jobs are not counted: a count kept per queue would "
    "cost a write per job.",
    tags=["queues"],
    responses={200: _documented(QueueList, "The queues the caller may read, by name")},
)
def list_queues() -> QueueList:
    deps = dependencies()
    overviews = deps.queue_control.overview(
        permitted_queues(queues_router.current_event, Permission.READ),
        depths=deps.queue_depths,
        dead_letters=deps.dead_letter_store,
    )
    return QueueList(queues=[QueueSummary.of(overview) for overview in overviews])


@queues_router.get(
    "/queues/<queue>",
    summary="Get a queue's state",
    tags=["queues"],
    responses={200: _documented(QueueDetail, "The queue"), 404: _UNKNOWN_QUEUE, 400: _INVALID},
)
def get_queue(queue: QueueName) -> QueueDetail:
    return QueueDetail.of(dependencies().queue_control.get(queue))


@queues_router.get(
    "/queues/<queue>/jobs",
    summary="List a queue's jobs of one status",
    description="Jobs due in a window (default: from 24 hours ago to 24 hours ahead; at most 7 "
    "days), in due order, a page at a time. No index is kept (a job's writes cost nothing "
    "more): every status but `dead` is read from the shards' due-time ranges, so a call pays "
    "for every job in the window, of any queue or status, and reads at most about 2,000 "
    "items beyond one read per shard before it answers (a short page, with a cursor). "
    "`dead` reads the dead-letter index instead, and its window is when the jobs died.",
    tags=["queues"],
    responses={
        200: _documented(ListedJobsPage, "A page"),
        400: _INVALID,
        404: _UNKNOWN_QUEUE,
    },
)
def list_queue_jobs(  # noqa: PLR0917 - Powertools passes query parameters by name
    queue: QueueName,
    status: Annotated[Status, Query(description="The status to list")],
    from_: Annotated[
        str | None, Query(alias="from", max_length=40, description="Window start (RFC 3339)")
    ] = None,
    to: Annotated[str | None, Query(max_length=40, description="Window end (RFC 3339)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTING_PAGE, description="Page size")] = 50,
    cursor: Annotated[str | None, Query(max_length=2_000, description="From next_cursor")] = None,
) -> ListedJobsPage:
    page = dependencies().job_listing.page(
        queue,
        status,
        from_ms=time_query("from", from_),
        to_ms=time_query("to", to),
        limit=limit,
        cursor=cursor,
    )
    return ListedJobsPage(
        items=[ListedJob.of(job) for job in page.jobs]
        + [ListedJob.of_letter(letter) for letter in page.dead],
        next_cursor=page.next_cursor,
        window_from=to_rfc3339(page.window.from_ms),
        window_to=to_rfc3339(page.window.to_ms),
    )


@queues_router.post(
    "/queues/<queue>/pause",
    summary="Pause a queue",
    description="Its jobs stay pending and nothing hands them to SQS (sweeps, direct submits, "
    "resumes, schedules) until it is resumed; other queues are unaffected. Jobs already in "
    "SQS still run. Pausing again is harmless.",
    tags=["queues"],
    responses={200: _documented(QueueDetail, "Paused"), 404: _UNKNOWN_QUEUE, 400: _INVALID},
)
def pause_queue(queue: QueueName) -> QueueDetail:
    state = dependencies().queue_control.pause(queue)
    metrics.add_metric(name="QueuesPaused", unit=MetricUnit.Count, value=1)
    return QueueDetail.of(state)


@queues_router.post(
    "/queues/<queue>/resume",
    summary="Resume a queue",
    description="Jobs that came due while it was paused are handed to SQS at once, the rest "
    "at their time. Resuming a running queue finishes an unfinished catch-up, if any.",
    tags=["queues"],
    responses={200: _documented(QueueDetail, "Running"), 404: _UNKNOWN_QUEUE, 400: _INVALID},
)
def resume_queue(queue: QueueName) -> QueueDetail:
    view = dependencies().queue_control.resume(queue)
    metrics.add_metric(name="QueuesResumed", unit=MetricUnit.Count, value=1)
    return QueueDetail.of(view.state, dispatched=view.dispatched)
