"""The API's routes, grouped by the Lambda that serves them. Each route parses (Powertools +
pydantic), calls the domain, and shapes the response."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from pydantic import BaseModel

from sundial.api.authorization import authorized_item
from sundial.api.models import (
    BatchItemResult,
    BatchResult,
    Cancelled,
    ErrorBody,
    JobDetail,
    JobSummary,
)
from sundial.errors import Conflict, InvalidInput, SundialError
from sundial.model.job import Job
from sundial.model.submission import ChangeJob, SubmitBatch, SubmitJob, parse_rfc3339
from sundial.services.jobs import Submitted
from sundial.wiring import dependencies

JobId = Annotated[str, Path(description="The job id returned by POST /jobs", max_length=100)]

metrics = Metrics()  # shares the handler's metric set (Powertools keeps one per process)
submit_router = Router()  # type: ignore[no-untyped-call]
jobs_router = Router()  # type: ignore[no-untyped-call]


def request_id(router: Router) -> str | None:
    """The API Gateway id of the request being handled: the correlation id of its log lines
    (the handlers' Logger reads the same field), kept with each job it submits."""
    event = router.current_event
    # Every route is an HTTP API (payload 2.0) route; its request context names the request.
    assert isinstance(event, APIGatewayProxyEventV2)
    return event.request_context.request_id or None


def time_query(field: str, value: str | None) -> int | None:
    """A query parameter's RFC 3339 time as epoch ms (None if absent); a bad one is a 400."""
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as error:
        raise InvalidInput(field, str(error)) from None


def _documented(model: type[BaseModel], description: str) -> OpenAPIResponse:
    return {"description": description, "content": {"application/json": {"model": model}}}


_INVALID = _documented(ErrorBody, "Invalid input: names the field and the reason")
_UNKNOWN = _documented(ErrorBody, "Unknown job")
# The queues' quotas (sundial.services.admission), on the routes that create jobs.
TOO_LARGE_FOR_QUEUE = _documented(
    ErrorBody,
    "Larger than its queue accepts: a payload over the queue's max_payload_bytes, or more jobs "
    "for one queue in the request than the queue admits in a second (split it); names the "
    "field, the queue, the size and the limit. Nothing was written; the same request never fits",
)
RATE_LIMITED: OpenAPIResponse = {
    **_documented(
        ErrorBody,
        "A queue's max_submissions_per_second is used up for this second: names the queue and "
        "the limit; nothing was written. Repeat the request after Retry-After",
    ),
    "headers": {
        "Retry-After": {
            "description": "Seconds to wait before repeating the request",
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}


def _json(status: int, model: BaseModel) -> Response[str]:
    body = model.model_dump_json()
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


@submit_router.post(
    "/jobs",
    summary="Submit a job",
    tags=["jobs"],
    responses={
        201: _documented(JobSummary, "Created"),
        200: _documented(JobSummary, "The earlier job with this idempotency_key"),
        400: _INVALID,
        409: _documented(ErrorBody, "idempotency_key reused for another request, or in progress"),
        413: TOO_LARGE_FOR_QUEUE,
        429: RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; nothing was accepted, retry"),
    },
)
def submit_job(request: SubmitJob) -> Response[str]:
    submitted = dependencies().jobs.submit(request, correlation_id=request_id(submit_router))
    metrics.add_metric(name="JobsSubmitted", unit=MetricUnit.Count, value=int(submitted.created))
    status = HTTPStatus.CREATED if submitted.created else HTTPStatus.OK
    return _json(status, JobSummary.of(submitted.job))


@submit_router.post(
    "/jobs/batch",
    summary="Submit up to 25 jobs",
    description="Invalid input rejects the whole batch (400) and writes nothing, as does a "
    "queue's quota (413, 429: the whole batch is counted); otherwise each job gets its own "
    "result.",
    tags=["jobs"],
    responses={
        200: _documented(BatchResult, "One result per job, in order"),
        400: _INVALID,
        413: TOO_LARGE_FOR_QUEUE,
        429: RATE_LIMITED,
    },
)
def submit_batch(batch: SubmitBatch) -> BatchResult:
    outcomes = dependencies().jobs.submit_many(batch.jobs, correlation_id=request_id(submit_router))
    created = sum(1 for o in outcomes if isinstance(o, Submitted) and o.created)
    metrics.add_metric(name="JobsSubmitted", unit=MetricUnit.Count, value=created)
    return BatchResult(results=[_batch_item(i, o) for i, o in enumerate(outcomes)])


def _batch_item(index: int, outcome: Submitted | SundialError) -> BatchItemResult:
    if isinstance(outcome, Submitted):
        status = HTTPStatus.CREATED if outcome.created else HTTPStatus.OK
        return BatchItemResult(index=index, status_code=status, job=JobSummary.of(outcome.job))
    code = HTTPStatus.CONFLICT if isinstance(outcome, Conflict) else HTTPStatus.SERVICE_UNAVAILABLE
    return BatchItemResult(index=index, status_code=code, error=ErrorBody(message=str(outcome)))


@jobs_router.get(
    "/jobs/<job_id>",
    summary="Get a job",
    tags=["jobs"],
    responses={200: _documented(JobDetail, "The job"), 400: _INVALID, 404: _UNKNOWN},
)
def get_job(job_id: JobId) -> JobDetail:
    deps = dependencies()
    job = authorized_item(Job) or deps.jobs.get(job_id)
    # `queued` is derived for a job a sweep sent without writing it (store.sweeps.as_shown).
    return JobDetail.of(deps.sweeps.as_shown(job, now_ms=deps.clock.now_ms()))


_CHANGE_CONFLICT = _documented(
    ErrorBody,
    "The job cannot be changed: its first attempt has started (or ended), it is a DAG node or a "
    "schedule's occurrence, or it is being handed to SQS by another call (retry shortly); the "
    "message says which",
)


@jobs_router.patch(
    "/jobs/<job_id>",
    summary="Change a waiting job",
    description="Changes the time (run_at or delay_seconds), priority, payload or max_attempts "
    "of a job waiting for its first attempt: pending, paused (it stays paused), or queued "
    "(handed to SQS, not yet taken by a runner: its message is then skipped). The job keeps its "
    "id. A time within 15 minutes (or in the past: now) hands it to SQS at once; a later one "
    "waits for the sweepers. One DynamoDB transaction: a racing claim, cancel or change makes "
    "it a 409 or a retry, never two jobs or none. GET shows every change under `moves`. Counted "
    "as one submission on a queue with a max_submissions_per_second.",
    tags=["jobs"],
    responses={
        200: _documented(JobDetail, "Changed: the job as it is now"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _CHANGE_CONFLICT,
        413: TOO_LARGE_FOR_QUEUE,
        429: RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; repeat the request"),
    },
)
def change_job(job_id: JobId, change: ChangeJob) -> JobDetail:
    job = dependencies().moves.move(job_id, change)
    metrics.add_metric(name="JobsChanged", unit=MetricUnit.Count, value=1)
    return JobDetail.of(job)


@jobs_router.post(
    "/jobs/<job_id>/run-now",
    summary="Run a waiting job now",
    description='The same as PATCH /jobs/{id} with {"delay_seconds": 0}: the job is handed to '
    "SQS at once and keeps its id.",
    tags=["jobs"],
    responses={
        200: _documented(JobDetail, "Handed to SQS (queued), or held if its queue is paused"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _CHANGE_CONFLICT,
        429: RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; repeat the request"),
    },
)
def run_job_now(job_id: JobId) -> JobDetail:
    job = dependencies().moves.move(job_id, ChangeJob(delay_seconds=0))
    metrics.add_metric(name="JobsChanged", unit=MetricUnit.Count, value=1)
    return JobDetail.of(job)


@jobs_router.post(
    "/jobs/<job_id>/retry",
    summary="Retry a job",
    description="Re-queues a dead, failed or cancelled job to run now, with its queue's "
    "attempt budget again. Any other status is a 409, so repeating a retry runs nothing twice. "
    "Counted as one submission on a queue with a max_submissions_per_second.",
    tags=["jobs"],
    responses={
        200: _documented(JobSummary, "Re-queued"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _documented(ErrorBody, "The job is pending, queued, running or succeeded"),
        429: RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; retry the request"),
    },
)
def retry_job(job_id: JobId) -> JobSummary:
    job = dependencies().jobs.retry(job_id)
    metrics.add_metric(name="JobsRetried", unit=MetricUnit.Count, value=1)
    return JobSummary.of(job)


@jobs_router.delete(
    "/jobs/<job_id>",
    summary="Cancel a job",
    description="Succeeds while the job is pending, queued, failed, blocked (a DAG node) or "
    "paused, and again if it is already cancelled. A queued job's message may still reach "
    "its consumer, which skips it.",
    tags=["jobs"],
    responses={
        200: _documented(Cancelled, "Cancelled"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _documented(ErrorBody, "The job is running or finished"),
    },
)
def cancel_job(job_id: JobId) -> Cancelled:
    status = dependencies().jobs.cancel(job_id)
    metrics.add_metric(name="JobsCancelled", unit=MetricUnit.Count, value=1)
    return Cancelled(id=job_id, status=status)
