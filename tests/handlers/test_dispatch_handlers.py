"""The sweeper Lambda's event contract (what the fan-out sends it)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sundial.submission import SubmitJob
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
