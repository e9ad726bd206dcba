"""Issue 12, the paused queue's scenarios (2, 6, 7): each interleaving is replayed on moto with
the manual clock by hooking the real AWS calls of the operation under test, and the other
operation runs at that exact point. Then the sweepers run until everything due is sent."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from ulid import ULID

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.model.job import Job, Priority, Status
from sundial.model.submission import SubmitJob
from sundial.wiring import Dependencies, configure
from tests.support import WriteMeter, receive_all

ALL_SHARDS = list(range(8))


def _hooked(clock: ManualClock) -> tuple[Dependencies, boto3.Session]:
    """A second wiring of the same system (as a second Lambda would be), on a session of its
    own: hooks on that session's events see only its calls."""
    session = boto3.Session()
    return configure(clock=clock, environ=dict(os.environ), session=session), session


def _once(action: Callable[[], object]) -> Callable[..., None]:
    """A botocore handler that runs `action` the first time it fires, and never again."""
    fired: list[bool] = []

    def handler(**_: Any) -> None:
        if not fired:
            fired.append(True)
            action()

    return handler


def _arrivals(deps: Dependencies, clock: ManualClock, *, minutes: int = 20) -> Counter[str]:
    """Run a sweep a minute for `minutes` and count every envelope that reached `default`."""
    sqs, seen = boto3.client("sqs"), Counter[str]()
    for _ in range(minutes):
        clock.advance(seconds=60)
        deps.sweeper.sweep(ALL_SHARDS)
        seen.update(e["id"] for e in receive_all(sqs, deps.settings.queue_urls["default"]))
    return seen


def _cursors_ahead(deps: Dependencies, clock: ManualClock) -> None:
    """Move every shard's cursor 14 minutes ahead of now (a sweep writes a cursor only on a
    shard where it found something): a job of another queue on each shard, then a sweep."""
    now = clock.now_ms()
    deps.store.put_new(
        [
            Job(
                key=JobKey(shard=shard, due_ms=now + 960_000, ulid=str(ULID())),
                queue="email",
                payload_json="{}",
                priority=Priority.NORMAL,
                max_attempts=3,
                created_at_ms=now,
            )
            for shard in ALL_SHARDS
        ],
        now_ms=now,
    )
    clock.advance(seconds=180)
    deps.sweeper.sweep(ALL_SHARDS)
    assert len(deps.sweeps.read_cursors(ALL_SHARDS)) == len(ALL_SHARDS)


def _held_job(deps: Dependencies, clock: ManualClock) -> str:
    """A job paused long ago whose queue is paused now, resumed while its queue is paused: it is
    overdue, below every cursor and below the queue's catch-up range, so only the queue's
    `held` record brings it back."""
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=1200)).job.id
    deps.jobs.pause(job_id)
    _arrivals(deps, clock, minutes=40)  # the cursors pass its due time while it is paused
    deps.queue_control.pause("default")
    _cursors_ahead(deps, clock)
    return job_id


def test_scenario_02_submit_to_a_paused_queue_racing_its_resume(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a paused queue whose cursors are already 14 minutes ahead
    deps.queue_control.pause("default")
    _cursors_ahead(deps, clock)
    # When a submit of a job due in a minute reads "paused", and the queue's resume (with its
    # whole catch-up) lands before the submit's write
    submitter, session = _hooked(clock)
    resume = _once(lambda: deps.queue_control.resume("default"))
    for write in ("BatchWriteItem", "TransactWriteItems", "PutItem"):
        session.events.register(f"before-call.dynamodb.{write}", resume)
    submitted = submitter.jobs.submit(SubmitJob(queue="default", delay_seconds=60))
    # Then the accepted job is sent, once
    assert submitted.created
    assert _arrivals(deps, clock)[submitted.job.id] == 1


def test_scenario_02_a_submit_that_lands_while_paused_is_caught_up(
    deps: Dependencies, clock: ManualClock
) -> None:
    # The other order: the submit's write lands while the queue is still paused
    deps.queue_control.pause("default")
    _cursors_ahead(deps, clock)
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=60)).job.id
    assert _arrivals(deps, clock, minutes=3)[job_id] == 0  # paused: nothing sent
    deps.queue_control.resume("default")
    assert _arrivals(deps, clock)[job_id] == 1


def test_scenario_06_two_overlapping_queue_resumes_send_a_held_job_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    job_id = _held_job(deps, clock)
    assert deps.jobs.resume(job_id).status is Status.PENDING
    assert job_id in deps.queue_states.get("default").held
    # When a second resume of the queue runs while the first has taken the held job but not
    # yet sent it
    first, session = _hooked(clock)
    session.events.register(
        "before-call.sqs.SendMessageBatch", _once(lambda: deps.queue_control.resume("default"))
    )
    first.queue_control.resume("default")
    # Then the job is sent once, and the catch-up is finished
    assert _arrivals(deps, clock)[job_id] == 1
    assert not deps.queue_states.get("default").catching_up


class Crash(Exception):
    """The Lambda dies here (a timeout, an out-of-memory kill)."""


@pytest.mark.parametrize("crash_after", range(4))
def test_scenario_07_a_job_resume_on_a_paused_queue_that_dies_part_way_loses_nothing(
    deps: Dependencies, clock: ManualClock, crash_after: int
) -> None:
    job_id = _held_job(deps, clock)
    # When the job's resume dies after its n-th DynamoDB call
    resumer, session = _hooked(clock)
    calls: list[str] = []

    def crash(model: Any, **_: Any) -> None:
        calls.append(model.name)
        if len(calls) == crash_after + 1:
            raise Crash(f"died after {model.name}")

    session.events.register("after-call.dynamodb.*", crash)
    try:
        resumer.jobs.resume(job_id)
    except Crash:
        # Then the client's retry succeeds (a resume already done answers as it did)
        assert deps.jobs.resume(job_id).status is Status.PENDING
    # And once the queue resumes, the job is sent, once
    deps.queue_control.resume("default")
    assert _arrivals(deps, clock)[job_id] == 1


def test_a_due_soon_submit_on_a_paused_queue_costs_one_transaction(
    deps: Dependencies, clock: ManualClock
) -> None:
    """The write-unit figure for the paused-queue path (a plain submit is one write, unchanged):
    the job's put and the check that the queue is still paused, in one transaction."""
    deps.queue_control.pause("default")
    counted, session = _hooked(clock)
    meter = WriteMeter(session)
    counted.jobs.submit(SubmitJob(queue="default", delay_seconds=60))
    assert meter.requests == Counter({"transaction": 1})
    assert meter.transaction_items == 2


def test_found_by_chaos_a_resume_that_dies_after_taking_a_job_loses_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    """(make chaos, seed 8) A queue's resume took a job of its catch-up (made it direct) and
    died before sending it. The sweepers finishing the catch-up found it taken and struck its
    shard off anyway, so nothing ever sent it. Now the shard stays owed until the taker is
    SUBMIT_IN_FLIGHT late, and the next pass sends it."""
    deps.queue_control.pause("default")
    _cursors_ahead(deps, clock)
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=300)).job.id
    # Given a resume whose catch-up ran out of time at once (every shard still owed), and a
    # repeat of it two and a half minutes later that takes the job and dies
    deps.queue_control.resume("default", has_time=lambda: False)
    clock.advance(seconds=150)
    resumer, session = _hooked(clock)

    taking: list[bool] = []

    def note_the_take(params: dict[str, Any], **_: Any) -> None:
        taking.append("SET direct = :true" in params.get("UpdateExpression", ""))

    def crash_after_the_take(**_: Any) -> None:
        if taking and taking[-1]:
            raise Crash("died after taking the job")

    session.events.register("provide-client-params.dynamodb.UpdateItem", note_the_take)
    session.events.register("after-call.dynamodb.UpdateItem", crash_after_the_take)
    with pytest.raises(Crash):
        resumer.queue_control.resume("default")
    assert deps.jobs.get(job_id).direct
    # When a sweep finishes the (stale) catch-up while that take is fresh
    clock.advance(seconds=5)
    deps.sweeper.sweep(ALL_SHARDS)
    # Then the job's shard is still owed, and the job is sent once
    assert deps.queue_states.get("default").catching_up
    assert _arrivals(deps, clock)[job_id] == 1
    assert not deps.queue_states.get("default").catching_up
