"""Outage recovery: a large overdue backlog swept out tick by tick under the Lambda deadline.

After an outage (or a pause of the whole system) every shard holds a run of overdue jobs. Each
tick, every sweeper gets 60 s (its timeout) and stops taking jobs with 5 s left (the sweeper's
own rule); the cursor holds at the lowest job not sent and the next tick goes on from there,
taking the most urgent jobs of the remaining range first.

The run is real where it can be here: the backlog is written to the table (moto, in process),
the real sweeper handler sweeps one sweeper's group of shards tick after tick, and every
message it sends is read back, so what is sent, in what order and how often is measured. The
sweepers of the other groups hold disjoint shards and run in parallel in AWS, so the group's
time is the backlog's time. What cannot be real here is AWS's clock: the deadline the sweeper
sees is modelled, from its own CPU per job (section 4's sweeper figure, measured against the
zero-latency stub at the start of this section) at the configured memory's CPU share, plus the
modelled AWS latency of every call it made (bench.latency; its concurrent claims overlapping
as in bench.system.aws_calls_ms). moto's own time is left out, as everywhere else.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends
from ulid import ULID

from bench.config import BenchConfig
from bench.cpu import run_scenario
from bench.latency import modelled_ms, vcpu_share
from bench.meter import AwsMeter
from bench.system import PAYLOAD, REGION, InProcessSundial
from sundial.dispatch.fanout import shard_groups
from sundial.dispatch.sweeper import CLAIM_CONCURRENCY
from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.timing import SWEEP_DEADLINE_MARGIN_MS, SWEEPER_TIMEOUT_MS
from tests.support import FakeLambdaContext

MINUTE_MS = 60_000
PRIORITY_MIX = {Priority.CRITICAL: 5, Priority.HIGH: 15, Priority.NORMAL: 60, Priority.LOW: 20}
PURGE_EVERY = 2  # SendMessageBatch calls: moto's send walks every message queued
MAX_TICKS = 40


class ModelledDeadline(FakeLambdaContext):
    """A Lambda context whose remaining time is the modelled time the sweep has used so far:
    its own CPU per job claimed, plus the modelled latency of the calls it made."""

    def __init__(
        self, meter: AwsMeter, cpu_ms_per_job: float, budget_ms: int = SWEEPER_TIMEOUT_MS
    ) -> None:
        super().__init__(remaining_ms=budget_ms)
        self._meter, self._cpu_ms_per_job, self._budget_ms = meter, cpu_ms_per_job, budget_ms
        self._seen = len(meter.calls)
        self._claims = 0
        self._in_turn_ms = self._concurrent_ms = self._longest_concurrent_ms = 0.0

    def used_ms(self) -> float:
        calls = self._meter.calls
        for call in calls[self._seen :]:
            latency = modelled_ms(call.service, call.operation)
            if call.thread.startswith("claim"):
                self._concurrent_ms += latency
                self._longest_concurrent_ms = max(self._longest_concurrent_ms, latency)
                self._claims += call.operation == "UpdateItem"
            else:
                self._in_turn_ms += latency
        self._seen = len(calls)
        waits = self._in_turn_ms + max(
            self._longest_concurrent_ms, self._concurrent_ms / CLAIM_CONCURRENCY
        )
        return self._claims * self._cpu_ms_per_job + waits

    def get_remaining_time_in_millis(self) -> int:
        return int(self._budget_ms - self.used_ms())


class SentMessages:
    """Every message the sweeper sends, read from its SendMessageBatch requests; the queues are
    emptied every PURGE_EVERY sends (as consumers would), unmetered. `attach` goes in
    InProcessSundial's hooks: clients copy the session's event hooks when they are made."""

    def __init__(self) -> None:
        self.order: list[tuple[str, str]] = []  # (job id, priority), in the order sent
        self.queue_urls: list[str] = []
        self._sends = 0

    def attach(self, session: boto3.Session) -> None:
        session.events.register("provide-client-params.sqs.SendMessageBatch", self._record)
        session.events.register("after-call.sqs.SendMessageBatch", self._purge)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        for entry in params["Entries"]:
            body = json.loads(entry["MessageBody"])
            self.order.append((body["id"], body["priority"]))

    def _purge(self, **_: Any) -> None:
        """Empty the queues in moto's backend: the PurgeQueue API allows one purge a minute
        (moto enforces it on the bench's frozen clock), and what was sent is read above."""
        self._sends += 1
        if self._sends % PURGE_EVERY == 0:
            backend = sqs_backends[DEFAULT_ACCOUNT_ID][REGION]
            for url in self.queue_urls:
                queue = backend.get_queue(url.rsplit("/", 1)[1])
                queue._messages = []
                queue._pending_messages = set()


def _backlog(count: int, shards: int, now_ms: int, rng: random.Random) -> list[Job]:
    """Overdue jobs spread over the two hours before now, of mixed priorities."""
    payload = json.dumps(PAYLOAD, separators=(",", ":"))
    priorities = rng.choices(list(PRIORITY_MIX), weights=list(PRIORITY_MIX.values()), k=count)
    return [
        Job(
            key=JobKey(
                shard=rng.randrange(shards),
                due_ms=now_ms - rng.randrange(120 * MINUTE_MS),
                ulid=str(ULID.from_timestamp(now_ms / 1000 - 86_400)),
            ),
            queue="default",
            payload_json=payload,
            priority=priority,
            max_attempts=3,
            created_at_ms=now_ms - 86_400_000,  # submitted long before the outage
        )
        for priority in priorities
    ]


def run_recovery(
    config: BenchConfig, backlog: int, workdir: Path, *, cpu_jobs: int = 2000, cpu_repeats: int = 3
) -> dict[str, Any]:
    cpu = run_scenario("sweeper", cpu_jobs, cpu_repeats, workdir)
    share = vcpu_share(config.memory_mb("sweeper"))
    cpu_ms_per_job = cpu["cpu_us_per_job_median"] / 1000 / share
    group = shard_groups(config.shard_count, config.shards_per_sweeper)[0]
    rng = random.Random(20261125)
    sent = SentMessages()
    with InProcessSundial(config, size_items=False, hooks=[sent.attach]) as system:
        sent.queue_urls = list(system.queue_urls.values())
        jobs = _backlog(backlog, config.shard_count, system.clock.now_ms(), rng)
        in_group = [job for job in jobs if job.key.shard in group]
        load_started = time.perf_counter()
        with system.unmetered():
            # As submitted a day before the outage (their created_at), long before due.
            system.deps.store.put_new(in_group, now_ms=min(j.created_at_ms for j in in_group))
        load_s = time.perf_counter() - load_started
        ticks: list[dict[str, Any]] = []
        start = system.clock.now_ms()
        for tick in range(MAX_TICKS):
            system.clock.set(start + tick * MINUTE_MS)
            context = ModelledDeadline(meter=system.meter, cpu_ms_per_job=cpu_ms_per_job)
            before = len(sent.order)
            system.invoke(
                "sweeper",
                lambda context=context: system.handlers["sweeper"].handler(  # type: ignore[misc]
                    {"shards": group}, context
                ),
            )
            this_tick = sent.order[before:]
            ticks.append(
                {
                    "tick": tick + 1,
                    "sent": len(this_tick),
                    "modelled_s": context.used_ms() / 1000,
                    "by_priority": dict(Counter(priority for _, priority in this_tick)),
                }
            )
            if len({job_id for job_id, _ in sent.order}) >= len(in_group):
                break
    return _summary(
        config,
        backlog=backlog,
        in_group=in_group,
        order=sent.order,
        ticks=ticks,
        cpu=cpu,
        cpu_ms_per_job=cpu_ms_per_job,
        load_s=load_s,
    )


def _summary(
    config: BenchConfig,
    *,
    backlog: int,
    in_group: list[Job],
    order: list[tuple[str, str]],
    ticks: list[dict[str, Any]],
    cpu: dict[str, Any],
    cpu_ms_per_job: float,
    load_s: float,
) -> dict[str, Any]:
    ids = [job_id for job_id, _ in order]
    expected = {job.id for job in in_group}
    last_of = {
        p.value: max((i for i, (_, q) in enumerate(order) if q == p.value), default=-1)
        for p in PRIORITY_MIX
    }
    first_of = {
        p.value: min((i for i, (_, q) in enumerate(order) if q == p.value), default=-1)
        for p in PRIORITY_MIX
    }
    full_ticks = [t for t in ticks if t is not ticks[-1]]
    all_sent_s = sum(60.0 for _ in full_ticks) + ticks[-1]["modelled_s"]
    per_sweeper_10m = 10_000_000 * config.shards_per_sweeper / config.shard_count
    rate = sum(t["sent"] for t in ticks) / sum(t["modelled_s"] for t in ticks)
    # What a full tick sends: measured when the backlog outlasted one, else the rate over the
    # time a tick gives (the timeout less the sweeper's margin).
    per_tick = (
        sum(t["sent"] for t in full_ticks) / len(full_ticks)
        if full_ticks
        else rate * (SWEEPER_TIMEOUT_MS - SWEEP_DEADLINE_MARGIN_MS) / 1000
    )
    return {
        "backlog": backlog,
        "shards": config.shard_count,
        "group_shards": config.shards_per_sweeper,
        "group_jobs": len(in_group),
        "load_s": load_s,
        "cpu_us_per_job_one_core": cpu["cpu_us_per_job_median"],
        "cpu_ms_per_job_at_memory": cpu_ms_per_job,
        "sweeper_memory_mb": config.memory_mb("sweeper"),
        "ticks": ticks,
        "sent": len(ids),
        "distinct": len(set(ids)),
        "missing": len(expected - set(ids)),
        "unexpected": len(set(ids) - expected),
        "duplicates": len(ids) - len(set(ids)),
        "first_sent_index": first_of,
        "last_sent_index": last_of,
        "all_sent_after_s": all_sent_s,
        "jobs_per_s_per_sweeper": rate,
        "per_full_tick": per_tick,
        "extrapolated_10m": {
            "jobs_per_sweeper": per_sweeper_10m,
            "ticks": per_sweeper_10m / per_tick if per_tick else None,
            "ticks_one_shard_per_sweeper": (10_000_000 / config.shard_count) / per_tick
            if per_tick
            else None,
        },
    }
