"""The history Lambda against real stream records: the table's stream in moto, written by the
real submit, sweep, consume and cancel paths, read with GetRecords and shaped as the DynamoDB
event source mapping delivers it."""

from __future__ import annotations

import gzip
import json
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.history.capture import HistoryEvent
from sundial.model.dag import SubmitDag
from sundial.model.submission import ChangeJob, SubmitJob
from sundial.wiring import Dependencies, history_recorder
from tests.harness import ALL_SHARDS, Harness
from tests.support import DAILY_REPORT, TABLE, FakeLambdaContext, StreamReader, create_table

BUCKET = "sundial-history-raw"
PREFIX = "history"


class Boom(Exception):
    """The job failed."""


@pytest.fixture
def stream(deps: Dependencies) -> StreamReader:
    """The job table with its NEW_AND_OLD_IMAGES stream, as the stack declares it (moto gives
    a stream enabled later no shard, so the table is made anew before anything is written)."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.delete_table(TableName=TABLE)
    create_table(dynamodb, stream=True)
    arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    # botocore would address an account-specific endpoint, which in-process moto does not
    # route; moto's own endpoint name serves the same API.
    streams = boto3.client(
        "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
    )
    return StreamReader(streams, arn)


def record(event: dict[str, Any]) -> dict[str, Any]:
    return history_recorder(
        environ={"SUNDIAL_HISTORY_BUCKET": BUCKET, "SUNDIAL_HISTORY_PREFIX": PREFIX}
    ).handle(event, FakeLambdaContext())


def stored() -> dict[str, list[HistoryEvent]]:
    """Every history object in the bucket: {key: its events}."""
    s3 = boto3.client("s3")
    objects = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {
        o["Key"]: [
            HistoryEvent.model_validate_json(line)
            for line in gzip.decompress(s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read())
            .decode()
            .splitlines()
        ]
        for o in objects
    }


def all_events() -> list[HistoryEvent]:
    return sorted((e for events in stored().values() for e in events), key=lambda e: e.event_at_ms)


def transitions(events: list[HistoryEvent]) -> list[tuple[str | None, str, int]]:
    return [(e.from_status, e.to_status, e.attempt) for e in events]


# A job swept, sent and run once, successfully: its transitions as recorded.
# A swept job: the sweep sends it under its shard's lease and writes no job item, so there is
# no `queued` transition (GET /jobs/{id} derives `queued`; sundial.store.sweeps).
RAN_ONCE = [
    (None, "pending", 0),
    ("pending", "running", 1),
    ("running", "succeeded", 1),
]


def sweep_and_run(harness: Harness, clock: ManualClock, due_in_s: int, late_ms: int) -> None:
    """Sweep a minute before a job due in `due_in_s` (its message is sent delayed to its due
    second), then let the consumer poll `late_ms` after it is due."""
    clock.advance(seconds=due_in_s - 60)
    harness.sweeper.sweep(ALL_SHARDS)
    clock.advance(ms=60_000 + late_ms)
    harness.poll()


def test_a_delayed_job_that_succeeds(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a job due in an hour (with an idempotency key: the table gets an idem item too),
    # swept (a cursor item moves) and run by a consumer
    harness = Harness(deps, clock, lambda job: {"ok": True})
    job = deps.jobs.submit(
        SubmitJob(queue="default", delay_seconds=3600, idempotency_key="k-1")
    ).job
    sweep_and_run(harness, clock, due_in_s=3600, late_ms=500)

    # When the stream's records reach the history Lambda
    response = record(stream.next_event())

    # Then every record was accepted, and the job's state changes are in S3, and
    # nothing else (no cursor, idempotency or meta item)
    assert response == {"batchItemFailures": []}
    events = all_events()
    assert transitions(events) == RAN_ONCE
    assert {e.job_id for e in events} == {job.id}
    assert {(e.queue, e.priority) for e in events} == {("default", "normal")}
    submitted, _running, succeeded = events
    assert submitted.event_at_ms == job.created_at_ms
    # And the success carries when the attempt started, how late and for how long it ran
    assert succeeded.due_at_ms == job.due_ms
    assert succeeded.started_at_ms == clock.now_ms()
    assert succeeded.started_at_ms is not None
    assert succeeded.started_at_ms - succeeded.due_at_ms == 500
    assert succeeded.duration_ms == 0  # the manual clock does not move while the job runs
    assert succeeded.error_type is None
    # And the objects sit under the event's day, gzip JSON lines
    assert [key.split("/")[:2] for key in stored()] == [["history", "dt=2026-11-21"]]


def test_a_retried_job_that_dies(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given an immediate job that fails twice with two attempts allowed
    def fail(job: Any) -> Any:
        raise Boom("down")

    harness = Harness(deps, clock, fail)
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0, max_attempts=2)).job
    harness.poll()
    retry_due = deps.jobs.get(job.id).next_attempt_at_ms
    assert retry_due is not None
    clock.set(retry_due + 1000)
    harness.poll()

    # When the records reach the history Lambda
    record(stream.next_event())

    # Then the failure, the retry and the death are recorded with the error type
    events = all_events()
    assert transitions(events) == [
        (None, "pending", 0),
        ("pending", "queued", 0),
        ("queued", "running", 1),
        ("running", "failed", 1),
        ("failed", "running", 2),
        ("running", "dead", 2),
    ]
    failed, dead = events[3], events[5]
    assert (failed.error_type, dead.error_type) == ("Boom", "Boom")
    # And the retry's lateness is measured from when the retry was due, not the job
    assert failed.due_at_ms == job.due_ms
    assert dead.due_at_ms == retry_due
    assert dead.started_at_ms == retry_due + 1000


def test_cancel_is_recorded_once(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a pending job that is cancelled, then cancelled again (a no-op)
    job = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=7200)).job
    clock.advance(seconds=5)
    deps.jobs.cancel(job.id)
    deps.jobs.cancel(job.id)

    # When the records reach the history Lambda
    record(stream.next_event())

    # Then there is one cancellation, at the cancel's time
    assert transitions(all_events()) == [(None, "pending", 0), ("pending", "cancelled", 0)]
    assert all_events()[-1].event_at_ms == clock.now_ms()


def test_a_moved_job_keeps_its_id_and_its_moves_are_no_events(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a job moved twice (PATCH /jobs/{id}: items put, deleted and a pointer), then run
    harness = Harness(deps, clock, lambda job: None)
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job
    deps.moves.move(job.id, ChangeJob(delay_seconds=7200))
    moved = deps.moves.move(job.id, ChangeJob(delay_seconds=5400, payload="new"))
    sweep_and_run(harness, clock, due_in_s=5400, late_ms=1000)

    # When the records reach the history Lambda
    assert record(stream.next_event()) == {"batchItemFailures": []}

    # Then the job's state changes are there, under the id it was submitted with, due at its
    # new time; the moves themselves are no events (GET /jobs/{id} shows them)
    events = all_events()
    assert transitions(events) == RAN_ONCE
    assert {e.job_id for e in events} == {job.id}
    assert events[-1].due_at_ms == moved.due_ms


def test_a_redelivered_batch_rewrites_the_same_object(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a batch of stream records that was already written once
    for n in range(5):
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600, payload={"n": n}))
    batch = stream.next_event()
    record(batch)
    first = stored()

    # When Lambda delivers the same batch again (a retry after a timeout, say)
    record(json.loads(json.dumps(batch)))

    # Then the same object is rewritten with the same events: nothing is duplicated
    assert stored() == first
    [events] = first.values()
    assert len(events) == 5
    assert len({e.event_id for e in events}) == 5


def test_ttl_expiry_is_marked_expired_never_cancelled(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a finished job whose retention ends: DynamoDB's TTL process deletes it, and the
    # stream record says so in userIdentity
    harness = Harness(deps, clock, lambda job: None)
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0)).job
    harness.poll()
    stream.next_event()  # the life of the job, already recorded
    boto3.client("dynamodb").delete_item(
        TableName=TABLE, Key={"pk": {"S": job.key.pk}, "sk": {"S": job.key.sk}}
    )
    [removal] = stream.next_event()["Records"]
    assert removal["eventName"] == "REMOVE"
    ttl_removal = removal | {
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    }

    # When the TTL removal (and, for contrast, the same removal made by a person) arrive
    record({"Records": [ttl_removal]})
    by_person = removal | {"eventID": "f" * 32}
    record({"Records": [by_person]})

    # Then the TTL removal reads as `expired` and the other as `deleted`: neither as cancelled
    endings = sorted((e.from_status, e.to_status) for e in all_events())
    assert endings == [("succeeded", "deleted"), ("succeeded", "expired")]


def test_a_broken_record_fails_alone_and_what_follows_comes_again(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a batch whose second record is a job item without a queue (corrupt)
    dynamodb = boto3.client("dynamodb")
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "shard#3"},
            "sk": {"S": "1795276800000#01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"},
            "status": {"S": "pending"},
        },
    )
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    event = stream.next_event()
    broken = event["Records"][1]["dynamodb"]["SequenceNumber"]

    # When the batch is handled
    response = record(event)

    # Then the broken record is reported (Lambda resumes from it), and only the event before
    # it is written: the one after it will come again with the retried records
    assert response == {"batchItemFailures": [{"itemIdentifier": broken}]}
    assert len(all_events()) == 1


def test_records_of_other_items_write_nothing(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given stream records of items that are not jobs: a sweep cursor, the shard count,
    # and items other features keep in the table
    dynamodb = boto3.client("dynamodb")
    for pk, sk in (("dead#default", "x"), ("schedule#daily", "schedule"), ("shard#1", "x#y")):
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": pk}, "sk": {"S": sk}})
    deps.sweeps.advance_cursor(1, "1795276800000#")
    deps.sweeps.record_shard_count(8)

    # When they reach the history Lambda
    response = record(stream.next_event())

    # Then nothing is written and nothing fails
    assert response == {"batchItemFailures": []}
    assert stored() == {}


def test_an_s3_failure_fails_the_invocation(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given history to write and a bucket that does not exist
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    event = stream.next_event()
    recorder = history_recorder(environ={"SUNDIAL_HISTORY_BUCKET": "no-such-bucket"})

    # When the batch is handled, the invocation fails as a whole (Lambda retries, bisecting)
    with pytest.raises(Exception, match="NoSuchBucket"):
        recorder.handle(event, FakeLambdaContext())


def test_a_dags_nodes_are_recorded_with_their_dag_id(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given the card's daily_report DAG, run to the end by a consumer
    harness = Harness(deps, clock, lambda job: {"ok": True})
    dag = deps.dags.submit(SubmitDag.model_validate(DAILY_REPORT))
    for _ in range(4):
        harness.poll("default")
        harness.poll("email")
    # When the stream's records reach the history Lambda
    assert record(stream.next_event()) == {"batchItemFailures": []}
    # Then every node's changes carry the DAG's id, blocked nodes included
    events = all_events()
    assert {e.job_id for e in events} == {node.id for node in dag.nodes}
    assert {e.dag_id for e in events} == {dag.id}
    notify = [e for e in events if e.job_id == dag.nodes[4].id]
    # (all at one instant of the manual clock, so compared as a set)
    assert set(transitions(notify)) == {
        (None, "blocked", 0),
        ("blocked", "queued", 0),
        ("queued", "running", 1),
        ("running", "succeeded", 1),
    }


def test_a_dag_childs_events_carry_its_release(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given the card's daily_report DAG, due now: its root runs 5 s late, and its child
    # `transform`, released when the root ends, runs at once (the same poll delivers it)
    harness = Harness(deps, clock, lambda job: {"ok": True})
    dag = deps.dags.submit(SubmitDag.model_validate(DAILY_REPORT))
    clock.advance(seconds=5)
    released_ms = clock.now_ms()
    harness.poll("default")

    # When the stream's records reach the history Lambda
    assert record(stream.next_event()) == {"batchItemFailures": []}

    # Then the child's events from its release on carry the release time, so its lateness
    # can be measured from it (the DAG's due time is every node's)
    events = all_events()
    extract, transform = dag.nodes[0].id, dag.nodes[1].id
    child = {e.to_status: e for e in events if e.job_id == transform}
    assert child["blocked"].released_at_ms is None
    assert child["queued"].released_at_ms == released_ms
    assert child["succeeded"].released_at_ms == released_ms
    succeeded = child["succeeded"]
    assert (succeeded.due_at_ms, succeeded.started_at_ms) == (released_ms - 5_000, released_ms)
    # And the root's carry none: nothing released it
    assert {e.released_at_ms for e in events if e.job_id == extract} == {None}


def _ttl_removal_of(key: Any, stream: StreamReader) -> dict[str, Any]:
    """DynamoDB's TTL process removing the item at `key`, as the stream delivers it (moto does
    not run TTL: the item is deleted, and the record marked as the TTL process marks it)."""
    boto3.client("dynamodb").delete_item(
        TableName=TABLE, Key={"pk": {"S": key.pk}, "sk": {"S": key.sk}}
    )
    [removal] = stream.next_event()["Records"]
    return dict(removal) | {
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    }


def test_a_moved_jobs_pointer_goes_when_the_jobs_item_expires(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given two moved jobs that ran; the second moved on again (its pointer names its last key)
    harness = Harness(deps, clock, lambda job: None)
    first = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job
    second = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job
    moved = deps.moves.move(first.id, ChangeJob(delay_seconds=0))
    passed = deps.moves.move(second.id, ChangeJob(delay_seconds=7200))
    deps.moves.move(second.id, ChangeJob(delay_seconds=0))
    harness.poll()
    assert deps.jobs.get(first.id).status is deps.jobs.get(second.id).status
    stream.next_event()
    table = boto3.client("dynamodb")
    origin = {"pk": {"S": first.key.pk}, "sk": {"S": first.key.sk}}
    assert table.get_item(TableName=TABLE, Key=origin)["Item"]["moved_to"]["S"] == moved.key.sk
    recorder = history_recorder(
        environ={
            "SUNDIAL_HISTORY_BUCKET": BUCKET,
            "SUNDIAL_HISTORY_PREFIX": PREFIX,
            "SUNDIAL_TABLE_NAME": TABLE,
        }
    )

    # When the first job's item expires (TTL), and a removal of the key the second job
    # passed through arrives too (a pointer must outlive everything but its job's own item)
    expired = _ttl_removal_of(moved.key, stream)
    passed_through = expired | {"eventID": "e" * 32}
    passed_through["dynamodb"] = dict(expired["dynamodb"]) | {
        "Keys": {"pk": {"S": passed.key.pk}, "sk": {"S": passed.key.sk}},
        "OldImage": dict(expired["dynamodb"]["OldImage"])
        | {"pk": {"S": passed.key.pk}, "sk": {"S": passed.key.sk}, "origin": {"S": second.key.sk}},
    }
    assert recorder.handle({"Records": [expired, passed_through]}, FakeLambdaContext()) == {
        "batchItemFailures": []
    }

    # Then the first job's pointer is gone (its id is unknown now, as for any expired job),
    # and the second's, which names the second's live item, stays: its id still works
    assert "Item" not in table.get_item(TableName=TABLE, Key=origin)
    assert deps.jobs.get(second.id).id == second.id
    # And a repeat of the batch (a stream retry) is harmless
    assert recorder.handle({"Records": [expired]}, FakeLambdaContext()) == {"batchItemFailures": []}


def test_a_job_never_moved_leaves_nothing_to_delete_when_it_expires(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a job that ran where it was submitted, and another job's live item
    harness = Harness(deps, clock, lambda job: None)
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0)).job
    other = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job
    harness.poll()
    stream.next_event()
    recorder = history_recorder(
        environ={
            "SUNDIAL_HISTORY_BUCKET": BUCKET,
            "SUNDIAL_HISTORY_PREFIX": PREFIX,
            "SUNDIAL_TABLE_NAME": TABLE,
        }
    )
    # When its item expires, Then the history records it and no other item is touched
    assert recorder.handle(
        {"Records": [_ttl_removal_of(job.key, stream)]}, FakeLambdaContext()
    ) == {"batchItemFailures": []}
    assert deps.jobs.get(other.id).id == other.id
