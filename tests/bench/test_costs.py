"""The all-in pricing (bench.costs), the volume model (bench.cost_curve) and the log meter
(bench.logs): checked against hand-worked figures and a simulation of the shard spread."""

from __future__ import annotations

import io
import json
import logging
import math
import random
from collections import Counter
from typing import Any

import pytest

from bench.cost_curve import HIGH_VOLUME, SundialVolumeModel, active_shards, dispatch_requests
from bench.costs import (
    CostOptions,
    SideQuantities,
    per_million,
    price,
    provisioned_break_even,
    quota_dollars_per_million,
    quota_write_units_per_job,
    traced,
)
from bench.logs import LAMBDA_PLATFORM_LOG_BYTES, LogMeter


def test_xray_traces_the_first_invocation_each_second_and_5_percent_of_the_rest() -> None:
    # Fewer invocations than seconds: every one is traced
    assert traced(30, seconds=60) == 30
    # 600 in a minute: 60 from the reservoir, then 5% of the other 540
    assert traced(600, seconds=60) == pytest.approx(60 + 27)


def test_price_counts_each_item_under_the_options() -> None:
    # Given what one side used for 1,000 jobs over a minute
    side = SideQuantities(
        write_units=4_000,
        read_units=1_000,
        sqs_requests=200,
        lambda_requests=1_000,
        api_requests=1_000,
        log_bytes=300_000,
        info_log_bytes=200_000,
        invocations=Counter({"submit": 1_000}),
    )

    # When it is priced as deployed by default
    default = price(side, CostOptions(seconds=60))

    # Then each item is its quantity at the published price
    assert default["dynamodb_writes"] == pytest.approx(4_000 * 0.625e-6)
    assert default["dynamodb_reads"] == pytest.approx(1_000 * 0.125e-6)
    assert default["sqs"] == pytest.approx(200 * 0.40e-6)
    assert default["api_gateway"] == pytest.approx(1_000 * 1.00e-6)
    # And logs are what was printed plus Lambda's own lines, at $0.50 per GB
    logged = 300_000 + LAMBDA_PLATFORM_LOG_BYTES * 1_000
    assert default["logs"] == pytest.approx(logged / 1024**3 * 0.50)
    # And X-Ray records 60 + 5% of 940 of the submits
    assert default["xray"] == pytest.approx((60 + 47) * 5e-6)

    # When the table is provisioned, tracing passes through and INFO lines are dropped
    lean = price(
        side,
        CostOptions(
            capacity="provisioned",
            utilization=0.5,
            tracing="pass_through",
            log_level="WARNING",
            seconds=60,
        ),
    )

    # Then writes cost the unit-hour price over the writes a unit makes at that utilization
    assert lean["dynamodb_writes"] == pytest.approx(4_000 * 0.00065 / (3600 * 0.5))
    assert "xray" not in lean
    assert lean["logs"] == pytest.approx(
        (100_000 + LAMBDA_PLATFORM_LOG_BYTES * 1_000) / 1024**3 * 0.5
    )


def test_per_million_sums_sides_per_job() -> None:
    sides = {
        "schedule": SideQuantities(write_units=2_000, api_requests=1_000),
        "consume": SideQuantities(write_units=2_000),
    }
    dollars = per_million(sides, 1_000, CostOptions(tracing="pass_through"))
    assert dollars["schedule"]["total"] == pytest.approx(2 * 0.625 + 1.00)  # type: ignore[index]
    assert dollars["total"] == pytest.approx(4 * 0.625 + 1.00)


def test_a_submission_limit_costs_one_write_per_request() -> None:
    # Given a rate-limited queue: one counter write per request, whatever the limit
    assert quota_write_units_per_job(1) == 1.0
    assert quota_write_units_per_job(25) == pytest.approx(0.04)
    # Then single submits pay a write unit per job, batches of 25 a 25th of it
    assert quota_dollars_per_million(1) == pytest.approx(0.625)
    assert quota_dollars_per_million(25) == pytest.approx(0.025)
    # And provisioned at 70% a write costs $0.00065 / 3,600 / 0.7
    provisioned = CostOptions(capacity="provisioned", utilization=0.70)
    assert quota_dollars_per_million(1, provisioned) == pytest.approx(0.00065 / 3600 / 0.7 * 1e6)
    # And the cost curve's model adds exactly that to the high-volume configuration
    model = SundialVolumeModel(
        {
            "jobs": 100,
            "sides": {"schedule": {"write_units": 100.0}, "consume": {"write_units": 200.0}},
            "per_job": {"write_units_per_shard_items": 0.0, "sqs_requests_dispatch": 0.0},
        },
        {"per_tick": {"sides": {"schedule": {}}}},
        shard_count=64,
    )
    plain = model.dollars(1_000, HIGH_VOLUME)["total"]
    limited = model.dollars_rate_limited(1_000, 25, HIGH_VOLUME)["total"]
    assert limited - plain == pytest.approx(quota_dollars_per_million(25, HIGH_VOLUME))


def test_provisioned_capacity_breaks_even_near_29_percent_utilization() -> None:
    # $0.00065 a unit-hour is 3,600 writes at full use, against $0.625 per million on demand
    assert provisioned_break_even() == pytest.approx(0.00065 / 3600 / 0.625e-6)
    assert 0.28 < provisioned_break_even() < 0.30


def test_quantities_scale_and_subtract_without_negative_invocations() -> None:
    measured = SideQuantities(
        lambda_requests=109, invocations=Counter(submit=100, sweeper=8, fanout=1)
    )
    per_tick = SideQuantities(lambda_requests=9, invocations=Counter(sweeper=8, fanout=1))
    per_job = (measured + per_tick.scaled(-1)).scaled(1 / 100)
    assert per_job.lambda_requests == pytest.approx(1.0)
    assert dict(per_job.invocations) == {"submit": pytest.approx(1.0)}
    assert SideQuantities.from_dict(per_job.as_dict()) == per_job


@pytest.mark.parametrize("jobs", [1, 10, 64, 320, 1_280])
def test_dispatch_requests_match_a_simulated_spread_over_the_shards(jobs: int) -> None:
    # Given jobs on random shards, each shard's due set sent in batches of 10
    rng = random.Random(jobs)
    trials = 400
    simulated = 0
    shard_used = 0
    for _ in range(trials):
        per_shard = Counter(rng.randrange(64) for _ in range(jobs))
        simulated += sum(math.ceil(count / 10) for count in per_shard.values())
        shard_used += len(per_shard)

    # Then the model's expectations agree with the simulation within sampling error
    assert dispatch_requests(jobs, 64) == pytest.approx(simulated / trials, rel=0.03)
    assert active_shards(jobs, 64) == pytest.approx(shard_used / trials, rel=0.03)


def test_dispatch_requests_at_high_volume_approach_one_per_ten_jobs() -> None:
    assert dispatch_requests(600_000, 64) / 600_000 == pytest.approx(0.1, rel=0.01)


def test_log_meter_counts_lines_and_info_lines_of_logging_handlers_and_prints() -> None:
    # Given a logger whose handler writes to a stream, as Powertools' does to stdout
    sink = io.StringIO()
    meter = LogMeter(sink)
    handler: logging.StreamHandler[Any] = logging.StreamHandler(sink)
    logger = logging.getLogger("bench-test-log-meter")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    info = json.dumps({"level": "INFO", "message": "sweep done"})
    warning = json.dumps({"level": "WARNING", "message": "poison job"})
    try:
        # When the meter stands in for that stream and lines are written through it
        handler.setStream(meter)
        logger.info(info)
        logger.warning(warning)
        meter.write('{"_aws": {"CloudWatchMetrics": []}}\n')  # an EMF line: no level
        counted = meter.take()
    finally:
        logger.removeHandler(handler)

    # Then every line is counted with its newline, INFO lines apart
    emf = len('{"_aws": {"CloudWatchMetrics": []}}') + 1
    assert counted.lines == 3
    assert counted.total == len(info) + 1 + len(warning) + 1 + emf
    assert counted.info == len(info) + 1
    # And the lines still reach the stream they were meant for
    assert sink.getvalue().count("\n") == 3
    # And a take starts the count again
    assert meter.take().total == 0
