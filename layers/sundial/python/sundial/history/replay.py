"""Failed history batches back into the history: what the stream's on-failure destination put
under `aws/lambda/` in the raw bucket, replayed into `history/` where compaction reads.

A stream batch the history Lambda still failed after its retries is not lost: Lambda writes it,
records and all, to the raw bucket (stacks/history_capture.py). Until it is replayed it is not
in the curated history or the reports. The replay runs every hour (and on demand: the runbook,
docs/operations.md#history-failed-batches):

- each failed-batch object is read, its records turned into events exactly as the stream's are
  (`capture.event_from_record`), and written with the same writer, so an event has the same id
  and lands in the same day's folder as if it had never failed;
- no double counting: event ids are the stream records' own, so an event written before the
  batch failed (a partial batch) or replayed twice is dropped by compaction's deduplication
  by event id, and an identical replay overwrites its own object (deterministic keys);
- a replayed object gets a marker under `replayed/` (the object itself stays, for the
  post-mortem, until the bucket's lifecycle expires it), so the next run skips it;
- an object whose records still cannot be read keeps no marker: its readable events are
  written, the rest are logged, and the next run tries again (after a fix, it succeeds).

Events of a day already compacted reach the curated table when that day is compacted again
(`--dates <day>`; the daily run recompacts the two days before today).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.parser.models import (
    DynamoDBStreamLambdaOnFailureDestinationModel,
)
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from sundial.history.capture import HistoryEvent, HistoryWriter, event_from_record

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

logger = Logger(child=True)

# Lambda's own key prefix for a stream's failed batches, and where replayed ones are marked.
FAILED_BATCHES_PREFIX = "aws/lambda"
REPLAYED_PREFIX = "replayed"


class FailedBatch(DynamoDBStreamLambdaOnFailureDestinationModel):
    """Lambda's record of a stream batch it gave up on. An S3 destination (unlike SQS or SNS)
    also gets the invocation's event itself, `payload`, the batch's records."""

    payload: dict[str, Any]

    @field_validator("payload", mode="before")
    @classmethod
    def _decoded(cls, value: object) -> object:
        # The invocation record's payload is the event as Lambda serialized it.
        return json.loads(value) if isinstance(value, str | bytes) else value


class ReplayRequest(BaseModel):
    """The scheduled event that starts a replay (the EventBridge rule's input)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    replay_failed_batches: Literal[True]


@dataclass
class ReplayReport:
    replayed: list[str] = field(default_factory=list)  # failed-batch objects, now in history
    already_replayed: int = 0
    events: int = 0
    unreadable: dict[str, str] = field(default_factory=dict)  # object key -> why, to retry

    def summary(self) -> dict[str, object]:
        return {
            "replayed": len(self.replayed),
            "already_replayed": self.already_replayed,
            "events": self.events,
            "unreadable": self.unreadable,
        }


class FailedBatchReplayer:
    """Replays every failed-batch object of the raw bucket not replayed yet (module doc)."""

    def __init__(self, client: S3Client, bucket: str, writer: HistoryWriter) -> None:
        self._s3 = client
        self._bucket = bucket
        self._writer = writer

    def replay(self) -> ReplayReport:
        report = ReplayReport()
        marked = self._keys(f"{REPLAYED_PREFIX}/")
        done = {key.removeprefix(f"{REPLAYED_PREFIX}/") for key in marked}
        for key in self._keys(f"{FAILED_BATCHES_PREFIX}/"):
            if key in done:
                report.already_replayed += 1
                continue
            self._replay_one(key, report)
        if report.replayed or report.unreadable:
            logger.warning("failed history batches replayed", extra=report.summary())
        return report

    def _replay_one(self, key: str, report: ReplayReport) -> None:
        body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        try:
            batch = FailedBatch.model_validate_json(body)
        except ValidationError as error:
            report.unreadable[key] = f"not a failed-batch record: {error.error_count()} errors"
            return
        events: list[HistoryEvent] = []
        problems: list[str] = []
        for raw in batch.payload.get("Records", []):
            try:
                event = event_from_record(DynamoDBRecord(raw))
            except (ValueError, KeyError, TypeError) as error:
                problems.append(f"{type(error).__name__}: {error}")
                continue
            if event is not None:
                events.append(event)
        if events:
            self._writer.write(events)
            report.events += len(events)
        if problems:
            report.unreadable[key] = f"{len(problems)} records unreadable: {problems[0]}"
            return
        self._s3.put_object(Bucket=self._bucket, Key=f"{REPLAYED_PREFIX}/{key}", Body=b"")
        report.replayed.append(key)

    def _keys(self, prefix: str) -> list[str]:
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=prefix
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]
