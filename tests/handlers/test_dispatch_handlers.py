"""The sweeper Lambda's event contract (what the fan-out sends it)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from pydantic import ValidationError

from sundial.model.submission import SubmitJob
from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext, load_handler

sweeper_lambda = load_handler("sweeper")


def test_sweeper_handler_sweeps_the_shards_it_is_given(deps: Dependencies) -> None:
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=1000))
    deps.clock.advance(seconds=200)  # type: ignore[attr-defined]
    report = sweeper_lambda.handler({"shards": list(range(8))}, FakeLambdaContext())
    assert report["dispatched"] == 1
    assert report["shards"] == 8


@pytest.mark.parametrize("event", [{}, {"shards": []}, {"shards": ["a"]}, {"shards": [1], "x": 1}])
def test_sweeper_handler_rejects_a_malformed_event(
    deps: Dependencies, event: dict[str, object]
) -> None:
    with pytest.raises((ValidationError, ValueError)):
        sweeper_lambda.handler(event, FakeLambdaContext())


def test_sweeper_handler_reports_poison_jobs_and_errors_as_metrics(
    deps: Dependencies, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a pending job of a queue that is no longer configured, next to a healthy one
    orphan = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=1000)).job
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=1000))
    stored = deps.store.get(orphan.key)
    assert stored is not None
    deps.store.put_new([replace(stored, queue="removed")], now_ms=deps.clock.now_ms())
    deps.clock.advance(seconds=200)  # type: ignore[attr-defined]
    report = sweeper_lambda.handler({"shards": list(range(8))}, FakeLambdaContext())
    assert report["dispatched"] == 1 and report["poisoned"] == 1 and report["errors"] == 0
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert metrics and metrics[-1]["PoisonJobs"] == [1.0] and metrics[-1]["SweepErrors"] == [0.0]


def test_sweeper_handler_emits_the_lateness_of_each_job_it_sends(
    deps: Dependencies, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two jobs due at +1000 s and one due at +1100 s
    for delay in (1000, 1000, 1100):
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=delay))
    # When the sweeper runs 5 s after the first two were due (a late tick)
    deps.clock.advance(seconds=1005)  # type: ignore[attr-defined]
    report = sweeper_lambda.handler({"shards": list(range(8))}, FakeLambdaContext())
    # Then it reports visible-in-SQS minus due per job: 5 s for the overdue two, and under a
    # second (rounding DelaySeconds up) for the one sent ahead of its time
    assert report["dispatched"] == 3
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    values = sorted(v for m in metrics for v in m.get("DispatchLatenessMs", []))
    assert values[1:] == [5000.0, 5000.0] and 0 <= values[0] < 1000
    late = next(m for m in metrics if "DispatchLatenessMs" in m)
    [definition] = late["_aws"]["CloudWatchMetrics"]
    assert {"Name": "DispatchLatenessMs", "Unit": "Milliseconds"} in definition["Metrics"]
    assert report["lateness_ms"] == {"p50": 5000, "p99": 5000, "max": 5000}
