"""Pause and resume: one job (served by the jobs function) and a whole queue (the queues
function). Each route parses, calls the domain, and shapes the response."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.metrics import MetricUnit

from sundial.api.models import ErrorBody, JobSummary
from sundial.api.routes import _INVALID, _UNKNOWN, JobId, _documented, metrics
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
