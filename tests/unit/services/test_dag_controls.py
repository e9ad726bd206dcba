"""DAG controls racing a DAG's own progress (issue 32): pause, resume, cancel and retry against
the submit and the nodes' runs. Each test names the scenario a review found, and fails on the
code before its fix."""

from __future__ import annotations

from typing import Any

import pytest

from sundial.clock import ManualClock
from sundial.errors import Conflict
from sundial.model.dag import DagStatus
from sundial.model.job import Job, Status
from sundial.timing import SUBMIT_IN_FLIGHT_MS
from sundial.transport.envelope import Envelope, envelope_body
from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext
from tests.unit.services.test_dags import CHAIN, DagRunner, _statuses

# Two roots due in an hour; `c` hangs on `b` under continue
CONTINUE: dict[str, Any] = {
    "name": "continue",
    "on_failure": "continue",
    "delay_seconds": 3600,
    "nodes": {
        "a": {"queue": "default"},
        "b": {"queue": "default"},
        "c": {"queue": "email", "depends_on": ["b"]},
    },
}


def _messages(runner: DagRunner, queue: str) -> int:
    url = runner.deps.settings.queue_urls[queue]
    attributes = runner.harness.sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())


def test_a_dag_paused_while_its_submit_sends_its_root_never_runs_it(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = DagRunner(deps, clock)
    send = runner.deps.jobs.dispatch_direct

    def paused_first(jobs: list[Job], **options: Any) -> list[Job]:
        # An operator who found the DAG in GET /dags?queue= pauses it while its submit runs
        assert jobs[0].dag is not None
        runner.deps.dags.pause(jobs[0].dag.dag_id)
        return send(jobs, **options)

    monkeypatch.setattr(runner.deps.jobs, "dispatch_direct", paused_first)
    view = runner.submit(CHAIN)
    monkeypatch.undo()
    # When the root's message (sent after the pause) reaches its consumer
    runner.run_until_idle()
    # Then nothing ran while the DAG is paused (found by a review: the fence admitted the
    # pending, direct root and the take won, so the root ran under a paused DAG)
    assert runner.ran == []
    assert runner.get(view).status is DagStatus.PAUSED
    # And its resume runs it, once, then its child
    runner.deps.dags.resume(view.id)
    runner.run_until_idle()
    assert runner.ran == ["a", "b"]


def test_a_resume_never_sends_a_root_its_submit_is_still_sending(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = DagRunner(deps, clock)
    # Given a DAG whose submit wrote its root (pending, direct) and has not sent it yet
    monkeypatch.setattr(runner.deps.jobs, "dispatch_direct", lambda jobs, **_: [])
    view = runner.submit(CHAIN)
    monkeypatch.undo()
    # When someone resumes it at once (documented as a harmless repair)
    runner.deps.dags.resume(view.id)
    # Then nothing is sent while the submit may still be sending it (found by a review: the
    # resume sent it too, two messages of attempt 1)
    assert _messages(runner, "default") == 0
    # And once the submit is certainly over, a resume takes the root over and sends it, once
    clock.advance(ms=SUBMIT_IN_FLIGHT_MS)
    runner.deps.dags.resume(view.id)
    runner.deps.dags.resume(view.id)
    assert _messages(runner, "default") == 1
    runner.run_until_idle()
    assert runner.ran == ["a", "b"]


def test_a_retried_node_never_runs_before_its_parents(
    deps: Dependencies, clock: ManualClock
) -> None:
    def dies(job: Envelope) -> None:
        raise RuntimeError("a fails")

    runner = DagRunner(deps, clock, {"a": dies})
    # Given a chain whose root keeps failing, and its child cancelled while blocked
    view = runner.submit(
        CHAIN
        | {
            "nodes": {
                "a": {"queue": "default", "max_attempts": 1},
                "b": {"queue": "email", "depends_on": ["a"]},
            }
        }
    )
    a, b = runner.get(view).nodes
    assert runner.deps.jobs.cancel(b.id) is Status.CANCELLED
    # When an operator retries the child by id while its parent is queued, then dead
    # (found by a review: the retry sent it at once, before its parent)
    with pytest.raises(Conflict, match="'a' is queued"):
        runner.deps.jobs.retry(b.id)
    runner.run_until_idle()
    assert _statuses(runner.get(view))["a"] is Status.DEAD
    with pytest.raises(Conflict, match="'a' is dead"):
        runner.deps.jobs.retry(b.id)
    # Then the child never ran; once its parent is retried and succeeds, so can it
    runner.behaviours.clear()
    runner.deps.jobs.retry(a.id)
    runner.run_until_idle()
    runner.deps.jobs.retry(b.id)
    runner.run_until_idle()
    assert runner.ran == ["a", "a", "b"]


def test_a_dag_cancelled_while_its_submit_runs_never_runs_its_root(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = DagRunner(deps, clock)
    write = runner.deps.jobs.write_new
    answered: list[DagStatus] = []

    def cancelled_first(jobs: list[Job], now: int) -> list[Job]:
        # DELETE /dags/{id} between the submit's blocked nodes and its roots: it answers 200
        assert jobs[0].dag is not None
        answered.append(runner.deps.dags.cancel(jobs[0].dag.dag_id).status)
        return write(jobs, now)

    monkeypatch.setattr(runner.deps.jobs, "write_new", cancelled_first)
    view = runner.submit(CHAIN)
    monkeypatch.undo()
    # Then the root written after the cancel never runs (found by a review: it did)
    assert answered == [DagStatus.CANCELLED]
    runner.run_until_idle()
    assert runner.ran == []
    assert set(_statuses(runner.get(view)).values()) == {Status.CANCELLED}


def test_a_redelivered_parent_never_runs_its_child_twice(
    deps: Dependencies, clock: ManualClock
) -> None:
    second: list[list[str]] = []

    def child(job: Envelope) -> str:
        # The parent's redelivery sent the child again: its second message comes while b runs
        # (a 3-minute job in a Lambda with 15 minutes left), and again after SQS's visibility
        second.append(runner.harness.poll("email"))
        clock.advance(seconds=121)
        second.append(runner.harness.poll("email"))
        return "b"

    # No heartbeat (a thread on the real scheduler): b's own message is visible again too
    runner = DagRunner(deps, clock, {"b": child}, visibility_timeout_s=None)
    runner.harness.context = FakeLambdaContext(remaining_ms=900_000)
    view = runner.submit(CHAIN)
    # Given the parent's success, recorded and its child released and sent, and then the
    # parent's message delivered again (the runner's record of it failed: a throttled send)
    a = runner.get(view).nodes[0]
    runner.harness.poll("default")
    assert runner.ran == ["a"] and runner.get(view).nodes[0].status is Status.SUCCEEDED
    url = runner.deps.settings.queue_urls["default"]
    runner.harness.sqs.send_message(QueueUrl=url, MessageBody=envelope_body(a, attempt=1))
    runner.harness.poll("default")  # the repair sends b again: two messages of its attempt 1
    # When b's two messages meet its run
    runner.run_until_idle()
    # Then b ran once (found by a review: a message delivered again took the attempt over
    # from b's live run): both, visible again while b ran, were turned away as busy
    assert runner.ran == ["a", "b"]
    assert [len(failed) for failed in second] == [0, 2]
    assert runner.get(view).status is DagStatus.SUCCEEDED


def test_cancelling_a_node_twice_never_runs_its_child_twice(
    deps: Dependencies, clock: ManualClock
) -> None:
    again: list[list[str]] = []

    def long_child(job: Envelope) -> str:
        # c runs 3 minutes (in a Lambda with 15 left); its second message comes meanwhile
        again.append(runner.harness.poll("email"))
        clock.advance(seconds=121)
        again.append(runner.harness.poll("email"))
        return "c"

    runner = DagRunner(deps, clock, {"c": long_child}, visibility_timeout_s=None)
    runner.harness.context = FakeLambdaContext(remaining_ms=900_000)
    view = runner.submit(CONTINUE)
    b = runner.get(view).nodes[1]
    # When b is cancelled twice (documented as harmless): under continue its child is released
    # and sent by the first cancel, and sent again by the second's repair
    assert runner.deps.jobs.cancel(b.id) is Status.CANCELLED
    assert runner.deps.jobs.cancel(b.id) is Status.CANCELLED
    runner.run_until_idle()
    # Then c ran once (found by a review: the second message took c's attempt over and c ran
    # twice); its other message was turned away while c ran
    assert runner.ran == ["c"]
    assert sum(len(failed) for failed in again) >= 1
