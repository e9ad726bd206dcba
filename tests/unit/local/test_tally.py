"""The live table's counts (sundial.local.tally), kept from the table's stream, equal what a
Scan of the table counts, through submits, a cancel, a move, a DAG and its progress."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.history.capture import is_job_key
from sundial.local.tally import JobTally
from sundial.model.dag import SubmitDag
from sundial.model.submission import ChangeJob, SubmitJob
from sundial.wiring import Dependencies
from tests.support import DAILY_REPORT, TABLE, create_table


@pytest.fixture
def streams(deps: Dependencies) -> Any:
    """The job table made anew with its stream (moto gives a stream enabled later no shard)."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.delete_table(TableName=TABLE)
    create_table(dynamodb, stream=True)
    return boto3.client(
        "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
    )


def _read_all(streams: Any) -> list[dict[str, Any]]:
    arn = boto3.client("dynamodb").describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    [shard] = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator, Limit=1000)[
        "Records"
    ]
    return records


def _scanned() -> tuple[dict[str, Counter[str]], dict[str, Counter[str]]]:
    """Jobs per queue and status, and DAG nodes per DAG: what the live table used to Scan."""
    jobs: dict[str, Counter[str]] = defaultdict(Counter)
    dags: dict[str, Counter[str]] = defaultdict(Counter)
    for page in boto3.client("dynamodb").get_paginator("scan").paginate(TableName=TABLE):
        for item in page["Items"]:
            if not is_job_key(item["pk"]["S"], item["sk"]["S"]):
                continue
            if "retry_of" in item or "moved_to" in item:
                continue
            jobs[item["queue"]["S"]][item["status"]["S"]] += 1
            if "dag_id" in item:
                dags[item["dag_id"]["S"]][item["status"]["S"]] += 1
    return dict(jobs), dict(dags)


def test_the_counts_kept_from_the_stream_are_what_a_scan_counts(
    deps: Dependencies, clock: ManualClock, streams: Any
) -> None:
    # Given jobs submitted, one cancelled, one moved, and a DAG whose first node was released
    jobs = [
        deps.jobs.submit(SubmitJob.model_validate({"queue": q, "delay_seconds": d})).job
        for q, d in (("default", 3600), ("email", 0), ("default", 7200), ("email", 5000))
    ]
    deps.jobs.cancel(jobs[0].id)
    deps.moves.move(jobs[2].id, ChangeJob.model_validate({"delay_seconds": 90_000}))
    dag = deps.dags.submit(SubmitDag.model_validate(DAILY_REPORT))
    # When every stream record is counted
    tally = JobTally()
    tally.observe(_read_all(streams))
    counts = tally.counts()
    # Then the counts are the table's, job by job and node by node
    jobs_now, dags_now = _scanned()
    assert counts.jobs == jobs_now
    assert {dag_id: d.nodes for dag_id, d in counts.dags.items()} == dags_now
    assert counts.dags[dag.id].name == DAILY_REPORT["name"]
    # (the moved job once, at its new time: its origin became a pointer, which is no job)
    assert (counts.jobs["default"]["cancelled"], counts.jobs["default"]["pending"]) == (1, 1)
