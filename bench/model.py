"""A throughput model: submissions/s and dispatches/s against shard count and concurrency.

Inputs are Sundial's measured CPU per job (bench.cpu, on one core of this machine) and the
documented figures below; the model takes the least of what each resource allows and names it.

Assumptions (documented limits, us-east-1 defaults; most are soft quotas AWS raises on request):
- DynamoDB: 1,000 write units/s per partition. Every job item lives under its shard's partition
  key, so a shard is taken as one partition (no split for heat), and a job write under 1 KB is
  one unit. In a steady state every job is written WRITES_PER_JOB times on its shard (submit,
  claim, running, outcome: measured by the cost ledger), so a shard carries
  1,000 / WRITES_PER_JOB jobs a second end to end. On-demand tables start with a table quota
  of 40,000 write units/s (adjustable), shown apart.
- Lambda: 1,000 concurrent executions per account and region by default; CPU in proportion to
  memory, one vCPU at 1,769 MB (Python uses one). Duration = CPU / vCPU share + the calls'
  latencies (bench.latency) that are not overlapped.
- API Gateway HTTP API: 10,000 requests/s per account and region, and the stage's own throttle
  as synthesized (cdk.json "api": what a deployment accepts, and what docs/configuration.md
  promises).
- SQS standard queues: nearly unlimited requests per second, so not a limit here.
- A sweeper has one tick (60 s, less a 5 s margin) to dispatch what it claims, and claims
  CLAIM_CONCURRENCY jobs at a time; it sends a flush's batches of 10 on the same pool, together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bench.latency import (
    API_GATEWAY_MS,
    DYNAMODB_BATCH_MS,
    DYNAMODB_ITEM_MS,
    SQS_MS,
    vcpu_share,
)
from sundial.dispatch.sweeper import CLAIM_CONCURRENCY

PARTITION_WCU_PER_S = 1_000
WRITES_PER_JOB = 4
TABLE_WCU_PER_S = 40_000
LAMBDA_CONCURRENCY = 1_000
API_REQUESTS_PER_S = 10_000
SWEEP_BUDGET_S = 55
FLUSH = 100  # jobs a sweeper claims before it sends them (sundial.dispatch.sweeper._FLUSH_AT)
SQS_BATCH = 10
SHARD_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class Rate:
    per_s: float
    limit: str  # what sets it


def submissions(
    *,
    shards: int,
    concurrency: int,
    cpu_us_per_job: float,
    jobs_per_request: int,
    memory_mb: int,
    stage_rate_limit: int = API_REQUESTS_PER_S,
) -> Rate:
    """Delayed jobs accepted per second, in a steady state (each also dispatched and run)."""
    cpu_s = cpu_us_per_job * jobs_per_request / 1e6 / vcpu_share(memory_mb)
    duration_s = cpu_s + DYNAMODB_BATCH_MS / 1000  # one BatchWriteItem per request
    limits = {
        "Lambda concurrency": concurrency * jobs_per_request / duration_s,
        "partition throughput": shards * PARTITION_WCU_PER_S / WRITES_PER_JOB,
        "API Gateway rate": API_REQUESTS_PER_S * jobs_per_request,
        "API stage throttle": stage_rate_limit * jobs_per_request,
    }
    limit = min(limits, key=lambda name: limits[name])
    return Rate(limits[limit], limit)


def sweeper_rate(
    *, cpu_us_per_job: float, memory_mb: int, claim_concurrency: int, concurrent_sends: bool
) -> Rate:
    """Jobs one sweeper invocation dispatches per second."""
    cpu_s = cpu_us_per_job / 1e6 / vcpu_share(memory_mb)
    claims_s = math.ceil(FLUSH / claim_concurrency) * DYNAMODB_ITEM_MS / 1000 / FLUSH
    sends_s = (SQS_MS / 1000 if concurrent_sends else SQS_MS / 1000 * FLUSH / SQS_BATCH) / FLUSH
    waiting_s = claims_s + sends_s
    # Waiting and CPU overlap only where there is concurrency to hide the waits behind.
    per_job_s = max(cpu_s, waiting_s) if claim_concurrency > 1 else cpu_s + waiting_s
    limit = "CPU" if cpu_s >= waiting_s and claim_concurrency > 1 else "latency"
    return Rate(1 / per_job_s, limit)


def dispatches(
    *,
    shards: int,
    shards_per_sweeper: int,
    sweeper: Rate,
    concurrency: int = LAMBDA_CONCURRENCY,
) -> Rate:
    """Jobs dispatched per second, sustained, by all sweepers of a tick together. The table
    quota is left out: it is a soft limit, shown apart."""
    sweepers = math.ceil(shards / shards_per_sweeper)
    limits = {
        f"sweeper {sweeper.limit}": sweepers * sweeper.per_s,
        "Lambda concurrency": concurrency * sweeper.per_s,
        "partition throughput": shards * PARTITION_WCU_PER_S / WRITES_PER_JOB,
    }
    limit = min(limits, key=lambda name: limits[name])
    return Rate(limits[limit], limit)


def first_reaching(target: float, rates: dict[int, Rate]) -> int | None:
    return next((shards for shards, rate in sorted(rates.items()) if rate.per_s >= target), None)


def build_model(
    cpu: dict[str, float],
    memory_mb: dict[str, int],
    shards_per_sweeper: int,
    stage_rate_limit: int = API_REQUESTS_PER_S,
) -> dict[str, Any]:
    """`cpu`: µs per job on one core, by scenario (bench.cpu). `stage_rate_limit`: the API
    stage's throttle as deployed (requests/s)."""
    deployed = f"stage throttle {stage_rate_limit:,}/s as deployed"
    raised = f"stage throttle raised to {API_REQUESTS_PER_S:,}/s"
    submit_series = {
        f"single submits, 1,000 concurrent Lambdas, {deployed}": dict(
            jobs_per_request=1, concurrency=1_000, stage=stage_rate_limit
        ),
        f"batches of 25, 1,000 concurrent Lambdas, {deployed}": dict(
            jobs_per_request=25, concurrency=1_000, stage=stage_rate_limit
        ),
        f"single submits, 1,000 concurrent Lambdas, {raised}": dict(
            jobs_per_request=1, concurrency=1_000, stage=API_REQUESTS_PER_S
        ),
        f"single submits, 100 concurrent Lambdas, {raised}": dict(
            jobs_per_request=1, concurrency=100, stage=API_REQUESTS_PER_S
        ),
    }
    submit: dict[str, dict[int, Rate]] = {}
    for name, options in submit_series.items():
        scenario = "submit_batch" if options["jobs_per_request"] > 1 else "submit"
        submit[name] = {
            shards: submissions(
                shards=shards,
                concurrency=options["concurrency"],
                cpu_us_per_job=cpu[scenario],
                jobs_per_request=options["jobs_per_request"],
                memory_mb=memory_mb["submit"],
                stage_rate_limit=options["stage"],
            )
            for shards in SHARD_COUNTS
        }
    configured = memory_mb["sweeper"]
    sweepers = {
        f"{configured} MB, {CLAIM_CONCURRENCY} claims in flight, sends in turn (before)": (
            configured,
            CLAIM_CONCURRENCY,
            False,
            shards_per_sweeper,
        ),
        f"{configured} MB, {CLAIM_CONCURRENCY} claims and a flush's sends in flight (now)": (
            configured,
            CLAIM_CONCURRENCY,
            True,
            shards_per_sweeper,
        ),
        f"{configured} MB, as now, 1 shard per sweeper": (
            configured,
            CLAIM_CONCURRENCY,
            True,
            1,
        ),
    }
    dispatch: dict[str, dict[int, Rate]] = {}
    per_sweeper: dict[str, Rate] = {}
    for name, (memory, claims, sends, group) in sweepers.items():
        rate = sweeper_rate(
            cpu_us_per_job=cpu["sweeper"],
            memory_mb=memory,
            claim_concurrency=claims,
            concurrent_sends=sends,
        )
        per_sweeper[name] = rate
        dispatch[name] = {
            shards: dispatches(shards=shards, shards_per_sweeper=group, sweeper=rate)
            for shards in SHARD_COUNTS
        }

    def table(
        series: dict[str, dict[int, Rate]], target: float, shapes: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            name: {
                "rates": {str(s): r.per_s for s, r in rates.items()},
                "limits": {str(s): r.limit for s, r in rates.items()},
                "reaches_target_at_shards": first_reaching(target, rates),
                "shape": shapes.get(name, {}),
            }
            for name, rates in series.items()
        }

    shapes = {
        name: {"memory_mb": m, "claims": c, "overlapped_sends": o, "shards_per_sweeper": g}
        for name, (m, c, o, g) in sweepers.items()
    }

    return {
        "shard_counts": list(SHARD_COUNTS),
        "submissions": table(submit, 10_000, {}),
        "dispatches": table(dispatch, 100_000, shapes),
        "per_sweeper": {
            name: {"per_s": r.per_s, "limit": r.limit} for name, r in per_sweeper.items()
        },
        "table_quota_wcu_per_s": TABLE_WCU_PER_S,
        "writes_per_job": WRITES_PER_JOB,
        "stage_rate_limit": stage_rate_limit,
        "lambda_concurrency": LAMBDA_CONCURRENCY,
        "inputs": {
            "cpu_us_per_job": cpu,
            "memory_mb": memory_mb,
            "latency_ms": {
                "dynamodb_item": DYNAMODB_ITEM_MS,
                "dynamodb_batch": DYNAMODB_BATCH_MS,
                "sqs": SQS_MS,
                "api_gateway": API_GATEWAY_MS,
            },
        },
    }
