"""Issue 12, the sweeper's scenarios: each interleaving is replayed deterministically on moto
with the manual clock, by hooking the real AWS calls of the sweeper under test."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from ulid import ULID

from sundial.clock import ManualClock
from sundial.dispatch.sweeper import Sweeper
from sundial.ids import JobKey
from sundial.model.job import Job, Priority, Status
from sundial.store.job_items import job_to_item
from sundial.store.jobs import JobStore
from sundial.store.sweeps import ShardSweepState, SweepStore
from sundial.timing import CLOCK_SKEW_MS, SWEEP_LEASE_MS, SWEEPER_TIMEOUT_MS
from sundial.transport.sender import QueueSender
from sundial.wiring import Dependencies
from tests.support import WriteMeter, receive_all


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


def _put(
    deps: Dependencies, clock: ManualClock, *, shard: int, in_s: int, queue: str = "default"
) -> Job:
    """A pending job on a chosen shard, due `in_s` seconds from now (inside the lookahead)."""
    now = clock.now_ms()
    job = Job(
        key=JobKey(shard=shard, due_ms=now + in_s * 1000, ulid=str(ULID())),
        queue=queue,
        payload_json="{}",
        priority=Priority.NORMAL,
        max_attempts=3,
        # Submitted long ago (a due-soon job written now would have to be direct)
        created_at_ms=now - 86_400_000,
    )
    deps.store.put_new([job], now_ms=job.created_at_ms)
    return job


def _arrivals(deps: Dependencies) -> Counter[str]:
    return Counter(
        e["id"] for e in receive_all(boto3.client("sqs"), deps.settings.queue_urls["default"])
    )


def _refuse(sqs: Any, job_id: str, *, sender_fault: bool = False) -> None:
    """SQS refuses this job's entry in its SendMessageBatch (the entry is withheld from moto
    and reported in Failed, as SQS reports a partial batch failure)."""
    # Each call's hooks run on its own thread (a flush's requests go out together)
    this_call = threading.local()

    def withhold(params: dict[str, Any], **_: Any) -> None:
        this_call.withheld = []
        keep: list[dict[str, Any]] = []
        for entry in params["Entries"]:
            mine = json.loads(entry["MessageBody"])["id"] == job_id
            (this_call.withheld if mine else keep).append(entry)
        params["Entries"] = keep

    def report_failed(parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("Failed", []).extend(
            {"Id": e["Id"], "SenderFault": sender_fault, "Code": "InternalError"}
            for e in getattr(this_call, "withheld", [])
        )

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", withhold)
    sqs.meta.events.register("after-call.sqs.SendMessageBatch", report_failed)


def test_scenario_01_second_sweeper_never_passes_a_job_the_first_could_not_send(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given j1 < j2 pending on shard 0, and SQS refusing j1's entry to sweeper A
    j1 = _put(deps, clock, shard=0, in_s=300)
    j2 = _put(deps, clock, shard=0, in_s=400)
    a, _, a_sqs = _sweeper(deps, clock)
    b, _, _ = _sweeper(deps, clock)
    _refuse(a_sqs, j1.id)
    # And sweeper B running whole between A's send and A's release (A holds the shard's lease)
    b_reports: list[Any] = []

    def run_b(**_: Any) -> None:
        if not b_reports:
            b_reports.append(b.sweep([0]))

    a_sqs.meta.events.register("after-call.sqs.SendMessageBatch", run_b)
    # When A sweeps (one refused send), with B's sweep interleaved as above
    a_report = a.sweep([0])
    assert a_report.dispatched == 1 and a_report.send_failures == 1
    # Then B left the shard alone (A held it): it neither sent nor moved anything
    assert b_reports[0].lease_busy == 1 and b_reports[0].dispatched == 0
    assert deps.jobs.get(j1.id).status is Status.PENDING
    # And A held the cursor at j1, naming j2 as sent above it: a later sweep sends j1 only
    state = deps.sweeps.read_sweep_states([0])[0]
    assert state.cursor == j1.key.sk and state.sent == {j2.key.sk} and state.lease is None
    clock.advance(seconds=60)
    later, _, _ = _sweeper(deps, clock)
    assert later.sweep([0]).dispatched == 1
    assert deps.sweeps.as_shown(deps.jobs.get(j1.id), now_ms=clock.now_ms()).status is (
        Status.QUEUED
    )
    clock.advance(seconds=1000)
    assert _arrivals(deps) == Counter({j1.id: 1, j2.id: 1})


def test_scenario_05_refused_send_plus_concurrent_cancel_sends_the_rest_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given j1 < j2 pending on shard 0, SQS refusing j1, and j1 cancelled by a client
    # between A's send and A's release (A holds its cursor at j1, naming j2 as sent)
    j1 = _put(deps, clock, shard=0, in_s=300)
    j2 = _put(deps, clock, shard=0, in_s=400)
    a, _, a_sqs = _sweeper(deps, clock)
    _refuse(a_sqs, j1.id)
    a_sqs.meta.events.register(
        "after-call.sqs.SendMessageBatch", lambda **_: deps.jobs.cancel(j1.id)
    )
    # When A sweeps, and later sweeps run, also past the lease
    report = a.sweep([0])
    assert report.dispatched == 1 and report.send_failures == 1
    later, _, _ = _sweeper(deps, clock)
    for _ in range(3):
        clock.advance(ms=SWEEP_LEASE_MS + 60_000)
        later.sweep([0])
    # Then j2 was sent exactly once (the later holder skips it: A's release names it), and
    # j1 never (cancelled, it needs nothing: the cursor passes it)
    clock.advance(seconds=1000)
    assert _arrivals(deps) == Counter({j2.id: 1})
    assert deps.jobs.get(j1.id).status is Status.CANCELLED


def test_scenario_08_a_job_of_a_removed_queue_blocks_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given, on shard 0, a pending job of a queue no longer configured, between healthy jobs,
    # and a healthy job on shard 1 (a later shard of the same group)
    before = _put(deps, clock, shard=0, in_s=200)
    orphan = _put(deps, clock, shard=0, in_s=300, queue="removed")
    after = _put(deps, clock, shard=0, in_s=400)
    other = _put(deps, clock, shard=1, in_s=300)
    sweeper, _, _ = _sweeper(deps, clock)
    # When the group is swept
    report = sweeper.sweep([0, 1])
    # Then every healthy job is sent, and only the orphan is affected: dead, with a reason an
    # operator sees on GET /jobs/{id}
    assert report.dispatched == 3 and report.poisoned == 1 and not report.failed_shards
    dead = deps.jobs.get(orphan.id)
    assert dead.status is Status.DEAD
    assert dead.last_error is not None and "removed" in dead.last_error.message
    # And the cursor does not stick at it: later sweeps send nothing again
    clock.advance(seconds=60)
    assert sweeper.sweep([0, 1]).dispatched == 0
    clock.advance(seconds=1000)
    assert _arrivals(deps) == Counter({before.id: 1, after.id: 1, other.id: 1})


def _raw(deps: Dependencies, job: Job) -> dict[str, Any]:
    item = boto3.client("dynamodb").get_item(
        TableName=deps.settings.table_name,
        Key={"pk": {"S": job.key.pk}, "sk": {"S": job.key.sk}},
        ConsistentRead=True,
    )["Item"]
    return dict(item)


def _put_raw(deps: Dependencies, job: Job, **changes: Any) -> None:
    """Write a job's item with some attributes changed (a value) or removed (None)."""
    item = job_to_item(job)
    for name, value in changes.items():
        if value is None:
            item.pop(name)
        else:
            item[name] = value
    boto3.client("dynamodb").put_item(TableName=deps.settings.table_name, Item=item)


def test_scenario_poison_a_poison_job_affects_that_job_only(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given, among healthy jobs on shard 0: an item whose priority is unknown (unreadable as
    # a due job), an item without its payload (readable, but not as a whole job), and a job
    # SQS rejects as the sender's fault
    healthy = [_put(deps, clock, shard=0, in_s=100 * (i + 1)) for i in range(4)]
    bad_priority = _put(deps, clock, shard=0, in_s=150)
    no_payload = _put(deps, clock, shard=0, in_s=250)
    rejected = _put(deps, clock, shard=0, in_s=350)
    _put_raw(deps, bad_priority, priority={"S": "urgent!"})
    _put_raw(deps, no_payload, payload=None)
    sweeper, _, sqs = _sweeper(deps, clock)
    _refuse(sqs, rejected.id, sender_fault=True)
    # When the shard is swept
    report = sweeper.sweep([0])
    # Then the healthy jobs are sent, and each poison job is dead with its reason
    assert report.dispatched == 4 and report.poisoned == 3
    assert not report.held_shards and not report.failed_shards
    for job, words in ((bad_priority, "urgent!"), (no_payload, "payload"), (rejected, "SQS")):
        item = _raw(deps, job)
        assert item["status"]["S"] == "dead"
        assert words in item["history"]["L"][-1]["M"]["message"]["S"]
    assert deps.jobs.get(rejected.id).last_error is not None
    # And the cursor passed them: later sweeps, also past the lease, send nothing again
    for _ in range(2):
        clock.advance(ms=SWEEP_LEASE_MS + 60_000)
        assert sweeper.sweep([0]).dispatched == 0
    clock.advance(seconds=1000)
    assert _arrivals(deps) == Counter({job.id: 1 for job in healthy})


def test_scenario_poison_an_error_on_one_shard_never_stops_the_others(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given due jobs on shards 0, 1 and 2, and DynamoDB failing every read of shard 1
    jobs = {shard: _put(deps, clock, shard=shard, in_s=300) for shard in (0, 1, 2)}
    sweeper, dynamodb, _ = _sweeper(deps, clock)

    def fail_shard_1(params: dict[str, Any], **_: Any) -> None:
        if params["ExpressionAttributeValues"][":pk"]["S"] == jobs[1].key.pk:
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "boom"}}, "Query"
            )

    dynamodb.meta.events.register("provide-client-params.dynamodb.Query", fail_shard_1)
    # When the group is swept
    report = sweeper.sweep([0, 1, 2])
    # Then the other shards are swept, and the failed one is reported
    assert report.dispatched == 2 and report.errors == 1 and report.failed_shards == [1]
    # And once DynamoDB recovers, the next sweep sends shard 1's job
    dynamodb.meta.events.unregister("provide-client-params.dynamodb.Query", fail_shard_1)
    clock.advance(seconds=60)
    assert sweeper.sweep([0, 1, 2]).dispatched == 1
    clock.advance(seconds=1000)
    assert _arrivals(deps) == Counter({job.id: 1 for job in jobs.values()})


def test_a_plain_sweep_writes_no_job_item(deps: Dependencies, clock: ManualClock) -> None:
    # Given 30 plain delayed jobs, and a sweeper whose DynamoDB writes are counted
    for i in range(30):
        _put(deps, clock, shard=i % 3, in_s=100 + i)
    session = boto3.Session()
    meter = WriteMeter(session)
    metered = Dependencies(settings=deps.settings, clock=clock, session=session)
    # When they are swept with no fault
    assert metered.sweeper.sweep([0, 1, 2]).dispatched == 30
    # Then no job item was written: each shard cost its lease and its release
    assert meter.job_writes() == 0 and meter.requests["cursor"] == 2 * 3
    # And a sweep with nothing due costs no write at all
    clock.advance(seconds=60)
    assert metered.sweeper.sweep([0, 1, 2]).dispatched == 0
    assert meter.requests["cursor"] == 2 * 3


def test_scenario_poison_a_shard_holding_only_a_malformed_item_moves_on(
    deps: Dependencies, clock: ManualClock
) -> None:
    bad = _put(deps, clock, shard=2, in_s=300)
    _put_raw(deps, bad, queue=None)
    sweeper, _, _ = _sweeper(deps, clock)
    assert sweeper.sweep([2]).poisoned == 1
    assert _raw(deps, bad)["status"]["S"] == "dead"
    # The cursor passed it: the next sweep does not even read it
    clock.advance(seconds=60)
    report = sweeper.sweep([2])
    assert report.poisoned == 0 and report.errors == 0


def test_scenario_lease_two_sweepers_meet_at_the_expiry_of_a_dead_holders_lease(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given jobs on shard 0, and sweeper A dying right after taking the shard's lease
    jobs = [_put(deps, clock, shard=0, in_s=300 + i) for i in range(3)]
    a, a_db, _ = _sweeper(deps, clock)

    def die_after_lease(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["sk"]["S"] == "cursor" and ":c" not in params["ExpressionAttributeValues"]:
            raise SystemExit("Lambda killed")  # the take's request, never sent

    a_db.meta.events.register("provide-client-params.dynamodb.UpdateItem", die_after_lease)
    with pytest.raises(SystemExit):
        a.sweep([0])
    a_db.meta.events.unregister("provide-client-params.dynamodb.UpdateItem", die_after_lease)
    # (the kill came before the request: take the lease as A would have)
    taken_at = clock.now_ms()
    read = deps.sweeps.read_sweep_states([0]).get(0, ShardSweepState())
    assert deps.sweeps.take_lease(0, token="sweep:A", now_ms=taken_at, read=read)
    # When a sweeper whose clock runs CLOCK_SKEW_MS ahead comes while A may still live (A's
    # Lambda may run SWEEPER_TIMEOUT_MS after its take), it leaves the shard alone
    ahead = ManualClock(taken_at + SWEEPER_TIMEOUT_MS + CLOCK_SKEW_MS)
    early, _, _ = _sweeper(deps, ahead)
    assert early.sweep([0]).lease_busy == 1
    # And at the expiry, B and C meet: both read the expired lease, C runs whole between B's
    # read and B's take, and only one of them holds the shard
    clock.set(taken_at + SWEEP_LEASE_MS + 1)
    b, b_db, _ = _sweeper(deps, clock)
    c, _, _ = _sweeper(deps, clock)
    c_reports: list[Any] = []

    def run_c(**_: Any) -> None:
        if not c_reports:
            c_reports.append(c.sweep([0]))

    b_db.meta.events.register("after-call.dynamodb.Query", run_c)
    b_report = b.sweep([0])
    assert c_reports[0].dispatched == 3 and b_report.dispatched == 0
    assert b_report.lease_busy == 1
    # Then each job was sent once, and the shard is free again
    assert deps.sweeps.read_sweep_states([0])[0].lease is None
    clock.advance(seconds=1000)
    assert _arrivals(deps) == Counter({job.id: 1 for job in jobs})
