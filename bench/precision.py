"""Timing precision on the local runtime, in real time: jobs due at random moments over a window
are submitted over HTTP to a queue no consumer reads, and a receiver records when each one
becomes receivable.

When is a message receivable? The receiver short-polls the queue (ReceiveMessage with
WaitTimeSeconds=0 every POLL_INTERVAL_S) and reads each message's
ApproximateFirstReceiveTimestamp: the emulator's own clock at the receive that returned it, so
the figure is exact to the emulator and late by at most one poll gap. A long-polling receiver
would be wrong here: moto re-checks delayed messages only once a second during a long poll
(it wakes early only when a new message is sent), which would add up to a second of the
emulator's own making.

The lateness splits in two, using SentTimestamp (when SQS accepted the message): the message
became visible at SentTimestamp + DelaySeconds, a whole number of seconds (the sender rounds
the time left up to one); the rest is the receiver's poll gap.
"""

from __future__ import annotations

import json
import math
import queue
import random
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ulid import ULID

from bench.localrun import LocalSundial, local_sundial
from sundial.clock import to_rfc3339
from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.store.jobs import JobStore

POLL_INTERVAL_S = 0.02
BATCH = 25
AHEAD_S = 20
PACE_S = 2


@dataclass
class Arrival:
    job_id: str
    first_receive_ms: int
    sent_ms: int


@dataclass
class Receiver:
    """Short-polls one queue; deletes what it received on a second thread."""

    local: LocalSundial
    url: str
    arrivals: list[Arrival] = field(default_factory=list)
    poll_starts: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._deletes: queue.Queue[list[str] | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._poll, name="receiver", daemon=True),
            threading.Thread(target=self._delete, name="deleter", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        self._deletes.put(None)
        for thread in self._threads:
            thread.join(timeout=30)

    def _poll(self) -> None:
        sqs = self.local.client("sqs")
        while not self.stop.is_set():
            try:
                self._poll_once(sqs)
            except Exception as error:  # a hiccup of the emulator: note it and poll again
                self.errors.append(repr(error))
                self.stop.wait(0.5)

    def _poll_once(self, sqs: Any) -> None:
        self.poll_starts.append(time.monotonic())
        messages = sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
            VisibilityTimeout=900,
            MessageSystemAttributeNames=["ApproximateFirstReceiveTimestamp", "SentTimestamp"],
        ).get("Messages", [])
        for message in messages:
            self.arrivals.append(
                Arrival(
                    job_id=json.loads(message["Body"])["id"],
                    first_receive_ms=int(message["Attributes"]["ApproximateFirstReceiveTimestamp"]),
                    sent_ms=int(message["Attributes"]["SentTimestamp"]),
                )
            )
        if messages:
            self._deletes.put([m["ReceiptHandle"] for m in messages])
        if len(messages) < 10:
            self.stop.wait(POLL_INTERVAL_S)

    def _delete(self) -> None:
        sqs = self.local.client("sqs")
        while (handles := self._deletes.get()) is not None:
            sqs.delete_message_batch(
                QueueUrl=self.url,
                Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)],
            )


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _submit(local: LocalSundial, dues: list[int]) -> list[tuple[str, int, int]]:
    """One POST /jobs/batch; returns (job id, due, when it was accepted) per job."""
    body = {
        "jobs": [
            {"queue": "default", "run_at": to_rfc3339(due), "payload": {"n": i}}
            for i, due in enumerate(dues)
        ]
    }
    status, answer = local.post("/jobs/batch", body)
    if status != 200:
        raise RuntimeError(f"batch submit failed: {status} {answer}")
    accepted_ms = time.time_ns() // 1_000_000
    accepted = []
    for due, result in zip(dues, answer["results"], strict=True):
        if result["status_code"] != 201:
            raise RuntimeError(f"job refused: {result}")
        accepted.append((result["job"]["id"], due, accepted_ms))
    return accepted


def _submit_ahead(local: LocalSundial, dues: list[int]) -> list[tuple[str, int, int]]:
    """Submit each job about AHEAD_S before it is due, every PACE_S, in 25-job batches.

    Not all at once: moto's ReceiveMessage and SendMessage walk every message in the queue, so
    a queue holding all the delayed jobs would slow the receiver until it lagged behind what
    it measures. Submitted this way the queue holds about AHEAD_S worth of jobs. How far ahead
    a job is sent does not change its timing: DelaySeconds is rounded the same way."""
    accepted: list[tuple[str, int, int]] = []
    next_up = 0
    while next_up < len(dues):
        tick = time.monotonic()
        horizon = time.time_ns() // 1_000_000 + AHEAD_S * 1000
        due_soon = []
        while next_up < len(dues) and dues[next_up] <= horizon:
            due_soon.append(dues[next_up])
            next_up += 1
        for start in range(0, len(due_soon), BATCH):
            accepted += _submit(local, due_soon[start : start + BATCH])
        time.sleep(max(0.0, PACE_S - (time.monotonic() - tick)))
    return accepted


# The sweeper path: jobs written to the table as if submitted long ago, due from this long
# after they are written (past the next tick, which fires at most 60 s later) over SWEPT_SPAN.
SWEPT_FROM_S = 75
SWEPT_QUEUE = "email"  # a queue of its own (no consumer locally): the two paths do not mix


def _write_swept(
    local: LocalSundial, dues: list[int], rng: random.Random, shards: int
) -> dict[str, int]:
    """Pending jobs in the table, as a submit made more than 15 minutes before they are due
    leaves them: the sweeper, not the submit, sends them. Written with the store's own batch
    writer; returns {job id: due}."""
    now = time.time_ns() // 1_000_000
    dynamodb = local.client("dynamodb")
    table = next(name for name in dynamodb.list_tables()["TableNames"] if "JobTable" in name)
    payload = json.dumps({"path": "sweeper"})
    jobs = [
        Job(
            key=JobKey(shard=rng.randrange(shards), due_ms=due, ulid=str(ULID())),
            queue=SWEPT_QUEUE,
            payload_json=payload,
            priority=Priority.NORMAL,
            max_attempts=3,
            created_at_ms=now - 3_600_000,
        )
        for due in dues
    ]
    # Written as submitted an hour ago (created_at): a backlog the sweeper finds due.
    JobStore(dynamodb, table).put_new(jobs, now_ms=now - 3_600_000)
    return {job.id: job.key.due_ms for job in jobs}


def run_precision(
    cdk_out: Path,
    *,
    jobs: int,
    window_s: int,
    lead_s: int,
    workdir: Path,
    shards: int = 64,
    seed: int = 5,
) -> dict[str, Any]:
    """Both paths in one run of the local runtime: `jobs` submitted over HTTP (the submit
    sends them), and a quarter as many written pending for the sweeper to send, each path to
    its own queue and receiver."""
    rng = random.Random(seed)
    with local_sundial(cdk_out, workdir / "local-precision.log") as local:
        receiver = Receiver(local, local.queue_url("default"))
        swept_receiver = Receiver(local, local.queue_url(SWEPT_QUEUE))
        receiver.start()
        swept_receiver.start()
        written_ms = time.time_ns() // 1_000_000
        swept_span_ms = max(1, window_s - SWEPT_FROM_S) * 1000
        swept_dues = sorted(
            written_ms + SWEPT_FROM_S * 1000 + rng.randrange(swept_span_ms)
            for _ in range(max(1, jobs // 4))
        )
        swept_by_id = _write_swept(local, swept_dues, rng, shards)
        start_ms = time.time_ns() // 1_000_000 + lead_s * 1000
        dues = sorted(start_ms + rng.randrange(window_s * 1000) for _ in range(jobs))
        submit_started = time.monotonic()
        submitted = _submit_ahead(local, dues)
        submit_s = time.monotonic() - submit_started
        due_by_id = {job_id: due for job_id, due, _ in submitted}
        submitted_late = sum(1 for _, due, at in submitted if due < at)
        last_due = max(dues[-1], swept_dues[-1])
        deadline = time.monotonic() + (last_due - time.time_ns() // 1_000_000) / 1000 + 15
        while time.monotonic() < deadline and (
            len({a.job_id for a in receiver.arrivals}) < len(due_by_id)
            or len({a.job_id for a in swept_receiver.arrivals}) < len(swept_by_id)
        ):
            time.sleep(0.5)
        time.sleep(2)  # a duplicate would show up now
        receiver.finish()
        swept_receiver.finish()
        startup_s = local.startup_s
    summary = summarize(
        receiver,
        due_by_id,
        submit_s=submit_s,
        submitted_late=submitted_late,
        window_s=window_s,
        startup_s=startup_s,
    )
    swept = summarize(
        swept_receiver,
        swept_by_id,
        submit_s=0.0,
        submitted_late=0,
        window_s=max(1, window_s - SWEPT_FROM_S),
        startup_s=startup_s,
    )
    return {**summary, "lead_s": lead_s, "swept": swept}


def summarize(
    receiver: Receiver,
    due_by_id: dict[str, int],
    *,
    submit_s: float,
    submitted_late: int,
    window_s: int,
    startup_s: float,
) -> dict[str, Any]:
    first: dict[str, Arrival] = {}
    duplicates = 0
    for arrival in receiver.arrivals:
        if arrival.job_id in first:
            duplicates += 1
        else:
            first[arrival.job_id] = arrival
    lateness = [first[j].first_receive_ms - due for j, due in due_by_id.items() if j in first]
    rounding, poll_lag = [], []
    for job_id, due in due_by_id.items():
        if job_id not in first:
            continue
        arrival = first[job_id]
        # It became visible a whole number of seconds after SQS accepted it, and no later than
        # the receive that returned it (the poll gap is far below a second).
        delay_s = max(0, (arrival.first_receive_ms - arrival.sent_ms) // 1000)
        visible_ms = arrival.sent_ms + delay_s * 1000
        rounding.append(visible_ms - due)
        poll_lag.append(arrival.first_receive_ms - visible_ms)
    gaps = [b - a for a, b in zip(receiver.poll_starts, receiver.poll_starts[1:], strict=False)]
    return {
        "jobs": len(due_by_id),
        "window_s": window_s,
        "received": len(first),
        "missing": len(due_by_id) - len(first),
        "receiver_errors": receiver.errors[:5],
        "duplicates": duplicates,
        "early": sum(1 for x in lateness if x < 0),
        "submitted_after_due": submitted_late,
        "submit_s": submit_s,
        "startup_s": startup_s,
        "lateness_ms": lateness,
        "p50_ms": percentile(lateness, 0.50),
        "p95_ms": percentile(lateness, 0.95),
        "p99_ms": percentile(lateness, 0.99),
        "max_ms": max(lateness),
        "min_ms": min(lateness),
        "mean_ms": statistics.fmean(lateness),
        "rounding_mean_ms": statistics.fmean(rounding),
        "rounding_p99_ms": percentile(rounding, 0.99),
        "poll_lag_mean_ms": statistics.fmean(poll_lag),
        "poll_lag_p99_ms": percentile(poll_lag, 0.99),
        "poll_gap_median_ms": statistics.median(gaps) * 1000 if gaps else 0.0,
        "poll_gap_p99_ms": percentile(gaps, 0.99) * 1000 if gaps else 0.0,
    }
