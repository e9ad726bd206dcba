"""The pieces the benchmark's comparisons rest on: the Dynein-style baseline behaves as that
design does (on moto), the zero-latency stub answers as AWS would shape it, and the throughput
model takes the least of its limits."""

from __future__ import annotations

import random
from typing import Any

import boto3
import pytest

from bench.dynein import DyneinScheduler
from bench.model import Rate, dispatches, submissions, sweeper_rate
from bench.stub import ZeroLatencyAws
from tests.support import TABLE, create_queues, create_table, receive_all


def test_the_dynein_baseline_puts_acquires_sends_once_and_deletes(aws: None) -> None:
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    create_table(dynamodb)
    urls, _ = create_queues(sqs)
    scheduler = DyneinScheduler(
        dynamodb=dynamodb,
        sqs=sqs,
        table=TABLE,
        queue_urls=urls,
        shard_count=4,
        rng=random.Random(3),
    )
    # Given 12 jobs, 6 of them due by t=1,000
    for n in range(12):
        scheduler.schedule(queue="default", payload={"n": n}, due_ms=500 + n * 100, now_ms=0)
    # When every shard ticks at t=1,000, and again
    sent = sum(scheduler.tick(shard, now_ms=1_000) for shard in range(4))
    again = sum(scheduler.tick(shard, now_ms=1_000) for shard in range(4))
    # Then the 6 overdue jobs were sent once each and deleted; the rest wait
    bodies = receive_all(sqs, urls["default"])
    assert sent == 6 and again == 0
    assert sorted(body["payload"]["n"] for body in bodies) == list(range(6))
    assert dynamodb.scan(TableName=TABLE)["Count"] == 6


def test_the_stub_answers_with_responses_botocore_parses() -> None:
    session = boto3.Session(
        region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    stub = ZeroLatencyAws({("dynamodb", "GetItem"): lambda r: {"Item": r["Key"]}})
    stub.install(session)
    sqs, dynamodb = session.client("sqs"), session.client("dynamodb")
    answer = sqs.send_message_batch(
        QueueUrl="https://sqs.us-east-1.amazonaws.com/123456789012/q",
        Entries=[{"Id": "a", "MessageBody": "x"}, {"Id": "b", "MessageBody": "y"}],
    )
    assert [e["Id"] for e in answer["Successful"]] == ["a", "b"] and not answer["Failed"]
    key = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    assert dynamodb.get_item(TableName="t", Key=key)["Item"] == key
    with pytest.raises(NotImplementedError, match="Scan"):
        dynamodb.scan(TableName="t")
    assert stub.calls == 3


def _least(rate: Rate, expected_limit: str) -> None:
    assert rate.limit == expected_limit, rate


def test_the_model_takes_the_least_of_its_limits_and_names_it() -> None:
    fast: dict[str, Any] = {"concurrency": 1_000, "cpu_us_per_job": 100, "memory_mb": 1769}
    # Few shards: partitions (4 writes per job, 1,000 per shard per second) bind
    few = submissions(shards=4, jobs_per_request=1, **fast)
    _least(few, "partition throughput")
    assert few.per_s == pytest.approx(4 * 1000 / 4)
    # Many shards, single submits: API Gateway's 10,000 requests/s binds; batches lift it 25-fold
    _least(submissions(shards=512, jobs_per_request=1, **fast), "API Gateway rate")
    assert submissions(shards=512, jobs_per_request=25, **fast).per_s > 10_000
    # The stage's own throttle, as deployed, binds below the account's limit
    deployed = submissions(shards=512, jobs_per_request=1, stage_rate_limit=1_000, **fast)
    _least(deployed, "API stage throttle")
    assert deployed.per_s == 1_000
    # Little concurrency binds before either
    _least(
        submissions(shards=512, jobs_per_request=1, **{**fast, "concurrency": 10}),
        "Lambda concurrency",
    )
    # A sweeper: concurrent claims hide the latency until CPU binds
    slow_cpu = sweeper_rate(
        cpu_us_per_job=700, memory_mb=256, claim_concurrency=16, concurrent_sends=False
    )
    one_at_a_time = sweeper_rate(
        cpu_us_per_job=700, memory_mb=256, claim_concurrency=1, concurrent_sends=False
    )
    assert slow_cpu.limit == "CPU" and one_at_a_time.limit == "latency"
    assert slow_cpu.per_s > one_at_a_time.per_s
    # Dispatch grows linearly with sweepers until partitions bind
    eight = dispatches(shards=64, shards_per_sweeper=8, sweeper=slow_cpu)
    sixteen = dispatches(shards=128, shards_per_sweeper=8, sweeper=slow_cpu)
    assert sixteen.per_s == pytest.approx(2 * eight.per_s)
    _least(
        dispatches(shards=4, shards_per_sweeper=1, sweeper=Rate(1e6, "CPU")), "partition throughput"
    )
