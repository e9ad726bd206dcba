"""The client's job calls: submit (one or a batch), get, cancel, change, run now, retry,
pause and resume (`JobCalls`, a part of `SundialClient`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from sundial.client.calls import (
    Calls,
    Repeat,
    Time,
    api_time,
    new_idempotency_key,
    retry_body,
    segment,
    without_none,
)
from sundial.client.models import (
    BatchResult,
    Cancelled,
    JobDetail,
    JobSummary,
    PayloadStorage,
    Priority,
    RetryPolicy,
)


class Keep:
    """The default of change_job's `payload`: keep the job's payload (None would set null)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = Keep()


class JobCalls(Calls):
    """/jobs and /jobs/{id}: one job, from its submit to its end."""

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
                body["run_at"] = api_time(body["run_at"])
            bodies.append(body)
        return self._call(
            BatchResult, "POST", "/jobs/batch", body={"jobs": bodies}, repeat=Repeat.SAFE
        )

    def get_job(self, job_id: str) -> JobDetail:
        """The job in full: status, attempts, times, result, errors. Safe to repeat."""
        return self._call(JobDetail, "GET", f"/jobs/{segment(job_id)}", repeat=Repeat.SAFE)

    def cancel_job(self, job_id: str) -> Cancelled:
        """Cancel a job; once this returns, its function never runs. Conflict (409) once its
        attempt is running or it has finished. Safe to repeat (a repeat answers 200 again)."""
        return self._call(Cancelled, "DELETE", f"/jobs/{segment(job_id)}", repeat=Repeat.SAFE)

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
        body = without_none(
            {
                "run_at": api_time(run_at),
                "delay_seconds": delay_seconds,
                "priority": priority,
                "max_attempts": max_attempts,
                "payload_storage": payload_storage,
            }
        )
        if not isinstance(payload, Keep):
            body["payload"] = payload
        return self._call(
            JobDetail, "PATCH", f"/jobs/{segment(job_id)}", body=body, repeat=Repeat.SAFE
        )

    def run_job_now(self, job_id: str) -> JobDetail:
        """Hand a waiting job to SQS now (POST /jobs/{id}/run-now); it keeps its id."""
        return self._post(JobDetail, f"/jobs/{segment(job_id)}/run-now")

    def retry_job(self, job_id: str) -> JobSummary:
        """Re-queue a dead, failed or cancelled job to run now. Safe to repeat: a repeat finds
        the job queued and answers Conflict instead of running it twice."""
        return self._post(JobSummary, f"/jobs/{segment(job_id)}/retry")

    def pause_job(self, job_id: str) -> JobSummary:
        """Hold a pending job in the table. Safe to repeat."""
        return self._post(JobSummary, f"/jobs/{segment(job_id)}/pause")

    def resume_job(self, job_id: str) -> JobSummary:
        """Resume a paused job (sent at once if due within 15 minutes). Safe to repeat; a 503
        must be repeated, which the client does."""
        return self._post(JobSummary, f"/jobs/{segment(job_id)}/resume")

    @staticmethod
    def _job_body(queue: str, payload: JsonValue, **fields: Any) -> dict[str, Any]:
        fields["run_at"] = api_time(fields.get("run_at"))
        fields["retry"] = retry_body(fields.get("retry"))
        return {"queue": queue, "payload": payload, **without_none(fields)}
