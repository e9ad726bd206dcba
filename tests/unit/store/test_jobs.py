"""JobStore against moto: the item layout and each conditional write."""

from __future__ import annotations

import boto3
import pytest
from ulid import ULID

from sundial.ids import JobKey, due_sk_bound
from sundial.model.job import Job, Priority, Status
from sundial.store.idempotency import IdempotencyRecord
from sundial.store.job_items import item_to_job, job_to_item
from sundial.store.jobs import UnsafeWrite
from sundial.wiring import Dependencies

NOW = 1_795_267_200_000


def _job(due_ms: int = NOW + 3_600_000, shard: int = 3, **changes: object) -> Job:
    job = Job(
        key=JobKey(shard=shard, due_ms=due_ms, ulid=str(ULID())),
        queue="default",
        payload_json='{"n":1}',
        priority=Priority.HIGH,
        max_attempts=3,
        created_at_ms=NOW,
    )
    for name, value in changes.items():
        setattr(job, name, value)
    return job


def test_item_round_trip_keeps_every_field() -> None:
    job = _job(
        status=Status.QUEUED,
        direct=True,
        idempotency_key="k",
        queued_at_ms=NOW + 1,
        claim_token="t",
        lease_until_ms=NOW + 2,
        expires_at_s=123,
    )
    assert item_to_job(job_to_item(job)) == job


def test_a_plain_job_item_is_well_under_one_kilobyte() -> None:
    # DynamoDB bills a write unit per KB: a typical job costs one unit per write.
    item = job_to_item(
        _job(status=Status.QUEUED, claim_token="sweep:" + str(ULID()), lease_until_ms=NOW)
    )
    size = sum(
        len(name) + len(next(iter(value.values())).__str__()) for name, value in item.items()
    )
    assert size < 400


def test_claim_is_conditional_on_pending(deps: Dependencies) -> None:
    store = deps.store
    job = _job()
    store.put_new([job], now_ms=NOW)
    assert store.claim(job.key, token="a", now_ms=NOW, lease_ms=1000)
    assert not store.claim(job.key, token="b", now_ms=NOW, lease_ms=1000)
    stored = store.get(job.key)
    assert (
        stored is not None
        and stored.status is Status.QUEUED
        and stored.claim_token == "a"
        and stored.lease_until_ms == NOW + 1000
    )


@pytest.mark.parametrize(
    ("status", "cancels"),
    [
        (s, s in {Status.PENDING, Status.QUEUED, Status.FAILED, Status.BLOCKED, Status.PAUSED})
        for s in Status
    ],
)
def test_cancel_by_status(deps: Dependencies, status: Status, cancels: bool) -> None:
    job = _job(status=status)
    deps.store.put_new([job], now_ms=NOW)
    cancelled, current = deps.store.cancel(job.key, now_ms=NOW, expires_at_s=99)
    assert cancelled is cancels
    # The job as cancelled, or as it was when the cancel was refused
    assert current is not None
    assert current.status is (Status.CANCELLED if cancels else status)


def test_cancel_of_a_missing_job_creates_nothing(deps: Dependencies) -> None:
    job = _job()
    assert deps.store.cancel(job.key, now_ms=NOW, expires_at_s=99) == (False, None)
    assert deps.store.get(job.key) is None


def test_query_due_returns_one_shards_range_in_due_order_across_pages(deps: Dependencies) -> None:
    # (written a day before they came due: a due-soon pending job nobody sends is refused)
    day_before = NOW - 86_400_000
    jobs = [_job(due_ms=NOW + i * 1000, shard=5, created_at_ms=day_before) for i in range(30)]
    jobs += [_job(shard=6, created_at_ms=day_before)]
    deps.store.put_new(jobs, now_ms=day_before)
    found = list(
        deps.sweeps.query_due(
            5,
            from_sk=due_sk_bound(NOW + 10_000, upper=False),
            to_sk=due_sk_bound(NOW + 19_000, upper=True),
        )
    )
    assert [j.due_ms for j in found] == [NOW + i * 1000 for i in range(10, 20)]


def test_cursor_only_moves_forward(deps: Dependencies) -> None:
    assert deps.sweeps.read_cursors([1, 2]) == {}
    assert deps.sweeps.advance_cursor(1, "0000000000200#")
    assert not deps.sweeps.advance_cursor(1, "0000000000100#")
    assert deps.sweeps.read_cursors([1, 2]) == {1: "0000000000200#"}


def test_idempotency_record_is_written_once(deps: Dependencies) -> None:
    record = IdempotencyRecord(job_id="j1", fingerprint="f1", created_at_ms=NOW)
    other = IdempotencyRecord(job_id="j2", fingerprint="f2", created_at_ms=NOW + 5)
    assert deps.idempotency.remember(queue="q", key="k", record=record) is None
    assert deps.idempotency.remember(queue="q", key="k", record=other) == record
    assert deps.idempotency.remember(queue="r", key="k", record=other) is None


def test_a_due_soon_job_nobody_sends_is_never_written(deps: Dependencies) -> None:
    """THE OWNER RULE (docs/invariants.md), enforced where every new job is written: a pending
    job due within the direct window must be direct (its writer sends it)."""
    unsent = _job(due_ms=NOW + 60_000)
    with pytest.raises(UnsafeWrite):
        deps.store.put_new([_job(), unsent], now_ms=NOW)
    with pytest.raises(UnsafeWrite):
        deps.store.put_if_absent(unsent, now_ms=NOW)
    # Nothing of the refused batch was written
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0
    deps.store.put_new([_job(due_ms=NOW + 60_000, direct=True)], now_ms=NOW)
