"""Run Sundial jobs outside Lambda: a worker leases jobs over the HTTP API, runs them in a
thread or process pool, heartbeats while they run, and acks or nacks each.

    from sundial.worker import Envelope, Worker

    def send_report(job: Envelope) -> dict:
        ...

    Worker(send_report, queue="reports", api_url="https://abc.execute-api...").run()

or from a shell: `python -m sundial.worker --api URL --queue reports mypackage.jobs:send_report`.

Every request goes through the Python client (sundial.client): one SigV4 signer (any HTTPS URL,
custom domains included, with the standard credential chain), one set of typed errors and one
retry policy, which repeats a call only when repeating it is safe:
- a lease is not idempotent (each receives other messages; a lost answer's jobs would wait out
  their lease before anyone could run them): repeated only when it certainly did nothing (429,
  or the connection never made). After a 5xx or a lost answer the worker waits a second and
  leases anew;
- heartbeat, ack and nack are conditional writes on the attempt's holder, so a repeat changes
  nothing more (a heartbeat sets the same lease end again; a repeated ack or nack finds the
  attempt over and answers 409): repeated with backoff on 429, 5xx and no answer, so a blip
  does not leave an attempt to be taken over and run a second time;
- a stored payload's presigned GET is repeated as any safe call.

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
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from sundial.client import (
    ApiUnreachable,
    HttpTransport,
    NotFound,
    RateLimited,
    ServerError,
    SundialClient,
    SundialError,
)
from sundial.client.leases import fetch_presigned
from sundial.clock import Clock, SystemClock
from sundial.model.payloads import PayloadUnavailable, check_payload
from sundial.transport.envelope import Envelope

logger = logging.getLogger("sundial.worker")

JobFunction = Callable[[Envelope], Any]
Pool = Literal["thread", "process"]
MAX_LEASE_BATCH = 10
PAYLOAD_FETCH_TIMEOUT_S = 60.0
# Answers after which leasing again later may succeed; any other refusal of a lease (unknown
# queue, no permission, a bad request) is a misconfiguration, and the worker stops on it.
_TRANSIENT = (ApiUnreachable, RateLimited, ServerError)


@dataclass(frozen=True, slots=True)
class Held:
    envelope: Envelope
    lease: str
    payload_url: str | None = None  # a payload stored in S3: where to GET it (presigned)


def fetch_payload(envelope: Envelope, payload_url: str | None) -> Envelope:
    """The envelope with its payload in place: a payload stored in S3 is fetched from the
    lease's presigned URL and checked against its sha256. PayloadUnavailable (the job then
    dies: no retry brings it back) if the object is gone or altered, or the lease came without
    a URL; a failure that may pass (S3 unreachable, a 5xx that outlasted the retries, an expired
    URL) is raised as it is: the attempt fails and is retried."""
    if envelope.payload_ref is None:
        return envelope
    ref = envelope.payload_ref.ref()
    if payload_url is None:
        raise PayloadUnavailable(
            f"job {envelope.id}'s payload is stored in S3 ({ref.key}) but the lease gave no "
            "payload_url: the API has no payload bucket"
        )
    try:
        body = fetch_presigned(payload_url, timeout_s=PAYLOAD_FETCH_TIMEOUT_S)
    except NotFound as missing:
        raise PayloadUnavailable(f"payload object {ref.key} is missing (expired?)") from missing
    payload = json.loads(check_payload(ref, body))
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
        region: str | None = None,
        client: SundialClient | None = None,
        concurrency: int = 4,
        pool: Pool = "thread",
        lease_seconds: int = 60,
        wait_seconds: int = 20,
        non_retryable: tuple[type[BaseException], ...] = (),
        burst: bool = False,
        clock: Clock | None = None,
    ) -> None:
        """`api_url`: the API (HTTPS is SigV4-signed in the region of an execute-api host, else
        `region`, else AWS_REGION); or `client`, a SundialClient made as you need (credentials,
        the local runtime's caller, a transport of your own). `burst`: return once a lease
        comes back empty and every held job is done, instead of waiting for more (for batch
        jobs and tests)."""
        if client is None:
            if api_url is None:
                raise ValueError("give api_url (or a client)")
            # The read timeout outlasts the lease's long poll.
            client = SundialClient(api_url, region=region, timeout_s=wait_seconds + 15)
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
        self._client = client
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
            if jobs is None:
                continue  # a failure that may pass: lease again (a burst worker too)
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

    def _lease(self, count: int) -> list[Held] | None:
        """Up to `count` jobs; None after a failure that may pass (then a second's pause, so
        an unreachable API is not polled in a spin). A refusal that will not pass (unknown
        queue, no permission) is raised: the worker stops loudly."""
        try:
            result = self._client.lease(
                self._queue, wait=self._wait_s, max_jobs=count, lease_seconds=self._lease_s
            )
        except _TRANSIENT as error:
            logger.warning("lease failed: %s", error)
            self._clock.wait_until(self._clock.now_ms() + 1000, self._stopping)
            return None
        # The function gets the envelope a consumer Lambda gets, parsed from the API's JSON.
        return [
            Held(
                Envelope.model_validate_json(leased.job.api_json()),
                leased.lease,
                leased.payload_url,
            )
            for leased in result.jobs
        ]

    def _finish(self, held: Held, done: Future[Any]) -> None:
        job_id = held.envelope.id
        try:
            error = done.exception()
            if error is None:
                ack = partial(self._client.ack, result=done.result())
                self._report("ack", job_id, held.lease, ack)
            else:
                retryable = not isinstance(error, (*self._non_retryable, PayloadUnavailable))
                nack = partial(
                    self._client.nack,
                    error_type=type(error).__name__,
                    message=str(error)[:500],
                    traceback="".join(traceback.format_exception(error))[:10_000],
                    retryable=retryable,
                )
                self._report("nack", job_id, held.lease, nack)
        finally:
            with self._slots:
                self._held.pop(job_id, None)
                self.completed += 1
                self._slots.notify_all()

    def _report(
        self, action: str, job_id: str, lease: str, call: Callable[[str, str], Any]
    ) -> None:
        """End the attempt (`call(job_id, lease)`); a failure is logged, not raised: the lease
        then runs out and the job is delivered again, its attempt taken over."""
        try:
            call(job_id, lease)
        except _TRANSIENT as error:
            logger.error("%s of job %s failed: %s", action, job_id, error)
        except SundialError as refused:
            logger.warning("%s of job %s refused: %s", action, job_id, refused)
        except (TypeError, ValueError) as error:
            # A result that is not JSON (or an answer that is not the API's)
            logger.error("%s of job %s failed: %s", action, job_id, error)

    def _heartbeat_loop(self) -> None:
        interval_ms = self._lease_s * 1000 // 3
        while self._clock.wait_until(self._clock.now_ms() + interval_ms, self._stopping):
            with self._slots:
                held = list(self._held.values())
            for job in held:
                try:
                    self._client.heartbeat(job.envelope.id, job.lease, lease_seconds=self._lease_s)
                except SundialError as error:
                    logger.warning("heartbeat of %s failed: %s", job.envelope.id, error)
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
    parser.add_argument(
        "--region", help="AWS region to sign for (default: the execute-api host's, AWS_REGION)"
    )
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
        region=args.region,
        concurrency=args.concurrency,
        pool=args.pool,
        lease_seconds=args.lease_seconds,
        wait_seconds=args.wait_seconds,
        burst=args.burst,
    )
    print(f"SUNDIAL_WORKER_READY queue={args.queue}", flush=True)
    worker.run()


__all__ = [
    "Envelope",
    "HttpTransport",
    "JobFunction",
    "SundialClient",
    "SundialError",
    "Worker",
    "fetch_payload",
    "main",
]

if __name__ == "__main__":
    main()
