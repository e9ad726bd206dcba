"""/schedules: recurring jobs (served by the schedules function). Each route parses, calls the
domain (sundial.services.schedules), and shapes the response."""

from __future__ import annotations

import json
from dataclasses import replace
from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, Field, JsonValue

from sundial.api.authorization import authorized_item
from sundial.api.models import ErrorBody
from sundial.api.routes import _INVALID, RATE_LIMITED, _documented, metrics
from sundial.clock import to_rfc3339
from sundial.errors import InvalidInput
from sundial.model.job import Priority, Status
from sundial.model.schedule import (
    CreateSchedule,
    Misfire,
    RunOutcome,
    RunRecord,
    Schedule,
    ScheduleState,
    UpdateSchedule,
)
from sundial.model.submission import parse_rfc3339
from sundial.retry import RetryPolicy
from sundial.services.cursors import MAX_LISTING_PAGE
from sundial.services.schedules import RunsWhen, RunView, ScheduleView
from sundial.wiring import dependencies

ScheduleId = Annotated[
    str, Path(description="The schedule id returned by POST /schedules", max_length=100)
]

schedules_router = Router()  # type: ignore[no-untyped-call]
# A schedule call counts the occurrences it writes at once (sundial.services.admission).
_SCHEDULE_TOO_LARGE = _documented(
    ErrorBody,
    "Larger than its queue accepts: a payload over the queue's max_payload_bytes, or more "
    "occurrences written at once (those due within 15 minutes) than the queue's "
    "max_submissions_per_second admits in 100 seconds; names the field, the queue and the "
    "limit. Nothing was written",
)
_SCHEDULE_RATE_LIMITED: OpenAPIResponse = {
    **RATE_LIMITED,
    "description": "The queue's max_submissions_per_second has no room for the occurrences "
    "this call writes at once (every one due within 15 minutes, and the next; more than a "
    "second admits are counted over the seconds after): names the queue, the limit and the "
    "count; nothing was written. Repeat the request after Retry-After",
}
_UNKNOWN = _documented(
    ErrorBody,
    "Unknown schedule; also the answer, word for word, to a caller with no permission at all "
    "on the schedule's queue (a schedule's id can be derived from its queue and key)",
)


def _time(ms: int | None) -> str | None:
    return to_rfc3339(ms) if ms is not None else None


class RunSummary(BaseModel):
    scheduled_for: str = Field(description="The occurrence's time (its job's run_at)")
    job_id: str
    outcome: RunOutcome = Field(
        description="fired: handed to SQS as a job; skipped: missed and not run (misfire "
        "policy); cancelled: the occurrence's job was cancelled before its time; replaced: an "
        "update (PATCH) replaced it before it was decided, and it never runs"
    )
    decided_at: str = Field(description="When the sweeper (or a resume) dispatched or skipped it")

    @classmethod
    def of(cls, run: RunRecord) -> RunSummary:
        return cls(
            scheduled_for=to_rfc3339(run.at_ms),
            job_id=run.job_id,
            outcome=run.outcome,
            decided_at=to_rfc3339(run.decided_at_ms),
        )


class RunDetail(RunSummary):
    status: Status | None = Field(description="The job's status now; null once it has expired")
    attempts: int | None = None
    finished_at: str | None = None
    upcoming: bool = Field(
        default=False,
        description="true while the occurrence's time is still ahead: decided (an occurrence "
        "due within 15 minutes is handed to SQS early, with a delay, and says `fired`) but not "
        "yet run; false once its time has come",
    )

    @classmethod
    def of_view(cls, view: RunView) -> RunDetail:
        job = view.job
        return cls(
            **RunSummary.of(view.run).model_dump(),
            upcoming=view.upcoming,
            status=job.status if job else None,
            attempts=job.attempts if job else None,
            finished_at=_time(job.finished_at_ms) if job else None,
        )


class RunsPage(BaseModel):
    runs: list[RunDetail] = Field(description="Newest first")
    next_before: str | None = Field(
        description="Pass as `before` for the next (older) page; null on the last page"
    )


class ScheduleSummary(BaseModel):
    id: str
    name: str | None
    cron: str | None
    rate: str | None
    timezone: str
    queue: str
    priority: Priority
    state: ScheduleState
    created_at: str
    paused_at: str | None
    revision: int = Field(description="How many updates (PATCH) the schedule has had")

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleSummary:
        return cls(
            id=schedule.id,
            name=schedule.name,
            cron=schedule.cron,
            rate=schedule.rate,
            timezone=schedule.timezone,
            queue=schedule.queue,
            priority=schedule.priority,
            state=schedule.state,
            created_at=to_rfc3339(schedule.created_at_ms),
            paused_at=_time(schedule.paused_at_ms),
            revision=schedule.revision,
        )


class ScheduleDetail(ScheduleSummary):
    payload: JsonValue
    max_attempts: int | None
    retry: RetryPolicy | None
    start_at: str | None
    end_at: str | None
    misfire: Misfire
    next_run_at: str | None = Field(
        description="The next occurrence from now; null while paused or once ended"
    )
    last_run: RunSummary | None = Field(
        description="The latest occurrence whose time has come (dispatched or skipped); never "
        "one still ahead (those due within 15 minutes are dispatched early, with SQS delays: "
        "GET /schedules/{id}/runs?when=upcoming lists them)"
    )

    @classmethod
    def of_view(cls, view: ScheduleView) -> ScheduleDetail:
        schedule = view.schedule
        return cls(
            **ScheduleSummary.of(schedule).model_dump(),
            payload=json.loads(schedule.payload_json),
            max_attempts=schedule.max_attempts,
            retry=schedule.retry,
            start_at=_time(schedule.start_at_ms),
            end_at=_time(schedule.end_at_ms),
            misfire=schedule.misfire,
            next_run_at=_time(view.next_run_at_ms),
            last_run=RunSummary.of(view.last_run) if view.last_run else None,
        )


class SchedulePage(BaseModel):
    items: list[ScheduleSummary] = Field(
        description="Oldest first; GET /schedules/{id} has a schedule's payload and runs"
    )
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null at end")


class UpdatedScheduleDetail(ScheduleDetail):
    applies_from: str = Field(
        description="The first occurrence with the new settings. Occurrences before it were "
        "already decided (sent, or being sent) and keep the settings they had"
    )
    replaced_job_id: str | None = Field(
        description="The occurrence the update replaced (it never runs; its run says "
        "`replaced`); null when the request changed nothing"
    )


class Deleted(BaseModel):
    id: str
    state: ScheduleState


def _json(status: int, model: BaseModel) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=model.model_dump_json(),
    )


@schedules_router.post(
    "/schedules",
    summary="Create a recurring schedule",
    description="Every occurrence is an ordinary job on `queue`. Give exactly one of `cron` "
    "or `rate`. An occurrence due within 15 minutes is sent by this call. On a queue with a "
    "max_submissions_per_second, the occurrences this call writes at once (every one due within "
    "15 minutes, and the next) count against it: start the schedule 15 minutes ahead "
    "(`start_at`) and it writes one.",
    tags=["schedules"],
    responses={
        201: _documented(ScheduleDetail, "Created"),
        200: _documented(ScheduleDetail, "The earlier schedule with this idempotency_key"),
        400: _INVALID,
        409: _documented(ErrorBody, "idempotency_key reused on this queue for another schedule"),
        413: _SCHEDULE_TOO_LARGE,
        429: _SCHEDULE_RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; retry (with an idempotency_key)"),
    },
)
def create_schedule(request: CreateSchedule) -> Response[str]:
    deps = dependencies()
    created = deps.schedules.create(request)
    metrics.add_metric(name="SchedulesCreated", unit=MetricUnit.Count, value=int(created.created))
    view = deps.schedules.get(created.schedule.id)
    status = HTTPStatus.CREATED if created.created else HTTPStatus.OK
    return _json(status, ScheduleDetail.of_view(view))


@schedules_router.get(
    "/schedules",
    summary="List a queue's schedules",
    description="Every schedule of the queue not deleted, oldest first, one page at a time. "
    "Each page costs one query of the queue's schedule index and one batch read of the "
    "schedules listed. Schedules created before the index existed appear once the "
    "deployment's backfill has run (docs/deploy.md, Upgrading).",
    tags=["schedules"],
    responses={
        200: _documented(SchedulePage, "A page"),
        400: _INVALID,
        404: _documented(ErrorBody, "Unknown queue"),
    },
)
def list_schedules(
    queue: Annotated[str, Query(min_length=1, max_length=40, description="A queue's name")],
    limit: Annotated[int, Query(ge=1, le=MAX_LISTING_PAGE, description="Page size")] = 50,
    cursor: Annotated[str | None, Query(max_length=2_000, description="From next_cursor")] = None,
) -> SchedulePage:
    schedules, next_cursor = dependencies().schedules.of_queue(queue, limit=limit, cursor=cursor)
    return SchedulePage(items=[ScheduleSummary.of(s) for s in schedules], next_cursor=next_cursor)


@schedules_router.get(
    "/schedules/<schedule_id>",
    summary="Get a schedule",
    tags=["schedules"],
    responses={200: _documented(ScheduleDetail, "The schedule"), 400: _INVALID, 404: _UNKNOWN},
)
def get_schedule(schedule_id: ScheduleId) -> ScheduleDetail:
    read = authorized_item(Schedule)
    return ScheduleDetail.of_view(dependencies().schedules.get(schedule_id, read=read))


@schedules_router.get(
    "/schedules/<schedule_id>/runs",
    summary="List a schedule's runs",
    description="Newest first, each with its job's current status and whether its time is "
    "still ahead (`upcoming`). Page with `before`; `when=past` lists only the runs whose time "
    "has come, `when=upcoming` only those decided ahead of their time.",
    tags=["schedules"],
    responses={200: _documented(RunsPage, "A page of runs"), 400: _INVALID, 404: _UNKNOWN},
)
def list_runs(
    schedule_id: ScheduleId,
    limit: Annotated[int, Query(ge=1, le=100, description="Runs per page")] = 20,
    before: Annotated[
        str | None,
        Query(max_length=40, description="Only runs scheduled before this time (RFC 3339)"),
    ] = None,
    when: Annotated[
        RunsWhen | None,
        Query(description="past: only runs whose time has come; upcoming: only those ahead"),
    ] = None,
) -> RunsPage:
    before_ms = None
    if before is not None:
        try:
            before_ms = parse_rfc3339(before)
        except ValueError as error:
            raise InvalidInput("before", str(error)) from None
    deps = dependencies()
    runs, more = deps.schedules.runs(schedule_id, limit=limit, before_ms=before_ms, when=when)
    now = deps.clock.now_ms()
    # Each run's job as GET /jobs/{id} shows it: `queued` is derived (store.sweeps.as_shown).
    shown = [replace(r, job=deps.sweeps.as_shown(r.job, now_ms=now)) if r.job else r for r in runs]
    return RunsPage(runs=[RunDetail.of_view(r) for r in shown], next_before=_time(more))


@schedules_router.post(
    "/schedules/<schedule_id>/pause",
    summary="Pause a schedule",
    description="No occurrence runs until it is resumed, including those already handed to "
    "SQS for a time still ahead (their consumer skips them). Pausing again is harmless.",
    tags=["schedules"],
    responses={200: _documented(ScheduleDetail, "Paused"), 400: _INVALID, 404: _UNKNOWN},
)
def pause_schedule(schedule_id: ScheduleId) -> ScheduleDetail:
    deps = dependencies()
    deps.schedules.pause(schedule_id)
    metrics.add_metric(name="SchedulesPaused", unit=MetricUnit.Count, value=1)
    return ScheduleDetail.of_view(deps.schedules.get(schedule_id))


@schedules_router.post(
    "/schedules/<schedule_id>/resume",
    summary="Resume a paused schedule",
    description="Occurrences still ahead run at their time; missed ones follow the misfire "
    "policy (fire_once: one runs now; skip: none); then the normal cadence. On a queue with a "
    "max_submissions_per_second, the occurrences it sends (again) count against it.",
    tags=["schedules"],
    responses={
        200: _documented(ScheduleDetail, "Active again"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _documented(ErrorBody, "The schedule is not paused"),
        413: _SCHEDULE_TOO_LARGE,
        429: _SCHEDULE_RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; resume again to finish"),
    },
)
def resume_schedule(schedule_id: ScheduleId) -> ScheduleDetail:
    deps = dependencies()
    deps.schedules.resume(schedule_id)
    metrics.add_metric(name="SchedulesResumed", unit=MetricUnit.Count, value=1)
    return ScheduleDetail.of_view(deps.schedules.get(schedule_id))


@schedules_router.patch(
    "/schedules/<schedule_id>",
    summary="Update a schedule",
    description="Change its recurrence (cron, rate, timezone), payload, priority, "
    "max_attempts, retry or name; fields left out keep their value; the queue never changes. "
    "The new settings apply from the next undecided occurrence: the one waiting in the table "
    "that no sweep or call has started to send. It is replaced (its run says `replaced`) by "
    "the new recurrence's first occurrence after the last decided one (and not before now, "
    "unless the replaced one was already overdue): `applies_from`. Occurrences already decided, "
    "which Sundial sends up to 15 minutes ahead, run as they were. One due within 15 minutes "
    "is sent by this call. Repeating an update that was applied changes nothing (and finishes "
    "it if it got no answer). Paused schedules may be updated; they stay paused.",
    tags=["schedules"],
    responses={
        200: _documented(UpdatedScheduleDetail, "Updated"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _documented(
            ErrorBody,
            "The schedule is deleted or has ended, or kept changing under this update; "
            "nothing was written",
        ),
        413: _SCHEDULE_TOO_LARGE,
        429: _SCHEDULE_RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; update again to finish"),
    },
)
def update_schedule(schedule_id: ScheduleId, request: UpdateSchedule) -> UpdatedScheduleDetail:
    deps = dependencies()
    updated = deps.schedules.update(schedule_id, request)
    metrics.add_metric(name="SchedulesUpdated", unit=MetricUnit.Count, value=1)
    detail = ScheduleDetail.of_view(deps.schedules.get(schedule_id))
    return UpdatedScheduleDetail(
        **detail.model_dump(),
        applies_from=to_rfc3339(updated.applies_from_ms),
        replaced_job_id=updated.replaced,
    )


@schedules_router.delete(
    "/schedules/<schedule_id>",
    summary="Delete a schedule",
    description="Nothing more runs: occurrences not yet due are cancelled. Deleting again "
    "is harmless; the schedule is then 404 to GET.",
    tags=["schedules"],
    responses={200: _documented(Deleted, "Deleted"), 400: _INVALID, 404: _UNKNOWN},
)
def delete_schedule(schedule_id: ScheduleId) -> Deleted:
    dependencies().schedules.delete(schedule_id)
    metrics.add_metric(name="SchedulesDeleted", unit=MetricUnit.Count, value=1)
    return Deleted(id=schedule_id, state=ScheduleState.DELETED)
