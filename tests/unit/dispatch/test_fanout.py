"""The fan-out: shard groups, the shards-only-grow rule, and the async-invoke launcher."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sundial.dispatch.fanout import LambdaLauncher, fan_out, shard_groups
from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext, load_handler


def test_shard_groups_cover_every_shard_once() -> None:
    groups = shard_groups(64, 8)
    assert len(groups) == 8
    assert sorted(s for g in groups for s in g) == list(range(64))
    assert shard_groups(10, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_lowering_the_shard_count_still_sweeps_the_old_shards(deps: Dependencies) -> None:
    launched: list[Sequence[int]] = []
    # Given a deployment that once ran with 16 shards
    assert fan_out(sweeps=deps.sweeps, shard_count=16, group_size=8, launch=launched.append) == 2
    # When it is redeployed with 4
    launched.clear()
    fan_out(sweeps=deps.sweeps, shard_count=4, group_size=8, launch=launched.append)
    # Then all 16 are still swept, since jobs may wait in any of them
    assert sorted(s for g in launched for s in g) == list(range(16))
    assert deps.sweeps.recorded_shard_count() == 16
    # And growing raises the record
    fan_out(sweeps=deps.sweeps, shard_count=32, group_size=8, launch=launched.append)
    assert deps.sweeps.recorded_shard_count() == 32


def test_fanout_handler_starts_one_sweeper_per_group(
    deps: Dependencies, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[Sequence[int]] = []
    monkeypatch.setattr(deps, "launch", launched.append)
    result = load_handler("fanout").handler({"source": "aws.events"}, FakeLambdaContext())
    assert result == {"sweepers": 2}  # 8 shards, 4 per sweeper (the test environment)
    assert launched == [[0, 1, 2, 3], [4, 5, 6, 7]]


@mock_aws(config={"lambda": {"use_docker": False}})
def test_lambda_launcher_invokes_the_sweeper_asynchronously() -> None:
    # Given a sweeper function (moto's simple Lambda backend: it accepts, never runs code)
    iam = boto3.client("iam")
    role = iam.create_role(
        RoleName="sweeper",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    client = boto3.client("lambda")
    client.create_function(
        FunctionName="sundial-sweeper",
        Runtime="python3.13",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
    )
    calls: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.lambda.Invoke", lambda params, **_: calls.append(params)
    )
    client.meta.events.register(
        "after-call.lambda.Invoke", lambda parsed, **_: responses.append(parsed)
    )
    # When the launcher starts a sweep of three shards
    LambdaLauncher(client, "sundial-sweeper")([3, 4, 5])
    # Then it is one asynchronous invoke with the shards as the event
    assert [c["InvocationType"] for c in calls] == ["Event"]
    assert json.loads(calls[0]["Payload"]) == {"shards": [3, 4, 5]}
    assert responses[0]["StatusCode"] == 202


def test_a_group_that_fails_to_start_does_not_stop_the_others(deps: Dependencies) -> None:
    launched: list[Sequence[int]] = []

    def launch(group: Sequence[int]) -> None:
        if 0 in group:
            raise RuntimeError("Lambda throttled")
        launched.append(group)

    failed: list[Sequence[int]] = []
    started = fan_out(
        sweeps=deps.sweeps, shard_count=12, group_size=4, launch=launch, failed=failed
    )
    assert started == 2
    assert launched == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert failed == [[0, 1, 2, 3]]
