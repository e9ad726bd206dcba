"""The buyer's table (bench.market, issue 29 goal 5): the hosted services' list prices per
million delayed jobs, worked by hand, and the modelled rows agreeing with the cost curve."""

from __future__ import annotations

from typing import Any

import pytest

from bench.cost_curve import cost_curve
from bench.costs import SideQuantities
from bench.market import (
    buyer_table,
    cloud_tasks_per_million,
    hosted_offers,
    qstash_per_million,
    temporal_per_million,
)


def test_cloud_tasks_charges_a_create_and_a_push() -> None:
    # 2 operations per job x $0.40 per million operations
    assert cloud_tasks_per_million() == pytest.approx(0.80)


def test_qstash_charges_one_message_at_one_dollar_per_hundred_thousand() -> None:
    assert qstash_per_million() == pytest.approx(10.0)


def test_temporal_ranges_from_two_cheap_actions_to_three_dear_ones() -> None:
    # low: 2 actions x $25 per million actions; high: 3 x $50
    assert temporal_per_million() == pytest.approx((50.0, 150.0))


def test_every_hosted_offer_names_its_source_and_what_it_leaves_out() -> None:
    for offer in hosted_offers():
        assert offer.source and offer.excludes and offer.formula
        assert 0 < offer.low <= offer.high


def _side(invocations: int = 0, **numbers: float) -> dict[str, Any]:
    side = SideQuantities.from_dict(numbers)
    if invocations:
        side.invocations["fn"] = invocations
    return side.as_dict()


def _path(key: str, jobs: int) -> dict[str, Any]:
    return {
        "key": key,
        "jobs": jobs,
        "sides": {
            "schedule": _side(
                write_units=2 * jobs + 8,
                read_units=140,
                sqs_requests=jobs / 5,
                lambda_requests=jobs + 9,
                gb_s=0.5 * jobs,
                api_requests=jobs,
                log_bytes=300 * jobs,
                invocations=jobs + 9,
            ),
            "consume": _side(
                write_units=2 * jobs,
                read_units=jobs,
                sqs_requests=jobs / 5,
                lambda_requests=jobs / 10,
                gb_s=0.2 * jobs,
                log_bytes=200 * jobs,
                invocations=jobs // 10,
            ),
        },
        "per_job": {"write_units_per_shard_items": 8 / jobs, "sqs_requests_dispatch": 0.2},
    }


def _ledger() -> dict[str, Any]:
    idle = _side(read_units=137, lambda_requests=9, gb_s=1.0, log_bytes=8000, invocations=9)
    return {
        "paths": [_path("delayed", 320), _path("batch", 320)],
        "idle_tick": {"per_tick": {"sides": {"schedule": idle, "consume": _side()}}},
        "dynein": {
            "jobs": 320,
            "sides": {
                "schedule": _side(write_units=960, sqs_requests=320, lambda_requests=328),
                "consume": _side(sqs_requests=64, lambda_requests=32),
            },
        },
    }


def test_the_modelled_rows_are_the_cost_curve_at_the_same_volumes() -> None:
    # Given one ledger, the cost curve and the buyer's table at the same volumes
    ledger = _ledger()
    curve = {r["jobs_per_tick"]: r for r in cost_curve(ledger, 64, 8, (10, 1000))["rows"]}
    # When the table is built
    table = buyer_table(ledger, 64, 8, (10, 1000))
    # Then its all-in figures are the curve's, and each scheduling side is part of its total
    for key in ("sundial", "sundial_batched", "dynein", "eventbridge"):
        for jobs in (10, 1000):
            cell = table["modelled"][key][str(jobs)]
            assert cell["all_in"] == pytest.approx(curve[jobs][key])
            assert 0 < cell["schedule"] < cell["all_in"]
    assert [o["key"] for o in table["hosted"]] == ["cloud_tasks", "qstash", "temporal"]
