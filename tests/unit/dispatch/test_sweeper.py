"""The sweeper against moto: claims, batching, races, partial failures, crashes, catch-up."""

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
from sundial.timing import CLAIM_LEASE_MS, SWEEP_LOOKAHEAD_MS
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


def _sent_batches(sqs: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, **_: calls.append(params)
    )
    return calls


def test_due_jobs_are_claimed_and_sent_in_batches_of_ten_to_surface_at_their_due_second(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 25 jobs due 16 to 17 minutes from now (beyond the direct window)
    ids = _submit(deps, 25, lambda i: 960 + i * 2)
    sweeper, _, sqs = _sweeper(deps, clock)
    batches = _sent_batches(sqs)
    # When a sweep runs 3 minutes later (all are within its 14-minute lookahead)
    clock.advance(seconds=180)
    report = sweeper.sweep(ALL_SHARDS)
    # Then each was claimed once and sent, at most 10 per SendMessageBatch
    assert report.dispatched == 25
    assert all(len(call["Entries"]) <= 10 for call in batches)
    assert sum(len(call["Entries"]) for call in batches) == 25
    assert {deps.jobs.get(i).status for i in ids} == {Status.QUEUED}
    # And DelaySeconds makes each visible at its due second: none early, all within 1 s
    for second in range(960 - 180, 960 - 180 + 50):
        clock.set(clock.now_ms() // 1000 * 1000 + 1)  # just after a whole second
        arrived = _arrivals(deps)
        for job_id in arrived:
            due_ms = deps.jobs.get(job_id).due_ms
            assert due_ms <= clock.now_ms() < due_ms + 1000 + 1, job_id
        clock.advance(seconds=1)
        del second
    assert all(deps.jobs.get(i).status is Status.QUEUED for i in ids)


def test_jobs_beyond_the_lookahead_wait(deps: Dependencies, clock: ManualClock) -> None:
    [job_id] = _submit(deps, 1, lambda _: 3600)
    sweeper, _, _ = _sweeper(deps, clock)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 0
    assert deps.jobs.get(job_id).status is Status.PENDING
    clock.advance(ms=3_600_000 - SWEEP_LOOKAHEAD_MS)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 1


def test_resweeping_is_harmless(deps: Dependencies, clock: ManualClock) -> None:
    _submit(deps, 30, lambda i: 1000 + i)
    sweeper, _, _ = _sweeper(deps, clock)
    clock.advance(seconds=200)
    assert sweeper.sweep(ALL_SHARDS).dispatched == 30
    # When the same sweep is invoked again (a retried async invoke), and after the lease
    assert sweeper.sweep(ALL_SHARDS).dispatched == 0
    clock.advance(ms=CLAIM_LEASE_MS + 1)
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
    # (after its read, or between its claims and its send)
    ran: list[int] = []

    def run_second(**_: Any) -> None:
        if not ran:
            ran.append(second.sweep(ALL_SHARDS).dispatched)

    client = first_db if "dynamodb" in interleave_at else first_sqs
    client.meta.events.register(interleave_at, run_second)
    first_report = first.sweep(ALL_SHARDS)
    # Then between them every job was dispatched exactly once
    assert ran and first_report.dispatched + ran[0] == 40
    # And later sweeps, even past the claim lease, send nothing again
    clock.advance(ms=CLAIM_LEASE_MS + 60_000)
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
    in_this_call: list[dict[str, Any]] = []

    def withhold(params: dict[str, Any], **_: Any) -> None:
        in_this_call.clear()
        if len(withheld) < 3:
            in_this_call.append(params["Entries"][0])
            params["Entries"] = params["Entries"][1:]
            withheld.extend(in_this_call)

    def report_failed(parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("Failed", []).extend(
            {"Id": e["Id"], "SenderFault": False, "Code": "InternalError"} for e in in_this_call
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


def test_a_sweeper_that_dies_between_claim_and_send_is_taken_over_after_its_lease(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a sweeper that dies after claiming, before sending
    ids = _submit(deps, 15, lambda i: 905 + i)
    clock.advance(seconds=100)
    doomed, _, doomed_sqs = _sweeper(deps, clock)

    def die(**_: Any) -> None:
        raise SystemExit("Lambda killed")

    doomed_sqs.meta.events.register("before-call.sqs.SendMessageBatch", die)
    with pytest.raises(SystemExit):
        doomed.sweep(ALL_SHARDS)
    stranded = [i for i in ids if deps.jobs.get(i).status is Status.QUEUED]
    assert stranded  # claimed, never sent (the other shards were not reached)
    # When another sweep runs while the dead claim's lease is still live, it waits
    healthy, _, _ = _sweeper(deps, clock)
    clock.advance(seconds=60)
    assert healthy.sweep(ALL_SHARDS).dispatched == len(ids) - len(stranded)
    # And after the lease expires, the jobs are taken over and sent, once
    clock.advance(ms=CLAIM_LEASE_MS)
    report = healthy.sweep(ALL_SHARDS)
    assert report.dispatched == report.taken_over == len(stranded)
    clock.advance(seconds=100)
    assert healthy.sweep(ALL_SHARDS).dispatched == 0
    clock.advance(seconds=600)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids) and set(arrivals.values()) == {1}


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


class _ClaimsMeetStore(JobStore):
    """A JobStore whose first `parties` claims wait for each other before going to DynamoDB:
    they can only all get through if they are in flight at the same time."""

    def __init__(self, client: Any, table: str, parties: int) -> None:
        super().__init__(client, table)
        self._parties = parties
        self._meet = threading.Barrier(parties, timeout=10)
        self._lock = threading.Lock()
        self.claims = 0

    def claim(self, key: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.claims += 1
            meets = self.claims <= self._parties
        if meets:
            self._meet.wait()
        return super().claim(key, **kwargs)


def test_claims_are_made_concurrently_and_each_job_is_still_sent_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 40 due jobs over 8 shards (so one shard has at least 5), and a sweeper that claims
    # 4 at a time
    ids = _submit(deps, 40, lambda i: 905 + i)
    by_shard = Counter(JobKey.from_job_id(i).shard for i in ids)
    busiest = max(by_shard, key=lambda shard: by_shard[shard])
    ids = [i for i in ids if JobKey.from_job_id(i).shard == busiest]
    clock.advance(seconds=200)  # every job within the lookahead
    store = _ClaimsMeetStore(boto3.client("dynamodb"), deps.settings.table_name, parties=4)
    sweeper = Sweeper(
        store=store,
        sweeps=deps.sweeps,
        sender=QueueSender(boto3.client("sqs"), deps.settings.queue_urls),
        clock=clock,
        claim_concurrency=4,
    )
    # When it sweeps that shard (the first 4 claims only proceed once all 4 are in flight)
    report = sweeper.sweep([busiest])
    # Then every job was claimed once and sent once
    assert report.dispatched == store.claims == len(ids) >= 5
    clock.advance(seconds=1000)
    arrivals = _arrivals(deps)
    assert set(arrivals) == set(ids) and set(arrivals.values()) == {1}


def test_a_claim_failing_amid_concurrent_claims_loses_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given 40 due jobs, and DynamoDB failing the 5th claim (after botocore's own retries)
    ids = _submit(deps, 40, lambda i: 905 + i)
    clock.advance(seconds=100)
    sweeper, dynamodb, _ = _sweeper(deps, clock)
    lock, claims = threading.Lock(), [0]

    def fail_fifth_claim(params: dict[str, Any], **_: Any) -> None:
        if ":token" not in params.get("ExpressionAttributeValues", {}):
            return  # not a claim
        with lock:
            claims[0] += 1
            fifth = claims[0] == 5
        if fifth:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                "UpdateItem",
            )

    dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", fail_fifth_claim)
    # When the sweep meets that error, it affects that job only: the rest are sent
    report = sweeper.sweep(ALL_SHARDS)
    assert report.errors == 1 and report.dispatched == report.seen - 1
    assert not report.failed_shards
    dynamodb.meta.events.unregister("provide-client-params.dynamodb.UpdateItem", fail_fifth_claim)
    # Then later sweeps send every job exactly once: the failed claim's job at the next tick
    clock.advance(seconds=60)
    sweeper.sweep(ALL_SHARDS)
    clock.advance(ms=CLAIM_LEASE_MS)
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
