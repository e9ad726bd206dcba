"""The local runtime's job history: where it is in the emulator's S3, copying it to a local
folder (local Spark cannot read S3 here: no S3A connector jars), and checking that it is
complete against the table's stream, so `make report` never reports a partial history as if it
were the whole (issue 26: it once counted 242 events where the stream held 1,826)."""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from sundial.history.capture import HistoryEvent, event_from_record
from sundial.local.streams import stream_record
from sundial.local.template import LocalTemplate

HISTORY_BUCKET_VARIABLE = "SUNDIAL_HISTORY_BUCKET"
HISTORY_PREFIX_VARIABLE = "SUNDIAL_HISTORY_PREFIX"


@dataclass(frozen=True)
class HistoryLocation:
    bucket: str
    prefix: str


def history_location(template: LocalTemplate) -> HistoryLocation:
    """The raw history bucket and prefix, as the template gives them to the history function.
    The template's names must have been assigned (provision.assign_names)."""
    for lid in template.of_type("AWS::Lambda::Function"):
        variables = template.props(lid).get("Environment", {}).get("Variables", {})
        if HISTORY_BUCKET_VARIABLE in variables:
            return HistoryLocation(
                bucket=str(template.resolve(variables[HISTORY_BUCKET_VARIABLE])),
                prefix=str(template.resolve(variables.get(HISTORY_PREFIX_VARIABLE, "history"))),
            )
    raise LookupError(f"no function in the template has {HISTORY_BUCKET_VARIABLE}")


def export_history(s3: Any, location: HistoryLocation, destination: Path) -> int:
    """Copy every raw history object to `destination/dt=.../...`. Returns the object count."""
    paginator = s3.get_paginator("list_objects_v2")
    copied = 0
    for page in paginator.paginate(Bucket=location.bucket, Prefix=f"{location.prefix}/"):
        for entry in page.get("Contents", []):
            relative = entry["Key"].removeprefix(f"{location.prefix}/")
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(location.bucket, entry["Key"], str(target))
            copied += 1
    return copied


def table_name(template: LocalTemplate) -> str:
    """The job table's emulator name (names assigned, as for history_location)."""
    [table] = list(template.of_type("AWS::DynamoDB::Table"))
    return str(template.physical[table])


@dataclass(frozen=True)
class Completeness:
    """The history in S3 against the table's stream: every event the stream's records make
    (as the history function makes them) should be in S3."""

    expected: int  # history events the stream's records make
    found: int  # of those, in S3
    missing: tuple[HistoryEvent, ...]  # the rest, oldest first
    unreadable: int  # job records the history function cannot read (they fail, as in AWS)

    @property
    def complete(self) -> bool:
        return not self.missing

    def summary(self) -> str:
        if self.complete:
            return f"complete: all {self.expected:,} events of the table's stream are in S3"
        first = self.missing[0]
        return (
            f"PARTIAL: S3 holds {self.found:,} of the {self.expected:,} history events the "
            f"table's stream holds; {len(self.missing):,} are missing (the first: job "
            f"{first.job_id} -> {first.to_status} at {first.event_date}). The history's stream "
            "reader may have stopped or fallen behind: see `make run`'s live table and its log."
        )


def stream_events(dynamodb: Any, streams: Any, table: str) -> tuple[list[HistoryEvent], int]:
    """Every history event the table's stream holds, read from its start (the local stream
    keeps every record), and the number of job records that cannot be read."""
    arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    events: list[HistoryEvent] = []
    unreadable = 0
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            response = streams.get_records(ShardIterator=iterator, Limit=1000)
            for raw in response.get("Records", []):
                try:
                    event = event_from_record(DynamoDBRecord(stream_record(raw, arn)))
                except ValueError:
                    unreadable += 1
                    continue
                if event is not None:
                    events.append(event)
            if not response.get("Records"):
                break  # an open shard's end (moto never closes one)
            iterator = response.get("NextShardIterator")
    return events, unreadable


class HistoryInS3:
    """The event ids of the raw history in S3, re-read as objects are added (each object once)."""

    def __init__(self, s3: Any, location: HistoryLocation) -> None:
        self._s3 = s3
        self._location = location
        self._read: set[str] = set()
        self.event_ids: set[str] = set()

    def refresh(self) -> set[str]:
        paginator = self._s3.get_paginator("list_objects_v2")
        bucket, prefix = self._location.bucket, f"{self._location.prefix}/"
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for entry in page.get("Contents", []):
                if entry["Key"] in self._read:
                    continue
                body = self._s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
                for line in gzip.decompress(body).decode().splitlines():
                    if line.strip():
                        self.event_ids.add(json.loads(line)["event_id"])
                self._read.add(entry["Key"])
        return self.event_ids


def check_history(
    expected: list[HistoryEvent], unreadable: int, in_s3: HistoryInS3, *, wait_s: float
) -> Completeness:
    """Compare; while something is missing, read S3 again for up to `wait_s` (the stream's
    last records may be on their way: the reader batches for up to 2 s)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = in_s3.refresh()
        missing = [e for e in expected if e.event_id not in found]
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(1)
    missing.sort(key=lambda e: e.event_at_ms)
    return Completeness(
        expected=len(expected),
        found=len(expected) - len(missing),
        missing=tuple(missing),
        unreadable=unreadable,
    )
