"""What invokes functions besides HTTP: EventBridge schedule rules, and SQS and DynamoDB
stream event source mappings, as the template declares them."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from sundial.local.functions import FunctionHost, InvocationError
from sundial.local.template import ACCOUNT_ID, REGION, EventSourceSpec, ScheduleSpec

log = logging.getLogger("sundial.local")
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> int:
    match = _RATE.match(expression)
    if not match:
        raise ValueError(f"schedule {expression!r}: only rate(...) expressions are emulated")
    return int(match.group(1)) * _UNIT_S[match.group(2).rstrip("s")]


class ScheduleRunner(threading.Thread):
    """Fires a rule's targets now and then every period, with EventBridge's event shape (or
    the target's constant input, when it has one)."""

    def __init__(
        self, spec: ScheduleSpec, targets: list[FunctionHost], stop: threading.Event
    ) -> None:
        super().__init__(name=f"rule:{spec.name}", daemon=True)
        self.spec = spec
        self.period_s = rate_seconds(spec.expression)
        self.targets = targets
        self._halt = stop
        self.fired = 0

    def run(self) -> None:
        next_at = time.monotonic()
        while not self._halt.is_set():
            event = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": "Scheduled Event",
                "source": "aws.events",
                "account": ACCOUNT_ID,
                "time": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "region": REGION,
                "resources": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{self.spec.name}"],
                "detail": {},
            }
            inputs = self.spec.inputs or (None,) * len(self.targets)
            for target, constant in zip(self.targets, inputs, strict=True):
                try:
                    target.invoke(json.loads(constant) if constant is not None else event)
                except InvocationError as error:
                    log.error("rule %s -> %s failed: %s", self.spec.name, target.spec.name, error)
            self.fired += 1
            next_at += self.period_s
            self._halt.wait(max(0.0, next_at - time.monotonic()))


class QueuePoller(threading.Thread):
    """An SQS event source mapping: long-polls the queue, batches up to BatchSize within the
    batching window, invokes the function, and deletes what succeeded. With
    ReportBatchItemFailures, the items the function lists stay for redelivery after their
    visibility timeout; if the function fails, the whole batch does."""

    def __init__(
        self,
        spec: EventSourceSpec,
        *,
        queue_url: str,
        queue_arn: str,
        target: FunctionHost,
        sqs: Any,
        stop: threading.Event,
        counts: Counter[str],
        queue_name: str,
    ) -> None:
        super().__init__(name=f"esm:{queue_name}", daemon=True)
        self.spec = spec
        self._url, self._arn = queue_url, queue_arn
        self._target = target
        self._sqs = sqs
        self._halt = stop
        self._counts = counts
        self._queue = queue_name

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                messages = self._collect()
                if messages:
                    self._deliver(messages)
            except Exception:  # keep polling, as Lambda's pollers do
                if not self._halt.is_set():
                    log.exception("event source mapping on %s", self._queue)
                    self._halt.wait(1)

    def _collect(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        window_ends = None
        while len(messages) < self.spec.batch_size and not self._halt.is_set():
            wait = (
                1 if window_ends is None else max(0, min(1, round(window_ends - time.monotonic())))
            )
            response = self._sqs.receive_message(
                QueueUrl=self._url,
                MaxNumberOfMessages=min(10, self.spec.batch_size - len(messages)),
                WaitTimeSeconds=wait,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            messages.extend(received)
            if messages and window_ends is None:
                window_ends = time.monotonic() + self.spec.batching_window_s
            if messages and (not received or time.monotonic() >= (window_ends or 0)):
                break
        return messages

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        event = {"Records": [sqs_record(m, self._arn) for m in messages]}
        try:
            result = self._target.invoke(event)
        except InvocationError as error:
            log.error("%s failed a batch of %d: %s", self._target.spec.name, len(messages), error)
            self._counts[f"{self._queue}:failed"] += len(messages)
            return  # every message comes back after its visibility timeout
        failed: set[str] = set()
        if self.spec.report_batch_item_failures and isinstance(result, dict):
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures") or []}
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self._sqs.delete_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + 10])
                ],
            )
        self._counts[f"{self._queue}:done"] += len(done)
        self._counts[f"{self._queue}:failed"] += len(failed)


def sqs_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """One record of the event an SQS event source mapping sends, from a received message."""
    body = message["Body"]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": message.get("Attributes", {}),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


# Locally a stream's batching window is capped so history shows up within seconds; in AWS the
# mapping's own window applies.
LOCAL_MAX_STREAM_WINDOW_S = 2
_STREAM_POLL_S = 0.5
_STREAM_RETRY_WAIT_S = 0.5


class StreamPoller(threading.Thread):
    """A DynamoDB stream event source mapping: reads every shard of the table's stream from
    TRIM_HORIZON, batches records (BatchSize, the batching window capped at
    LOCAL_MAX_STREAM_WINDOW_S) and invokes the function with Lambda's event shape. With
    ReportBatchItemFailures it resumes from the first record the function names; a failed
    invocation is retried, the batch bisected first when BisectBatchOnFunctionError is set,
    up to MaximumRetryAttempts; then the batch goes to the S3 on-failure destination (if the
    mapping has one) as Lambda writes it there, and the shard moves on. Event filters are not
    applied: the function must (and Sundial's does) ignore records it has no use for."""

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
    ) -> None:
        super().__init__(name=f"esm:{name}", daemon=True)
        self.spec = spec
        self._arn = stream_arn
        self._target = target
        self._streams = streams
        self._s3 = s3
        self._halt = stop
        self._counts = counts
        self._name = name
        self._uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{stream_arn}|{target.spec.arn}"))

    def run(self) -> None:
        iterators: dict[str, str] = {}
        pending: dict[str, list[dict[str, Any]]] = {}
        first_seen: dict[str, float] = {}
        window = min(self.spec.batching_window_s, LOCAL_MAX_STREAM_WINDOW_S)
        while not self._halt.is_set():
            try:
                for shard in self._streams.describe_stream(StreamArn=self._arn)[
                    "StreamDescription"
                ]["Shards"]:
                    shard_id = shard["ShardId"]
                    if shard_id not in iterators:
                        iterators[shard_id] = self._streams.get_shard_iterator(
                            StreamArn=self._arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                        )["ShardIterator"]
                    response = self._streams.get_records(
                        ShardIterator=iterators[shard_id], Limit=1000
                    )
                    iterators[shard_id] = response["NextShardIterator"]
                    records = [stream_record(r, self._arn) for r in response.get("Records", [])]
                    if records:
                        pending.setdefault(shard_id, []).extend(records)
                        first_seen.setdefault(shard_id, time.monotonic())
                    queued = pending.get(shard_id, [])
                    due = time.monotonic() - first_seen.get(shard_id, 0) >= window
                    while queued and (len(queued) >= self.spec.batch_size or due):
                        batch, queued = (
                            queued[: self.spec.batch_size],
                            queued[self.spec.batch_size :],
                        )
                        self._process(shard_id, batch, attempt=0)
                    pending[shard_id] = queued
                    if not queued:
                        first_seen.pop(shard_id, None)
            except Exception:  # keep polling, as Lambda's pollers do
                if not self._halt.is_set():
                    log.exception("stream event source mapping %s", self._name)
            self._halt.wait(_STREAM_POLL_S)

    def _process(self, shard_id: str, records: list[dict[str, Any]], *, attempt: int) -> None:
        """Deliver `records` until each is processed or handed to the failure destination."""
        if self._halt.is_set():
            return
        retries_left = self.spec.max_retries < 0 or attempt < self.spec.max_retries
        try:
            result = self._target.invoke({"Records": records})
        except InvocationError as error:
            log.error("%s failed a batch of %d: %s", self._name, len(records), error)
            if not retries_left:
                self._to_failure_destination(shard_id, records, "RetryAttemptsExhausted")
                return
            self._halt.wait(_STREAM_RETRY_WAIT_S)
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
        if first_failed is None:
            return
        remaining = records[first_failed:]
        if not retries_left:
            self._to_failure_destination(shard_id, remaining, "RetryAttemptsExhausted")
            return
        self._halt.wait(_STREAM_RETRY_WAIT_S)
        self._process(shard_id, remaining, attempt=attempt + 1)

    def _to_failure_destination(
        self, shard_id: str, records: list[dict[str, Any]], condition: str
    ) -> None:
        self._counts[f"{self._name}:failed"] += len(records)
        destination = self.spec.on_failure_arn
        if not destination or not destination.startswith("arn:aws:s3:::"):
            log.error("%s dropped %d records (no S3 destination)", self._name, len(records))
            return
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
