"""The cost ledger: every AWS call and capacity unit per job, path by path, in dollars per
million jobs, beside a Dynein-style baseline (run here on moto too) and the EventBridge
Scheduler model.

A path is one small function that drives jobs through the real handlers on an
`InProcessSundial`; register it with `@ledger_path`. Each path runs in a fresh emulator, and
everything metered during it is charged to its jobs, so per-tick costs (the fan-out, the
sweepers' cursor reads and writes, their queries) are included at the path's volume and shown
apart. The schedules/DAG issue adds its paths the same way.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.config import BenchConfig
from bench.cost_curve import cost_curve
from bench.costs import DEFAULTS, SideQuantities, per_million, provisioned_break_even
from bench.dynein import DyneinScheduler
from bench.meter import Call
from bench.prices import MILLION, PRICES, Prices
from bench.system import InProcessSundial, Invocation, payload
from sundial.clock import to_rfc3339
from sundial.ids import SHARD_PREFIX, JobKey
from sundial.model.submission import parse_rfc3339
from sundial.timing import SWEEP_LOOKAHEAD_MS
from sundial.transport.envelope import Envelope
from tests.support import DAILY_REPORT

HOUR_MS = 3_600_000
MINUTE_MS = 60_000
TICKS_PER_MONTH = 30 * 24 * 60
TICK_S = 60.0  # a path's jobs are due within one tick: the time they arrive over
REPO = Path(__file__).resolve().parent.parent
METRIC_NAME = re.compile(r'add_metric\(\s*name="(\w+)"')
# Who is on which side: sending jobs to SQS (the target of <= 0.2 requests per job), or
# taking them off it again (the event source mapping's pollers and the consumer).
DISPATCH_ACTORS = frozenset(
    {"submit", "jobs", "schedules", "dags", "fanout", "sweeper", "dynein api", "dynein scheduler"}
)
PER_SHARD_DETAILS = frozenset({"cursor", "shard count"})

# drive(system, jobs) takes about `jobs` jobs through a path; it returns how many jobs the
# metered run is charged to when that is not `jobs` (None: exactly `jobs`).
PathDriver = Callable[[InProcessSundial, int], int | None]


@dataclass(frozen=True)
class LedgerPath:
    key: str
    title: str
    drive: PathDriver
    most_jobs: int | None = None  # a cap on the profile's jobs (counts per job do not need more)
    quotas: Mapping[str, Mapping[str, int]] | None = None  # the queues' quotas (SUNDIAL_QUOTAS)


PATHS: list[LedgerPath] = []


def ledger_path(
    key: str,
    title: str,
    *,
    most_jobs: int | None = None,
    quotas: Mapping[str, Mapping[str, int]] | None = None,
) -> Callable[[PathDriver], PathDriver]:
    """Register a path: `drive(system, jobs)` takes `jobs` jobs through it (at most
    `most_jobs`: a path whose figures are per job and do not depend on the volume), on a
    deployment whose queues declare `quotas`."""

    def register(drive: PathDriver) -> PathDriver:
        PATHS.append(LedgerPath(key, title, drive, most_jobs, quotas))
        return drive

    return register


# -- the paths ------------------------------------------------------------------------------


def _delayed_jobs(system: InProcessSundial, count: int) -> list[dict[str, Any]]:
    """Jobs due an hour from now, spread over one minute (so one sweep tick dispatches them)."""
    now = system.clock.now_ms()
    return [
        {
            "queue": "default",
            "run_at": to_rfc3339(now + HOUR_MS + system.rng.randrange(MINUTE_MS)),
            "payload": payload(),
        }
        for _ in range(count)
    ]


def _due(ids: Sequence[str]) -> list[int]:
    return [JobKey.from_job_id(job_id).due_ms for job_id in ids]


def _sweep_then_run(system: InProcessSundial, ids: Sequence[str], due: Sequence[int] = ()) -> None:
    """The one tick whose lookahead reaches every job, then the consumer once all are due.
    `due`: the jobs' due times, if not those their ids name (moved jobs)."""
    due = list(due) or _due(ids)
    system.clock.set(max(due) - SWEEP_LOOKAHEAD_MS)
    system.tick()
    system.clock.set(max(due) + 1_000)
    system.consume("default")


@ledger_path("delayed", "Delayed job, succeeds first time")
def delayed_succeeds(system: InProcessSundial, jobs: int) -> None:
    ids = system.submit(_delayed_jobs(system, jobs))
    _sweep_then_run(system, ids)


@ledger_path("retry", "Delayed job, fails once, succeeds on the retry")
def delayed_retried_once(system: InProcessSundial, jobs: int) -> None:
    def fail_first_attempt(job: Envelope) -> None:
        if job.attempt == 1:
            raise RuntimeError("first attempt fails")

    system.behaviour = fail_first_attempt
    ids = system.submit(_delayed_jobs(system, jobs))
    _sweep_then_run(system, ids)
    # The retry waits up to the queue's initial retry delay (10 s, full jitter) in SQS.
    system.clock.advance(seconds=11)
    system.consume("default")


@ledger_path("cancelled", "Delayed job, cancelled while pending")
def cancelled(system: InProcessSundial, jobs: int) -> None:
    ids = system.submit(_delayed_jobs(system, jobs))
    for job_id in ids:
        status, answer = system.api("DELETE", f"/jobs/{job_id}")
        assert status == 200, answer
    _sweep_then_run(system, ids)


@ledger_path("immediate", "Immediate job (no delay), succeeds")
def immediate(system: InProcessSundial, jobs: int) -> None:
    system.submit(
        [
            {"queue": "default", "delay_seconds": 0, "payload": payload(), "priority": "critical"}
            for _ in range(jobs)
        ]
    )
    system.clock.advance(seconds=1)
    system.consume("default")


@ledger_path("batch", "Batch submit of 25 delayed jobs per request, each succeeds")
def batch_of_25(system: InProcessSundial, jobs: int) -> None:
    ids = system.submit(_delayed_jobs(system, jobs), batch=True)
    _sweep_then_run(system, ids)


def _move(system: InProcessSundial, ids: Sequence[str], *, moves: int) -> list[int]:
    """Move each job `moves` times (PATCH /jobs/{id}), an hour later each time; returns the
    jobs' due times after the last move (their ids keep naming their first)."""
    due: list[int] = []
    for move in range(1, moves + 1):
        due = []
        for job_id in ids:
            later = {"delay_seconds": 3600 * (move + 1)}
            status, answer = system.api("PATCH", f"/jobs/{job_id}", later)
            assert status == 200, answer
            due.append(parse_rfc3339(answer["run_at"]))
    return due


@ledger_path("moved", "Delayed job moved once (PATCH /jobs/{id}), then succeeds", most_jobs=100)
def delayed_moved_once(system: InProcessSundial, jobs: int) -> None:
    ids = system.submit(_delayed_jobs(system, jobs))
    _sweep_then_run(system, ids, _move(system, ids, moves=1))


@ledger_path("moved_twice", "Delayed job moved twice, then succeeds", most_jobs=100)
def delayed_moved_twice(system: InProcessSundial, jobs: int) -> None:
    ids = system.submit(_delayed_jobs(system, jobs))
    _sweep_then_run(system, ids, _move(system, ids, moves=2))


# A payload of about 2 KB (the bench's usual one is about 200 bytes): every write of its item
# then costs 3 units instead of 1 (1 per started KB of the larger image).
LARGE_PAYLOAD_BYTES = 2_000


@ledger_path("large_payload", "Delayed job with a 2 KB payload, succeeds", most_jobs=100)
def delayed_large_payload(system: InProcessSundial, jobs: int) -> None:
    filler = "x" * (LARGE_PAYLOAD_BYTES - len(json.dumps(payload())))
    submitted = [
        {**job, "payload": {**job["payload"], "notes": filler}}
        for job in _delayed_jobs(system, jobs)
    ]
    ids = system.submit(submitted)
    _sweep_then_run(system, ids)


@ledger_path("idempotent", "Delayed job submitted with an idempotency key, succeeds", most_jobs=100)
def delayed_with_idempotency_key(system: InProcessSundial, jobs: int) -> None:
    keyed = [
        {**job, "idempotency_key": f"bench-{number}"}
        for number, job in enumerate(_delayed_jobs(system, jobs))
    ]
    ids = system.submit(keyed)
    _sweep_then_run(system, ids)


# Issue 16's per-queue submission limit: a rate-limited queue counts each request's jobs in its
# window with one conditional write, whatever the limit (this one is never reached here).
RATE_LIMITED = {"default": {"max_submissions_per_second": 100_000}}


@ledger_path(
    "rate_limited",
    "Delayed job on a rate-limited queue (max_submissions_per_second), succeeds",
    most_jobs=100,
    quotas=RATE_LIMITED,
)
def delayed_rate_limited(system: InProcessSundial, jobs: int) -> None:
    ids = system.submit(_delayed_jobs(system, jobs))
    _sweep_then_run(system, ids)


@ledger_path(
    "rate_limited_batch",
    "Batch of 25 delayed jobs on a rate-limited queue, each succeeds",
    most_jobs=100,
    quotas=RATE_LIMITED,
)
def batch_rate_limited(system: InProcessSundial, jobs: int) -> None:
    ids = system.submit(_delayed_jobs(system, jobs), batch=True)
    _sweep_then_run(system, ids)


# The schedule path fires each schedule's occurrences over this many metered ticks; it runs
# jobs / SCHEDULE_TICKS schedules, so each tick's fixed costs are spread over as many
# occurrences as the other paths spread them over jobs.
SCHEDULE_TICKS = 2
SCHEDULE_START_MS = 20 * MINUTE_MS


@ledger_path("schedule", "Schedule occurrence (every-minute cron), succeeds, steady state")
def schedule_occurrences(system: InProcessSundial, jobs: int) -> int:
    """Every-minute schedules in their steady state: at each tick, each schedule's next
    occurrence enters the sweep's lookahead, and the sweep claims it, records the run and
    writes its successor; the occurrence runs when due. Creating a schedule and its first
    occurrence is a one-time cost, left out (run unmetered)."""
    schedules = max(1, jobs // SCHEDULE_TICKS)
    start = system.clock.now_ms() // MINUTE_MS * MINUTE_MS + SCHEDULE_START_MS
    first_fires = start - SWEEP_LOOKAHEAD_MS  # the tick whose lookahead reaches the first
    with system.unmetered():
        for number in range(schedules):
            status, created = system.api(
                "POST",
                "/schedules",
                {
                    "name": f"bench-{number}",
                    "cron": "* * * * *",
                    "start_at": to_rfc3339(start),
                    "queue": "default",
                    "payload": payload(),
                },
                function="schedules",
            )
            assert status == 201, created
        system.clock.set(first_fires)
        system.tick()  # fires each first occurrence (the steady state from here on)
    for tick in range(1, SCHEDULE_TICKS + 1):
        system.clock.set(first_fires + tick * MINUTE_MS)
        system.tick()
    # The occurrences fired before the window run unmetered, then those fired in it.
    with system.unmetered():
        system.clock.set(start + 1_000)
        system.consume("default")
    system.clock.set(start + SCHEDULE_TICKS * MINUTE_MS + 1_000)
    return system.consume("default")


@ledger_path("dag_node", "DAG node of the daily_report diamond (5 nodes), succeeds")
def dag_nodes(system: InProcessSundial, jobs: int) -> int:
    """`POST /dags` of the card's diamond (extract -> transform -> load_warehouse, load_cache
    -> notify; on two queues), then the consumers run what arrives: the root is sent by the
    submit, each child by the consumer of its last parent. Charged per node."""
    nodes = len(DAILY_REPORT["nodes"])
    dags = max(1, jobs // nodes)
    ids = []
    for _ in range(dags):
        status, created = system.api("POST", "/dags", dict(DAILY_REPORT), function="dags")
        assert status == 201, created
        ids.append(created["id"])
    queues = sorted({node["queue"] for node in DAILY_REPORT["nodes"].values()})
    for _ in range(60):  # a released child is sent with no delay: seconds, not minutes
        if not sum(system.consume(queue) for queue in queues) and _all_finished(system):
            break
        system.clock.advance(seconds=1)
    with system.unmetered():
        for dag_id in ids:
            status, view = system.api(
                "GET", f"/dags/{dag_id}", function="dags", route="/dags/{dag_id}"
            )
            assert status == 200 and view["status"] == "succeeded", view
    return dags * nodes


def _all_finished(system: InProcessSundial) -> bool:
    unfinished = {"pending", "blocked", "queued", "running", "failed"}
    return not unfinished & set(job_statuses(system))


# -- running and summing up -----------------------------------------------------------------


@dataclass
class Metered:
    """What one run metered: the calls, the Lambda invocations and the API requests."""

    jobs: int
    calls: list[Call]
    invocations: list[Invocation]
    api_requests: int
    outcome: dict[str, int]

    @classmethod
    def of(cls, system: InProcessSundial, jobs: int, outcome: dict[str, int]) -> Metered:
        return cls(
            jobs, list(system.meter.calls), list(system.invocations), system.api_requests, outcome
        )


def job_statuses(system: InProcessSundial) -> dict[str, int]:
    """How the jobs ended, read without metering (to check a path did what it says)."""
    with system.meter.paused():
        items: list[dict[str, Any]] = []
        client = system.session.client("dynamodb")
        for page in client.get_paginator("scan").paginate(TableName=system.table):
            items += page["Items"]
    # Job items only: in the shards' partitions (index items, e.g. a queue's schedules or dead
    # letters, also have sort keys that start with a time).
    jobs = [item for item in items if item["pk"]["S"].startswith(SHARD_PREFIX)]
    return dict(Counter(item["status"]["S"] for item in jobs if item["sk"]["S"][:1].isdigit()))


def run_path(path: LedgerPath, config: BenchConfig, jobs: int) -> dict[str, Any]:
    jobs = min(jobs, path.most_jobs or jobs)
    with InProcessSundial(config, quotas=path.quotas) as system:
        charged = path.drive(system, jobs)
        metered = Metered.of(system, charged or jobs, job_statuses(system))
    return {"key": path.key, "title": path.title, **summarize(metered, config)}


def run_dynein(config: BenchConfig, jobs: int) -> dict[str, Any]:
    """The Dynein-style baseline on the same emulator, jobs, payloads and event source mapping.
    Its API and scheduler are charged as if they ran on Lambda like Sundial's (an API Gateway
    request and an invocation per job; one scheduler invocation per group of shards per tick),
    so the two differ only in how they use DynamoDB and SQS."""
    with InProcessSundial(config) as system:
        scheduler = DyneinScheduler(
            dynamodb=system.session.client("dynamodb"),
            sqs=system.session.client("sqs"),
            table=system.table,
            queue_urls=system.queue_urls,
            shard_count=config.shard_count,
            rng=system.rng,
        )
        now = system.clock.now_ms()
        due = [now + HOUR_MS + system.rng.randrange(MINUTE_MS) for _ in range(jobs)]
        for due_ms in due:
            system.api_requests += 1
            system.invoke(
                "dynein api",
                lambda due_ms=due_ms: scheduler.schedule(  # type: ignore[misc]
                    queue="default", payload=payload(), due_ms=due_ms, now_ms=system.clock.now_ms()
                ),
            )
        system.clock.set(max(due))  # Dynein dispatches jobs once overdue: one tick after all
        shards = list(range(config.shard_count))
        for start in range(0, len(shards), config.shards_per_sweeper):
            group = shards[start : start + config.shards_per_sweeper]
            system.invoke(
                "dynein scheduler",
                lambda group=group: [  # type: ignore[misc]
                    scheduler.tick(s, now_ms=system.clock.now_ms()) for s in group
                ],
            )
        system.clock.advance(seconds=1)
        consumed = system.consume("default", handler=_plain_consumer)
        metered = Metered.of(system, jobs, {"consumed": consumed})
    return {
        "key": "dynein",
        "title": "Dynein-style baseline (model, run on moto): delayed job",
        **summarize(metered, config),
    }


def _plain_consumer(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    """A consumer with no status tracking: it reads each job and acknowledges it."""
    for record in event["Records"]:
        json.loads(record["body"])
    return {"batchItemFailures": []}


def run_idle_tick(config: BenchConfig) -> dict[str, Any]:
    """What one minute's tick costs when nothing is due: a fixed cost, whatever the volume."""
    with InProcessSundial(config) as system:
        system.tick()  # the first tick records the shard count: not a steady-state cost
        system.meter.reset()
        system.invocations.clear()
        system.tick()
        metered = Metered.of(system, 1, {})
    per_tick = summarize(metered, config)
    return {
        "per_tick": per_tick,
        "dollars_per_month": per_tick["dollars_per_million"]["total"] * TICKS_PER_MONTH / MILLION,
    }


def run_dispatch_batching(config: BenchConfig, volumes: Sequence[int]) -> list[dict[str, Any]]:
    """SQS requests per job on dispatch, against how many jobs one tick dispatches: the
    sweeper sends each shard's due jobs in batches of 10, so small volumes fill few batches."""
    rows = []
    with InProcessSundial(config, size_items=False) as system:
        for volume in volumes:
            ids = system.submit(_delayed_jobs(system, volume), batch=True)
            system.meter.reset()
            due = _due(ids)
            system.clock.set(max(due) - SWEEP_LOOKAHEAD_MS)
            system.tick()
            sends = [c for c in system.meter.calls if c.operation == "SendMessageBatch"]
            claims = sum(
                1 for c in system.meter.calls if c.operation == "UpdateItem" and c.detail == "job"
            )
            rows.append(
                {
                    "jobs_per_tick": volume,
                    "jobs_per_shard": volume / config.shard_count,
                    "claimed": claims,
                    "send_requests": sum(c.sqs_requests for c in sends),
                    "sqs_requests_per_job": sum(c.sqs_requests for c in sends) / volume,
                }
            )
            system.clock.set(max(due) + HOUR_MS)
            system.purge_queues()  # moto's SendMessage slows with every message queued
    return rows


def side(actor: str) -> str:
    return "schedule" if actor in DISPATCH_ACTORS else "consume"


def summarize(metered: Metered, config: BenchConfig, prices: Prices = PRICES) -> dict[str, Any]:
    """Per-job quantities, and dollars per million jobs for each side (scheduling: submit to
    in SQS; consuming: SQS to done, status included) and in all, as deployed by default
    (bench.costs: on demand, active tracing, INFO logs; the path's jobs arriving over one
    tick, as the ledger drives them)."""
    jobs = metered.jobs
    calls, invocations = metered.calls, metered.invocations
    memory = {name: _memory_mb(config, name) for name in {i.function for i in invocations}}

    def per_job(value: float) -> float:
        return value / jobs

    def gb_s(selected: Sequence[Invocation], *, modelled: bool) -> float:
        return sum(
            (i.modelled_ms_at(memory[i.function]) if modelled else i.billed_ms)
            / 1000
            * memory[i.function]
            / 1024
            for i in selected
        )

    sides: dict[str, SideQuantities] = {}
    for name in ("schedule", "consume"):
        mine = [c for c in calls if side(c.actor) == name]
        runs = [i for i in invocations if side(i.function) == name]
        sides[name] = SideQuantities(
            write_units=sum(c.write_units for c in mine),
            read_units=sum(c.read_units for c in mine),
            sqs_requests=sum(c.sqs_requests for c in mine),
            lambda_requests=len(runs),
            gb_s=gb_s(runs, modelled=True),
            api_requests=metered.api_requests if name == "schedule" else 0,
            log_bytes=sum(i.log_bytes for i in runs),
            info_log_bytes=sum(i.info_log_bytes for i in runs),
            invocations=Counter(i.function for i in runs),
        )
    dollars = per_million(sides, jobs, DEFAULTS.at(TICK_S), prices)
    writes = [c for c in calls if c.service == "dynamodb" and c.write_units]
    reads = [c for c in calls if c.service == "dynamodb" and not c.write_units]
    sqs = [c for c in calls if c.service == "sqs"]
    count = Counter(i.function for i in invocations)
    quantities = {
        "write_units_job_items": per_job(
            sum(c.write_units for c in writes if c.detail not in PER_SHARD_DETAILS)
        ),
        "write_units_per_shard_items": per_job(
            sum(c.write_units for c in writes if c.detail in PER_SHARD_DETAILS)
        ),
        "write_units_reported_by_moto": per_job(sum(c.reported_units for c in writes)),
        # Of the job items' units: a rate-limited queue's submission windows (issue 16).
        "write_units_quota": per_job(sum(c.write_units for c in writes if c.detail == "quota")),
        "write_requests": per_job(sum(c.items for c in writes)),
        "read_units": per_job(sum(c.read_units for c in reads)),
        "read_units_reported_by_moto": per_job(sum(c.reported_units for c in reads)),
        "sqs_requests_dispatch": per_job(
            sum(c.sqs_requests for c in sqs if side(c.actor) == "schedule")
        ),
        "sqs_requests_consume": per_job(
            sum(c.sqs_requests for c in sqs if side(c.actor) == "consume")
        ),
        "lambda_requests": per_job(len(invocations)),
        "lambda_gb_s_measured": per_job(gb_s(invocations, modelled=False)),
        "lambda_gb_s_modelled": per_job(gb_s(invocations, modelled=True)),
        "api_requests": per_job(metered.api_requests),
    }
    operations = Counter(f"{c.actor}: {c.service} {c.operation}" for c in calls)
    return {
        "jobs": jobs,
        "outcome": metered.outcome,
        "per_job": quantities,
        "calls_per_job": {k: v / jobs for k, v in sorted(operations.items())},
        "invocations_per_job": {k: v / jobs for k, v in sorted(count.items())},
        "mean_ms": {
            name: {
                "measured": _mean([i.billed_ms for i in invocations if i.function == name]),
                "modelled": _mean(
                    [i.modelled_ms_at(memory[name]) for i in invocations if i.function == name]
                ),
                "memory_mb": memory[name],
            }
            for name in sorted(count)
        },
        "log_bytes_per_job": per_job(sum(i.log_bytes for i in invocations)),
        "sides": {name: quantities.as_dict() for name, quantities in sides.items()},
        "dollars_per_million": {
            **dollars,
            "lambda_duration_measured": per_job(gb_s(invocations, modelled=False))
            * prices.lambda_gb_second
            * MILLION,
        },
    }


def eventbridge_model(dynein: dict[str, Any]) -> dict[str, Any]:
    """EventBridge Scheduler: $1.00 per million invocations plus one SendMessage per job; the
    consuming side is the Dynein run's (the same plain consumer, no status tracking)."""
    jobs = dynein["jobs"]
    sides = {
        "schedule": SideQuantities(scheduler_invocations=jobs, sqs_requests=jobs),
        "consume": SideQuantities.from_dict(dynein["sides"]["consume"]),
    }
    return {
        "key": "eventbridge",
        "title": "EventBridge Scheduler (model): one schedule and one SendMessage per job",
        "jobs": jobs,
        "sides": {name: quantities.as_dict() for name, quantities in sides.items()},
        "dollars_per_million": per_million(sides, jobs, DEFAULTS.at(TICK_S)),
    }


# The Dynein-style model's functions are charged at Lambda's usual small size, not at the
# memory Sundial gives its CPU-bound submit and sweeper: its scheduler spends its time waiting
# on one SendMessage per job, which more memory would only make dearer.
DYNEIN_MEMORY_MB = 256


def _memory_mb(config: BenchConfig, function: str) -> int:
    if function.startswith("dynein"):
        return DYNEIN_MEMORY_MB
    return config.memory_mb(function)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def custom_metrics() -> list[str]:
    """The custom metrics the functions emit (Powertools EMF, one dimension: the service), read
    from the code: each is billed per month, whatever the volume."""
    names: set[str] = set()
    for folder in (REPO / "layers" / "sundial" / "python", REPO / "lambdas"):
        for source in folder.rglob("*.py"):
            names.update(METRIC_NAME.findall(source.read_text()))
    return sorted(names)


def run_ledger(config: BenchConfig, jobs: int, batching_volumes: Sequence[int]) -> dict[str, Any]:
    paths = [run_path(path, config, jobs) for path in PATHS]
    dynein = run_dynein(config, jobs)
    idle_tick = run_idle_tick(config)
    metrics = custom_metrics()
    idle_tick["custom_metrics"] = metrics
    idle_tick["custom_metrics_dollars_per_month"] = len(metrics) * (
        PRICES.cloudwatch_custom_metric_month
    )
    ledger: dict[str, Any] = {
        "jobs_per_path": jobs,
        "paths": paths,
        "dynein": dynein,
        "eventbridge": eventbridge_model(dynein),
        "idle_tick": idle_tick,
        "dispatch_batching": run_dispatch_batching(config, batching_volumes),
        "prices": PRICES.rows(),
        "provisioned_break_even_utilization": provisioned_break_even(),
    }
    ledger["cost_curve"] = cost_curve(ledger, config.shard_count, config.sweeper_count())
    return ledger
