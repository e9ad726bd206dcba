"""Issue 12, scenario 3 (cancel 200, effect runs) and the consumer side of the promises: the
cancel is replayed at each of the consumer's AWS calls, with the SDK's defaults."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from sundial.clock import ManualClock
from sundial.errors import Conflict
from sundial.model.job import Status
from sundial.runs.leases import AckRequest, LeaseRequest
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies
from tests.harness import Harness, delayed_job
from tests.support import DAILY_REPORT, FakeLambdaContext, sqs_event
from tests.unit.services.test_dags import DagRunner


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


def test_extra_redelivered_dag_parent_does_not_run_children_twice(
    deps: Dependencies, clock: ManualClock
) -> None:
    """SQS delivers the DAG's root again after it succeeded (at-least-once). Its repeat may
    send a still-queued child again (it cannot tell a send that was lost from one that was
    not), but no child's function runs twice: the attempt-taking write lets one delivery in."""
    runner = DagRunner(deps, clock)
    runner.submit(DAILY_REPORT)
    url = deps.settings.queue_urls["default"]
    [message] = runner.harness.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["All"]
    )["Messages"]
    event = sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:default")
    for _ in range(2):  # the same delivery twice: the root succeeds, then its duplicate arrives
        assert runner.harness.consumer.lambda_handler(event, FakeLambdaContext()) == {
            "batchItemFailures": []
        }
    runner.harness.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    runner.run_until_idle()
    assert Counter(runner.ran) == Counter(list(DAILY_REPORT["nodes"]))


def test_extra_retried_worker_ack_does_not_run_children_twice(
    deps: Dependencies, clock: ManualClock
) -> None:
    """A worker's ack whose response was lost is sent again: the repeat changes nothing that
    would run a child twice."""
    runner = DagRunner(deps, clock)
    runner.submit(DAILY_REPORT)
    [leased] = deps.leases.lease("default", LeaseRequest(wait=0, max=1))
    assert leased.envelope.dag is not None and leased.envelope.dag.node == "extract"
    ack = AckRequest(lease=leased.lease.token(), result={"rows": 1})
    deps.leases.ack(leased.envelope.id, ack)
    with pytest.raises(Conflict):
        deps.leases.ack(leased.envelope.id, ack)  # the retry: the lease's attempt is over
    runner.run_until_idle()
    assert Counter(runner.ran) == Counter(n for n in DAILY_REPORT["nodes"] if n != "extract")
