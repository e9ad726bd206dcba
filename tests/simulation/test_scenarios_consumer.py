"""Issue 12, scenario 3 (cancel 200, effect runs) and the consumer side of the promises: the
cancel is replayed at each of the consumer's AWS calls, with the SDK's defaults."""

from __future__ import annotations

from typing import Any

import pytest

from sundial.clock import ManualClock
from sundial.envelope import Envelope
from sundial.errors import Conflict
from sundial.models import Status
from sundial.wiring import Dependencies
from tests.harness import Harness, delayed_job


def _cancel(deps: Dependencies, job_id: str) -> str:
    """DELETE /jobs/{id}, as the API answers it: `cancelled` (200) or the 409's status."""
    try:
        return str(deps.jobs.cancel(job_id))
    except Conflict as conflict:
        return f"409 {conflict.status}"


@pytest.mark.parametrize("cancel_after_call", range(3))
def test_scenario_03_a_cancel_that_answered_200_never_runs_the_effect(
    deps: Dependencies, clock: ManualClock, cancel_after_call: int
) -> None:
    effects: list[str] = []
    harness = Harness(deps, clock, lambda job: effects.append(job.id))
    job_id = delayed_job(deps, clock, harness)
    # When the client cancels right after the consumer's n-th DynamoDB call (the first is the
    # fence's read: the bug let the function run after it without any write)
    answers: list[str] = []
    calls: list[str] = []

    def cancel_then(model: Any, **_: Any) -> None:
        calls.append(model.name)
        if len(calls) == cancel_after_call + 1:
            answers.append(_cancel(deps, job_id))

    harness.dynamodb.meta.events.register("after-call.dynamodb.*", cancel_then)
    harness.poll()
    # Then a 200 `cancelled` means the effect never ran; otherwise the API said it had started
    assert answers, "the cancel was not replayed"
    if answers == ["cancelled"]:
        assert effects == []
        assert deps.jobs.get(job_id).status is Status.CANCELLED
    else:
        assert answers in (["409 running"], ["409 succeeded"])
        assert effects == [job_id]


def test_scenario_03_a_cancel_while_the_function_runs_answers_409(
    deps: Dependencies, clock: ManualClock
) -> None:
    answers: list[str] = []

    def cancelled_mid_run(job: Envelope) -> None:
        answers.append(_cancel(deps, job.id))

    harness = Harness(deps, clock, cancelled_mid_run)
    job_id = delayed_job(deps, clock, harness)
    harness.poll()
    assert answers == ["409 running"]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED
