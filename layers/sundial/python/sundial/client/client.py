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

The calls are written by resource, each in its own module (`jobs`, `schedules`, `dags`,
`queues`, `dead_letters`, `leases`), on the request machinery of `calls`; this class joins
them and says how to reach the API.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sundial.client.backoff import Backoff
from sundial.client.dags import DagCalls
from sundial.client.dead_letters import DeadLetterCalls
from sundial.client.jobs import JobCalls
from sundial.client.leases import LeaseCalls
from sundial.client.queues import QueueCalls
from sundial.client.schedules import ScheduleCalls
from sundial.client.transport import HttpTransport, Transport, default_api_url

if TYPE_CHECKING:
    from botocore.credentials import Credentials


class SundialClient(JobCalls, ScheduleCalls, DagCalls, QueueCalls, DeadLetterCalls, LeaseCalls):
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
        self._transport = transport or HttpTransport(
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
