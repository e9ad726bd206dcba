"""Cost per job against volume, and a configuration for the design card's steady load.

Modelled from what the ledger measured at one volume (bench.ledger), split into what a tick
costs whatever is due (the idle tick: fan-out, sweepers, cursor reads, a Query per shard),
what each shard with work costs per tick (its cursor write), the dispatch SendMessageBatch
requests (each shard's due jobs in batches of 10: expected from the binomial spread of N jobs
over the shards), and the rest, per job. X-Ray's sampling is applied at each volume's rate.
The Dynein-style baseline is split the same way (its scheduler invocations and a Query per
shard per tick; the rest per job); EventBridge Scheduler has no per-tick part.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from bench.costs import (
    DEFAULTS,
    CostOptions,
    SideQuantities,
    per_million,
    quota_dollars_per_million,
    quota_write_units_per_job,
)

SQS_BATCH = 10
TICK_S = 60.0
# The design card's steady load: 10,000 submissions a second, i.e. per one-minute tick.
DESIGN_LOAD_PER_TICK = 10_000 * 60
VOLUMES = (10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000)

# The configuration a high-volume producer would choose (cdk.json: table_capacity provisioned,
# observability tracing pass_through and log_level WARNING; producers submit in batches).
HIGH_VOLUME = CostOptions(
    capacity="provisioned", utilization=0.70, tracing="pass_through", log_level="WARNING"
)


def active_shards(jobs: float, shards: int) -> float:
    """Expected shards with at least one of `jobs` jobs (each on a random shard)."""
    return float(shards * (1 - (1 - 1 / shards) ** jobs))


def dispatch_requests(jobs: int, shards: int) -> float:
    """Expected SendMessageBatch requests when `jobs` jobs on random shards are each shard's
    due set: sum over shards of E[ceil(X / 10)], X ~ Binomial(jobs, 1 / shards)."""
    p = 1 / shards
    if jobs > 5_000:  # ceil(X/10) ~ X/10 + 0.45 once every shard has many jobs
        return shards * (jobs * p / SQS_BATCH + 0.45)
    expected, probability = 0.0, (1 - p) ** jobs
    for k in range(jobs + 1):
        if k:
            probability *= (jobs - k + 1) / k * p / (1 - p)
        expected += probability * math.ceil(k / SQS_BATCH)
        if k > jobs * p * 4 + 50 and probability < 1e-12:
            break
    return shards * expected


class SundialVolumeModel:
    """Sundial's cost at any volume, from one measured path and the idle tick."""

    def __init__(
        self, path: Mapping[str, Any], idle_tick: Mapping[str, Any], shard_count: int
    ) -> None:
        self.shards = shard_count
        self.measured_jobs = int(path["jobs"])
        sides = {name: SideQuantities.from_dict(q) for name, q in path["sides"].items()}
        self.idle = SideQuantities.from_dict(idle_tick["per_tick"]["sides"]["schedule"])
        per_job = path["per_job"]
        n0 = self.measured_jobs
        cursor_units = per_job["write_units_per_shard_items"] * n0
        self.cursor_units_per_shard = cursor_units / active_shards(n0, shard_count)
        schedule = sides["schedule"] + self.idle.scaled(-1)
        schedule.write_units -= cursor_units
        schedule.sqs_requests -= per_job["sqs_requests_dispatch"] * n0
        self.schedule_per_job = schedule.scaled(1 / n0)
        self.consume_per_job = sides["consume"].scaled(1 / n0)

    def sides(self, jobs: int) -> dict[str, SideQuantities]:
        """What one tick of `jobs` jobs uses, per side."""
        per_tick = SideQuantities(
            write_units=self.cursor_units_per_shard * active_shards(jobs, self.shards),
            sqs_requests=dispatch_requests(jobs, self.shards),
        )
        return {
            "schedule": self.idle + per_tick + self.schedule_per_job.scaled(jobs),
            "consume": self.consume_per_job.scaled(jobs),
        }

    def dollars(self, jobs: int, options: CostOptions = DEFAULTS) -> dict[str, Any]:
        return per_million(self.sides(jobs), jobs, options.at(TICK_S))

    def dollars_rate_limited(
        self, jobs: int, jobs_per_request: int, options: CostOptions = DEFAULTS
    ) -> dict[str, Any]:
        """As `dollars`, with every job's queue rate-limited (issue 16): each request of
        `jobs_per_request` jobs also counts them in its queue's submission window."""
        sides = self.sides(jobs)
        counter = SideQuantities(write_units=jobs * quota_write_units_per_job(jobs_per_request))
        sides["schedule"] = sides["schedule"] + counter
        return per_million(sides, jobs, options.at(TICK_S))


class DyneinVolumeModel:
    """The Dynein-style baseline at any volume: its scheduler's invocations and one Query per
    shard per tick are per tick, the rest per job."""

    def __init__(self, dynein: Mapping[str, Any], shard_count: int, sweepers: int) -> None:
        n0 = int(dynein["jobs"])
        sides = {name: SideQuantities.from_dict(q) for name, q in dynein["sides"].items()}
        self.per_tick = SideQuantities(
            lambda_requests=sweepers,
            read_units=0.5 * shard_count,  # an eventually consistent Query of an empty page
        )
        self.per_tick.invocations["dynein scheduler"] = sweepers
        self.schedule_per_job = (sides["schedule"] + self.per_tick.scaled(-1)).scaled(1 / n0)
        self.consume_per_job = sides["consume"].scaled(1 / n0)

    def sides(self, jobs: int) -> dict[str, SideQuantities]:
        return {
            "schedule": self.per_tick + self.schedule_per_job.scaled(jobs),
            "consume": self.consume_per_job.scaled(jobs),
        }

    def dollars(self, jobs: int, options: CostOptions = DEFAULTS) -> dict[str, Any]:
        return per_million(self.sides(jobs), jobs, options.at(TICK_S))


def eventbridge_sides(dynein: DyneinVolumeModel, jobs: int) -> dict[str, SideQuantities]:
    return {
        "schedule": SideQuantities(scheduler_invocations=jobs, sqs_requests=jobs),
        "consume": dynein.consume_per_job.scaled(jobs),
    }


def cost_curve(
    ledger: Mapping[str, Any], shard_count: int, sweepers: int, volumes: Sequence[int] = VOLUMES
) -> dict[str, Any]:
    """$ per million delayed jobs at each volume (jobs per tick), as deployed by default, for
    Sundial, the Dynein-style baseline and EventBridge Scheduler; and the design card's steady
    load in the high-volume configuration."""
    paths = {path["key"]: path for path in ledger["paths"]}
    sundial = SundialVolumeModel(paths["delayed"], ledger["idle_tick"], shard_count)
    batched = SundialVolumeModel(paths["batch"], ledger["idle_tick"], shard_count)
    dynein = DyneinVolumeModel(ledger["dynein"], shard_count, sweepers)

    def eventbridge(jobs: int, options: CostOptions = DEFAULTS) -> dict[str, Any]:
        return per_million(eventbridge_sides(dynein, jobs), jobs, options.at(TICK_S))

    rows = [
        {
            "jobs_per_tick": jobs,
            "sundial": sundial.dollars(jobs)["total"],
            "sundial_batched": batched.dollars(jobs)["total"],
            "dynein": dynein.dollars(jobs)["total"],
            "eventbridge": eventbridge(jobs)["total"],
        }
        for jobs in volumes
    ]
    load = DESIGN_LOAD_PER_TICK
    design_load = {
        "jobs_per_tick": load,
        "sundial_default": sundial.dollars(load),
        "sundial_high_volume": batched.dollars(load, HIGH_VOLUME),
        "sundial_high_volume_rate_limited": batched.dollars_rate_limited(load, 25, HIGH_VOLUME),
        "sundial_batched_on_demand": batched.dollars(
            load, CostOptions(tracing="pass_through", log_level="WARNING")
        ),
        "dynein_default": dynein.dollars(load),
        "dynein_high_volume": dynein.dollars(load, HIGH_VOLUME),
        "eventbridge_default": eventbridge(load),
        "eventbridge_high_volume": eventbridge(load, HIGH_VOLUME),
        "high_volume_options": {
            "capacity": HIGH_VOLUME.capacity,
            "utilization": HIGH_VOLUME.utilization,
            "tracing": HIGH_VOLUME.tracing,
            "log_level": HIGH_VOLUME.log_level,
        },
    }
    return {"rows": rows, "design_load": design_load, "quota": quota_costs()}


def quota_costs() -> list[dict[str, Any]]:
    """What a per-queue submission limit adds per million jobs (issue 16): one write unit per
    request on a rate-limited queue, so per job 1 / the jobs per request; as deployed by
    default (on demand) and in the high-volume configuration (provisioned)."""
    return [
        {
            "submits": submits,
            "jobs_per_request": per_request,
            "write_units_per_job": quota_write_units_per_job(per_request),
            "dollars_per_million_on_demand": quota_dollars_per_million(per_request),
            "dollars_per_million_high_volume": quota_dollars_per_million(per_request, HIGH_VOLUME),
        }
        for submits, per_request in (("single submits", 1), ("batches of 25", 25))
    ]
