"""A DynamoDB stream event source mapping, as Lambda runs one, for the local runtime; and how
it is doing (StreamHealth), which the log, the live view and `make report` show.

A reader that stops, falls behind or keeps failing a batch is never silent (issue 26: the
history function once stopped writing and nothing said so):
- Its thread ending for any reason is logged as CRITICAL and kept in `health.stopped`.
- An idle reader checks every VERIFY_EVERY_S that a fresh iterator from its last record finds
  nothing more. If one does, its own iterator went stale (moto once replaced a table's stream
  shard under its readers; in AWS an iterator expires after 15 minutes): it logs an error and
  reads on from its last record, as Lambda does from its checkpoint. An iterator that expired
  (ExpiredIteratorException) is replaced the same way.
- A batch failing for STUCK_AFTER_S or longer is reported, with the error, until it succeeds or
  goes to the on-failure destination; records sent there are counted.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from sundial.local.functions import FunctionHost, InvocationError
from sundial.local.template import EventSourceSpec

log = logging.getLogger("sundial.local")

# Locally a stream's batching window is capped so history shows up within seconds; in AWS the
# mapping's own window applies.
LOCAL_MAX_STREAM_WINDOW_S = 2
VERIFY_EVERY_S = 10.0
STUCK_AFTER_S = 30.0
_POLL_S = 0.5
_RETRY_WAIT_S = 0.5
_EXPIRED = frozenset({"ExpiredIteratorException", "TrimmedDataAccessException"})

# Sees every record read, before it is batched (the live view's counts).
RecordObserver = Callable[[Sequence[dict[str, Any]]], None]


@dataclass
class StreamHealth:
    """What one stream reader has done so far, and what is wrong with it now."""

    read: int = 0  # records read from the stream
    delivered: int = 0  # records the function has taken (it may ignore some)
    to_destination: int = 0  # records handed to the on-failure destination, or dropped
    resyncs: int = 0  # times its iterator was found stale and replaced
    failing: int = 0  # records in the batch that is failing now
    failing_since: float | None = None  # time.monotonic() of that batch's first failure
    last_error: str | None = None
    stopped: str | None = None  # why the reader ended; None while it runs

    def problem(self, now: float | None = None) -> str | None:
        """The one thing a person must know now, or None while the reader is well."""
        now = time.monotonic() if now is None else now
        if self.stopped is not None:
            return f"STOPPED ({self.stopped}): nothing is read from the stream"
        if self.failing_since is not None and now - self.failing_since >= STUCK_AFTER_S:
            return (
                f"a batch of {self.failing} records has failed for "
                f"{now - self.failing_since:.0f} s: {self.last_error}"
            )
        if self.to_destination:
            return f"{self.to_destination} records went to the on-failure destination"
        return None


@dataclass
class _Shard:
    shard_id: str
    iterator: str | None = None
    last_sequence: str | None = None  # of the last record read
    checked_at: float = field(default_factory=time.monotonic)
    ended: bool = False
    pending: list[dict[str, Any]] = field(default_factory=list)
    first_pending_at: float | None = None


class StreamPoller(threading.Thread):
    """Reads every shard of the table's stream from TRIM_HORIZON, batches records (BatchSize,
    the batching window capped at LOCAL_MAX_STREAM_WINDOW_S) and invokes the function with
    Lambda's event shape. With ReportBatchItemFailures it resumes from the first record the
    function names; a failed invocation is retried, the batch bisected first when
    BisectBatchOnFunctionError is set, up to MaximumRetryAttempts; then the batch goes to the
    S3 on-failure destination (if the mapping has one) as Lambda writes it there, and the shard
    moves on. Event filters are not applied: the function must (and Sundial's does) ignore
    records it has no use for."""

    def __init__(
        self,
        spec: EventSourceSpec,
        *,
        stream_arn: str,
        target: FunctionHost,
        streams: Any,
        s3: Any,
        stop: threading.Event,
        counts: Counter[str],
        name: str,
        observers: Sequence[RecordObserver] = (),
    ) -> None:
        super().__init__(name=f"esm:{name}", daemon=True)
        self.spec = spec
        self.health = StreamHealth()
        self._arn = stream_arn
        self._target = target
        self._streams = streams
        self._s3 = s3
        self._halt = stop
        self._counts = counts
        self._name = name
        self._observers = list(observers)
        self._uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{stream_arn}|{target.spec.arn}"))
        self._window = min(spec.batching_window_s, LOCAL_MAX_STREAM_WINDOW_S)

    def run(self) -> None:
        try:
            self._poll()
        except BaseException as error:  # the reader must never end unseen
            self.health.stopped = f"{type(error).__name__}: {error}"
            log.critical(
                "stream event source mapping %s stopped: no more history is written",
                self._name,
                exc_info=True,
            )

    def _poll(self) -> None:
        shards: dict[str, _Shard] = {}
        while not self._halt.is_set():
            try:
                description = self._streams.describe_stream(StreamArn=self._arn)
                for found in description["StreamDescription"]["Shards"]:
                    shard = shards.setdefault(found["ShardId"], _Shard(found["ShardId"]))
                    if not shard.ended:
                        self._poll_shard(shard)
            except Exception as error:  # keep polling, as Lambda's pollers do
                if not self._halt.is_set():
                    self.health.last_error = f"{type(error).__name__}: {error}"
                    log.exception("stream event source mapping %s", self._name)
            self._halt.wait(_POLL_S)

    def _poll_shard(self, shard: _Shard) -> None:
        records = [stream_record(r, self._arn) for r in self._read(shard)]
        if records:
            self.health.read += len(records)
            self._observe(records)
            shard.pending.extend(records)
            if shard.first_pending_at is None:
                shard.first_pending_at = time.monotonic()
        due = (
            shard.first_pending_at is not None
            and time.monotonic() - shard.first_pending_at >= self._window
        )
        while shard.pending and (len(shard.pending) >= self.spec.batch_size or due):
            batch = shard.pending[: self.spec.batch_size]
            del shard.pending[: self.spec.batch_size]
            self._process(shard.shard_id, batch, attempt=0)
        if not shard.pending:
            shard.first_pending_at = None

    def _read(self, shard: _Shard) -> list[dict[str, Any]]:
        """The shard's next records; checks now and then that the iterator is not stale."""
        if shard.iterator is None:
            shard.iterator = self._iterator(shard)
        try:
            response = self._streams.get_records(ShardIterator=shard.iterator, Limit=1000)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in _EXPIRED:
                raise
            log.warning(
                "stream %s: its shard iterator expired; reading on from its last record", self._name
            )
            shard.iterator = None
            return []
        records: list[dict[str, Any]] = response.get("Records", [])
        if not records and time.monotonic() - shard.checked_at >= VERIFY_EVERY_S:
            response, records = self._recheck(shard, response)
        shard.iterator = response.get("NextShardIterator")
        shard.ended = shard.iterator is None  # a closed shard, read to its end
        if records:
            shard.last_sequence = records[-1]["dynamodb"]["SequenceNumber"]
            shard.checked_at = time.monotonic()
        return records

    def _recheck(
        self, shard: _Shard, response: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Read from a fresh iterator after the last record: if it finds records, the reader's
        own iterator had gone stale, and reading goes on from the fresh one."""
        shard.checked_at = time.monotonic()
        fresh = self._streams.get_records(ShardIterator=self._iterator(shard), Limit=1000)
        records: list[dict[str, Any]] = fresh.get("Records", [])
        if not records:
            return response, records
        self.health.resyncs += 1
        log.error(
            "stream event source mapping %s: its shard iterator returned nothing while the "
            "stream holds more records after sequence %s; reading on from there",
            self._name,
            shard.last_sequence,
        )
        return fresh, records

    def _iterator(self, shard: _Shard) -> str:
        position: dict[str, str] = {"ShardIteratorType": "TRIM_HORIZON"}
        if shard.last_sequence is not None:
            position = {
                "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                "SequenceNumber": shard.last_sequence,
            }
        response = self._streams.get_shard_iterator(
            StreamArn=self._arn, ShardId=shard.shard_id, **position
        )
        return str(response["ShardIterator"])

    def _observe(self, records: list[dict[str, Any]]) -> None:
        for observe in self._observers:
            try:
                observe(records)
            except Exception:  # an observer's bug must not stop the history
                log.exception("stream %s: an observer failed", self._name)

    def _process(self, shard_id: str, records: list[dict[str, Any]], *, attempt: int) -> None:
        """Deliver `records` until each is processed or handed to the failure destination."""
        if self._halt.is_set():
            return
        retries_left = self.spec.max_retries < 0 or attempt < self.spec.max_retries
        try:
            result = self._target.invoke({"Records": records})
        except InvocationError as error:
            if self._halt.is_set():
                return  # the runtime is stopping: its containers were ended under the call
            self._failed(records, str(error))
            if not retries_left:
                self._to_failure_destination(shard_id, records, "RetryAttemptsExhausted")
                return
            self._halt.wait(_RETRY_WAIT_S)
            if self.spec.bisect_on_error and len(records) > 1:
                middle = len(records) // 2
                self._process(shard_id, records[:middle], attempt=attempt + 1)
                self._process(shard_id, records[middle:], attempt=attempt + 1)
            else:
                self._process(shard_id, records, attempt=attempt + 1)
            return
        failed: set[str] = set()
        if self.spec.report_batch_item_failures and isinstance(result, dict):
            failed = {str(f["itemIdentifier"]) for f in result.get("batchItemFailures") or []}
        sequence = [r["dynamodb"]["SequenceNumber"] for r in records]
        first_failed = next((i for i, n in enumerate(sequence) if n in failed), None)
        done = len(records) if first_failed is None else first_failed
        self._counts[f"{self._name}:done"] += done
        self.health.delivered += done
        if first_failed is None:
            self.health.failing, self.health.failing_since = 0, None
            return
        remaining = records[first_failed:]
        self._failed(remaining, f"the function reported record {sequence[first_failed]} failed")
        if not retries_left:
            self._to_failure_destination(shard_id, remaining, "RetryAttemptsExhausted")
            return
        self._halt.wait(_RETRY_WAIT_S)
        self._process(shard_id, remaining, attempt=attempt + 1)

    def _failed(self, records: list[dict[str, Any]], error: str) -> None:
        health = self.health
        health.failing, health.last_error = len(records), error
        if health.failing_since is None:
            health.failing_since = time.monotonic()
        log.error("%s failed a batch of %d: %s", self._name, len(records), error)

    def _to_failure_destination(
        self, shard_id: str, records: list[dict[str, Any]], condition: str
    ) -> None:
        self._counts[f"{self._name}:failed"] += len(records)
        self.health.to_destination += len(records)
        self.health.failing, self.health.failing_since = 0, None
        destination = self.spec.on_failure_arn
        if not destination or not destination.startswith("arn:aws:s3:::"):
            log.error("%s dropped %d records (no S3 destination)", self._name, len(records))
            return
        log.error(
            "%s: %d records of shard %s went to the on-failure destination %s",
            self._name,
            len(records),
            shard_id,
            destination,
        )
        now = datetime.now(tz=UTC)
        key = (
            f"aws/lambda/{self._uuid}/{shard_id}/{now:%Y/%m/%d}/"
            f"{now:%Y-%m-%dT%H.%M.%S}-{uuid.uuid4()}"
        )
        sequence = [r["dynamodb"]["SequenceNumber"] for r in records]
        body = {
            "version": "1.0",
            "timestamp": now.isoformat(),
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self._target.spec.arn,
                "condition": condition,
                "approximateInvokeCount": self.spec.max_retries + 1,
            },
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
            "DDBStreamBatchInfo": {
                "shardId": shard_id,
                "startSequenceNumber": sequence[0],
                "endSequenceNumber": sequence[-1],
                "batchSize": len(records),
                "streamArn": self._arn,
            },
            "payload": json.dumps({"Records": records}, default=str),
        }
        self._s3.put_object(
            Bucket=destination.removeprefix("arn:aws:s3:::"),
            Key=key,
            Body=json.dumps(body).encode(),
        )


def stream_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record read with GetRecords, as a DynamoDB stream event source mapping hands it to a
    function: the same fields, the creation time in epoch seconds, and eventSourceARN."""
    stream = dict(record["dynamodb"])
    created = stream.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        stream["ApproximateCreationDateTime"] = int(created.timestamp())
    return {**record, "dynamodb": stream, "eventSourceARN": stream_arn}
