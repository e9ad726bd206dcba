"""Failed history batches (Lambda's S3 on-failure destination, aws/lambda/...) are replayed into
history/ by the history Lambda's hourly task, once, and compaction counts each event once."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from pyspark.sql import SparkSession

from stacks.history_capture import HISTORY_FAILED_RECORDS_METRIC
from sundial.clock import ManualClock
from sundial.history.capture import HistoryEvent
from sundial.model.submission import SubmitJob
from sundial.wiring import Dependencies
from sundial_history.jobs import run_compaction
from tests.support import TABLE, FakeLambdaContext, StreamReader, load_handler
from tests.unit.history.test_capture import BUCKET, PREFIX, record, stream

__all__ = ["stream"]  # the fixture, shared with the capture tests

history_lambda = load_handler("history")
FAILED_KEY = "aws/lambda/4f6c-mapping/shardId-0001/2026/11/21/12/2026-11-21T12:00:00.000Z-1a2b"
ENVIRON = {"SUNDIAL_HISTORY_BUCKET": BUCKET, "SUNDIAL_HISTORY_PREFIX": PREFIX}


@pytest.fixture(autouse=True)
def _history_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)


def keys() -> set[str]:
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def all_events() -> list[HistoryEvent]:
    """Every event under history/, in the order written (a duplicate counts twice)."""
    s3 = boto3.client("s3")
    return [
        HistoryEvent.model_validate_json(line)
        for key in sorted(keys())
        if key.startswith(f"{PREFIX}/")
        for line in gzip.decompress(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        .decode()
        .splitlines()
    ]


def failed_batch(event: dict[str, Any], *, payload_as_text: bool = True) -> bytes:
    """What Lambda writes to an S3 on-failure destination for a stream batch it gave up on:
    the invocation record (metadata) with the invocation's event as `payload`."""
    records = event["Records"]
    return json.dumps(
        {
            "requestContext": {
                "requestId": "c9a2c1f0-0000-4000-8000-000000000001",
                "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:history",
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": 11,
            },
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "version": "1.0",
            "timestamp": "2026-11-21T12:00:00.000Z",
            "DDBStreamBatchInfo": {
                "shardId": "shardId-0001",
                "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
                "approximateArrivalOfFirstRecord": "2026-11-21T12:00:00Z",
                "approximateArrivalOfLastRecord": "2026-11-21T12:00:00Z",
                "batchSize": len(records),
                "streamArn": records[0]["eventSourceARN"],
            },
            "payload": json.dumps(event) if payload_as_text else event,
        }
    ).encode()


def _replay() -> dict[str, Any]:
    result: dict[str, Any] = history_lambda.handler(
        {"replay_failed_batches": True}, FakeLambdaContext()
    )
    return result


def _three_jobs_whose_batch_failed_after_a_partial_write(
    deps: Dependencies, stream: StreamReader
) -> dict[str, Any]:
    for _ in range(3):
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    event = stream.next_event()
    # The first record's event was written before the rest of the batch failed for good
    assert record({"Records": event["Records"][:1]}) == {"batchItemFailures": []}
    boto3.client("s3").put_object(Bucket=BUCKET, Key=FAILED_KEY, Body=failed_batch(event))
    return event


def test_a_failed_batch_is_replayed_into_the_history_once(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a batch of three job submissions that failed after its first event was written
    event = _three_jobs_whose_batch_failed_after_a_partial_write(deps, stream)
    expected_ids = {r["eventID"] for r in event["Records"]}
    # When the hourly replay runs
    report = _replay()
    # Then all three events are in history/ with their stream ids (one of them twice, which
    # compaction drops: see the Spark test below), and the failed batch is marked replayed
    assert report == {"replayed": 1, "already_replayed": 0, "events": 3, "unreadable": {}}
    assert {e.event_id for e in all_events()} == expected_ids
    assert len(all_events()) == 4
    s3 = boto3.client("s3")
    assert s3.head_object(Bucket=BUCKET, Key=f"replayed/{FAILED_KEY}")["ContentLength"] == 0
    assert s3.head_object(Bucket=BUCKET, Key=FAILED_KEY)  # kept for the post-mortem
    # And the next run replays nothing again
    objects = keys()
    assert _replay() == {"replayed": 0, "already_replayed": 1, "events": 0, "unreadable": {}}
    assert keys() == objects


def test_a_payload_given_as_an_object_is_read_too(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    event = stream.next_event()
    body = failed_batch(event, payload_as_text=False)
    boto3.client("s3").put_object(Bucket=BUCKET, Key=FAILED_KEY, Body=body)
    assert _replay()["events"] == 1
    assert [e.to_status for e in all_events()] == ["pending"]


def test_a_batch_that_still_cannot_be_read_is_kept_for_the_next_run(
    deps: Dependencies, clock: ManualClock, stream: StreamReader
) -> None:
    # Given a failed batch with a job item that has no queue (corrupt) after a good one,
    # and an object that is not a failed-batch record at all
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    boto3.client("dynamodb").put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "shard#3"},
            "sk": {"S": "1795276800000#01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"},
            "status": {"S": "pending"},
        },
    )
    event = stream.next_event()
    s3 = boto3.client("s3")
    s3.put_object(Bucket=BUCKET, Key=FAILED_KEY, Body=failed_batch(event))
    s3.put_object(Bucket=BUCKET, Key="aws/lambda/other/not-a-record", Body=b"{}")
    # When the replay runs
    report = _replay()
    # Then the good event is written, both objects are reported unreadable with the reason,
    # and neither is marked, so the next run (after a fix) tries them again
    assert report["replayed"] == 0 and report["events"] == 1
    assert set(report["unreadable"]) == {FAILED_KEY, "aws/lambda/other/not-a-record"}
    assert report["unreadable"][FAILED_KEY].startswith("1 records unreadable")
    assert [k for k in keys() if k.startswith("replayed/")] == []
    assert _replay()["unreadable"] == report["unreadable"]


def test_the_history_lambda_refuses_an_event_it_does_not_know(deps: Dependencies) -> None:
    with pytest.raises(ValueError, match="replay_failed_batches"):
        history_lambda.handler({"something": "else"}, FakeLambdaContext())


@pytest.mark.spark
def test_compaction_counts_a_replayed_event_once(
    deps: Dependencies,
    clock: ManualClock,
    stream: StreamReader,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    # Given the partial write and the replay of the same batch (one event is there twice)
    event = _three_jobs_whose_batch_failed_after_a_partial_write(deps, stream)
    _replay()
    s3 = boto3.client("s3")
    for key in keys():
        if key.startswith(f"{PREFIX}/"):
            local = tmp_path / "raw" / key
            local.parent.mkdir(parents=True, exist_ok=True)
            body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            local.write_bytes(gzip.compress(gzip.decompress(body)))
    # When the day is compacted
    run_compaction(
        spark,
        raw_path=str(tmp_path / "raw" / PREFIX),
        curated_path=str(tmp_path / "curated"),
        dates="all",
    )
    # Then the curated history holds each of the three events once
    curated = spark.read.parquet(str(tmp_path / "curated"))
    assert sorted(r.event_id for r in curated.select("event_id").collect()) == sorted(
        r["eventID"] for r in event["Records"]
    )


def test_records_the_function_fails_are_counted_for_their_alarm(
    deps: Dependencies,
    clock: ManualClock,
    stream: StreamReader,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a batch with a record the history function cannot read (a job without a queue)
    boto3.client("dynamodb").put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "shard#3"},
            "sk": {"S": "1795276800000#01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"},
            "status": {"S": "pending"},
        },
    )
    capsys.readouterr()
    # When the history Lambda handles it
    response = history_lambda.handler(stream.next_event(), FakeLambdaContext())
    # Then it reports the record, and writes the metric the history/failed-records alarm
    # watches (stacks.monitoring), once, as an EMF line
    assert len(response["batchItemFailures"]) == 1
    emf = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{") and "_aws" in line
    ]
    assert [line["HistoryRecordsFailed"] for line in emf] == [[1.0]]
    [metric] = emf[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    assert metric["Name"] == HISTORY_FAILED_RECORDS_METRIC


def test_a_batch_without_failures_writes_no_metric(
    deps: Dependencies,
    clock: ManualClock,
    stream: StreamReader,
    capsys: pytest.CaptureFixture[str],
) -> None:
    deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    capsys.readouterr()
    assert history_lambda.handler(stream.next_event(), FakeLambdaContext()) == {
        "batchItemFailures": []
    }
    assert "HistoryRecordsFailed" not in capsys.readouterr().out
