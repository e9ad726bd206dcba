"""Large payloads stored in S3 (issue 17, item 5): offload, content-addressed keys, the
consumer's fetch and check, moves, and the acceptance: a 5 MiB payload through submit -> SQS ->
consumer at one write unit per job-item write, as a small job."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import boto3
import pytest
from moto.core import utils as moto_utils
from moto.s3 import models as moto_s3
from pydantic import JsonValue, ValidationError

from sundial.clock import ManualClock
from sundial.errors import TooLargeForQueue
from sundial.model.job import Status
from sundial.model.payloads import (
    INLINE_PAYLOAD_BYTES,
    MAX_STORED_PAYLOAD_BYTES,
    PayloadRef,
    PayloadStorage,
    PayloadUnavailable,
    check_payload,
)
from sundial.model.submission import PAYLOAD_TOO_LARGE, ChangeJob, SubmitJob
from sundial.store.job_items import job_to_item
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies, configure
from tests.conftest import PAYLOAD_BUCKET
from tests.harness import ALL_SHARDS, Harness, delayed_job
from tests.support import WriteMeter, expire_by_lifecycle, payload_lifecycle_rules

MIB = 1024 * 1024


def _text_of(size: int) -> str:
    """A JSON string payload whose compact JSON is exactly `size` bytes."""
    return "x" * (size - 2)


def _object(key: str) -> bytes:
    body: bytes = boto3.client("s3").get_object(Bucket=PAYLOAD_BUCKET, Key=key)["Body"].read()
    return body


def _item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it (names + values; numbers counted as their digits,
    generously)."""

    def value_bytes(value: dict[str, Any]) -> int:
        ((kind, inner),) = value.items()
        if kind == "S":
            return len(inner.encode())
        if kind == "N":
            return len(inner)
        if kind in {"BOOL", "NULL"}:
            return 1
        if kind == "M":
            return 3 + sum(len(k.encode()) + value_bytes(v) + 1 for k, v in inner.items())
        if kind == "L":
            return 3 + sum(value_bytes(v) + 1 for v in inner)
        raise AssertionError(kind)

    return sum(len(name.encode()) + value_bytes(value) for name, value in item.items())


def _job_items(deps: Dependencies) -> list[dict[str, Any]]:
    items = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("shard#") and i["sk"]["S"][0].isdigit()]


# -- where a payload goes ---------------------------------------------------------------------


def test_a_payload_up_to_the_inline_limit_stays_in_the_job(deps: Dependencies) -> None:
    # Given a payload of exactly the inline limit
    submitted = deps.jobs.submit(
        SubmitJob(queue="default", delay_seconds=60, payload=_text_of(INLINE_PAYLOAD_BYTES))
    ).job
    # Then it is inline: no reference, no object
    assert submitted.payload_ref is None
    assert json.loads(submitted.payload_json) == _text_of(INLINE_PAYLOAD_BYTES)
    assert "Contents" not in boto3.client("s3").list_objects_v2(Bucket=PAYLOAD_BUCKET)


def test_a_payload_over_the_inline_limit_is_stored_as_its_jobs_own_object(
    deps: Dependencies,
) -> None:
    # Given a payload one byte over the inline limit
    payload = _text_of(INLINE_PAYLOAD_BYTES + 1)
    job = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=60, payload=payload)).job
    # Then its object holds the compact JSON under payloads/<queue>/<job ULID>/<sha256>
    compact = json.dumps(payload).encode()
    sha = hashlib.sha256(compact).hexdigest()
    assert job.payload_ref == PayloadRef(f"payloads/email/{job.key.ulid}/{sha}", sha, len(compact))
    assert _object(job.payload_ref.key) == compact
    # And it is tagged referenced, its job being written: no lifecycle rule can take it
    assert _tags(job.payload_ref.key) == {"sundial-payload": "referenced"}
    # And the job item keeps the reference, not the payload
    stored = deps.jobs.get(job.id)
    assert stored.payload_ref == job.payload_ref and stored.payload_json == "null"


def test_the_caller_may_ask_for_s3_whatever_the_size(deps: Dependencies) -> None:
    request = SubmitJob(
        queue="default", delay_seconds=60, payload={"small": 1}, payload_storage=PayloadStorage.S3
    )
    job = deps.jobs.submit(request).job
    assert job.payload_ref is not None
    assert _object(job.payload_ref.key) == b'{"small":1}'


def test_an_idempotent_repeat_stores_nothing_and_returns_the_first_job(
    deps: Dependencies,
) -> None:
    # Given a large payload submitted twice with one key (the second asking for s3 too)
    payload: JsonValue = {"blob": _text_of(200_000)}
    first = SubmitJob(queue="default", delay_seconds=60, payload=payload, idempotency_key="k")
    again = first.model_copy(update={"payload_storage": "s3"})
    one = deps.jobs.submit(first)
    two = deps.jobs.submit(again)
    # Then the repeat is the first job, with the same reference, and one object exists
    assert two.created is False and two.job.id == one.job.id
    assert two.job.payload_ref == one.job.payload_ref
    listed = boto3.client("s3").list_objects_v2(Bucket=PAYLOAD_BUCKET)["Contents"]
    assert [o["Key"] for o in listed] == [one.job.payload_ref.key]  # type: ignore[union-attr]


def test_without_a_payload_bucket_a_large_payload_is_a_413_naming_the_field(
    environ: dict[str, str], clock: ManualClock
) -> None:
    deps = configure(clock=clock, environ={k: v for k, v in environ.items() if "PAYLOAD" not in k})
    batch = [
        SubmitJob(queue="default", delay_seconds=60),
        SubmitJob(queue="default", delay_seconds=60, payload=_text_of(INLINE_PAYLOAD_BYTES + 1)),
    ]
    with pytest.raises(TooLargeForQueue) as refused:
        deps.jobs.submit_many(batch)
    assert refused.value.field == "jobs[1].payload"
    assert _job_items(deps) == []  # nothing written


def test_a_payload_over_the_api_limit_is_refused_as_too_large() -> None:
    # Given a payload one byte over 5 MiB
    with pytest.raises(ValidationError) as refused:
        SubmitJob(queue="default", delay_seconds=0, payload=_text_of(MAX_STORED_PAYLOAD_BYTES + 1))
    [error] = refused.value.errors()
    # Then its error is of the type the API answers 413, on the payload field
    assert error["type"] == PAYLOAD_TOO_LARGE and error["loc"] == ("payload",)
    # And exactly 5 MiB is accepted
    SubmitJob(queue="default", delay_seconds=0, payload=_text_of(MAX_STORED_PAYLOAD_BYTES))


def test_a_hash_mismatch_is_refused() -> None:
    ref = PayloadRef.of("default", "01KAM3AAAAAAAAAAAAAAAAAAAA", '"a"')
    assert check_payload(ref, b'"a"') == '"a"'
    with pytest.raises(PayloadUnavailable, match="does not match"):
        check_payload(ref, b'"b"')


# -- the consumer -----------------------------------------------------------------------------


def test_a_5_mib_payload_round_trips_at_the_write_units_of_a_small_job(
    deps: Dependencies, clock: ManualClock
) -> None:
    """The acceptance: submit -> sweeper -> SQS -> consumer SDK; the function gets the payload
    as if inline, and every job-item write is one write unit, as many as a small job's."""
    harness = Harness(deps, clock, lambda envelope: len(json.dumps(envelope.payload)))
    submit_session = boto3.Session()
    submit_meter = WriteMeter(submit_session)
    submitter = Dependencies(settings=deps.settings, clock=clock, session=submit_session)
    big: JsonValue = {"blob": "x" * (5 * MIB - len('{"blob":""}'))}
    assert len(json.dumps(big, separators=(",", ":"))) == 5 * MIB == MAX_STORED_PAYLOAD_BYTES
    small: JsonValue = {"n": 1}
    writes: dict[str, int] = {}
    for name, payload in (("small", small), ("big", big)):
        before_submit = submit_meter.job_writes()
        before_run = harness.meter.job_writes()
        job_id = submitter.jobs.submit(
            SubmitJob(queue="default", delay_seconds=3600, payload=payload)
        ).job.id
        item_sizes = [_item_bytes(item) for item in _job_items(deps)]
        clock.advance(seconds=3600 - 600)
        assert harness.sweeper.sweep(ALL_SHARDS).dispatched == 1
        clock.advance(seconds=601)
        assert harness.poll() == []
        # Then the function got the payload itself
        assert harness.calls[-1].payload == payload
        job = deps.jobs.get(job_id)
        assert job.status is Status.SUCCEEDED
        # And the job item stays under 1 KB (one write unit per write) before and after its run
        item_sizes.append(_item_bytes(job_to_item(job)))
        assert max(item_sizes) < 1024, item_sizes
        writes[name] = (submit_meter.job_writes() - before_submit) + (
            harness.meter.job_writes() - before_run
        )
    # And the large job took as many job-item writes as the small one
    assert writes["big"] == writes["small"]


def test_a_missing_payload_object_fails_the_job_for_good_to_the_dlq(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda envelope: envelope.payload)
    job_id = delayed_job(deps, clock, harness, payload={"v": 1}, payload_storage="s3")
    key = deps.jobs.get(job_id).payload_ref.key  # type: ignore[union-attr]
    boto3.client("s3").delete_object(Bucket=PAYLOAD_BUCKET, Key=key)  # as the lifecycle would
    # When its message is delivered
    assert harness.poll() == []
    # Then the function never ran, the job is dead with the reason, and its envelope is in the DLQ
    assert harness.calls == []
    job = deps.jobs.get(job_id)
    assert job.status is Status.DEAD
    assert job.last_error is not None and job.last_error.error_type == "PayloadUnavailable"
    assert "missing" in job.last_error.message
    [letter] = harness.dead_letters()
    assert letter["id"] == job_id and letter["payload_ref"]["key"] == key


def test_an_altered_payload_object_fails_the_job_for_good(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda envelope: envelope.payload)
    job_id = delayed_job(deps, clock, harness, payload={"v": 1}, payload_storage="s3")
    key = deps.jobs.get(job_id).payload_ref.key  # type: ignore[union-attr]
    boto3.client("s3").put_object(Bucket=PAYLOAD_BUCKET, Key=key, Body=b'{"v":2}')
    assert harness.poll() == []
    assert harness.calls == []
    job = deps.jobs.get(job_id)
    assert job.status is Status.DEAD and job.attempts == 1
    assert job.last_error is not None and "does not match" in job.last_error.message


def test_a_retry_of_a_stored_payload_job_carries_its_reference(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a job whose first attempt fails (retry a day out: a timer item)
    seen: list[Any] = []

    def flaky(envelope: Envelope) -> None:
        seen.append(envelope.payload)
        if len(seen) == 1:
            raise RuntimeError("first time")

    harness = Harness(deps, clock, flaky)
    payload = {"blob": _text_of(100_000)}
    day = {"initial_delay_seconds": 86_400, "max_delay_seconds": 86_400}
    job_id = delayed_job(deps, clock, harness, payload=payload, retry=day)
    assert harness.poll() == []
    # When the retry comes due and runs
    clock.advance(seconds=86_400 - 600)
    harness.sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=601)
    assert harness.poll() == []
    # Then both attempts got the payload
    assert seen == [payload, payload]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


# -- moves ------------------------------------------------------------------------------------


def test_a_move_with_a_large_payload_stores_it_and_the_job_runs_with_it(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda envelope: None)
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600, payload="v1")).job.id
    # When PATCH gives it a payload over the inline limit
    large: JsonValue = {"blob": _text_of(INLINE_PAYLOAD_BYTES * 2)}
    moved = deps.moves.move(job_id, ChangeJob.model_validate({"payload": large}))
    assert (
        moved.payload_ref is not None
        and _object(moved.payload_ref.key) == json.dumps(large, separators=(",", ":")).encode()
    )
    # Then its run gets the new payload
    clock.advance(seconds=3600 - 600)
    harness.sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=601)
    assert harness.poll() == []
    assert [call.payload for call in harness.calls] == [large]
    # And a later small payload is inline again
    other = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600, payload=large)).job
    back = deps.moves.move(other.id, ChangeJob.model_validate({"payload": "small"}))
    assert back.payload_ref is None and json.loads(back.payload_json) == "small"


def test_payload_storage_alone_is_not_a_change() -> None:
    with pytest.raises(ValidationError, match="give payload too"):
        ChangeJob.model_validate({"payload_storage": "s3"})


def test_a_dead_stored_payload_job_retried_runs_with_its_reference(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a job that died because its object was missing, and the object put back
    harness = Harness(deps, clock, lambda envelope: envelope.payload)
    job_id = delayed_job(deps, clock, harness, payload={"v": 1}, payload_storage="s3")
    ref = deps.jobs.get(job_id).payload_ref
    assert ref is not None
    boto3.client("s3").delete_object(Bucket=PAYLOAD_BUCKET, Key=ref.key)
    assert harness.poll() == []
    assert deps.jobs.get(job_id).status is Status.DEAD
    boto3.client("s3").put_object(Bucket=PAYLOAD_BUCKET, Key=ref.key, Body=b'{"v":1}')
    # When it is retried (as a dead-letter replay does), its new message carries the reference
    deps.jobs.retry(job_id)
    assert harness.poll() == []
    # Then it runs with the payload
    assert [call.payload for call in harness.calls] == [{"v": 1}]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


@pytest.fixture
def s3_clock(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """The clock moto's S3 stamps objects with (it imports utcnow itself)."""
    monkeypatch.setattr(moto_s3, "utcnow", moto_utils.utcnow)
    return clock


def _tags(key: str) -> dict[str, str]:
    tags = boto3.client("s3").get_object_tagging(Bucket=PAYLOAD_BUCKET, Key=key)["TagSet"]
    return {t["Key"]: t["Value"] for t in tags}


DAY_S = 86_400


def test_a_paused_job_keeps_its_stored_payload_however_long_it_waits(
    deps: Dependencies, s3_clock: ManualClock
) -> None:
    """A pause has no time limit: the lifecycle, as the stack configures it, must not reach
    an object a job references (found by a review: a job due in a year, paused the day before
    and resumed months later, ran into PayloadUnavailable and died)."""
    clock, rules = s3_clock, payload_lifecycle_rules()
    s3 = boto3.client("s3")
    # Given a job due in 366 days whose payload is stored in S3, paused the day before
    request = SubmitJob(
        queue="default",
        delay_seconds=366 * DAY_S,
        payload={"v": 1},
        payload_storage=PayloadStorage.S3,
    )
    job = deps.jobs.submit(request).job
    clock.advance(seconds=365 * DAY_S)
    deps.jobs.pause(job.id)
    # When it stays paused three months, while S3's lifecycle runs every day
    for _ in range(90):
        clock.advance(seconds=DAY_S)
        expire_by_lifecycle(s3, PAYLOAD_BUCKET, rules, clock.now_ms())
    # Then, resumed, it runs with its payload
    harness = Harness(deps, clock, lambda envelope: envelope.payload)
    deps.jobs.resume(job.id)
    clock.advance(seconds=1)
    assert harness.poll() == []
    assert [c.payload for c in harness.calls] == [{"v": 1}]
    assert deps.jobs.get(job.id).status is Status.SUCCEEDED


def test_an_object_no_job_was_written_for_expires_and_a_replaced_one_too(
    deps: Dependencies, s3_clock: ManualClock
) -> None:
    clock, rules = s3_clock, payload_lifecycle_rules()
    s3 = boto3.client("s3")
    # Given a payload stored by a submit that died before its job was written
    assert deps.payloads is not None
    orphan = deps.payloads.put("default", "01KAM3AAAAAAAAAAAAAAAAAAAA", '{"lost":1}')
    # And a job whose payload was replaced by a move
    request = SubmitJob(
        queue="default",
        delay_seconds=30 * DAY_S,
        payload={"v": 1},
        payload_storage=PayloadStorage.S3,
    )
    job = deps.jobs.submit(request).job
    moved = deps.moves.move(
        job.id, ChangeJob.model_validate({"payload": {"v": 2}, "payload_storage": "s3"})
    )
    assert job.payload_ref is not None and moved.payload_ref is not None
    assert moved.payload_ref.key != job.payload_ref.key
    assert _tags(job.payload_ref.key) == {"sundial-payload": "unreferenced"}
    # When a week passes
    clock.advance(seconds=6 * DAY_S)
    assert expire_by_lifecycle(s3, PAYLOAD_BUCKET, rules, clock.now_ms()) == []
    clock.advance(seconds=DAY_S)
    # Then both unreferenced objects are gone, and the job's own payload stays
    gone = expire_by_lifecycle(s3, PAYLOAD_BUCKET, rules, clock.now_ms())
    assert sorted(gone) == sorted([orphan.key, job.payload_ref.key])
    assert _object(moved.payload_ref.key) == b'{"v":2}'
