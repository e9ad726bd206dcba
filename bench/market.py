"""The table a buyer reads first: $ per million delayed jobs for Sundial and what else a team
could buy instead, each with what its price includes and what it leaves out.

Sundial's figures and the two AWS-built alternatives (the Dynein-style baseline, EventBridge
Scheduler) come from the cost ledger's model against volume (bench.cost_curve), charged the
same way for logs, X-Ray and metrics. The hosted services are priced from their published
list prices (constants below, each with its source), per delayed job:

- Google Cloud Tasks: a create (CreateTask) and a push (the HTTP dispatch) are each one
  billable operation: 2 x $0.40 per million operations = $0.80 per million jobs.
- Upstash QStash: one message per delayed job at $1 per 100,000 messages = $10 per million.
- Temporal Cloud: a delayed job is a workflow with a timer and one activity, 2 or 3 billable
  actions, at $25 to $50 per million actions (the rate falls with volume and plan):
  low = 2 x $25 = $50, high = 3 x $50 = $150 per million jobs.

None of the hosted prices includes the worker that runs the job (your endpoint or your
Temporal worker), which Sundial's "all in" figure does include for its consumer SDK; so the
comparable Sundial figure is its scheduling side (submit to in SQS), shown beside it. Free
tiers and plan minimums are left out on every side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.cost_curve import (
    DyneinVolumeModel,
    SundialVolumeModel,
    eventbridge_sides,
)
from bench.costs import DEFAULTS, per_million
from bench.prices import MILLION

# https://cloud.google.com/tasks/pricing: $0.40 per million billable operations beyond the
# first million a month; an API call and a push delivery attempt (per 32 KB chunk) each count.
CLOUD_TASKS_PER_OPERATION = 0.40 / MILLION
CLOUD_TASKS_OPERATIONS_PER_JOB = 2  # CreateTask + the push

# https://upstash.com/pricing/qstash: pay as you go, $1 per 100,000 messages.
QSTASH_PER_MESSAGE = 1.00 / 100_000
QSTASH_MESSAGES_PER_JOB = 1

# https://temporal.io/pricing: Temporal Cloud actions, $25 to $50 per million (volume tiers and
# plan), e.g. StartWorkflow, the timer, the activity: 2 or 3 per delayed job.
TEMPORAL_PER_MILLION_ACTIONS = (25.0, 50.0)
TEMPORAL_ACTIONS_PER_JOB = (2, 3)

# The volumes the table prints Sundial's model at (jobs due per one-minute tick).
TABLE_VOLUMES = (10, 1_000, 10_000)


@dataclass(frozen=True)
class Offer:
    """One alternative: its price per million delayed jobs (a range when it has one) and the
    plain facts a buyer weighs beside it."""

    key: str
    name: str
    low: float
    high: float
    formula: str
    source: str
    precision: str
    cancel: str
    status: str
    queues: str
    excludes: str

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def cloud_tasks_per_million() -> float:
    return CLOUD_TASKS_OPERATIONS_PER_JOB * CLOUD_TASKS_PER_OPERATION * MILLION


def qstash_per_million() -> float:
    return QSTASH_MESSAGES_PER_JOB * QSTASH_PER_MESSAGE * MILLION


def temporal_per_million() -> tuple[float, float]:
    """(low, high): the fewest actions at the lowest rate, the most at the highest."""
    low_rate, high_rate = TEMPORAL_PER_MILLION_ACTIONS
    fewest, most = TEMPORAL_ACTIONS_PER_JOB
    return fewest * low_rate, most * high_rate


def hosted_offers() -> list[Offer]:
    """The hosted services, priced from their published list prices."""
    temporal_low, temporal_high = temporal_per_million()
    return [
        Offer(
            "cloud_tasks",
            "Google Cloud Tasks",
            cloud_tasks_per_million(),
            cloud_tasks_per_million(),
            "2 operations (create + push) x $0.40 per million",
            "cloud.google.com/tasks/pricing",
            "schedule_time, up to 30 days ahead",
            "yes (DeleteTask)",
            "while queued only (GetTask); none once delivered",
            "yes: per-queue rate limits and retries",
            "the HTTP handler that runs the job; egress; GCP only",
        ),
        Offer(
            "qstash",
            "Upstash QStash",
            qstash_per_million(),
            qstash_per_million(),
            "1 message x $1 per 100,000",
            "upstash.com/pricing/qstash",
            "delay / not-before in seconds",
            "yes (cancel a message)",
            "delivery logs",
            "yes: queues with parallelism",
            "the HTTP endpoint that runs the job",
        ),
        Offer(
            "temporal",
            "Temporal Cloud",
            temporal_low,
            temporal_high,
            "2-3 actions x $25-50 per million actions",
            "temporal.io/pricing",
            "durable timers, generally within 1 s",
            "yes (cancel the workflow)",
            "yes: full workflow history",
            "task queues",
            "your workers' compute; storage; plan minimums and support",
        ),
    ]


def _side_totals(dollars: Mapping[str, Any]) -> dict[str, float]:
    schedule = dollars["schedule"]
    return {"all_in": float(dollars["total"]), "schedule": float(schedule["total"])}


def buyer_table(
    ledger: Mapping[str, Any],
    shard_count: int,
    sweepers: int,
    volumes: Sequence[int] = TABLE_VOLUMES,
) -> dict[str, Any]:
    """$ per million delayed jobs at each of `volumes` jobs a tick: Sundial (single submits,
    batches of 25), the Dynein-style baseline and EventBridge Scheduler from the ledger's
    model, each all in and its scheduling side alone; and the hosted services' list prices."""
    paths = {path["key"]: path for path in ledger["paths"]}
    single = SundialVolumeModel(paths["delayed"], ledger["idle_tick"], shard_count)
    batched = SundialVolumeModel(paths["batch"], ledger["idle_tick"], shard_count)
    dynein = DyneinVolumeModel(ledger["dynein"], shard_count, sweepers)
    modelled: dict[str, dict[int, dict[str, float]]] = {
        "sundial": {},
        "sundial_batched": {},
        "dynein": {},
        "eventbridge": {},
    }
    for jobs in volumes:
        modelled["sundial"][jobs] = _side_totals(single.dollars(jobs))
        modelled["sundial_batched"][jobs] = _side_totals(batched.dollars(jobs))
        modelled["dynein"][jobs] = _side_totals(dynein.dollars(jobs))
        sides = eventbridge_sides(dynein, jobs)
        modelled["eventbridge"][jobs] = _side_totals(per_million(sides, jobs, DEFAULTS.at(60.0)))
    return {
        "volumes": list(volumes),
        "modelled": {k: {str(j): v for j, v in rows.items()} for k, rows in modelled.items()},
        "hosted": [offer.as_dict() for offer in hosted_offers()],
    }


# What each modelled row is, for the table: name, precision, cancel, status, queues, excludes.
MODELLED_ROWS: tuple[tuple[str, str, str, str, str, str, str], ...] = (
    (
        "sundial",
        "Sundial, exact, single submits",
        "second (SQS DelaySeconds; measured in section 2)",
        "yes, fenced: a cancelled job never runs",
        "yes, every attempt (pending to succeeded/dead)",
        "a team's own SQS queue + DLQ, priorities, limits",
        "your job's own code time; the fixed monthly cost (goal 4); history (Glue)",
    ),
    (
        "sundial_batched",
        "Sundial, exact, batches of 25",
        "as above",
        "as above",
        "as above",
        "as above",
        "as above",
    ),
    (
        "dynein",
        "Dynein-style build (model)",
        "second (SQS DelaySeconds)",
        "before dispatch only",
        "none after sending",
        "SQS queues, no per-team isolation",
        "your job's own code time",
    ),
    (
        "eventbridge",
        "EventBridge Scheduler + SQS (model)",
        "a 60 s window (one-time schedules)",
        "yes (DeleteSchedule)",
        "none per run (failed deliveries to a DLQ)",
        "targets your SQS queue",
        "your job's own code time; status and retries after delivery",
    ),
)
