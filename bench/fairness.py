"""Fair dispatch (issue 16): the lateness of a quiet queue's jobs while another queue floods,
before and after, side by side in one run.

The scenario, in one sweeper's group of shards (8 of 64): queue `default` floods, `flood_jobs`
jobs all due at the same second a minute before the sweep starts (an outage's backlog, or
more due at once than the sweeps before could send); queue `email` is quiet, `quiet_jobs` jobs
due evenly from a minute before the sweep to a minute after it, on random shards of the group.
The sweeper runs tick after tick until every job is sent. Three variants, each in a fresh
process:
- `before`: the sweeper as it was before fair dispatch (git revision BEFORE_FAIR, extracted
  from this clone): priority, then due order, one shard after another;
- `round_robin`: this tree, no cap: queues take turns within each minute-wide moment, and
  every shard of the group takes turns;
- `capped`: this tree with `default` capped at `cap_per_second` jobs a second (global; the
  group's 8 shards pace 8/64 of it).

What is measured and what is modelled. Real: the table and the queues (moto, in process), the
real sweeper through `sundial.wiring`, every claim and every SendMessageBatch and its
DelaySeconds. Modelled, as in bench/recovery.py: the clock during a sweep. It reads the sweep's
own CPU (section 4's sweeper figure per job claimed, measured at the start of this section, the
same for every variant) plus the modelled AWS latency of the calls it has made so far
(bench.latency; claims overlap CLAIM_CONCURRENCY at a time), and the Lambda deadline follows
it. So each message's visibility time is (modelled time of its SendMessageBatch) +
DelaySeconds, and a job's lateness is that minus max(due, the sweep's start): for an overdue
job, what the sweep added, not the outage.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends
from ulid import ULID

from bench.config import ROOT, BenchConfig
from bench.meter import AwsMeter
from bench.recovery import ModelledDeadline
from bench.system import REGION, START, moto_follows, set_lambda_environment
from sundial.clock import ManualClock
from sundial.dispatch.fanout import shard_groups
from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.wiring import configure
from tests.support import TABLE, create_queues, create_table

PACKAGE_ROOT = Path("layers/sundial/python")
# main just before fair dispatch (issue 16).
BEFORE_FAIR = "bfa86ca"
VARIANTS = ("before", "round_robin", "capped")
FLOOD, QUIET = "default", "email"
MINUTE_MS = 60_000
MAX_TICKS = 30
PURGE_EVERY = 2  # SendMessageBatch calls: moto's send walks every message queued


class ModelledClock(ManualClock):
    """The time a sweep has taken so far, modelled (see the module docstring): the tick's start
    plus the deadline model's time used. Thread-safe: the sweeper's sends read it on the claim
    pool's threads."""

    def __init__(self, start_ms: int) -> None:
        super().__init__(start_ms)
        self._model_lock = threading.Lock()
        self._deadline: ModelledDeadline | None = None

    def follow(self, deadline: ModelledDeadline | None) -> None:
        with self._model_lock:
            self._deadline = deadline

    def now_ms(self) -> int:
        base = super().now_ms()
        with self._model_lock:
            return base if self._deadline is None else base + int(self._deadline.used_ms())

    def remaining_ms(self) -> int:
        """The sweep's Lambda deadline, from the same model (under the same lock)."""
        with self._model_lock:
            assert self._deadline is not None
            return self._deadline.get_remaining_time_in_millis()


class Visibility:
    """Each message the sweeper sends: when it becomes visible (the modelled time of its
    request plus its DelaySeconds). The queues are emptied every PURGE_EVERY requests, as
    consumers would, straight in moto's backend."""

    def __init__(self, clock: ModelledClock) -> None:
        self.visible: dict[str, int] = {}
        self.sends = 0
        self.queue_urls: list[str] = []
        self._clock = clock
        self._lock = threading.Lock()

    def attach(self, session: boto3.Session) -> None:
        session.events.register("provide-client-params.sqs.SendMessageBatch", self._record)
        session.events.register("after-call.sqs.SendMessageBatch", self._purge)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        now = self._clock.now_ms()
        with self._lock:
            for entry in params["Entries"]:
                job_id = json.loads(entry["MessageBody"])["id"]
                self.visible.setdefault(job_id, now + entry["DelaySeconds"] * 1000)

    def _purge(self, **_: Any) -> None:
        with self._lock:
            self.sends += 1
            if self.sends % PURGE_EVERY:
                return
            backend = sqs_backends[DEFAULT_ACCOUNT_ID][REGION]
            for url in self.queue_urls:
                queue = backend.get_queue(url.rsplit("/", 1)[1])
                queue._messages = []
                queue._pending_messages = set()


def _jobs(
    queue: str, dues: list[int], group: list[int], rng: random.Random, now_ms: int
) -> list[Job]:
    return [
        Job(
            key=JobKey(shard=rng.choice(group), due_ms=due, ulid=str(ULID())),
            queue=queue,
            payload_json='{"n":1}',
            priority=Priority.NORMAL,
            max_attempts=3,
            created_at_ms=now_ms - 86_400_000,  # submitted long before: not direct
        )
        for due in dues
    ]


def run_variant(
    variant: str, config: BenchConfig, params: dict[str, Any], cpu_ms_per_job: float, seed: int
) -> dict[str, Any]:
    """One run of the scenario, in this process (the tree on sys.path is the variant's)."""
    set_lambda_environment()
    group = shard_groups(config.shard_count, config.shards_per_sweeper)[0]
    rng = random.Random(seed)
    clock = ModelledClock(int(START.timestamp() * 1000))
    start = clock.now_ms()
    with mock_aws(), moto_follows(clock):
        admin = boto3.Session()
        create_table(admin.client("dynamodb"))
        urls, dead_letters = create_queues(admin.client("sqs"))
        session = boto3.Session()
        meter = AwsMeter(session)
        visibility = Visibility(clock)
        visibility.attach(session)
        visibility.queue_urls = list(urls.values())
        environ = {
            "SUNDIAL_TABLE_NAME": TABLE,
            "SUNDIAL_QUEUE_URLS": json.dumps(urls),
            "SUNDIAL_DEAD_LETTER_URLS": json.dumps(dead_letters),
            "SUNDIAL_SHARD_COUNT": str(config.shard_count),
            "SUNDIAL_RETENTION_DAYS": "30",
        }
        if variant == "capped":
            environ["SUNDIAL_DISPATCH"] = json.dumps(
                {FLOOD: {"max_per_second": params["cap_per_second"], "weight": 1}}
            )
        deps = configure(clock=clock, environ=environ, session=session)
        flood = _jobs(FLOOD, [start - MINUTE_MS] * params["flood_jobs"], group, rng, start)
        quiet_count = params["quiet_jobs"]
        quiet_dues = [
            start - MINUTE_MS + 2 * MINUTE_MS * i // quiet_count for i in range(quiet_count)
        ]
        quiet = _jobs(QUIET, quiet_dues, group, rng, start)
        with meter.paused():
            _write_backlog(deps.store, flood + quiet)
        ticks: list[dict[str, Any]] = []
        for tick in range(MAX_TICKS):
            clock.set(start + tick * MINUTE_MS)
            deadline = ModelledDeadline(meter=meter, cpu_ms_per_job=cpu_ms_per_job)
            clock.follow(deadline)
            report = deps.sweeper.sweep(group, remaining_ms=clock.remaining_ms)
            clock.follow(None)
            ticks.append(
                {
                    "tick": tick + 1,
                    "modelled_s": deadline.used_ms() / 1000,
                    "dispatched": report.dispatched,
                }
            )
            if all(job.id in visibility.visible for job in flood + quiet):
                break
        clock.follow(None)
    return _summary(variant, params, flood, quiet, visibility.visible, ticks, start, config)


def _lateness(jobs: list[Job], visible: dict[str, int], start: int) -> list[int]:
    return sorted(visible[job.id] - max(job.due_ms, start) for job in jobs if job.id in visible)


def _percentile(values: list[int], fraction: float) -> int:
    return values[int(fraction * (len(values) - 1))] if values else 0


def _summary(  # noqa: PLR0917 - one call site, every part of one run
    variant: str,
    params: dict[str, Any],
    flood: list[Job],
    quiet: list[Job],
    visible: dict[str, int],
    ticks: list[dict[str, Any]],
    start: int,
    config: BenchConfig,
) -> dict[str, Any]:
    quiet_late = _lateness(quiet, visible, start)
    flood_late = _lateness(flood, visible, start)
    per_second = Counter(visible[job.id] // 1000 for job in flood if job.id in visible)
    early = [job.id for job in flood + quiet if job.id in visible and visible[job.id] < job.due_ms]
    return {
        "variant": variant,
        "quiet_sent": len(quiet_late),
        "quiet_p50_ms": _percentile(quiet_late, 0.5),
        "quiet_p99_ms": _percentile(quiet_late, 0.99),
        "quiet_max_ms": quiet_late[-1] if quiet_late else 0,
        "flood_sent": len(flood_late),
        "flood_p50_ms": _percentile(flood_late, 0.5),
        "flood_last_visible_s": (flood_late[-1] / 1000) if flood_late else 0,
        "flood_peak_per_second": max(per_second.values(), default=0),
        "group_cap_per_second": params["cap_per_second"]
        * config.shards_per_sweeper
        / config.shard_count,
        "early": len(early),
        "ticks": len(ticks),
        "first_tick_modelled_s": ticks[0]["modelled_s"] if ticks else 0,
    }


def _write_backlog(store: Any, jobs: list[Job]) -> None:
    """Write jobs as submitted long ago (their created_at). The store of an older checkout (the
    "before" variant) takes no write time: it checked placement against created_at itself."""
    if "now_ms" in inspect.signature(store.put_new).parameters:
        store.put_new(jobs, now_ms=min(job.created_at_ms for job in jobs))
    else:
        store.put_new(jobs)


def _checkout(revision: str, into: Path) -> Path | None:
    """The package as it was at `revision`, or None when this clone does not have it."""
    archive = subprocess.run(
        ["git", "archive", revision, str(PACKAGE_ROOT)], cwd=ROOT, capture_output=True, check=False
    )
    if archive.returncode != 0:
        return None
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / PACKAGE_ROOT


def run_fairness(
    config: BenchConfig,
    params: dict[str, Any],
    workdir: Path,
    *,
    cpu_ms_per_job: float,
    repeats: int,
) -> dict[str, Any]:
    """Every variant `repeats` times, alternating (so all see the same machine), each in a
    fresh process with its own tree first on the path; the medians per variant."""
    before = _checkout(BEFORE_FAIR, workdir / "fair-before")
    trees = {"round_robin": ROOT / PACKAGE_ROOT, "capped": ROOT / PACKAGE_ROOT}
    if before is not None:
        trees = {"before": before, **trees}
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in trees}
    for repeat in range(repeats):
        for variant, tree in trees.items():
            out = workdir / f"fairness-{variant}-{repeat}.json"
            path = [str(tree), str(ROOT), str(ROOT / "glue")]
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.fairness",
                    variant,
                    json.dumps(config.as_dict()),
                    json.dumps(params),
                    str(cpu_ms_per_job),
                    str(20261125 + repeat),
                    str(out),
                ],
                check=True,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
            )
            runs[variant].append(json.loads(out.read_text()))
    medians = {
        variant: {
            key: statistics.median(run[key] for run in results)
            for key in results[0]
            if isinstance(results[0][key], int | float)
        }
        for variant, results in runs.items()
    }
    return {
        "params": params,
        "repeats": repeats,
        "before_revision": BEFORE_FAIR if before is not None else None,
        "cpu_ms_per_job": cpu_ms_per_job,
        "group_shards": config.shards_per_sweeper,
        "shards": config.shard_count,
        "medians": medians,
        "runs": runs,
    }


def main(argv: list[str]) -> None:
    """`python -m bench.fairness VARIANT CONFIG_JSON PARAMS_JSON CPU_MS SEED OUT`"""
    variant, config_json, params_json, cpu_ms, seed, out = argv
    config = BenchConfig.from_dict(json.loads(config_json))
    result = run_variant(variant, config, json.loads(params_json), float(cpu_ms), int(seed))
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
