"""Synthetic job history at any size, in the raw format the history Lambda writes (gzip JSON
lines under `dt=YYYY-MM-DD/`), for tests, `make report` without a local runtime, and the
compaction benchmark.

The jobs behave like Sundial's: a mix of queues (each with its own failure rate, error types
and run times), priorities, delays from immediate to days ahead (direct sends, sweeper
claims), lateness with rare spikes, retries with exponential backoff and full jitter up to each
queue's attempt budget, dead jobs (some retried by hand hours later), cancellations, scheduled
runs (a few occurrences written already cancelled, as a schedule's revision writes them) and
DAGs (chains whose children are inserted `blocked` and released, with their release time,
when the job before them ends). So every status a job is inserted with occurs: `pending`,
`blocked` and `cancelled`. A small share of events is written twice, as a redelivered stream
batch would be.

Everything is drawn from `random.Random` seeded per creation day, so the same arguments give
the same history however many worker processes write it.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import json
import math
import random
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sundial_history.columns import RAW_EVENT, names

DAY_MS = 86_400_000
SWEEP_LOOKAHEAD_MS = 14 * 60_000  # the sweeper claims jobs this far ahead (sundial.timing)
DIRECT_WINDOW_MS = 15 * 60_000  # jobs due this soon are sent by the submit Lambda itself
DEFAULT_START = date(2026, 11, 14)
FIELDS = names(RAW_EVENT)


@dataclass(frozen=True)
class QueueProfile:
    name: str
    weight: float
    failure_rate: float
    duration_median_ms: float
    max_attempts: int
    errors: tuple[tuple[str, float], ...]
    poison_rate: float = 0.005  # jobs that fail every attempt, and so end dead


QUEUES: tuple[QueueProfile, ...] = (
    QueueProfile(
        "email",
        0.35,
        0.04,
        350,
        5,
        (("SMTPServerDisconnected", 5), ("TimeoutError", 3), ("InvalidAddress", 1)),
    ),
    QueueProfile(
        "default", 0.25, 0.02, 900, 3, (("TimeoutError", 3), ("KeyError", 2), ("ValueError", 1))
    ),
    QueueProfile(
        "webhooks",
        0.15,
        0.10,
        600,
        5,
        (("HTTPError", 6), ("ConnectionError", 4), ("TimeoutError", 2)),
    ),
    QueueProfile("billing", 0.15, 0.01, 1200, 3, (("ThrottlingException", 3), ("CardDeclined", 2))),
    QueueProfile("reports", 0.10, 0.06, 25_000, 3, (("MemoryError", 1), ("TimeoutError", 4))),
)
PRIORITIES = (("critical", 0.05), ("high", 0.15), ("normal", 0.65), ("low", 0.15))
CANCEL_RATE = 0.03
DAG_RATE = 0.02  # of draws: a DAG (a chain of jobs) instead of one job
DAG_CHILDREN = (1, 4)  # a DAG's root has this many descendants, one after the other
DAG_CONTINUE_RATE = 0.5  # DAGs whose children still run after a job of theirs died
SCHEDULE_RATE = 0.15
SCHEDULES_PER_QUEUE = 12
REPLACED_OCCURRENCE_RATE = 0.02  # schedule occurrences written already cancelled (a revision)
HAND_RETRY_RATE = 0.3  # dead jobs retried by hand, hours later
DUPLICATE_RATE = 0.005
EVENTS_PER_JOB = 3.2  # what the mix above averages, to size a day's jobs for a target count


def _cumulative(weights: Sequence[float]) -> list[float]:
    return list(itertools.accumulate(weights))


_QUEUE_CUMULATIVE = _cumulative([q.weight for q in QUEUES])
_PRIORITY_CUMULATIVE = _cumulative([w for _, w in PRIORITIES])
_ERROR_CUMULATIVE = {q.name: _cumulative([w for _, w in q.errors]) for q in QUEUES}


def _pick(rng: random.Random, cumulative: list[float]) -> int:
    return bisect.bisect_right(cumulative, rng.random() * cumulative[-1])


@dataclass
class _Job:
    """One job's events as the history Lambda records them (sundial.history.capture)."""

    day: _Day
    queue: QueueProfile
    priority: str
    due: int
    schedule_id: str | None = None
    dag_id: str | None = None
    job_id: str = ""
    released: int | None = None  # a DAG child's release
    events: list[dict[str, Any]] = field(default_factory=list)

    def emit(
        self,
        status: str,
        at: int,
        attempt: int,
        attempt_due: int,
        *,
        started: int | None = None,
        error: str | None = None,
    ) -> None:
        self.events.append(
            {
                "v": 1,
                "event_id": self.day.event_id(),
                "job_id": self.job_id,
                "queue": self.queue.name,
                "priority": self.priority,
                "schedule_id": self.schedule_id,
                "dag_id": self.dag_id,
                "from_status": self.events[-1]["to_status"] if self.events else None,
                "to_status": status,
                "attempt": attempt,
                "due_at_ms": attempt_due,
                "event_at_ms": at,
                "started_at_ms": started,
                "duration_ms": at - started if started is not None else None,
                "error_type": error,
                "correlation_id": None,
                "released_at_ms": self.released,
            }
        )

    def run(self, ready: int, *, first_attempt: int = 1, poisoned: bool = False) -> tuple[str, int]:
        """Attempts from `first_attempt`, the first due at `ready`, until one succeeds or the
        queue's attempt budget is spent: (succeeded | dead, when it ended)."""
        rng, queue = self.day.rng, self.queue
        attempt_due = ready
        last = max(queue.max_attempts, first_attempt)
        for attempt in range(first_attempt, last + 1):
            lateness = rng.lognormvariate(math.log(250), 0.6)
            if rng.random() < 0.01:
                lateness += rng.uniform(1_000, 30_000)  # a cold start, a throttle
            started = attempt_due + int(lateness)
            ended = started + int(rng.lognormvariate(math.log(queue.duration_median_ms), 0.5))
            if not poisoned and rng.random() >= queue.failure_rate:
                self.emit("succeeded", ended, attempt, attempt_due, started=started)
                return "succeeded", ended
            error = queue.errors[_pick(rng, _ERROR_CUMULATIVE[queue.name])][0]
            if attempt == last:
                self.emit("dead", ended, attempt, attempt_due, started=started, error=error)
                return "dead", ended
            self.emit("failed", ended, attempt, attempt_due, started=started, error=error)
            attempt_due = ended + int(rng.uniform(0, min(3_600_000, 10_000 * 2 ** (attempt - 1))))
        raise AssertionError("unreachable: the last attempt succeeds or dies")

    def finish(self, ready: int, *, poisoned: bool) -> tuple[str, int]:
        """Run it; a dead job may be retried by hand hours later (pending again, due at the
        retry request, its attempts counted on), which can succeed."""
        outcome, ended = self.run(ready, poisoned=poisoned)
        rng = self.day.rng
        if outcome == "dead" and rng.random() < HAND_RETRY_RATE:
            attempts = self.events[-1]["attempt"]
            retried = ended + int(rng.uniform(3_600_000, 30 * 3_600_000))
            self.emit("pending", retried, attempts, retried)
            self.emit("queued", retried + rng.randint(5, 80), attempts, retried)
            outcome, ended = self.run(retried, first_attempt=attempts + 1)
        return outcome, ended


@dataclass
class _Day:
    """Draws the jobs created on one day."""

    day: date
    seed: int
    jobs: int
    rng: random.Random = field(init=False)
    start_ms: int = field(init=False)
    event_seq: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.seed}/{self.day.isoformat()}")
        self.start_ms = int(
            datetime(self.day.year, self.day.month, self.day.day, tzinfo=UTC).timestamp() * 1000
        )

    def event_id(self) -> str:
        self.event_seq += 1
        return f"{self.day.strftime('%Y%m%d')}{self.seed % 65536:04x}{self.event_seq:020x}"

    def events(self) -> Iterator[dict[str, Any]]:
        for _ in range(self.jobs):
            for event in self._draw():
                yield event
                if self.rng.random() < DUPLICATE_RATE:
                    yield event  # a redelivered stream record: same event id

    def _job(self, created: int, due: int, **labels: Any) -> _Job:
        rng = self.rng
        job = _Job(
            self,
            QUEUES[_pick(rng, _QUEUE_CUMULATIVE)],
            PRIORITIES[_pick(rng, _PRIORITY_CUMULATIVE)][0],
            due,
            **labels,
        )
        job.job_id = _job_token(rng)
        return job

    def _timing(self) -> tuple[int, int]:
        """(created, due): delays from immediate (sent by the submit Lambda) to days ahead."""
        rng = self.rng
        created = self.start_ms + int(rng.random() * DAY_MS)
        roll = rng.random()
        if roll < 0.45:
            delay = rng.uniform(0, 5_000)
        elif roll < 0.80:
            delay = rng.uniform(5_000, DIRECT_WINDOW_MS * 1.2)
        elif roll < 0.97:
            delay = rng.uniform(DIRECT_WINDOW_MS, 6 * 3_600_000)
        else:
            delay = rng.uniform(6 * 3_600_000, 3 * DAY_MS)
        return created, created + int(delay)

    def _queued_at(self, created: int, due: int) -> int:
        if due - created <= DIRECT_WINDOW_MS:
            return created + self.rng.randint(5, 80)
        return max(created, due - SWEEP_LOOKAHEAD_MS + int(self.rng.uniform(0, 60_000)))

    def _draw(self) -> list[dict[str, Any]]:
        if self.rng.random() < DAG_RATE:
            return self._dag()
        return self._single().events

    def _single(self) -> _Job:
        rng = self.rng
        created, due = self._timing()
        job = self._job(created, due)
        if rng.random() < SCHEDULE_RATE:
            job.schedule_id = f"sched-{job.queue.name}-{rng.randrange(SCHEDULES_PER_QUEUE)}"
            if rng.random() < REPLACED_OCCURRENCE_RATE:
                job.emit("cancelled", created, 0, due)  # written cancelled: it never runs
                return job
        poisoned = rng.random() < job.queue.poison_rate
        job.emit("pending", created, 0, due)
        queued_at = self._queued_at(created, due)
        if rng.random() < CANCEL_RATE:
            cancel_at = created + int(rng.random() * max(1, due - created))
            if cancel_at >= queued_at:
                job.emit("queued", queued_at, 0, due)
            job.emit("cancelled", cancel_at, 0, due)
            return job
        job.emit("queued", queued_at, 0, due)
        job.finish(due, poisoned=poisoned)
        return job

    def _dag(self) -> list[dict[str, Any]]:
        """A chain: the root runs at the DAG's due time; each child, inserted `blocked` with
        the root and due at the same time, is released when the job before it ends (if that
        one died: released anyway when the DAG continues on failure, else cancelled)."""
        rng = self.rng
        created, due = self._timing()
        dag_id = f"dag-{self.day:%Y%m%d}-{self.event_seq:x}"
        jobs = [self._job(created, due, dag_id=dag_id)]
        jobs += [self._job(created, due, dag_id=dag_id) for _ in range(rng.randint(*DAG_CHILDREN))]
        continues = rng.random() < DAG_CONTINUE_RATE
        root, children = jobs[0], jobs[1:]
        root.emit("pending", created, 0, due)
        for child in children:
            child.emit("blocked", created, 0, due)
        root.emit("queued", self._queued_at(created, due), 0, due)
        outcome, ended = root.finish(due, poisoned=rng.random() < root.queue.poison_rate)
        for child in children:
            at = ended + rng.randint(5, 200)
            if outcome != "succeeded" and not continues:
                child.emit("cancelled", at, 0, due)
                continue
            child.released = at
            child.emit("queued", at, 0, due)
            outcome, ended = child.finish(
                max(due, at), poisoned=rng.random() < child.queue.poison_rate
            )
        return [event for job in jobs for event in job.events]


def _job_token(rng: random.Random) -> str:
    """A 36-character URL-safe token shaped like a Sundial job id (random, not decodable)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    bits = rng.getrandbits(216)
    return "".join(alphabet[(bits >> (6 * i)) & 63] for i in range(36))


def _days(start: date, days: int) -> list[date]:
    return [start + timedelta(days=n) for n in range(days)]


def _jobs_per_day(events: int, days: int) -> int:
    return max(1, math.ceil(events / EVENTS_PER_JOB / days))


def generate_events(
    events: int, *, start: date = DEFAULT_START, days: int = 7, seed: int = 7
) -> Iterator[dict[str, Any]]:
    """About `events` raw events (as dicts) for jobs created over `days` days from `start`."""
    per_day = _jobs_per_day(events, days)
    for day in _days(start, days):
        yield from _Day(day, seed, per_day).events()


@dataclass(frozen=True)
class RawHistoryStats:
    events: int
    files: int
    bytes: int
    dates: tuple[str, ...]


def _utc_date(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def _write_days(
    root: str, days: list[date], *, seed: int, jobs_per_day: int, events_per_file: int, worker: int
) -> RawHistoryStats:
    buffers: dict[str, list[str]] = {}
    first_ms: dict[str, int] = {}
    counter = itertools.count()
    totals = {"events": 0, "files": 0, "bytes": 0}
    dates: set[str] = set()

    def flush(dt: str) -> None:
        lines = buffers.pop(dt)
        folder = Path(root) / f"dt={dt}"
        folder.mkdir(parents=True, exist_ok=True)
        data = gzip.compress("".join(lines).encode(), compresslevel=6, mtime=0)
        path = folder / f"{first_ms.pop(dt):013d}-w{worker}-{next(counter):06d}.json.gz"
        path.write_bytes(data)
        totals["files"] += 1
        totals["bytes"] += len(data)

    for day in days:
        for event in _Day(day, seed, jobs_per_day).events():
            dt = _utc_date(event["event_at_ms"])
            dates.add(dt)
            if dt not in buffers:
                buffers[dt] = []
                first_ms[dt] = event["event_at_ms"]
            buffers[dt].append(json.dumps(event, separators=(",", ":")) + "\n")
            totals["events"] += 1
            if len(buffers[dt]) >= events_per_file:
                flush(dt)
    for dt in list(buffers):
        flush(dt)
    return RawHistoryStats(totals["events"], totals["files"], totals["bytes"], tuple(sorted(dates)))


def write_raw_history(
    root: Path,
    events: int,
    *,
    start: date = DEFAULT_START,
    days: int = 7,
    seed: int = 7,
    events_per_file: int = 5_000,
    workers: int = 1,
) -> RawHistoryStats:
    """Write about `events` raw events under `root/dt=YYYY-MM-DD/` as gzip JSON-lines files of
    `events_per_file` events (one history Lambda batch each), using `workers` processes."""
    all_days = _days(start, days)
    per_day = _jobs_per_day(events, days)
    shares = [all_days[w::workers] for w in range(workers)]
    if workers == 1:
        results = [
            _write_days(
                str(root),
                all_days,
                seed=seed,
                jobs_per_day=per_day,
                events_per_file=events_per_file,
                worker=0,
            )
        ]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(
                    _write_days,
                    str(root),
                    share,
                    seed=seed,
                    jobs_per_day=per_day,
                    events_per_file=events_per_file,
                    worker=w,
                )
                for w, share in enumerate(shares)
                if share
            ]
            results = [f.result() for f in futures]
    return RawHistoryStats(
        events=sum(r.events for r in results),
        files=sum(r.files for r in results),
        bytes=sum(r.bytes for r in results),
        dates=tuple(sorted({d for r in results for d in r.dates})),
    )
