"""What invokes functions besides HTTP: EventBridge schedule rules and SQS event source
mappings, as the template declares them (a table's stream: sundial.local.streams)."""

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
            if self._halt.is_set():
                return  # the runtime is stopping: its containers were ended under the call
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
