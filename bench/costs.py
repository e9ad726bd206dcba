"""Dollars from counted quantities: the one place a quantity becomes a price, for every design
and configuration the benchmarks compare.

A ledger run counts, per side (scheduling: submit to in SQS; consuming: SQS to done), the
write and read units, SQS requests, Lambda requests and GB-seconds, API requests, the bytes the
functions printed, and the invocations of each function. `price` turns them into dollars under
`CostOptions`: the table's capacity mode, the functions' X-Ray tracing and log level (the
`table_capacity` and `observability` settings of cdk.json), and the load, which X-Ray's
sampling depends on.

X-Ray (modelled: Lambda's active tracing samples by a fixed rule, the first invocation each
second and 5% of the rest, per function; $5 per million traces recorded). CloudWatch Logs
(counted: every byte printed, plus Lambda's START/END/REPORT lines, bench.logs; $0.50 per GB
ingested; storage for the month the log groups keep them is under 2% of that and left out).
Custom metrics are billed per metric per month, not per job: they are in the fixed cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from bench.logs import LAMBDA_PLATFORM_LOG_BYTES
from bench.prices import MILLION, PRICES, Prices

GIB = 1024**3
XRAY_RESERVOIR_PER_S = 1.0
XRAY_FIXED_RATE = 0.05


@dataclass(frozen=True)
class CostOptions:
    """How a deployment is configured, and the load it runs at."""

    capacity: Literal["on_demand", "provisioned"] = "on_demand"
    utilization: float = 0.70  # provisioned only: consumed / provisioned, on average
    tracing: Literal["active", "pass_through"] = "active"
    log_level: Literal["INFO", "WARNING"] = "INFO"
    seconds: float = 60.0  # the time the counted jobs arrived over (X-Ray's reservoir is per s)

    def at(self, seconds: float) -> CostOptions:
        return replace(self, seconds=seconds)


DEFAULTS = CostOptions()


@dataclass
class SideQuantities:
    """What one side of a run used, in all (not per job)."""

    write_units: float = 0.0
    read_units: float = 0.0
    sqs_requests: float = 0.0
    lambda_requests: float = 0.0
    gb_s: float = 0.0
    api_requests: float = 0.0
    log_bytes: float = 0.0
    info_log_bytes: float = 0.0
    invocations: Counter[str] = field(default_factory=Counter)
    scheduler_invocations: float = 0.0  # EventBridge Scheduler's own (its model only)

    def __add__(self, other: SideQuantities) -> SideQuantities:
        return SideQuantities(
            **{
                name: getattr(self, name) + getattr(other, name)
                for name in self.__dataclass_fields__
            }
        )

    def scaled(self, factor: float) -> SideQuantities:
        numbers = {
            name: value * factor
            for name, value in vars(self).items()
            if not isinstance(value, Counter)
        }
        counts = Counter({k: v * factor for k, v in self.invocations.items()})
        return SideQuantities(**numbers, invocations=counts)

    def as_dict(self) -> dict[str, object]:
        return {**vars(self), "invocations": dict(self.invocations)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> SideQuantities:
        values = dict(data)
        invocations = values.pop("invocations", {})
        assert isinstance(invocations, dict)
        return cls(**values, invocations=Counter(invocations))  # type: ignore[arg-type]


def traced(invocations: float, seconds: float) -> float:
    """Invocations of one function that active tracing records, over `seconds`."""
    reservoir = min(invocations, XRAY_RESERVOIR_PER_S * seconds)
    return reservoir + XRAY_FIXED_RATE * (invocations - reservoir)


def write_unit_price(options: CostOptions, prices: Prices = PRICES) -> float:
    if options.capacity == "on_demand":
        return prices.dynamodb_write_unit
    return prices.dynamodb_wcu_hour / 3600 / options.utilization


def read_unit_price(options: CostOptions, prices: Prices = PRICES) -> float:
    if options.capacity == "on_demand":
        return prices.dynamodb_read_unit
    return prices.dynamodb_rcu_hour / 3600 / options.utilization


def price(
    side: SideQuantities, options: CostOptions = DEFAULTS, prices: Prices = PRICES
) -> dict[str, float]:
    """Dollars for what one side used (in all, not per job), item by item."""
    log_bytes = side.log_bytes - (side.info_log_bytes if options.log_level == "WARNING" else 0)
    log_bytes += LAMBDA_PLATFORM_LOG_BYTES * side.lambda_requests
    traces = (
        sum(traced(count, options.seconds) for count in side.invocations.values())
        if options.tracing == "active"
        else 0.0
    )
    items = {
        "dynamodb_writes": side.write_units * write_unit_price(options, prices),
        "dynamodb_reads": side.read_units * read_unit_price(options, prices),
        "sqs": side.sqs_requests * prices.sqs_request,
        "lambda_requests": side.lambda_requests * prices.lambda_request,
        "lambda_duration": side.gb_s * prices.lambda_gb_second,
        "logs": log_bytes / GIB * prices.cloudwatch_logs_gb,
        "xray": traces * prices.xray_trace,
        "api_gateway": side.api_requests * prices.api_gateway_http_request,
        "scheduler_invocations": side.scheduler_invocations
        * prices.eventbridge_scheduler_invocation,
    }
    return {name: value for name, value in items.items() if value}


def per_million(
    sides: Mapping[str, SideQuantities],
    jobs: float,
    options: CostOptions = DEFAULTS,
    prices: Prices = PRICES,
) -> dict[str, object]:
    """{side: {item: $ per million jobs, "total"}, "total"}: what a ledger row shows."""
    out: dict[str, object] = {}
    total = 0.0
    for name, side in sides.items():
        dollars = {k: v / jobs * MILLION for k, v in price(side, options, prices).items()}
        dollars["total"] = sum(dollars.values())
        total += dollars["total"]
        out[name] = dollars
    out["total"] = total
    return out


# A rate-limited queue (issue 16, sundial.services.admission) counts each request's jobs in its
# submission window with one conditional UpdateItem on an item well under 1 KB: one write unit
# per request (per rate-limited queue in it), whatever the limit. A queue with no limit: none.
QUOTA_WRITE_UNITS_PER_REQUEST = 1.0


def quota_write_units_per_job(jobs_per_request: int) -> float:
    """The submission counter's write units per job, for requests of this many jobs (a single
    submit 1; a batch of 25, 1/25; a DAG, 1 per node count on each rate-limited queue)."""
    return QUOTA_WRITE_UNITS_PER_REQUEST / jobs_per_request


def quota_dollars_per_million(
    jobs_per_request: int, options: CostOptions = DEFAULTS, prices: Prices = PRICES
) -> float:
    """What a rate limit adds per million jobs: its counter's writes, priced under `options`."""
    return quota_write_units_per_job(jobs_per_request) * write_unit_price(options, prices) * MILLION


def provisioned_break_even(prices: Prices = PRICES) -> float:
    """The average utilization above which provisioned writes cost less than on-demand ones."""
    return prices.dynamodb_wcu_hour / 3600 / prices.dynamodb_write_unit
