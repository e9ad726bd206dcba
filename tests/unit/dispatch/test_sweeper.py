"""The sweeper against moto: shard leases, batching, races, partial failures, crashes, catch-up."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sundial.clock import ManualClock
from sundial.dispatch.sweeper import Sweeper
from sundial.ids import JobKey
from sundial.model.job import Status
from sundial.model.submission import SubmitJob
from sundial.store.jobs import JobStore
from sundial.store.sweeps import SweepStore
from sundial.timing import SWEEP_LEASE_MS, SWEEP_LOOKAHEAD_MS
from sundial.transport.sender import QueueSender
from sundial.wiring import Dependencies
from tests.support import receive_all

ALL_SHARDS = list(range(8))


def _sweeper(deps: Dependencies, clock: ManualClock) -> tuple[Sweeper, Any, Any]:
    """A sweeper with its own clients, so a test can hook into its AWS calls."""
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    sweeper = Sweeper(
        store=JobStore(dynamodb, deps.settings.table_name),
        sweeps=SweepStore(dynamodb, deps.settings.table_name),
        sender=QueueSender(sqs, deps.settings.queue_urls),
        clock=clock,
    )
    return sweeper, dynamodb, sqs


def _submit(deps: Dependencies, count: int, delay_s: Callable[[int], int]) -> list[str]:
    return [
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=delay_s(i), payload=i)).job.id
        for i in range(count)
    ]


def _arrivals(deps: Dependencies) -> Counter[str]:
    return Counter(
        e["id"] for e in receive_all(boto3.client("sqs"), deps.settings.queue_urls["default"])
    )


def _shown(deps: Dependencies, clock: ManualClock, job_id: str) -> Status:
    """The status GET /jobs/{id} shows (store.sweeps.as_shown: `queued` is derived)."""
    return deps.sweeps.as_shown(deps.jobs.get(job_id), now_ms=clock.now_ms()).status


def _sent_batches(sqs: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, **_: calls.append(params)
    )
    return calls


def test_due_jobs_are_sent_in_batches_of_ten_to_surface_at_their_due_second(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 25 jobs due 16 to 17 minutes from now (beyond the direct window)
    ids = _submit(deps, 25, lambda i: 960 + i * 2)
    sweeper, _, sqs = _sweeper(deps, clock)
    batches = _sent_batches(sqs)
    # When a sweep runs 3 minutes later (all are within its 14-minute lookahead)
    clock.advance(seconds=180)
    report = sweeper.sweep(ALL_SHARDS)
    # Then each was sent once, at most 10 per SendMessageBatch, its item left pending (the
    # sweep writes no job) and shown queued (the cursor passed it)
    assert report.dispatched == 25
    assert all(len(call["Entries"]) <= 10 for call in batches)
    assert sum(len(call["Entries"]) for call in batches) == 25
    assert {deps.jobs.get(i).status for i in ids} == {Status.PENDING}
    assert {_shown(deps, clock, i) for i in ids} == {Status.QUEUED}
    # And DelaySeconds makes each visible at its due second: none early, all within 1 s
    for second in range(960 - 180, 960 - 180 + 50):
        clock.set(clock.now_ms() // 1000 * 1000 + 1)  # just after a whole second
        arrived = _arrivals(deps)
        for job_id in arrived:
            due_ms = deps.jobs.get(job_id).due_ms
            assert due_ms <= clock.now_ms() < due_ms + 1000 + 1, job_id
        clock.advance(seconds=1)
        del second
    assert all(_shown(deps, clock, i) is Status.QUEUED for i in ids)


def test_jobs_beyond_the_lookahead_wait(deps: Dependencies, clock: ManualClock) -> None:
    [job_id] = _submit(deps, 1, lambda _: 3600)
    sweeper, _, _ = _sweeper(deps, clock)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 0
    assert _shown(deps, clock, job_id) is Status.PENDING
    clock.advance(ms=3_600_000 - SWEEP_LOOKAHEAD_MS)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 1


def test_resweeping_is_harmless(deps: Dependencies, clock: ManualClock) -> None:
    _submit(deps, 30, lambda i: 1000 + i)
    sweeper, _, _ = _sweeper(deps, clock)
    clock.advance(seconds=200)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 30
    # When the same sweep is invoked again (a retried async invoke), and after the lease
    assert sweeper.sweep(ALL_SHARDS).dispatched == 0
    clock.advance(ms=SWEEP_LEASE_MS + 1)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 0
    clock.advance(seconds=1200)
    assert sum(_arrivals(deps).values()) == 30


@pytest.mark.parametrize(
    "interleave_at", ["after-call.dynamodb.Query", "before-call.sqs.SendMessageBatch"]
)
def test_two_sweepers_racing_on_one_shard_send_each_job_once(
    deps: Dependencies, clock: ManualClock, interleave_at: str
) -> None:
    # Given jobs due soon on every shard
    ids = _submit(deps, 40, lambda i: 910 + i)
    clock.advance(seconds=120)
    first, first_db, first_sqs = _sweeper(deps, clock)
    second, _, _ = _sweeper(deps, clock)
    # When the second sweeper runs completely in the middle of the first one's work
    # (after its first read, or holding its leases, before its send)
    ran: list[int] = []

    def run_second(**_: Any) -> None:
        if not ran:
            ran.append(second.sweep(ALL_SHARDS).dispatched)

    client = first_db if "dynamodb" in interleave_at else first_sqs
    client.meta.events.register(interleave_at, run_second)
    first_report = first.sweep(ALL_SHARDS)
    # Then between them every job was dispatched exactly once: a lease is taken only on the
    # cursor item as read, and never from a live holder
    assert ran and first_report.dispatched + ran[0] == 40
    # And later sweeps, even past the claim lease, send nothing again
    clock.advance(ms=SWEEP_LEASE_MS + 60_000)
    assert first.sweep(ALL_SHARDS).dispatched == 0
    clock.advance(seconds=1000)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids)
    assert set(arrivals.values()) == {1}


def test_partial_send_failure_loses_nothing(deps: Dependencies, clock: ManualClock) -> None:
    # Given 20 due jobs, and SQS failing 3 entries of the first batch (fault injection
    # around the real moto call: the entries are withheld and reported as failed)
    ids = _submit(deps, 20, lambda i: 905 + i)
    clock.advance(seconds=100)
    sweeper, _, sqs = _sweeper(deps, clock)
    withheld: list[dict[str, Any]] = []
    # A flush's requests go out together on the sweeper's pool: each call's hooks run on its
    # own thread, so what a call withheld is what it reports
    this_call = threading.local()
    lock = threading.Lock()

    def withhold(params: dict[str, Any], **_: Any) -> None:
        with lock:
            take = max(0, min(3 - len(withheld), len(params["Entries"]) - 1))
            this_call.withheld = params["Entries"][:take]
            withheld.extend(this_call.withheld)
        params["Entries"] = params["Entries"][take:]

    def report_failed(parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("Failed", []).extend(
            {"Id": e["Id"], "SenderFault": False, "Code": "InternalError"}
            for e in getattr(this_call, "withheld", [])
        )

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", withhold)
    sqs.meta.events.register("after-call.sqs.SendMessageBatch", report_failed)
    # When the sweep runs
    report = sweeper.sweep(ALL_SHARDS)
    # Then the failed jobs are pending again, and the next sweep sends them
    assert report.send_failures == 3
    assert report.dispatched == 17
    failed_ids = {json.loads(e["MessageBody"])["id"] for e in withheld}
    assert {deps.jobs.get(i).status for i in failed_ids} == {Status.PENDING}
    clock.advance(seconds=60)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 3
    clock.advance(seconds=1000)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids)
    assert set(arrivals.values()) == {1}


def test_sqs_down_for_a_whole_sweep_loses_nothing(deps: Dependencies, clock: ManualClock) -> None:
    ids = _submit(deps, 12, lambda i: 905 + i)
    clock.advance(seconds=100)
    sweeper, _, sqs = _sweeper(deps, clock)

    def throttle(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "RequestThrottled", "Message": "slow down"}}, "SendMessageBatch"
        )

    sqs.meta.events.register("before-call.sqs.SendMessageBatch", throttle)
    assert sweeper.sweep(ALL_SHARDS).send_failures == 12
    sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", throttle)
    clock.advance(seconds=60)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 12
    clock.advance(seconds=1000)
    assert set(_arrivals(deps)) == set(ids)


@pytest.mark.parametrize("dies", ["before-send", "before-release"])
def test_a_sweeper_that_dies_holding_leases_is_followed_after_its_lease(
    deps: Dependencies, clock: ManualClock, dies: str
) -> None:
    # Given a sweeper that dies holding its shards' leases, before its first send or after
    # its sends and before its release
    ids = _submit(deps, 15, lambda i: 905 + i)
    clock.advance(seconds=100)
    doomed, doomed_db, doomed_sqs = _sweeper(deps, clock)

    def die(params: dict[str, Any] | None = None, **_: Any) -> None:
        if dies == "before-send" or ":c" in (params or {}).get("ExpressionAttributeValues", {}):
            raise SystemExit("Lambda killed")

    if dies == "before-send":
        doomed_sqs.meta.events.register("before-call.sqs.SendMessageBatch", die)
    else:
        doomed_db.meta.events.register("provide-client-params.dynamodb.UpdateItem", die)
    with pytest.raises(SystemExit):
        doomed.sweep(ALL_SHARDS)
    # When another sweep runs while the leases are live, it leaves those shards alone
    healthy, _, _ = _sweeper(deps, clock)
    clock.advance(seconds=30)
    assert healthy.sweep(ALL_SHARDS).lease_busy >= 1
    # And once they expire, the next holder sends from the cursor the dead one left
    clock.advance(ms=SWEEP_LEASE_MS)
    report = healthy.sweep(ALL_SHARDS)
    clock.advance(seconds=100)
    assert healthy.sweep(ALL_SHARDS).dispatched == 0
    clock.advance(seconds=1000)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids)
    # Each job was sent once; after a lost release, twice: the next holder sends again what
    # the dead one sent, a duplicate the consumer's take makes a no-op (store.attempts)
    assert report.dispatched == len(ids)
    # (the sweeper sends every shard's messages before it releases any shard)
    assert set(arrivals.values()) == ({1} if dies == "before-send" else {2})


def test_a_sweeper_down_for_an_hour_catches_up(deps: Dependencies, clock: ManualClock) -> None:
    # Given 400 jobs due over the next 75 minutes, and no sweep for 80 minutes
    ids = _submit(deps, 400, lambda i: 901 + i * 11)
    clock.advance(seconds=80 * 60)
    sweeper, _, _ = _sweeper(deps, clock)
    # When the sweeper comes back
    report = sweeper.sweep(ALL_SHARDS)
    # Then it sends the whole backlog at once: the overdue jobs now, the rest at their time
    assert report.dispatched == 400
    clock.advance(seconds=900)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids) and set(arrivals.values()) == {1}


def test_running_short_of_time_keeps_the_place(deps: Dependencies, clock: ManualClock) -> None:
    ids = _submit(deps, 30, lambda i: 905 + i)
    clock.advance(seconds=100)
    sweeper, _, _ = _sweeper(deps, clock)
    budget = iter([60_000] * 12 + [1_000] * 1000)  # plenty at first, then almost none
    first = sweeper.sweep(ALL_SHARDS, remaining_ms=lambda: next(budget))
    assert 0 < first.dispatched < 30
    second = sweeper.sweep(ALL_SHARDS)
    assert first.dispatched + second.dispatched == 30
    clock.advance(seconds=1000)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids) and set(arrivals.values()) == {1}


def test_direct_jobs_are_left_to_the_submit_path(deps: Dependencies, clock: ManualClock) -> None:
    # Given a direct job whose submit died after writing it, before sending it
    [job_id] = _submit(deps, 1, lambda _: 600)
    dynamodb = boto3.client("dynamodb")
    job = deps.jobs.get(job_id)
    dynamodb.update_item(
        TableName=deps.settings.table_name,
        Key={"pk": {"S": job.key.pk}, "sk": {"S": job.key.sk}},
        UpdateExpression="SET #s = :p",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":p": {"S": "pending"}},
    )
    receive_all(boto3.client("sqs"), deps.settings.queue_urls["default"])
    sweeper, _, _ = _sweeper(deps, clock)
    # Then the sweeper does not send it (it was never acknowledged to the client)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 0


def test_cancelled_pending_jobs_are_never_sent(deps: Dependencies, clock: ManualClock) -> None:
    ids = _submit(deps, 10, lambda i: 905 + i)
    for job_id in ids[:4]:
        deps.jobs.cancel(job_id)
    clock.advance(seconds=100)
    sweeper, _, _ = _sweeper(deps, clock)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 6
    clock.advance(seconds=1000)
    assert set(_arrivals(deps)) == set(ids[4:])


def test_a_sweep_writes_no_job_item_and_two_writes_per_shard(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 40 due jobs over 8 shards
    ids = _submit(deps, 40, lambda i: 905 + i)
    clock.advance(seconds=200)  # every job within the lookahead
    sweeper, dynamodb, _ = _sweeper(deps, clock)
    writes: list[str] = []
    dynamodb.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem",
        lambda params, **_: writes.append(params["Key"]["sk"]["S"]),
    )
    # When it sweeps
    report = sweeper.sweep(ALL_SHARDS)
    # Then every job was sent, and the only writes were each shard's lease and its release
    assert report.dispatched == 40
    shards = {JobKey.from_job_id(i).shard for i in ids}
    assert writes == ["cursor"] * (2 * len(shards))
    # And a sweep finding nothing due writes nothing
    writes.clear()
    clock.advance(seconds=60)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 0 and writes == []
    clock.advance(seconds=1000)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids) and set(arrivals.values()) == {1}


def test_a_failed_read_of_a_batch_loses_nothing(deps: Dependencies, clock: ManualClock) -> None:
    # Given 40 due jobs, and DynamoDB failing the first read of jobs' items to send (after
    # botocore's own retries)
    ids = _submit(deps, 40, lambda i: 905 + i)
    clock.advance(seconds=100)
    sweeper, dynamodb, _ = _sweeper(deps, clock)
    failures = [0]

    def fail_first_read(params: dict[str, Any], **_: Any) -> None:
        keys = next(iter(params["RequestItems"].values()))["Keys"]
        if keys[0]["sk"]["S"] != "cursor" and not failures[0]:
            failures[0] += 1
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                "BatchGetItem",
            )

    dynamodb.meta.events.register("provide-client-params.dynamodb.BatchGetItem", fail_first_read)
    # When the sweep meets that error, it affects that shard's batch only: the rest are sent
    report = sweeper.sweep(ALL_SHARDS)
    assert report.errors == 1 and 0 < report.dispatched < report.seen
    assert not report.failed_shards and report.held_shards
    # Then later sweeps send every job exactly once: the held batch at the next tick
    clock.advance(seconds=60)
    sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=1000)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids) and set(arrivals.values()) == {1}


def test_claim_concurrency_must_be_positive(deps: Dependencies, clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="claim_concurrency"):
        Sweeper(
            store=deps.store,
            sweeps=deps.sweeps,
            sender=deps.sender,
            clock=clock,
            claim_concurrency=0,
        )
