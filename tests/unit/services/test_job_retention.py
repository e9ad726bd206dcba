"""What a job owns outside its item lives exactly as long as the job (sundial.services.
job_retention): its idempotency record, its DAG's listing entries, its payload object and a
moved job's pointer go when DynamoDB's TTL removes the job's item, read from the table's stream
by the history Lambda; nothing of them expires on a clock of its own. moto runs no TTL and no
lifecycle: tests.support emulates both (expire_by_ttl, expire_by_lifecycle)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.model.dag import DagStatus, SubmitDag
from sundial.model.payloads import PayloadStorage
from sundial.model.submission import ChangeJob, SubmitJob
from sundial.retry import RetryPolicy
from sundial.store.idempotency import IDEM_SK, idempotency_pk
from sundial.wiring import Dependencies, history_recorder
from tests.conftest import PAYLOAD_BUCKET
from tests.harness import Harness
from tests.support import TABLE, FakeLambdaContext, StreamReader, create_table, expire_by_ttl

BUCKET = "sundial-history-raw"
DAY_S = 86_400


@pytest.fixture
def stream(deps: Dependencies) -> StreamReader:
    """The job table with its stream (as the stack declares it), made anew before any write."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.delete_table(TableName=TABLE)
    create_table(dynamodb, stream=True)
    arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    streams = boto3.client(
        "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
    )
    return StreamReader(streams, arn)


def _expire(clock: ManualClock, stream: StreamReader) -> set[tuple[str, str]]:
    """DynamoDB's TTL at the clock's time, and the history Lambda reading the stream."""
    removed = expire_by_ttl(boto3.client("dynamodb"), TABLE, clock.now_ms())
    recorder = history_recorder(
        environ={
            "SUNDIAL_HISTORY_BUCKET": BUCKET,
            "SUNDIAL_TABLE_NAME": TABLE,
            "SUNDIAL_PAYLOAD_BUCKET": PAYLOAD_BUCKET,
        }
    )
    event = stream.next_event(ttl_removed=removed)
    assert recorder.handle(event, FakeLambdaContext()) == {"batchItemFailures": []}
    return removed


def _record(queue: str, key: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = (
        boto3.client("dynamodb")
        .get_item(
            TableName=TABLE, Key={"pk": {"S": idempotency_pk(queue, key)}, "sk": {"S": IDEM_SK}}
        )
        .get("Item")
    )
    return item


def _objects() -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=PAYLOAD_BUCKET).get("Contents", [])
    return [o["Key"] for o in listed]


def test_a_moved_jobs_idempotency_key_lives_as_long_as_the_job(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a keyed job due in an hour, moved 60 days out (found by a review: its key's record
    # expired a retention after the FIRST due time, and a repeat then made a second job)
    request = SubmitJob(queue="default", delay_seconds=3600, idempotency_key="k")
    job = deps.jobs.submit(request).job
    deps.moves.move(job.id, ChangeJob(delay_seconds=60 * DAY_S))
    # When 40 days pass, with TTL running
    clock.advance(seconds=40 * DAY_S)
    _expire(clock, stream)
    # Then a repeat of the submit is still the first job
    again = deps.jobs.submit(request)
    assert (again.created, again.job.id) == (False, job.id)


def test_an_expired_jobs_idempotency_key_goes_with_it_and_is_not_recreated(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a keyed job due in 30 days, run now instead, which succeeded
    harness = Harness(deps, clock, lambda envelope: None)
    request = SubmitJob(queue="default", delay_seconds=30 * DAY_S, idempotency_key="k")
    job = deps.jobs.submit(request).job
    deps.moves.move(job.id, ChangeJob(delay_seconds=0))
    harness.poll()
    # When its retention ends and TTL removes its item (found by a review: the record, dated
    # from the first due time, outlived it, and a repeat re-created the finished job)
    clock.advance(seconds=31 * DAY_S)
    assert (job.key.pk, deps.jobs.get(job.id).key.sk) in _expire(clock, stream)
    # Then its record went with it, and the same request is a new job
    assert _record("default", "k") is None
    again = deps.jobs.submit(request)
    assert again.created and again.job.id != job.id


def test_a_record_naming_another_job_stays(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    first = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0, idempotency_key="k")).job
    Harness(deps, clock, lambda envelope: None).poll()
    # The key's record is made to name another job (as a key reused after an earlier expiry)
    boto3.client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": idempotency_pk("default", "k")}, "sk": {"S": IDEM_SK}},
        UpdateExpression="SET job_id = :other",
        ExpressionAttributeValues={":other": {"S": "another"}},
    )
    clock.advance(seconds=31 * DAY_S)
    assert (first.key.pk, first.key.sk) in _expire(clock, stream)
    assert _record("default", "k") is not None


def test_a_stored_payload_goes_when_its_jobs_item_expires_and_a_timer_takes_nothing(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a job with a stored payload whose first attempt failed with a retry hours out
    # (a timer item, which references the same object and expires sooner)
    calls: list[Any] = []

    def fails_once(envelope: Any) -> None:
        calls.append(envelope.payload)
        if len(calls) == 1:
            raise RuntimeError("flaky")

    harness = Harness(deps, clock, fails_once)
    policy = RetryPolicy(initial_delay_seconds=DAY_S, factor=1.0, max_delay_seconds=DAY_S)
    request = SubmitJob(
        queue="default",
        delay_seconds=0,
        payload={"v": 1},
        payload_storage=PayloadStorage.S3,
        retry=policy,
    )
    job = deps.jobs.submit(request).job
    assert job.payload_ref is not None
    harness.poll()
    retry_at = deps.jobs.get(job.id).next_attempt_at_ms
    assert retry_at is not None and retry_at - clock.now_ms() > 900_000  # a timer item
    # When the retry runs at its time, and weeks pass with TTL running: the timer's item
    # expires first, then the job's
    clock.advance(ms=retry_at - clock.now_ms())
    harness.sweeper.sweep(list(range(deps.settings.shard_count)))
    clock.advance(seconds=1)
    harness.poll()
    assert calls == [{"v": 1}, {"v": 1}]
    assert deps.jobs.get(job.id).finished_at_ms is not None
    # The timer expires a retention after its own time, the job a retention after it ended
    clock.advance(ms=retry_at + 30 * DAY_S * 1000 - clock.now_ms())
    removed = _expire(clock, stream)
    assert len(removed) == 1 and (job.key.pk, job.key.sk) not in removed
    assert _objects() == [job.payload_ref.key]  # the timer's removal took nothing
    clock.advance(seconds=DAY_S)
    _expire(clock, stream)
    # Then the object went with its job
    assert _objects() == []


def test_a_dags_listing_entry_lives_as_long_as_its_nodes(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a DAG paused for three months (found by a review: its listing entries expired two
    # retentions after its due time, while the DAG was still paused)
    dag = deps.dags.submit(
        SubmitDag.model_validate(
            {
                "name": "d",
                "delay_seconds": DAY_S,
                "nodes": {"a": {"queue": "default"}, "b": {"queue": "email", "depends_on": ["a"]}},
            }
        )
    )
    deps.dags.pause(dag.id)
    clock.advance(seconds=90 * DAY_S)
    _expire(clock, stream)
    # Then it is still listed on both its queues
    for queue in ("default", "email"):
        views, _ = deps.dags.of_queue(queue, readable=("default", "email"), limit=10, cursor=None)
        assert [v.id for v in views] == [dag.id]
    # And once it ran, and its nodes' retention ended, its entries went with them
    deps.dags.resume(dag.id)
    harness = Harness(deps, clock, lambda envelope: None)
    for _ in range(3):
        clock.advance(seconds=60)
        harness.sweeper.sweep(list(range(deps.settings.shard_count)))
        harness.poll()
        harness.poll("email")
    assert deps.dags.get(dag.id).status is DagStatus.SUCCEEDED  # its held nodes did not expire
    clock.advance(seconds=31 * DAY_S)
    _expire(clock, stream)
    for queue in ("default", "email"):
        assert (
            deps.dags.of_queue(queue, readable=("default", "email"), limit=10, cursor=None)[0] == []
        )
        entries = boto3.client("dynamodb").query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"dags#{queue}"}},
        )["Items"]
        assert entries == []
