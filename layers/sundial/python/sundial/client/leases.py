"""The client's calls for a worker outside Lambda: lease, heartbeat, ack and nack
(`LeaseCalls`, a part of `SundialClient`; sundial.worker drives these), and the GET of a leased
job's stored payload from its presigned URL (`fetch_presigned`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit

from pydantic import JsonValue

from sundial.client.backoff import Backoff
from sundial.client.calls import Calls, Repeat, segment, send, without_none
from sundial.client.models import JobDetail, LeaseResult
from sundial.client.transport import ApiRequest, get_presigned


def fetch_presigned(
    url: str,
    *,
    timeout_s: float = 60.0,
    backoff: Backoff | None = None,
    sleep: Callable[[float], None] | None = None,
) -> bytes:
    """The body at a presigned URL (a lease's `payload_url`). Safe to repeat (a GET changes
    nothing): repeated on 429, 5xx and no answer, with backoff, as every safe call of the
    client. NotFound when the object is gone; the typed error of the last failure otherwise.
    A module function, not a method: a worker's pool process calls it with nothing to pickle
    but the URL."""
    response = send(
        lambda _: get_presigned(url, timeout_s=timeout_s),
        ApiRequest("GET", urlsplit(url).path),
        Repeat.SAFE,
        backoff=backoff or Backoff(),
        sleep=sleep or time.sleep,
    )
    return response.body


class LeaseCalls(Calls):
    """/queues/{queue}/lease and /jobs/{id}/heartbeat, ack and nack: a leased attempt."""

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
        body = without_none({"wait": wait, "max": max_jobs, "lease_seconds": lease_seconds})
        path = f"/queues/{segment(queue)}/lease"
        return self._call(LeaseResult, "POST", path, body=body, repeat=Repeat.IF_NOT_APPLIED)

    def heartbeat(self, job_id: str, lease: str, *, lease_seconds: int | None = None) -> JobDetail:
        """Extend a lease. Safe to repeat. Conflict once the lease has expired."""
        body = without_none({"lease": lease, "lease_seconds": lease_seconds})
        return self._post(JobDetail, f"/jobs/{segment(job_id)}/heartbeat", body)

    def ack(self, job_id: str, lease: str, *, result: JsonValue = None) -> JobDetail:
        """The leased attempt succeeded. Safe to repeat (a conditional write: a repeat after a
        lost answer answers Conflict, the attempt being over, and changes nothing)."""
        body = {"lease": lease, "result": result}
        return self._post(JobDetail, f"/jobs/{segment(job_id)}/ack", body)

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
        body = without_none(
            {
                "lease": lease,
                "error_type": error_type,
                "message": message,
                "traceback": traceback,
                "retry_after_seconds": retry_after_seconds,
                "retryable": retryable,
            }
        )
        return self._post(JobDetail, f"/jobs/{segment(job_id)}/nack", body)
