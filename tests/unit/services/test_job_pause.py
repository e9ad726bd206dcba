"""Pausing and resuming one job: the contract, the sweeper's cursor, crashes and write costs."""

from __future__ import annotations

from collections import Counter

import boto3
import pytest
from pydantic import JsonValue

from sundial.clock import ManualClock
from sundial.dispatch.sweeper import Sweeper
from sundial.errors import Conflict, InvalidInput, JobNotFound
from sundial.ids import JobKey
from sundial.model.job import Status
from sundial.model.submission import SubmitJob
from sundial.timing import SUBMIT_IN_FLIGHT_MS
from sundial.transport.sender import QueueSender
from sundial.wiring import Dependencies
from tests.support import WriteMeter, receive_all

ALL_SHARDS = list(range(8))


def _submit(deps: Dependencies, delay_s: int, payload: JsonValue = None) -> str:
    request = SubmitJob(queue="default", delay_seconds=delay_s, payload=payload)
    return deps.jobs.submit(request).job.id


def _arrivals(deps: Dependencies) -> Counter[str]:
    messages = receive_all(boto3.client("sqs"), deps.settings.queue_urls["default"])
    return Counter(message["id"] for message in messages)


def _cursor(deps: Dependencies, job_id: str) -> str:
    shard = JobKey.from_job_id(job_id).shard
    return deps.sweeps.read_cursors([shard])[shard]


def test_a_paused_job_is_never_dispatched_and_does_not_hold_the_cursor(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a job due in an hour, paused
    job_id = _submit(deps, 3600)
    paused = deps.jobs.pause(job_id)
    assert paused.status is Status.PAUSED
    assert paused.paused_at_ms == clock.now_ms()
    # When sweeps run until long after its due time
    for _ in range(80):
        clock.advance(seconds=60)
        deps.sweeper.sweep(ALL_SHARDS)
    # Then it was never sent, it is still paused, and the cursor went past it
    assert _arrivals(deps) == Counter()
    assert deps.jobs.get(job_id).status is Status.PAUSED
    assert _cursor(deps, job_id) > JobKey.from_job_id(job_id).sk


def test_resuming_an_overdue_job_dispatches_it_at_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a paused job whose due time (and the cursor) passed while it was paused
    job_id = _submit(deps, 1200, payload={"n": 1})
    deps.jobs.pause(job_id)
    clock.advance(seconds=1800)
    deps.sweeper.sweep(ALL_SHARDS)
    assert _cursor(deps, job_id) > JobKey.from_job_id(job_id).sk
    # When it is resumed
    resumed = deps.jobs.resume(job_id)
    # Then it is queued and its message is visible now, without another sweep
    assert resumed.status is Status.QUEUED
    [envelope] = receive_all(boto3.client("sqs"), deps.settings.queue_urls["default"])
    assert envelope["id"] == job_id
    assert envelope["attempt"] == 1
    assert envelope["payload"] == {"n": 1}
    # And no later sweep sends it again
    clock.advance(seconds=600)
    assert deps.sweeper.sweep(ALL_SHARDS).dispatched == 0
    assert _arrivals(deps) == Counter()


def test_resuming_a_job_due_soon_sends_it_for_its_due_second(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a paused job that is due in 5 minutes when it is resumed
    job_id = _submit(deps, 1500)
    deps.jobs.pause(job_id)
    clock.advance(seconds=1200)
    # When it is resumed
    assert deps.jobs.resume(job_id).status is Status.QUEUED
    # Then its message surfaces at the due second, not before, and only once
    clock.advance(seconds=299)
    assert _arrivals(deps) == Counter()
    clock.advance(seconds=1)
    assert _arrivals(deps) == Counter({job_id: 1})
    deps.sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=900)
    assert _arrivals(deps) == Counter()


def test_resuming_a_job_still_far_ahead_leaves_it_to_the_sweeper(
    deps: Dependencies, clock: ManualClock
) -> None:
    job_id = _submit(deps, 7200)
    deps.jobs.pause(job_id)
    clock.advance(seconds=600)
    resumed = deps.jobs.resume(job_id)
    assert resumed.status is Status.PENDING and not resumed.direct
    assert resumed.paused_at_ms is None
    for _ in range(120):
        deps.sweeper.sweep(ALL_SHARDS)
        clock.advance(seconds=60)
    assert _arrivals(deps) == Counter({job_id: 1})


def test_pausing_half_of_a_backlog_loses_and_duplicates_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 40 jobs due over the next 40 minutes, every other one paused
    ids = [_submit(deps, 960 + 60 * i, payload=i) for i in range(40)]
    for job_id in ids[::2]:
        deps.jobs.pause(job_id)
    # When the sweeper runs for an hour, and the paused jobs are then resumed
    for _ in range(60):
        clock.advance(seconds=60)
        deps.sweeper.sweep(ALL_SHARDS)
    for job_id in ids[::2]:
        deps.jobs.resume(job_id)
    for _ in range(20):
        clock.advance(seconds=60)
        deps.sweeper.sweep(ALL_SHARDS)
    # Then every job arrived exactly once
    assert _arrivals(deps) == Counter(dict.fromkeys(ids, 1))


@pytest.mark.parametrize("delay_s", [10, 0])  # sent by the submit call itself: queued
def test_only_a_pending_job_can_be_paused(deps: Dependencies, delay_s: int) -> None:
    job_id = _submit(deps, delay_s)
    with pytest.raises(Conflict) as raised:
        deps.jobs.pause(job_id)
    assert raised.value.status is Status.QUEUED
    assert deps.jobs.get(job_id).status is Status.QUEUED


@pytest.mark.parametrize(
    "status", [Status.RUNNING, Status.SUCCEEDED, Status.FAILED, Status.DEAD, Status.CANCELLED]
)
def test_pausing_a_job_past_pending_is_a_conflict_and_changes_nothing(
    deps: Dependencies, status: Status
) -> None:
    job_id = _submit(deps, 3600)
    key = JobKey.from_job_id(job_id)
    boto3.client("dynamodb").update_item(
        TableName=deps.settings.table_name,
        Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": str(status)}},
    )
    with pytest.raises(Conflict) as raised:
        deps.jobs.pause(job_id)
    assert raised.value.status is status
    assert deps.jobs.get(job_id).status is status


def test_pause_and_resume_twice(deps: Dependencies) -> None:
    job_id = _submit(deps, 3600)
    deps.jobs.pause(job_id)
    with pytest.raises(Conflict, match="only pending jobs can be paused"):
        deps.jobs.pause(job_id)
    deps.jobs.resume(job_id)
    # A second resume (a client retrying a lost response) answers as the first did
    assert deps.jobs.resume(job_id).status is Status.PENDING
    assert deps.jobs.get(job_id).status is Status.PENDING


def test_unknown_and_malformed_ids(deps: Dependencies) -> None:
    unknown = JobKey(shard=1, due_ms=1, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id
    for operation in (deps.jobs.pause, deps.jobs.resume):
        with pytest.raises(JobNotFound):
            operation(unknown)
        with pytest.raises(InvalidInput) as raised:
            operation("not-a-job-id")
        assert raised.value.field == "job_id"
    # And nothing was created by asking
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0


def test_a_paused_job_can_be_cancelled_and_then_not_resumed(deps: Dependencies) -> None:
    job_id = _submit(deps, 3600)
    deps.jobs.pause(job_id)
    assert deps.jobs.cancel(job_id) is Status.CANCELLED
    with pytest.raises(Conflict) as raised:
        deps.jobs.resume(job_id)
    assert raised.value.status is Status.CANCELLED


def test_a_resume_that_died_before_sending_can_be_finished_by_resuming_again(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an overdue paused job whose resume died after marking it, before sending it
    job_id = _submit(deps, 1200)
    deps.jobs.pause(job_id)
    clock.advance(seconds=1800)

    def die(*_: object, **__: object) -> None:
        raise RuntimeError("Lambda died")

    with monkeypatch.context() as patch:
        patch.setattr(QueueSender, "send", die)
        with pytest.raises(RuntimeError):
            deps.jobs.resume(job_id)
    assert deps.jobs.get(job_id).status is Status.PENDING
    # When the client resumes again at once, it is told the first resume may still be running
    with pytest.raises(Conflict, match="being resumed"):
        deps.jobs.resume(job_id)
    # And once the first resume must have ended, resuming again sends it, once
    clock.advance(ms=SUBMIT_IN_FLIGHT_MS + 1)
    assert deps.jobs.resume(job_id).status is Status.QUEUED
    assert _arrivals(deps) == Counter({job_id: 1})


def test_write_units_of_pause_and_resume(deps: Dependencies, clock: ManualClock) -> None:
    # Given the same service on a session whose DynamoDB writes are counted
    session = boto3.Session()
    meter = WriteMeter(session)
    reads: list[str] = []  # registered before any client is made: clients copy the hooks
    session.events.register("before-call.dynamodb.GetItem", lambda **_: reads.append("get"))
    metered = Dependencies(settings=deps.settings, clock=clock, session=session)
    far, near = _submit(deps, 7200), _submit(deps, 1200)
    # When each is paused: one conditional write each
    metered.jobs.pause(far)
    metered.jobs.pause(near)
    assert meter.job_writes() == 2
    clock.advance(seconds=600)
    # And resumed: one write for a job left to the sweeper (and no read: only a moved job's
    # resume looks for where it is), two for one sent at once
    reads_before = len(reads)
    metered.jobs.resume(far)
    assert meter.job_writes() == 3
    assert len(reads) == reads_before
    metered.jobs.resume(near)
    assert meter.job_writes() == 5
    assert deps.jobs.get(near).status is Status.QUEUED


def test_the_sweeper_counts_nothing_for_a_paused_job(
    deps: Dependencies, clock: ManualClock
) -> None:
    job_id = _submit(deps, 1000)
    deps.jobs.pause(job_id)
    sweeper = Sweeper(store=deps.store, sweeps=deps.sweeps, sender=deps.sender, clock=clock)
    clock.advance(seconds=200)
    report = sweeper.sweep(ALL_SHARDS)
    assert report.seen == 1 and report.dispatched == 0 and not report.held_shards
