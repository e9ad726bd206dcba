"""Scale on the emulator: a backlog of 100,000 jobs in the table, and the sweep of a 10,000-job
due window out of it, by one sweeper invocation.

moto's server runs in its own process (as in `make run`), so its memory is measured apart from
the sweeper's, and every call crosses HTTP as it would to AWS. The backlog is written with the
store's own batch writer (BatchWriteItem, 25 jobs a request) from a few threads.

Two of moto's costs grow with size and shape the run: its Query sorts every item of the table
on each call (so the run uses one sweeper's group of shards, 8 queries rather than 64, and the
shard count is the configured shards per sweeper), and its SendMessage walks every message
already in the queue (so consumers in other processes drain the queues as the sweep fills them).
"""

from __future__ import annotations

import json
import multiprocessing
import random
import resource
import subprocess
import sys
import time
import tracemalloc
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from ulid import ULID

from bench.localrun import free_port
from bench.meter import AwsMeter, emulator_wall_s
from bench.system import PAYLOAD, BenchClock
from sundial.dispatch.sweeper import Sweeper
from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.store.jobs import JobStore
from sundial.store.sweeps import SweepStore
from sundial.transport.sender import QueueSender
from tests.support import TABLE, create_queues, create_table

MINUTE_MS = 60_000
LOAD_THREADS = 4


@dataclass(frozen=True)
class MotoServer:
    url: str
    pid: int

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def session(self) -> boto3.Session:
        return boto3.Session(
            aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
        )

    def client(self, session: boto3.Session, service: str) -> Any:
        return session.client(service, endpoint_url=self.url)  # type: ignore[call-overload]


@contextmanager
def moto_server(log: Path) -> Iterator[MotoServer]:
    port = free_port()
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-p", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.2)
        yield MotoServer(url=url, pid=process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _jobs(
    count: int, *, first_due_ms: int, span_ms: int, now_ms: int, shards: int, rng: random.Random
) -> list[Job]:
    payload = json.dumps(PAYLOAD, separators=(",", ":"))
    return [
        Job(
            key=JobKey(
                shard=rng.randrange(shards),
                due_ms=first_due_ms + rng.randrange(span_ms),
                ulid=str(ULID.from_timestamp(now_ms / 1000)),
            ),
            queue="default",
            payload_json=payload,
            priority=Priority.NORMAL,
            max_attempts=3,
            # A backlog submitted long before it comes due (a pending job written due soon
            # would have to be direct: JobStore.put_new refuses it otherwise)
            created_at_ms=now_ms - 86_400_000,
        )
        for _ in range(count)
    ]


def _load(server: MotoServer, jobs: list[Job]) -> float:
    """Write the backlog with the store's batch writer from a few threads; returns seconds."""
    chunks = [jobs[i : i + 2500] for i in range(0, len(jobs), 2500)]
    stores = [
        JobStore(server.client(server.session(), "dynamodb"), TABLE) for _ in range(LOAD_THREADS)
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(LOAD_THREADS) as pool:
        # Each job as written when it was submitted (its created_at), long before it comes due.
        submitted = min(job.created_at_ms for job in jobs)
        list(
            pool.map(
                lambda n: stores[n % LOAD_THREADS].put_new(chunks[n], now_ms=submitted),
                range(len(chunks)),
            )
        )
    return time.perf_counter() - started


def _sweep(
    server: MotoServer,
    clock: BenchClock,
    queue_urls: dict[str, str],
    *,
    shards: int,
    claim_concurrency: int,
) -> dict[str, Any]:
    """One sweeper invocation over every shard, with tracemalloc on: the emulator's time
    dominates, so it barely moves the clock."""
    session = server.session()
    meter = AwsMeter(session)
    dynamodb = server.client(session, "dynamodb")
    sweeper = Sweeper(
        store=JobStore(dynamodb, TABLE),
        sweeps=SweepStore(dynamodb, TABLE),
        sender=QueueSender(server.client(session, "sqs"), queue_urls),
        clock=clock,
        claim_concurrency=claim_concurrency,
    )
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    started = time.perf_counter()
    report = sweeper.sweep(list(range(shards)))
    wall = time.perf_counter() - started
    peak_kb = tracemalloc.get_traced_memory()[1] / 1024
    tracemalloc.stop()
    by_operation: dict[str, dict[str, float]] = {}
    for call in meter.calls:
        entry = by_operation.setdefault(call.operation, {"calls": 0, "emulator_s": 0.0})
        entry["calls"] += 1
        entry["emulator_s"] += call.emulator_s
    return {
        "claim_concurrency": claim_concurrency,
        "dispatched": report.dispatched,
        "seen": report.seen,
        "wall_s": wall,
        "jobs_per_s": report.dispatched / wall if wall else 0.0,
        "emulator_busy_s": emulator_wall_s(meter.calls),
        "by_operation": by_operation,
        "tracemalloc_peak_kb": peak_kb,
        "max_rss_mb": {
            "before": rss_before,
            "after": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
    }


def _drain(url: str, endpoint: str, stop: Any) -> None:
    """A consumer that deletes what arrives (in its own process, so the sweeper's memory is
    its own): moto's SendMessage walks every message already in the queue, twice, so an
    undrained queue of 10,000 would make the emulator, not the sweeper, the subject."""
    sqs = boto3.Session(
        aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    ).client("sqs", endpoint_url=endpoint)
    while not stop.is_set():
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        handles = [m["ReceiptHandle"] for m in messages.get("Messages", [])]
        if handles:
            sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(handles)],
            )
        else:
            stop.wait(0.05)


def run_scale(
    *,
    backlog: int,
    window: int,
    shards: int,
    workdir: Path,
    claim_concurrency: int = 1,
    seed: int = 11,
) -> dict[str, Any]:
    """One sweeper invocation over `shards` shards sweeps a window of `window` jobs out of a
    backlog of `backlog`. The window is overdue (due over the ten minutes before the sweep, as
    after a pause or a burst), so its messages are visible at once and drained as they come.

    Claims go one at a time by default: moto's server slows down under concurrent requests
    (in one run, 16 claims in flight made each UpdateItem about 20 times slower and the sweep
    six times longer), and on the emulator the time is moto's either way."""
    rng = random.Random(seed)
    clock = BenchClock(time.time_ns() // 1_000_000)
    now = clock.now_ms()
    jobs = _jobs(
        window,
        first_due_ms=now - 10 * MINUTE_MS,
        span_ms=10 * MINUTE_MS,
        now_ms=now,
        shards=shards,
        rng=rng,
    )
    jobs += _jobs(
        backlog - window,
        first_due_ms=now + 60 * MINUTE_MS,
        span_ms=24 * 60 * MINUTE_MS,
        now_ms=now,
        shards=shards,
        rng=rng,
    )
    with moto_server(workdir / "moto-scale.log") as server:
        admin = server.session()
        create_table(server.client(admin, "dynamodb"))
        queue_urls, _ = create_queues(server.client(admin, "sqs"))
        rss_empty = server.rss_mb()
        load_s = _load(server, jobs)
        count = server.client(admin, "dynamodb").describe_table(TableName=TABLE)["Table"][
            "ItemCount"
        ]
        rss_loaded = server.rss_mb()
        del jobs
        stop = multiprocessing.Event()
        drains = [
            multiprocessing.Process(target=_drain, args=(url, server.url, stop), daemon=True)
            for url in queue_urls.values()
        ]
        for drain in drains:
            drain.start()
        try:
            sweep = _sweep(
                server, clock, queue_urls, shards=shards, claim_concurrency=claim_concurrency
            )
        finally:
            stop.set()
            for drain in drains:
                drain.join(timeout=30)
        rss_server_after = server.rss_mb()
    return {
        "backlog": backlog,
        "items_in_table": count,
        "window": window,
        "shards": shards,
        "load_s": load_s,
        "load_jobs_per_s": backlog / load_s,
        "emulator_rss_mb": {
            "empty": rss_empty,
            "loaded": rss_loaded,
            "after_sweep": rss_server_after,
        },
        "sweep": sweep,
    }
