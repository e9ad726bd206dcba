"""JobService against moto: submit, idempotency, get and cancel."""

from __future__ import annotations

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.errors import Conflict, InvalidInput, JobNotFound
from sundial.ids import JobKey
from sundial.model.job import Status
from sundial.model.submission import SubmitJob
from sundial.timing import DIRECT_WINDOW_MS, SUBMIT_IN_FLIGHT_MS
from sundial.wiring import Dependencies
from tests.support import receive_all


def _queue_url(deps: Dependencies, name: str = "default") -> str:
    return deps.settings.queue_urls[name]


def test_a_delayed_job_is_stored_pending_and_not_sent(deps: Dependencies) -> None:
    # When a job is submitted for an hour from now
    submitted = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600, payload={"a": 1}))
    # Then it is stored pending at its due time, and nothing is in SQS yet
    job = deps.jobs.get(submitted.job.id)
    assert submitted.created
    assert job.status is Status.PENDING
    assert job.due_ms == submitted.job.created_at_ms + 3_600_000
    assert not job.direct
    assert job.payload_json == '{"a":1}'
    assert receive_all(boto3.client("sqs"), _queue_url(deps)) == []


def test_a_job_due_within_the_direct_window_goes_straight_to_sqs(
    deps: Dependencies, clock: ManualClock
) -> None:
    # When a job is submitted 30 s ahead
    submitted = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=30, payload="hi"))
    # Then it is recorded as queued, so get and cancel work
    job = deps.jobs.get(submitted.job.id)
    assert job.status is Status.QUEUED
    assert job.direct
    sqs = boto3.client("sqs")
    # And its message surfaces at the due second, not before
    clock.advance(seconds=29.9)
    assert receive_all(sqs, _queue_url(deps, "email")) == []
    clock.advance(seconds=0.2)
    [envelope] = receive_all(sqs, _queue_url(deps, "email"))
    assert envelope["id"] == job.id
    assert envelope["payload"] == "hi"
    assert envelope["attempt"] == 1


def test_unknown_queue_is_invalid_and_writes_nothing(deps: Dependencies) -> None:
    with pytest.raises(InvalidInput) as raised:
        deps.jobs.submit(SubmitJob(queue="nope", delay_seconds=5))
    assert raised.value.field == "queue"
    assert "known: default, email" in raised.value.reason
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0


def test_a_time_beyond_the_horizon_is_invalid(deps: Dependencies) -> None:
    with pytest.raises(InvalidInput) as raised:
        deps.jobs.submit(SubmitJob(queue="default", run_at="2099-01-01T00:00:00Z"))
    assert raised.value.field == "run_at"


def test_a_batch_with_one_bad_job_writes_nothing_and_names_it(deps: Dependencies) -> None:
    good = SubmitJob(queue="default", delay_seconds=5)
    with pytest.raises(InvalidInput) as raised:
        deps.jobs.submit_many([good, SubmitJob(queue="missing", delay_seconds=5)])
    assert raised.value.field == "jobs[1].queue"
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0


def test_idempotency_key_returns_the_first_job_and_creates_nothing(deps: Dependencies) -> None:
    # Given a job submitted with an idempotency key
    request = SubmitJob(queue="default", delay_seconds=3600, idempotency_key="order-42")
    first = deps.jobs.submit(request)
    items_before = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"]
    # When the same request is repeated
    again = deps.jobs.submit(request)
    # Then it returns the first job and writes no new item
    assert first.created and not again.created
    assert again.job.id == first.job.id
    items_after = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"]
    assert items_after == items_before


def test_idempotency_key_is_scoped_to_the_queue(deps: Dependencies) -> None:
    a = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600, idempotency_key="k"))
    b = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=3600, idempotency_key="k"))
    assert a.job.id != b.job.id


def test_idempotency_key_reused_for_different_content_is_a_conflict(deps: Dependencies) -> None:
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=60, idempotency_key="k"))
    with pytest.raises(Conflict):
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=61, idempotency_key="k"))


def test_a_repeat_finishes_a_first_request_that_died_after_remembering_the_key(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a first request that crashed right after storing its idempotency key
    request = SubmitJob(queue="default", delay_seconds=2, idempotency_key="crash-1")

    def crash(jobs: object, **_: object) -> None:
        raise RuntimeError("Lambda died")

    with monkeypatch.context() as patch:
        patch.setattr(deps.store, "put_new", crash)
        with pytest.raises(RuntimeError):
            deps.jobs.submit(request)
    # When the client retries while the first might still be running, it is told to wait
    with pytest.raises(Conflict):
        deps.jobs.submit(request)
    # And when it retries after the first request must have ended
    clock.advance(ms=SUBMIT_IN_FLIGHT_MS + 1)
    again = deps.jobs.submit(request)
    # Then the job exists, keeps the id the key was given, and has been sent
    assert deps.jobs.get(again.job.id).status is Status.QUEUED
    clock.advance(seconds=2)
    [envelope] = receive_all(boto3.client("sqs"), _queue_url(deps))
    assert envelope["id"] == again.job.id


def test_get_unknown_is_not_found_and_malformed_is_invalid(deps: Dependencies) -> None:
    unknown = JobKey(shard=1, due_ms=1, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id
    with pytest.raises(JobNotFound):
        deps.jobs.get(unknown)
    with pytest.raises(InvalidInput):
        deps.jobs.get("not-a-job-id")
    with pytest.raises(JobNotFound):
        deps.jobs.cancel(unknown)
    with pytest.raises(InvalidInput):
        deps.jobs.cancel("not-a-job-id")


@pytest.mark.parametrize("delay_s", [3600, 10])  # pending, then queued (direct)
def test_cancel_pending_or_queued_and_again(deps: Dependencies, delay_s: int) -> None:
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=delay_s)).job
    assert deps.jobs.cancel(job.id) is Status.CANCELLED
    assert deps.jobs.cancel(job.id) is Status.CANCELLED  # idempotent
    stored = deps.jobs.get(job.id)
    assert stored.status is Status.CANCELLED
    assert stored.expires_at_s is not None  # retention starts


@pytest.mark.parametrize("status", [Status.RUNNING, Status.SUCCEEDED, Status.DEAD])
def test_cancel_running_or_finished_is_a_conflict(deps: Dependencies, status: Status) -> None:
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job
    boto3.client("dynamodb").update_item(
        TableName=deps.settings.table_name,
        Key={"pk": {"S": job.key.pk}, "sk": {"S": job.key.sk}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": str(status)}},
    )
    with pytest.raises(Conflict) as raised:
        deps.jobs.cancel(job.id)
    assert raised.value.status == status
    assert deps.jobs.get(job.id).status is status  # unchanged


def test_direct_window_boundary(deps: Dependencies) -> None:
    inside = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=DIRECT_WINDOW_MS // 1000))
    outside = deps.jobs.submit(
        SubmitJob(queue="default", delay_seconds=DIRECT_WINDOW_MS // 1000 + 1)
    )
    assert inside.job.direct and inside.job.status is Status.QUEUED
    assert not outside.job.direct and outside.job.status is Status.PENDING
