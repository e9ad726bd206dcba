"""`SundialClient`: every route of the Sundial API as a typed method.

    from sundial.client import SundialClient
    sundial = SundialClient()  # SUNDIAL_API, else the local runtime (make run)
    job = sundial.submit("email", {"to": "ada@example.com"}, delay_seconds=600)
    sundial.get_job(job.id).status

Retries. Each method says whether repeating its request is safe, and the client repeats it
(with backoff and jitter, honouring `Retry-After`) only when it is:
- **Safe to repeat** (retried on 429, 5xx, a 409 "retry shortly", and no answer): reads; job
  and schedule submits (the client sends an `idempotency_key`, generating one if you give
  none, so a repeat returns the first job instead of making a second); and every control call,
  because the API makes them idempotent by design: cancel, pause, resume, delete, purge and
  replay repeat harmlessly, and retry answers 409 rather than running a job twice.
- **Repeated only when certainly not applied** (429, or a connection never made): a DAG
  submit (the API takes no idempotency key for DAGs, so a repeat after a lost answer could
  make a second DAG) and a lease (a lost answer's leases would only expire, but the jobs would
  wait a lease out first).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, JsonValue

from sundial.client.backoff import Backoff
from sundial.client.errors import (
    ApiUnreachable,
    Conflict,
    RateLimited,
    ServerError,
    SundialError,
    error_for,
)
from sundial.client.models import (
    BatchResult,
    Cancelled,
    DagDetail,
    DagPage,
    DagSummary,
    DeadLetterPage,
    DeadLetterView,
    Deleted,
    JobDetail,
    JobSummary,
    LeaseResult,
    ListedJob,
    ListedJobsPage,
    Misfire,
    OnFailure,
    ParentResults,
    PayloadStorage,
    Priority,
    PurgeResult,
    QueueDetail,
    QueueList,
    QueueSummary,
    ReplayResult,
    RetryPolicy,
    RunsPage,
    RunsWhen,
    ScheduleDetail,
    SchedulePage,
    ScheduleSummary,
    Status,
    UpdatedScheduleDetail,
    format_rfc3339,
    from_api,
)
from sundial.client.transport import (
    ApiRequest,
    ApiResponse,
    HttpTransport,
    Transport,
    TransportFailure,
    default_api_url,
    get_presigned,
)

if TYPE_CHECKING:
    from botocore.credentials import Credentials

Model = TypeVar("Model", bound=BaseModel)
Item_co = TypeVar("Item_co", covariant=True)
Time = datetime | str  # a datetime (timezone-aware), or RFC 3339 text as the API takes it


class Repeat(Enum):
    """Whether a request may be sent again when its answer was lost or was a failure."""

    SAFE = "safe"  # idempotent: repeating it changes nothing more
    IF_NOT_APPLIED = "if_not_applied"  # only when the API certainly did nothing (429, no connect)


@dataclass(frozen=True, slots=True)
class ReplayProgress:
    """The running totals of `replay_dead_letters`, after each request."""

    replayed: int
    skipped: int
    unreplayable: int  # letters kept: the last request sees them all (each request does)
    requests: int
    more: bool
    # Letters kept because another call is retrying their job: replay again in 30 s.
    in_flight: int = 0
    answer: ReplayResult | None = None  # the last request's answer, as the API gave it


class Keep:
    """The default of change_job's `payload`: keep the job's payload (None would set null)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = Keep()


def new_idempotency_key() -> str:
    """A fresh key for one logical submit: random, so no two submits share one."""
    return f"sundial-client-{uuid.uuid4().hex}"


def _time(value: Time | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return format_rfc3339(value)


def _without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class _Page(Protocol[Item_co]):
    @property
    def items(self) -> Sequence[Item_co]: ...

    @property
    def next_cursor(self) -> str | None: ...


def _every_page(fetch: Callable[[str | None], _Page[Item_co]]) -> Iterator[Item_co]:
    """The items of every page of a listing, fetching each (`fetch(cursor)`) as the iteration
    reaches it."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _segment(value: str) -> str:
    """An id or queue name as one path segment: quoted, so it can never change the route."""
    if not value:
        raise ValueError("an id or queue name cannot be empty")
    return quote(value, safe="")


def _retry(retry: RetryPolicy | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if retry is None:
        return None
    if isinstance(retry, RetryPolicy):
        return retry.model_dump(exclude_none=True)
    return dict(retry)


class SundialClient:
    """A client of one Sundial API.

    `api_url`: the API's base URL; default `SUNDIAL_API`, else the local runtime at
    SUNDIAL_HOST:SUNDIAL_API_PORT (http://127.0.0.1:8000 unless set). HTTPS URLs, any host,
    are SigV4-signed for `execute-api` with the standard AWS credential chain (or
    `credentials`), in the region of an `*.execute-api.<region>.amazonaws.com` host, else
    `region`, else `AWS_REGION`. Plain HTTP is sent unsigned; `caller` then names the identity
    the local runtime acts as.
    `transport` replaces HTTP altogether (tests pass the handlers in-process)."""

    def __init__(
        self,
        api_url: str | None = None,
        *,
        region: str | None = None,
        credentials: Credentials | None = None,
        caller: str | None = None,
        timeout_s: float = 30.0,
        backoff: Backoff | None = None,
        transport: Transport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.api_url = (api_url or default_api_url()).rstrip("/")
        self._transport: Transport = transport or HttpTransport(
            self.api_url,
            region=region,
            credentials=credentials,
            caller=caller,
            timeout_s=timeout_s,
        )
        self.backoff = backoff or Backoff()
        self._sleep = sleep
        self._rng = rng or random.Random()

    @property
    def transport(self) -> Transport:
        """How requests reach the API (the admin UI's server passes its calls through it)."""
        return self._transport

    # -- jobs -------------------------------------------------------------------------------

    def submit(
        self,
        queue: str,
        payload: JsonValue = None,
        *,
        run_at: Time | None = None,
        delay_seconds: int | None = None,
        priority: Priority | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        payload_storage: PayloadStorage | None = None,
    ) -> JobSummary:
        """Submit one job to run at `run_at` or after `delay_seconds` (neither: now). A payload
        may be up to 5 MiB: over 64 KiB (or with `payload_storage="s3"`) the API stores it in
        S3 and consumers get it transparently.

        Safe to repeat: a key is generated when none is given, so a retried submit returns
        the first job; the API answers 201 for a new job, 200 for the earlier one."""
        if run_at is None and delay_seconds is None:
            delay_seconds = 0
        body = self._job_body(
            queue,
            payload,
            run_at=run_at,
            delay_seconds=delay_seconds,
            priority=priority,
            max_attempts=max_attempts,
            retry=retry,
            idempotency_key=idempotency_key or new_idempotency_key(),
            payload_storage=payload_storage,
        )
        return self._call(JobSummary, "POST", "/jobs", body=body, repeat=Repeat.SAFE)

    def submit_batch(self, jobs: Sequence[Mapping[str, Any]]) -> BatchResult:
        """Submit 1-25 jobs (each a POST /jobs body: `{"queue", "payload", "delay_seconds"...}`);
        one result per job, in order. Safe to repeat: every job without an `idempotency_key`
        gets a generated one. Any invalid job fails the whole batch with InvalidRequest."""
        bodies = []
        for job in jobs:
            body = dict(job)
            body.setdefault("idempotency_key", new_idempotency_key())
            if body.get("run_at") is None and body.get("delay_seconds") is None:
                body["delay_seconds"] = 0
            if isinstance(body.get("run_at"), datetime):
                body["run_at"] = _time(body["run_at"])
            bodies.append(body)
        return self._call(
            BatchResult, "POST", "/jobs/batch", body={"jobs": bodies}, repeat=Repeat.SAFE
        )

    def get_job(self, job_id: str) -> JobDetail:
        """The job in full: status, attempts, times, result, errors. Safe to repeat."""
        return self._call(JobDetail, "GET", f"/jobs/{_segment(job_id)}", repeat=Repeat.SAFE)

    def cancel_job(self, job_id: str) -> Cancelled:
        """Cancel a job; once this returns, its function never runs. Conflict (409) once its
        attempt is running or it has finished. Safe to repeat (a repeat answers 200 again)."""
        return self._call(Cancelled, "DELETE", f"/jobs/{_segment(job_id)}", repeat=Repeat.SAFE)

    def change_job(
        self,
        job_id: str,
        *,
        run_at: Time | None = None,
        delay_seconds: int | None = None,
        priority: Priority | None = None,
        payload: JsonValue | Keep = KEEP,
        max_attempts: int | None = None,
        payload_storage: PayloadStorage | None = None,
    ) -> JobDetail:
        """Change a job waiting for its first attempt (PATCH /jobs/{id}): its time (`run_at` or
        `delay_seconds`), priority, payload (None is a payload: leave it out to keep the old
        one; `payload_storage` for it, as on submit) or attempt budget. The job keeps its id.
        Conflict (409) with the reason when its attempt has started or ended, or it is a DAG
        node or a schedule's occurrence."""
        body = _without_none(
            {
                "run_at": _time(run_at),
                "delay_seconds": delay_seconds,
                "priority": priority,
                "max_attempts": max_attempts,
                "payload_storage": payload_storage,
            }
        )
        if not isinstance(payload, Keep):
            body["payload"] = payload
        return self._call(
            JobDetail, "PATCH", f"/jobs/{_segment(job_id)}", body=body, repeat=Repeat.SAFE
        )

    def run_job_now(self, job_id: str) -> JobDetail:
        """Hand a waiting job to SQS now (POST /jobs/{id}/run-now); it keeps its id."""
        return self._post(JobDetail, f"/jobs/{_segment(job_id)}/run-now")

    def retry_job(self, job_id: str) -> JobSummary:
        """Re-queue a dead, failed or cancelled job to run now. Safe to repeat: a repeat finds
        the job queued and answers Conflict instead of running it twice."""
        return self._post(JobSummary, f"/jobs/{_segment(job_id)}/retry")

    def pause_job(self, job_id: str) -> JobSummary:
        """Hold a pending job in the table. Safe to repeat."""
        return self._post(JobSummary, f"/jobs/{_segment(job_id)}/pause")

    def resume_job(self, job_id: str) -> JobSummary:
        """Resume a paused job (sent at once if due within 15 minutes). Safe to repeat; a 503
        must be repeated, which the client does."""
        return self._post(JobSummary, f"/jobs/{_segment(job_id)}/resume")

    # -- schedules --------------------------------------------------------------------------

    def create_schedule(
        self,
        queue: str,
        *,
        cron: str | None = None,
        rate: str | None = None,
        timezone: str | None = None,
        payload: JsonValue = None,
        name: str | None = None,
        priority: Priority | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        start_at: Time | None = None,
        end_at: Time | None = None,
        misfire: Misfire | None = None,
        idempotency_key: str | None = None,
    ) -> ScheduleDetail:
        """Create a recurring schedule (`cron` or `rate`). Safe to repeat: a key is generated
        when none is given, so a repeat returns the first schedule."""
        body = _without_none(
            {
                "queue": queue,
                "cron": cron,
                "rate": rate,
                "timezone": timezone,
                "payload": payload,
                "name": name,
                "priority": priority,
                "max_attempts": max_attempts,
                "retry": _retry(retry),
                "start_at": _time(start_at),
                "end_at": _time(end_at),
                "misfire": misfire,
                "idempotency_key": idempotency_key or new_idempotency_key(),
            }
        )
        return self._call(ScheduleDetail, "POST", "/schedules", body=body, repeat=Repeat.SAFE)

    def schedule_page(
        self, queue: str, *, cursor: str | None = None, limit: int | None = None
    ) -> SchedulePage:
        """One page of the queue's schedules (not deleted), oldest first. Safe to repeat."""
        query = _without_none({"queue": queue, "cursor": cursor, "limit": limit})
        return self._call(SchedulePage, "GET", "/schedules", query=query, repeat=Repeat.SAFE)

    def schedules(self, queue: str, *, page_size: int = 100) -> Iterator[ScheduleSummary]:
        """Every schedule of the queue, oldest first, page after page as the iteration goes."""
        return _every_page(lambda cursor: self.schedule_page(queue, cursor=cursor, limit=page_size))

    def get_schedule(self, schedule_id: str) -> ScheduleDetail:
        """Safe to repeat."""
        path = f"/schedules/{_segment(schedule_id)}"
        return self._call(ScheduleDetail, "GET", path, repeat=Repeat.SAFE)

    def schedule_runs(
        self,
        schedule_id: str,
        *,
        limit: int | None = None,
        before: Time | None = None,
        when: RunsWhen | None = None,
    ) -> RunsPage:
        """One page of a schedule's runs, newest first; pass `next_before` as `before` for the
        next. `when`: "past" (their time has come) or "upcoming" (decided ahead of their time:
        an occurrence due within 15 minutes is sent early); each run says which (`upcoming`).
        Safe to repeat."""
        query = _without_none({"limit": limit, "before": _time(before), "when": when})
        path = f"/schedules/{_segment(schedule_id)}/runs"
        return self._call(RunsPage, "GET", path, query=query, repeat=Repeat.SAFE)

    def update_schedule(
        self,
        schedule_id: str,
        *,
        cron: str | None = None,
        rate: str | None = None,
        timezone: str | None = None,
        priority: Priority | None = None,
        name: str | None = None,
        **nullable: Any,
    ) -> UpdatedScheduleDetail:
        """Change a schedule from its next undecided occurrence on (`applies_from` in the
        answer). Only what is given changes; `payload`, `max_attempts` and `retry` may be
        given as None to set them so (payload null, the queue's defaults), so they go by
        keyword. Safe to repeat: repeating an applied update changes nothing."""
        unknown = set(nullable) - {"payload", "max_attempts", "retry"}
        if unknown:
            raise TypeError(f"update_schedule() got unexpected fields {sorted(unknown)}")
        body: dict[str, Any] = _without_none(
            {"cron": cron, "rate": rate, "timezone": timezone, "priority": priority, "name": name}
        )
        body |= nullable
        if "retry" in body:
            body["retry"] = _retry(body["retry"])
        path = f"/schedules/{_segment(schedule_id)}"
        return self._call(UpdatedScheduleDetail, "PATCH", path, body=body, repeat=Repeat.SAFE)

    def pause_schedule(self, schedule_id: str) -> ScheduleDetail:
        """Safe to repeat (pausing a paused schedule is harmless)."""
        return self._post(ScheduleDetail, f"/schedules/{_segment(schedule_id)}/pause")

    def resume_schedule(self, schedule_id: str) -> ScheduleDetail:
        """Safe to repeat; a 503 must be repeated, which the client does."""
        return self._post(ScheduleDetail, f"/schedules/{_segment(schedule_id)}/resume")

    def delete_schedule(self, schedule_id: str) -> Deleted:
        """Nothing more runs. Safe to repeat."""
        path = f"/schedules/{_segment(schedule_id)}"
        return self._call(Deleted, "DELETE", path, repeat=Repeat.SAFE)

    # -- DAGs -------------------------------------------------------------------------------

    def submit_dag(
        self,
        name: str,
        nodes: Mapping[str, Mapping[str, Any]],
        *,
        on_failure: OnFailure | None = None,
        parent_results: ParentResults | None = None,
        run_at: Time | None = None,
        delay_seconds: int | None = None,
    ) -> DagDetail:
        """Submit a DAG: `nodes` maps each node's name to `{"queue", "payload", "depends_on",
        ...}`. NOT repeated after a lost answer or a 5xx (the API takes no idempotency key for
        DAGs, so a repeat could create a second DAG): only after a 429 or a failed connection.
        On ServerError, look the DAG up before submitting again."""
        body = _without_none(
            {
                "name": name,
                "nodes": {key: dict(node) for key, node in nodes.items()},
                "on_failure": on_failure,
                "parent_results": parent_results,
                "run_at": _time(run_at),
                "delay_seconds": delay_seconds,
            }
        )
        return self._call(DagDetail, "POST", "/dags", body=body, repeat=Repeat.IF_NOT_APPLIED)

    def dag_page(
        self, queue: str, *, cursor: str | None = None, limit: int | None = None
    ) -> DagPage:
        """One page of the DAGs with a node on the queue, oldest first, with their status. A
        DAG also using a queue the caller may not read is left out. Safe to repeat."""
        query = _without_none({"queue": queue, "cursor": cursor, "limit": limit})
        return self._call(DagPage, "GET", "/dags", query=query, repeat=Repeat.SAFE)

    def dags(self, queue: str, *, page_size: int = 100) -> Iterator[DagSummary]:
        """Every DAG of the queue, oldest first, page after page as the iteration goes."""
        return _every_page(lambda cursor: self.dag_page(queue, cursor=cursor, limit=page_size))

    def get_dag(self, dag_id: str) -> DagDetail:
        """The DAG's status and every node's. Safe to repeat."""
        return self._call(DagDetail, "GET", f"/dags/{_segment(dag_id)}", repeat=Repeat.SAFE)

    def cancel_dag(self, dag_id: str) -> DagDetail:
        """Cancel every node not finished or running. Safe to repeat."""
        return self._call(DagDetail, "DELETE", f"/dags/{_segment(dag_id)}", repeat=Repeat.SAFE)

    def pause_dag(self, dag_id: str) -> DagDetail:
        """Release no node until resumed. Safe to repeat."""
        return self._post(DagDetail, f"/dags/{_segment(dag_id)}/pause")

    def resume_dag(self, dag_id: str) -> DagDetail:
        """Safe to repeat; a 503 must be repeated, which the client does."""
        return self._post(DagDetail, f"/dags/{_segment(dag_id)}/resume")

    # -- queues -----------------------------------------------------------------------------

    def list_queues(self) -> list[QueueSummary]:
        """Every queue the caller may read: state, SQS depth, dead letters. Safe to repeat."""
        return self._call(QueueList, "GET", "/queues", repeat=Repeat.SAFE).queues

    def get_queue(self, queue: str) -> QueueDetail:
        """Whether the queue is paused. Safe to repeat."""
        return self._call(QueueDetail, "GET", f"/queues/{_segment(queue)}", repeat=Repeat.SAFE)

    def pause_queue(self, queue: str) -> QueueDetail:
        """Hand nothing of the queue to SQS until resumed. Safe to repeat."""
        return self._post(QueueDetail, f"/queues/{_segment(queue)}/pause")

    def resume_queue(self, queue: str) -> QueueDetail:
        """Send what came due meanwhile. Safe to repeat."""
        return self._post(QueueDetail, f"/queues/{_segment(queue)}/resume")

    def queue_jobs_page(
        self,
        queue: str,
        status: Status,
        *,
        since: Time | None = None,
        until: Time | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> ListedJobsPage:
        """One page of the queue's jobs of `status` due in [since, until) (default: a day
        either side of now; at most 7 days), in due order; for `dead`, by when they died. A
        page may be short before the end (each call's reading is bounded). Safe to repeat."""
        query = _without_none(
            {
                "status": status,
                "from": _time(since),
                "to": _time(until),
                "cursor": cursor,
                "limit": limit,
            }
        )
        path = f"/queues/{_segment(queue)}/jobs"
        return self._call(ListedJobsPage, "GET", path, query=query, repeat=Repeat.SAFE)

    def queue_jobs(
        self,
        queue: str,
        status: Status,
        *,
        since: Time | None = None,
        until: Time | None = None,
        page_size: int = 100,
    ) -> Iterator[ListedJob]:
        """Every job of the queue with `status` in the window, in due order, page after page
        as the iteration goes."""
        return _every_page(
            lambda cursor: self.queue_jobs_page(
                queue, status, since=since, until=until, cursor=cursor, limit=page_size
            )
        )

    # -- dead letters -----------------------------------------------------------------------

    def dead_letter_page(
        self,
        queue: str,
        *,
        cursor: str | None = None,
        limit: int | None = None,
        since: Time | None = None,
        until: Time | None = None,
        error_type: str | None = None,
    ) -> DeadLetterPage:
        """One page of the queue's dead letters, oldest first. Safe to repeat."""
        query = _without_none(
            {
                "cursor": cursor,
                "limit": limit,
                "since": _time(since),
                "until": _time(until),
                "error_type": error_type,
            }
        )
        path = f"/queues/{_segment(queue)}/dead"
        return self._call(DeadLetterPage, "GET", path, query=query, repeat=Repeat.SAFE)

    def dead_letters(
        self,
        queue: str,
        *,
        since: Time | None = None,
        until: Time | None = None,
        error_type: str | None = None,
        page_size: int = 100,
    ) -> Iterator[DeadLetterView]:
        """Every dead letter of the queue (matching the filters), oldest first, fetching page
        after page (`page_size` each, at most 100) as the iteration goes."""
        return _every_page(
            lambda cursor: self.dead_letter_page(
                queue,
                cursor=cursor,
                limit=page_size,
                since=since,
                until=until,
                error_type=error_type,
            )
        )

    def replay_dead_letters(
        self,
        queue: str,
        *,
        since: Time | None = None,
        until: Time | None = None,
        error_type: str | None = None,
        job_id: str | None = None,
        limit: int | None = None,
        on_progress: Callable[[ReplayProgress], None] | None = None,
    ) -> ReplayProgress:
        """Re-queue every dead job among the queue's letters (matching the filters), request
        after request (`limit` letters each, at most 500) while the API says there is `more`
        (`job_id`: that job's letter alone);
        `on_progress` is called with the running totals after each. Safe to repeat, and to
        stop and start again: a replayed job is no longer dead, so it is never run twice."""
        body = _without_none(
            {
                "since": _time(since),
                "until": _time(until),
                "error_type": error_type,
                "job_id": job_id,
                "limit": limit,
            }
        )
        path = f"/queues/{_segment(queue)}/dead/replay"
        progress = ReplayProgress(0, 0, 0, 0, more=True)
        while progress.more:
            result = self._call(ReplayResult, "POST", path, body=body, repeat=Repeat.SAFE)
            progress = ReplayProgress(
                replayed=progress.replayed + len(result.replayed),
                skipped=progress.skipped + result.skipped,
                unreplayable=result.unreplayable,
                requests=progress.requests + 1,
                more=result.more,
                in_flight=result.in_flight,
                answer=result,
            )
            if on_progress is not None:
                on_progress(progress)
        return progress

    def purge_dead_letters(
        self,
        queue: str,
        older_than: Time,
        *,
        limit: int | None = None,
        on_answer: Callable[[PurgeResult], None] | None = None,
    ) -> PurgeResult:
        """Delete the letters that died before `older_than` (the jobs keep their history),
        request after request while there is `more`; returns the total (`on_answer` is given
        each request's answer). Safe to repeat."""
        query = _without_none({"older_than": _time(older_than), "limit": limit})
        path = f"/queues/{_segment(queue)}/dead"
        purged = 0
        while True:
            result = self._call(PurgeResult, "DELETE", path, query=query, repeat=Repeat.SAFE)
            if on_answer is not None:
                on_answer(result)
            purged += result.purged
            if not result.more:
                return PurgeResult(purged=purged, more=False)

    # -- workers outside Lambda (sundial.worker drives these) --------------------------------

    def lease(
        self,
        queue: str,
        *,
        wait: int | None = None,
        max_jobs: int | None = None,
        lease_seconds: int | None = None,
    ) -> LeaseResult:
        """Long-poll up to `wait` seconds for up to `max_jobs` jobs, each leased for
        `lease_seconds`. Repeated only after a 429 or a failed connection: a lost answer's
        jobs would wait out their lease before anyone could run them."""
        body = _without_none({"wait": wait, "max": max_jobs, "lease_seconds": lease_seconds})
        path = f"/queues/{_segment(queue)}/lease"
        return self._call(LeaseResult, "POST", path, body=body, repeat=Repeat.IF_NOT_APPLIED)

    def heartbeat(self, job_id: str, lease: str, *, lease_seconds: int | None = None) -> JobDetail:
        """Extend a lease. Safe to repeat. Conflict once the lease has expired."""
        body = _without_none({"lease": lease, "lease_seconds": lease_seconds})
        return self._post(JobDetail, f"/jobs/{_segment(job_id)}/heartbeat", body)

    def ack(self, job_id: str, lease: str, *, result: JsonValue = None) -> JobDetail:
        """The leased attempt succeeded. Safe to repeat (a conditional write: a repeat after a
        lost answer answers Conflict, the attempt being over, and changes nothing)."""
        body = {"lease": lease, "result": result}
        return self._post(JobDetail, f"/jobs/{_segment(job_id)}/ack", body)

    def nack(
        self,
        job_id: str,
        lease: str,
        *,
        error_type: str | None = None,
        message: str | None = None,
        traceback: str | None = None,
        retry_after_seconds: int | None = None,
        retryable: bool | None = None,
    ) -> JobDetail:
        """The leased attempt failed: the job is retried with backoff, or dead. Safe to repeat,
        as `ack`."""
        body = _without_none(
            {
                "lease": lease,
                "error_type": error_type,
                "message": message,
                "traceback": traceback,
                "retry_after_seconds": retry_after_seconds,
                "retryable": retryable,
            }
        )
        return self._post(JobDetail, f"/jobs/{_segment(job_id)}/nack", body)

    # -- the one way a request is made -------------------------------------------------------

    @staticmethod
    def _job_body(queue: str, payload: JsonValue, **fields: Any) -> dict[str, Any]:
        fields["run_at"] = _time(fields.get("run_at"))
        fields["retry"] = _retry(fields.get("retry"))
        return {"queue": queue, "payload": payload, **_without_none(fields)}

    def _post(self, model: type[Model], path: str, body: Any = None) -> Model:
        return self._call(model, "POST", path, body=body, repeat=Repeat.SAFE)

    def _call(
        self,
        model: type[Model],
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        repeat: Repeat,
    ) -> Model:
        request = ApiRequest(
            method=method,
            path=path,
            query={key: str(value) for key, value in (query or {}).items()},
            body=json.dumps(body).encode() if body is not None else None,
        )
        response = self._send(request, repeat)
        return from_api(model, response.body)

    def _send(self, request: ApiRequest, repeat: Repeat) -> ApiResponse:
        return send(
            self._transport,
            request,
            repeat,
            backoff=self.backoff,
            sleep=self._sleep,
            rng=self._rng,
        )


def send(
    transport: Transport,
    request: ApiRequest,
    repeat: Repeat,
    *,
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> ApiResponse:
    """Send, repeating as `repeat` allows, up to the backoff's attempts; the last failure is
    raised as its typed error. The one retry policy of every request the client package makes
    (the API's, and the presigned payload GETs of sundial.worker)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            response = transport(request)
        except TransportFailure as failure:
            error: SundialError = ApiUnreachable(str(failure))
            may_repeat = repeat is Repeat.SAFE or not failure.sent
        else:
            if 200 <= response.status < 300:
                return response
            error = error_for(response.status, _json(response.body), response.headers)
            may_repeat = _is_transient(error, repeat)
        if not may_repeat or attempt >= backoff.max_attempts:
            raise error
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        sleep(backoff.delay_s(attempt, retry_after_s=retry_after, rng=rng))


def fetch_presigned(
    url: str,
    *,
    timeout_s: float = 60.0,
    backoff: Backoff | None = None,
    sleep: Callable[[float], None] | None = None,
) -> bytes:
    """The body at a presigned URL (a lease's `payload_url`). Safe to repeat (a GET changes
    nothing): repeated on 429, 5xx and no answer, with backoff, as every safe call of the
    client. NotFound when the object is gone; the typed error of the last failure otherwise."""
    response = send(
        lambda _: get_presigned(url, timeout_s=timeout_s),
        ApiRequest("GET", urlsplit(url).path),
        Repeat.SAFE,
        backoff=backoff or Backoff(),
        sleep=sleep or time.sleep,
    )
    return response.body


def _is_transient(error: SundialError, repeat: Repeat) -> bool:
    if isinstance(error, RateLimited):
        return True  # refused before anything was done: always safe to send again
    if repeat is not Repeat.SAFE:
        return False
    if isinstance(error, ServerError):
        return True
    # The API's own wording for "the same request is still in flight": repeat it, as the
    # guarantees ask of clients (docs/guarantees.md).
    return isinstance(error, Conflict) and error.message.endswith("retry shortly")


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return body.decode(errors="replace")
