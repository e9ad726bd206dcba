"""Run Sundial jobs outside Lambda: a worker leases jobs over the HTTP API, runs them in a
thread or process pool, heartbeats while they run, and acks or nacks each.

    from sundial.worker import Worker

    def send_report(job: Envelope) -> dict:
        ...

    Worker(send_report, queue="reports", api_url="https://abc.execute-api...").run()

or from a shell: `python -m sundial.worker --api URL --queue reports mypackage.jobs:send_report`.

Delivery blocks: a lease long-polls SQS (up to 20 s) and returns as soon as a job is there; a
worker whose pool is full waits for a free slot, not on a timer. On SIGTERM (or SIGINT) the
worker stops leasing, finishes the jobs it holds (acking each), then returns: `run()` is the
whole graceful drain a container orchestrator needs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import signal
import threading
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal
from urllib.parse import urlsplit

import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.session import get_session

from sundial.clock import Clock, SystemClock
from sundial.model.payloads import PayloadUnavailable, check_payload
from sundial.transport.envelope import Envelope

logger = logging.getLogger("sundial.runs.worker")

JobFunction = Callable[[Envelope], Any]
Pool = Literal["thread", "process"]
MAX_LEASE_BATCH = 10


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


Transport = Callable[[str, str, Mapping[str, Any]], tuple[int, Any]]


class HttpTransport:
    """JSON over HTTPS. Requests to an AWS endpoint are SigV4-signed (execute-api) with the
    default credential chain; the local runtime needs no signature."""

    def __init__(self, api_url: str, *, timeout_s: float = 35.0) -> None:
        self._base = api_url.rstrip("/")
        self._http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=5, read=timeout_s), retries=urllib3.Retry(3)
        )
        host = urlsplit(self._base).hostname or ""
        self._signer: SigV4Auth | None = None
        if host.endswith(".amazonaws.com"):
            session = get_session()
            credentials = session.get_credentials()
            if credentials is None:
                raise RuntimeError("no AWS credentials to sign Sundial API requests with")
            region = host.split(".")[2]
            self._signer = SigV4Auth(credentials, "execute-api", region)

    def __call__(self, method: str, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        url = f"{self._base}{path}"
        data = json.dumps(body).encode()
        headers = {"content-type": "application/json"}
        if self._signer is not None:
            request = AWSRequest(method=method, url=url, data=data, headers=headers)
            self._signer.add_auth(request)
            headers = dict(request.headers.items())
        response = self._http.request(method, url, body=data, headers=headers)
        payload = json.loads(response.data) if response.data else None
        return response.status, payload


@dataclass(frozen=True, slots=True)
class Held:
    envelope: Envelope
    lease: str
    payload_url: str | None = None  # a payload stored in S3: where to GET it (presigned)


PAYLOAD_FETCH_TIMEOUT_S = 60.0


def fetch_payload(envelope: Envelope, payload_url: str | None) -> Envelope:
    """The envelope with its payload in place: a payload stored in S3 is fetched from the
    lease's presigned URL and checked against its sha256. PayloadUnavailable (the job then
    dies: no retry brings it back) if the object is gone or altered, or the lease came without
    a URL; a network error or an S3 5xx is raised as it is (a retryable failure)."""
    if envelope.payload_ref is None:
        return envelope
    ref = envelope.payload_ref.ref()
    if payload_url is None:
        raise PayloadUnavailable(
            f"job {envelope.id}'s payload is stored in S3 ({ref.key}) but the lease gave no "
            "payload_url: the API has no payload bucket"
        )
    response = urllib3.request(
        "GET", payload_url, timeout=urllib3.Timeout(connect=5, read=PAYLOAD_FETCH_TIMEOUT_S)
    )
    if response.status == 404:
        raise PayloadUnavailable(f"payload object {ref.key} is missing (expired?)")
    if response.status != 200:
        raise RuntimeError(f"fetching the payload of job {envelope.id}: HTTP {response.status}")
    payload = json.loads(check_payload(ref, response.data))
    return envelope.model_copy(update={"payload": payload})


def run_job(function: JobFunction, envelope: Envelope, payload_url: str | None) -> Any:
    """What a pool runs for one job: its payload fetched (if stored in S3), then the function.
    Module-level, so a process pool can pickle it."""
    return function(fetch_payload(envelope, payload_url))


class Worker:
    def __init__(
        self,
        function: JobFunction,
        *,
        queue: str,
        api_url: str | None = None,
        transport: Transport | None = None,
        concurrency: int = 4,
        pool: Pool = "thread",
        lease_seconds: int = 60,
        wait_seconds: int = 20,
        non_retryable: tuple[type[BaseException], ...] = (),
        burst: bool = False,
        clock: Clock | None = None,
    ) -> None:
        """`burst`: return once a lease comes back empty and every held job is done, instead of
        waiting for more (for batch jobs and tests)."""
        if transport is None:
            if api_url is None:
                raise ValueError("give api_url (or a transport)")
            transport = HttpTransport(api_url, timeout_s=wait_seconds + 15)
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 1 <= lease_seconds <= 43_200:
            raise ValueError("lease_seconds must be 1..43200")
        if not 0 <= wait_seconds <= 20:
            raise ValueError("wait_seconds must be 0..20 (SQS long polling)")
        if pool not in ("thread", "process"):
            raise ValueError("pool must be 'thread' or 'process'")
        self._function = function
        self._queue = queue
        self._call = transport
        self._concurrency = concurrency
        self._pool: Pool = pool
        self._lease_s = lease_seconds
        self._wait_s = wait_seconds
        self._non_retryable = non_retryable
        self._burst = burst
        self._clock = clock or SystemClock()
        self._stopping = threading.Event()
        self._slots = threading.Condition()
        self._held: dict[str, Held] = {}
        self.completed = 0

    # -- control ----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop leasing; `run` returns once the jobs held now are finished."""
        self._stopping.set()
        with self._slots:
            self._slots.notify_all()

    def run(self) -> None:
        """Lease and run jobs until stop() or SIGTERM/SIGINT, then drain and return."""
        restore = self._install_signal_handlers()
        heartbeat = threading.Thread(target=self._heartbeat_loop, name="sundial-heartbeats")
        executor = self._executor()
        heartbeat.start()
        try:
            self._lease_loop(executor)
        finally:
            executor.shutdown(wait=True)  # finish what is held: each ack runs as it completes
            self._stopping.set()
            heartbeat.join()
            restore()
        logger.info("worker drained", extra={"completed": self.completed})

    # -- the loop ---------------------------------------------------------------------------

    def _lease_loop(self, executor: Executor) -> None:
        while not self._stopping.is_set():
            with self._slots:
                self._slots.wait_for(
                    lambda: self._stopping.is_set() or len(self._held) < self._concurrency
                )
                free = self._concurrency - len(self._held)
            if self._stopping.is_set():
                return
            jobs = self._lease(min(free, MAX_LEASE_BATCH))
            if not jobs and self._burst:
                with self._slots:
                    self._slots.wait_for(lambda: not self._held)
                    if not self._held:
                        return
            for held in jobs:
                with self._slots:
                    self._held[held.envelope.id] = held
                future = executor.submit(run_job, self._function, held.envelope, held.payload_url)
                future.add_done_callback(partial(self._finish, held))

    def _lease(self, count: int) -> list[Held]:
        body = {"wait": self._wait_s, "max": count, "lease_seconds": self._lease_s}
        try:
            status, result = self._call("POST", f"/queues/{self._queue}/lease", body)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            logger.warning("lease failed: %s", error)
            self._stopping.wait(1)  # the API is unreachable: do not spin
            return []
        if status != 200:
            if 400 <= status < 500:
                raise ApiError(status, result)  # misconfigured (unknown queue): stop loudly
            logger.warning("lease failed: HTTP %s %s", status, result)
            self._stopping.wait(1)
            return []
        return [
            Held(Envelope.model_validate(item["job"]), item["lease"], item.get("payload_url"))
            for item in result["jobs"]
        ]

    def _finish(self, held: Held, done: Future[Any]) -> None:
        job_id = held.envelope.id
        try:
            error = done.exception()
            if error is None:
                self._report(job_id, "ack", {"lease": held.lease, "result": done.result()})
            else:
                self._report(
                    job_id,
                    "nack",
                    {
                        "lease": held.lease,
                        "error_type": type(error).__name__,
                        "message": str(error)[:500],
                        "traceback": "".join(traceback.format_exception(error))[:10_000],
                        "retryable": not isinstance(
                            error, (*self._non_retryable, PayloadUnavailable)
                        ),
                    },
                )
        finally:
            with self._slots:
                self._held.pop(job_id, None)
                self.completed += 1
                self._slots.notify_all()

    def _report(self, job_id: str, action: str, body: dict[str, Any]) -> None:
        try:
            status, result = self._call("POST", f"/jobs/{job_id}/{action}", body)
        except (urllib3.exceptions.HTTPError, OSError, TypeError, ValueError) as error:
            # TypeError/ValueError: a result that is not JSON. The lease runs out and the job
            # is delivered again; its attempt is then taken over.
            logger.error("%s of job %s failed: %s", action, job_id, error)
            return
        if status != 200:
            logger.warning("%s of job %s refused: HTTP %s %s", action, job_id, status, result)

    def _heartbeat_loop(self) -> None:
        interval_ms = self._lease_s * 1000 // 3
        while self._clock.wait_until(self._clock.now_ms() + interval_ms, self._stopping):
            with self._slots:
                held = list(self._held.values())
            for job in held:
                body = {"lease": job.lease, "lease_seconds": self._lease_s}
                try:
                    status, _ = self._call("POST", f"/jobs/{job.envelope.id}/heartbeat", body)
                except (urllib3.exceptions.HTTPError, OSError) as error:
                    logger.warning("heartbeat of %s failed: %s", job.envelope.id, error)
                    continue
                if status != 200:
                    logger.warning("heartbeat of %s refused: HTTP %s", job.envelope.id, status)
        # The loop also ends when run() stops it after the drain.

    def _executor(self) -> Executor:
        if self._pool == "process":
            return ProcessPoolExecutor(self._concurrency, initializer=_ignore_stop_signals)
        return ThreadPoolExecutor(self._concurrency, thread_name_prefix="sundial-job")

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None  # signals reach the main thread only; call stop() instead
        previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, lambda *_: self.stop())

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


def _ignore_stop_signals() -> None:
    """Pool processes finish their job on SIGTERM/SIGINT (sent to the whole process group);
    the worker decides when to stop."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _load(target: str) -> JobFunction:
    module_name, _, attribute = target.partition(":")
    if not attribute:
        raise SystemExit(f"{target!r}: give the function as module:function")
    function: JobFunction = getattr(importlib.import_module(module_name), attribute)
    return function


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sundial.worker", description=__doc__)
    parser.add_argument("function", help="module:function taking an Envelope")
    parser.add_argument("--api", required=True, help="Sundial API base URL")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pool", choices=["thread", "process"], default="thread")
    parser.add_argument("--lease-seconds", type=int, default=60)
    parser.add_argument("--wait-seconds", type=int, default=20)
    parser.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    worker = Worker(
        _load(args.function),
        queue=args.queue,
        api_url=args.api,
        concurrency=args.concurrency,
        pool=args.pool,
        lease_seconds=args.lease_seconds,
        wait_seconds=args.wait_seconds,
        burst=args.burst,
    )
    print(f"SUNDIAL_WORKER_READY queue={args.queue}", flush=True)
    worker.run()


if __name__ == "__main__":
    main()
