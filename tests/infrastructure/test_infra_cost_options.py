"""The cost options of cdk.json (stacks.settings): the API throttle, the table's capacity mode
and what the functions record, each synthesized as configured and still cdk-nag clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.infrastructure.synthesis import Synthesized, synthesize

pytestmark = pytest.mark.infra

HIGH_VOLUME = {
    "api": {"throttle_rate_limit": 10_000, "throttle_burst_limit": 5_000},
    "table_capacity": {
        "mode": "provisioned",
        "min_write_units": 100,
        "max_write_units": 50_000,
        "min_read_units": 10,
        "max_read_units": 5_000,
        "target_utilization_percent": 75,
    },
    "observability": {"tracing": "pass_through", "log_level": "WARNING"},
}


@pytest.fixture(scope="module")
def high_volume(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk.out"), HIGH_VOLUME)


def _one(synthesized: Synthesized, resource_type: str) -> dict[str, Any]:
    resources = list(synthesized.resources(resource_type).values())
    assert len(resources) == 1, resources
    properties: dict[str, Any] = resources[0]["Properties"]
    return properties


def test_defaults_are_on_demand_traced_and_throttled_at_1000(synthesized: Synthesized) -> None:
    # Given the app as cdk.json configures it (no cost options set)
    table = _one(synthesized, "AWS::DynamoDB::Table")
    stage = _one(synthesized, "AWS::ApiGatewayV2::Stage")

    # Then the table is on demand, with no auto scaling
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in table
    assert not synthesized.resources("AWS::ApplicationAutoScaling::ScalableTarget")
    # And the stage accepts 1,000 requests/s (burst 500), as docs/configuration.md promises
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] == 1000
    assert stage["DefaultRouteSettings"]["ThrottlingBurstLimit"] == 500
    # And every function is traced and logs at INFO
    for function in synthesized.resources("AWS::Lambda::Function").values():
        properties = function["Properties"]
        if "TracingConfig" not in properties:
            continue  # CDK's own helper functions (e.g. log retention, bucket notifications)
        assert properties["TracingConfig"] == {"Mode": "Active"}
        assert properties["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] == "INFO"


def test_provisioned_capacity_scales_writes_and_reads_within_the_bounds(
    high_volume: Synthesized,
) -> None:
    # Given the high-volume configuration
    table = _one(high_volume, "AWS::DynamoDB::Table")
    targets = high_volume.resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    policies = high_volume.resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()

    # Then the table is provisioned at the lower bounds
    assert table.get("BillingMode", "PROVISIONED") == "PROVISIONED"  # CFN default
    assert table["ProvisionedThroughput"] == {"ReadCapacityUnits": 10, "WriteCapacityUnits": 100}
    # And auto scaling keeps each dimension between its bounds
    bounds = {
        target["Properties"]["ScalableDimension"]: (
            target["Properties"]["MinCapacity"],
            target["Properties"]["MaxCapacity"],
        )
        for target in targets
    }
    assert bounds == {
        "dynamodb:table:WriteCapacityUnits": (100, 50_000),
        "dynamodb:table:ReadCapacityUnits": (10, 5_000),
    }
    # And tracks the target utilization on both
    tracked = sorted(
        (
            policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"],
            policy["Properties"]["TargetTrackingScalingPolicyConfiguration"][
                "PredefinedMetricSpecification"
            ]["PredefinedMetricType"],
        )
        for policy in policies
    )
    assert tracked == [
        (75, "DynamoDBReadCapacityUtilization"),
        (75, "DynamoDBWriteCapacityUtilization"),
    ]


def test_throttle_tracing_and_log_level_follow_the_settings(high_volume: Synthesized) -> None:
    # Given the high-volume configuration
    stage = _one(high_volume, "AWS::ApiGatewayV2::Stage")
    functions = [
        function["Properties"]
        for function in high_volume.resources("AWS::Lambda::Function").values()
        if "POWERTOOLS_SERVICE_NAME"
        in function["Properties"].get("Environment", {}).get("Variables", {})
    ]

    # Then the stage accepts what it says
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] == 10_000
    assert stage["DefaultRouteSettings"]["ThrottlingBurstLimit"] == 5_000
    # And every Sundial function (the history recorder too) traces only sampled callers and
    # logs warnings and errors only
    assert len(functions) >= 10
    for properties in functions:
        assert properties["TracingConfig"] == {"Mode": "PassThrough"}
        assert properties["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] == "WARNING"


def test_high_volume_configuration_passes_cdk_nag(high_volume: Synthesized) -> None:
    # Given the high-volume configuration, synthesized with the rule pack app.py registers
    # Then synth succeeded and no finding is left unacknowledged
    assert high_volume.synth_error is None
    assert high_volume.nag_violations == []


def test_synthesis_overrides_leave_cdk_json_alone(tmp_path: Path) -> None:
    # Given the overrides above, used by this module's fixture
    from tests.infrastructure.synthesis import cdk_json_context  # noqa: PLC0415

    # Then cdk.json itself still configures none of them (the defaults are the deployment's)
    assert not set(HIGH_VOLUME) & set(cdk_json_context()["sundial"])
    assert tmp_path.exists()
