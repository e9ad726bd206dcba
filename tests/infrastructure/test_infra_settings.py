"""Settings validation: a bad "sundial" context fails synth with a message naming the key."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stacks.settings import SettingsError, SundialSettings
from sundial.quotas import MAX_STORED_PAYLOAD_BYTES
from tests.infrastructure.synthesis import REPO_ROOT, cdk_json_context

pytestmark = pytest.mark.infra


def valid() -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(cdk_json_context()["sundial"])
    return raw


def test_cdk_json_settings_are_valid() -> None:
    # Given the "sundial" context in cdk.json
    # When it is validated
    settings = SundialSettings.from_context(valid())

    # Then it holds the configured values
    assert settings.shard_count == 64
    assert settings.shards_per_sweeper == 8
    assert settings.retention_days == 30
    assert sorted(settings.queues) == ["default", "demo", "email"]
    assert settings.queues["demo"].max_receive_count == 5
    assert settings.queues["demo"].visibility_timeout_seconds == 30
    # And every queue takes the retry defaults (cdk.json sets none)
    for queue in settings.queues.values():
        assert queue.retry.model_dump() == {
            "max_attempts": 3,
            "initial_delay_seconds": 10,
            "factor": 2.0,
            "max_delay_seconds": 3600,
        }
    # And the example consumer reads the demo queue (the default)
    assert settings.example_consumer_queue == "demo"


def test_every_queue_tolerates_redrives_beyond_a_throttled_batch() -> None:
    # Given the queues in cdk.json
    queues = valid()["queues"]

    # Then each allows at least 5 receives of one message before its DLQ (AWS's advice for a
    # Lambda event source; retries are new messages, so this bounds consumer crashes only)
    assert all(queue["max_receive_count"] >= 5 for queue in queues.values()), queues


def _with_retry(retry: Any) -> dict[str, Any]:
    """The cdk.json settings with `retry` set on the email queue."""
    raw = valid()
    raw["queues"]["email"] = raw["queues"]["email"] | {"retry": retry}
    return raw


@pytest.mark.parametrize(
    ("retry", "expected"),
    [
        ({}, (3, 10, 2.0, 3600)),
        ({"max_attempts": 1}, (1, 10, 2.0, 3600)),
        ({"max_attempts": 100, "factor": 10.0}, (100, 10, 10.0, 3600)),
        ({"initial_delay_seconds": 0, "max_delay_seconds": 0, "factor": 1}, (3, 0, 1.0, 0)),
        (
            {"initial_delay_seconds": 86_400, "max_delay_seconds": 7 * 86_400},
            (3, 86_400, 2.0, 7 * 86_400),
        ),
        ({"initial_delay_seconds": 60, "max_delay_seconds": 60}, (3, 60, 2.0, 60)),
    ],
)
def test_queue_retry_settings_accept_values_in_range(
    retry: dict[str, Any], expected: tuple[int, int, float, int]
) -> None:
    # Given the email queue with a retry object (keys it leaves out take the defaults)
    # When the settings are validated
    settings = SundialSettings.from_context(_with_retry(retry))

    # Then the email queue has those values
    got = settings.queues["email"].retry
    assert (
        got.max_attempts,
        got.initial_delay_seconds,
        got.factor,
        got.max_delay_seconds,
    ) == expected


@pytest.mark.parametrize(
    ("retry", "key", "reason"),
    [
        ({"max_attempts": 0}, "max_attempts", "greater than or equal to 1"),
        ({"max_attempts": 101}, "max_attempts", "less than or equal to 100"),
        ({"initial_delay_seconds": -1}, "initial_delay_seconds", "greater than or equal to 0"),
        (
            {"initial_delay_seconds": 86_401, "max_delay_seconds": 86_401},
            "initial_delay_seconds",
            "less than or equal to 86400",
        ),
        ({"factor": 0.5}, "factor", "greater than or equal to 1"),
        ({"factor": 10.5}, "factor", "less than or equal to 10"),
        (
            {"initial_delay_seconds": 60, "max_delay_seconds": 30},
            "max_delay_seconds",
            "must be >= initial_delay_seconds (60), got 30",
        ),
        # the default cap (3600 s) below a longer initial delay
        (
            {"initial_delay_seconds": 7200},
            "max_delay_seconds",
            "must be >= initial_delay_seconds (7200), got 3600",
        ),
        ({"max_delay_seconds": 7 * 86_400 + 1}, "max_delay_seconds", "less than or equal to"),
        ({"max_attempts": "3"}, "max_attempts", "valid integer"),
        ({"max_attempts": True}, "max_attempts", "valid integer"),
        ({"factor": False}, "factor", "valid number"),
        ({"max_atempts": 3}, "max_atempts", "Extra inputs are not permitted"),
    ],
)
def test_bad_queue_retry_settings_are_rejected_naming_the_key(
    retry: dict[str, Any], key: str, reason: str
) -> None:
    # Given the email queue with one bad retry value
    raw = _with_retry(retry)

    # When the settings are validated
    with pytest.raises(SettingsError) as raised:
        SundialSettings.from_context(raw)

    # Then the message names the key and the reason
    message = str(raised.value)
    assert f"sundial.queues.email.retry.{key}: " in message
    assert reason in message


def test_queue_retry_must_be_an_object() -> None:
    # Given the email queue with a retry that is not an object
    # When the settings are validated
    with pytest.raises(SettingsError, match=r"sundial\.queues\.email\.retry: "):
        SundialSettings.from_context(_with_retry(5))


def test_example_consumer_can_be_turned_off() -> None:
    # Given the cdk.json settings with example_consumer_queue set to null
    # When they are validated
    settings = SundialSettings.from_context(valid() | {"example_consumer_queue": None})

    # Then no example consumer is wanted
    assert settings.example_consumer_queue is None


def test_example_consumer_queue_must_be_a_configured_queue() -> None:
    # Given the cdk.json settings naming a queue that is not configured for the example consumer
    raw = valid() | {"example_consumer_queue": "billing"}

    # When they are validated
    with pytest.raises(SettingsError) as raised:
        SundialSettings.from_context(raw)

    # Then the message names the key, the bad value and the queues it could be
    message = str(raised.value)
    assert "sundial.example_consumer_queue" in message
    assert "'billing' is not a configured queue" in message
    assert "['default', 'demo', 'email']" in message


_QUEUE = {"max_receive_count": 5, "visibility_timeout_seconds": 30}


def test_queue_quotas_are_off_unless_declared_and_bounded_by_the_api() -> None:
    # Given cdk.json's queues (no quotas) and one declaring both, at their highest
    settings = SundialSettings.from_context(valid())
    email = _QUEUE | {"max_submissions_per_second": 1_000_000, "max_payload_bytes": 65_536}
    limited = SundialSettings.from_context(valid() | {"queues": {"email": email}})
    # Then the undeclared limits are off, and the declared ones are kept
    for queue in settings.queues.values():
        assert (queue.max_submissions_per_second, queue.max_payload_bytes) == (None, None)
        assert not queue.limited
    assert limited.queues["email"].max_submissions_per_second == 1_000_000
    assert limited.queues["email"].max_payload_bytes == 65_536


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"shard_count": 0}, "sundial.shard_count"),
        ({"shard_count": 4097}, "sundial.shard_count"),
        ({"shards_per_sweeper": 0}, "sundial.shards_per_sweeper"),
        ({"retention_days": 0}, "sundial.retention_days"),
        ({"retention_days": 3651}, "sundial.retention_days"),
        ({"queues": {}}, "sundial.queues"),
        (
            {"queues": {"Email": {"max_receive_count": 5, "visibility_timeout_seconds": 30}}},
            "sundial.queues.Email",
        ),
        (
            {"queues": {"9lives": {"max_receive_count": 5, "visibility_timeout_seconds": 30}}},
            "sundial.queues.9lives",
        ),
        (
            {"queues": {"a" * 41: {"max_receive_count": 5, "visibility_timeout_seconds": 30}}},
            "sundial.queues." + "a" * 41,
        ),
        (
            {"queues": {"email": {"max_receive_count": 0, "visibility_timeout_seconds": 30}}},
            "sundial.queues.email.max_receive_count",
        ),
        (
            {"queues": {"email": {"max_receive_count": 1001, "visibility_timeout_seconds": 30}}},
            "sundial.queues.email.max_receive_count",
        ),
        (
            {"queues": {"email": {"max_receive_count": 5, "visibility_timeout_seconds": 0}}},
            "sundial.queues.email.visibility_timeout_seconds",
        ),
        (
            {"queues": {"email": {"max_receive_count": 5, "visibility_timeout_seconds": 43201}}},
            "sundial.queues.email.visibility_timeout_seconds",
        ),
        (
            {
                "queues": {
                    "email": {
                        "max_receive_count": 5,
                        "visibility_timeout_seconds": 30,
                        "priority_queue": "yes",
                    }
                }
            },
            "sundial.queues.email.priority_queue",
        ),
        *[
            ({"queues": {"email": _QUEUE | quota}}, f"sundial.queues.email.{next(iter(quota))}")
            for quota in (
                {"max_submissions_per_second": 0},
                {"max_submissions_per_second": "50"},
                {"max_submissions_per_second": 1.5},
                {"max_submissions_per_second": True},
                {"max_payload_bytes": MAX_STORED_PAYLOAD_BYTES + 1},  # over the API's own limit
                {"max_payload_bytes": 0},
            )
        ],
        (
            {
                "queues": {
                    "email": {
                        "max_receive_count": 5,
                        "visibility_timeout_seconds": 30,
                        "max_dispatch_per_second": 0,
                    }
                }
            },
            "sundial.queues.email.max_dispatch_per_second",
        ),
        (
            {
                "queues": {
                    "email": {
                        "max_receive_count": 5,
                        "visibility_timeout_seconds": 30,
                        "dispatch_weight": "2",
                    }
                }
            },
            "sundial.queues.email.dispatch_weight",
        ),
        ({"shard_cuont": 64}, "sundial.shard_cuont"),
        ({"example_consumer_queue": "Demo"}, "sundial.example_consumer_queue"),
        ({"example_consumer_queue": 7}, "sundial.example_consumer_queue"),
        ({"api": {"throttle_rate_limit": 0}}, "sundial.api.throttle_rate_limit"),
        ({"api": {"throttle_burst_limit": "500"}}, "sundial.api.throttle_burst_limit"),
        ({"table_capacity": {"mode": "autoscaled"}}, "sundial.table_capacity.mode"),
        (
            {"table_capacity": {"min_write_units": 50, "max_write_units": 5}},
            "sundial.table_capacity.max_write_units",
        ),
        (
            {"table_capacity": {"target_utilization_percent": 95}},
            "sundial.table_capacity.target_utilization_percent",
        ),
        ({"observability": {"tracing": "off"}}, "sundial.observability.tracing"),
        ({"observability": {"log_level": "info"}}, "sundial.observability.log_level"),
    ],
)
def test_bad_settings_are_rejected_naming_the_key(change: dict[str, Any], key: str) -> None:
    # Given the cdk.json settings with one bad value
    raw = valid() | change

    # When they are validated
    with pytest.raises(SettingsError) as raised:
        SundialSettings.from_context(raw)

    # Then the message names the offending key
    assert key in str(raised.value)


def test_missing_settings_are_rejected() -> None:
    # Given no "sundial" context at all
    # When it is validated
    # Then the message says which context key is missing
    with pytest.raises(SettingsError, match='context "sundial" must be an object'):
        SundialSettings.from_context(None)


def test_app_exits_with_a_clear_message_on_bad_settings(tmp_path: Path) -> None:
    # Given the app run as the CDK CLI runs it, with a bad shard count in the context
    context = {"sundial": valid() | {"shard_count": 0}}
    environment = os.environ | {
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_OUTDIR": str(tmp_path),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }

    # When it runs
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # Then it fails before synthesizing, with one line naming the key (no traceback)
    assert result.returncode != 0
    assert "sundial: invalid cdk.json context: sundial.shard_count" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.template.json"))
