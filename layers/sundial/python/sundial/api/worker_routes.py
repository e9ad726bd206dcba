"""Workers outside Lambda: lease jobs, heartbeat, ack, nack (served by the workers function,
whose timeout covers a 20-second long poll)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.metrics import MetricUnit

from sundial.api.dead_letter_routes import _UNKNOWN_QUEUE, QueueName
from sundial.api.models import ErrorBody, JobDetail, LeasedJobView, LeaseResult
from sundial.api.routes import _INVALID, _UNKNOWN, JobId, _documented, metrics
from sundial.runs.leases import AckRequest, HeartbeatRequest, LeaseRequest, NackRequest
from sundial.wiring import dependencies

workers_router = Router()  # type: ignore[no-untyped-call]
_LEASE_OVER = _documented(ErrorBody, "The lease expired, or its attempt is over")


@workers_router.post(
    "/queues/<queue>/lease",
    summary="Lease jobs",
    description="Long-polls the queue for up to `wait` seconds and returns up to `max` jobs, "
    "each marked running and yours for `lease_seconds`. Cancelled, finished and duplicate "
    "deliveries are dropped, so the list may be shorter than `max`, or empty.",
    tags=["workers"],
    responses={200: _documented(LeaseResult, "Leased jobs"), 400: _INVALID, 404: _UNKNOWN_QUEUE},
)
def lease_jobs(queue: QueueName, request: LeaseRequest) -> LeaseResult:
    leased = dependencies().leases.lease(queue, request)
    metrics.add_metric(name="JobsLeased", unit=MetricUnit.Count, value=len(leased))
    return LeaseResult(jobs=[LeasedJobView.of(job) for job in leased])


@workers_router.post(
    "/jobs/<job_id>/heartbeat",
    summary="Extend a lease",
    tags=["workers"],
    responses={
        200: _documented(JobDetail, "Extended"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _LEASE_OVER,
    },
)
def heartbeat(job_id: JobId, request: HeartbeatRequest) -> JobDetail:
    return JobDetail.of(dependencies().leases.heartbeat(job_id, request))


@workers_router.post(
    "/jobs/<job_id>/ack",
    summary="Finish a leased job: succeeded",
    tags=["workers"],
    responses={
        200: _documented(JobDetail, "Succeeded"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _LEASE_OVER,
    },
)
def ack(job_id: JobId, request: AckRequest) -> JobDetail:
    return JobDetail.of(dependencies().leases.ack(job_id, request))


@workers_router.post(
    "/jobs/<job_id>/nack",
    summary="Finish a leased job: failed",
    description="Records the failed attempt and schedules the retry, after "
    "retry_after_seconds or the retry policy's backoff; the job is dead when its attempts "
    "run out or retryable is false.",
    tags=["workers"],
    responses={
        200: _documented(JobDetail, "Failed (retry scheduled) or dead"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _LEASE_OVER,
    },
)
def nack(job_id: JobId, request: NackRequest) -> JobDetail:
    return JobDetail.of(dependencies().leases.nack(job_id, request))
