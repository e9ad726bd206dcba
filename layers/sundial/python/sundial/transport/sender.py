"""Hands jobs to their team's SQS queue: SendMessageBatch, 10 per call, with DelaySeconds
set so each message becomes visible at its job's due second.

A message that is not accepted is either to be retried (throttled, SQS unreachable, an SQS
internal error: nothing is wrong with the job) or rejected (its queue is not configured, its
job cannot be made into a message, SQS refused the entry as the sender's fault: sending it
again cannot succeed). A rejected job affects only itself; the others are sent."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from sundial.model.job import Job, Priority
from sundial.model.placement import delay_seconds
from sundial.transport.envelope import envelope_body
from sundial.transport.routes import QueueRoutes

if TYPE_CHECKING:
    pass

SQS_BATCH = 10
SQS_BATCH_BYTES = 1_048_576  # SendMessageBatch: all bodies of one call together


@dataclass(frozen=True, slots=True)
class Outgoing:
    job: Job
    attempt: int = 1
    due_ms: int | None = None  # when this attempt is due; by default the job's due time
    # A paced job's send slot (sundial.dispatch.fairness): visible then, not at its due time.
    # The envelope's run_at stays the due time, so a consumer sees the pacing as lateness.
    slot_ms: int | None = None

    @property
    def run_at_ms(self) -> int:
        """When this attempt is due (the envelope's run_at)."""
        return self.job.due_ms if self.due_ms is None else self.due_ms

    @property
    def visible_at_ms(self) -> int:
        """When the message is to become visible: its due time, or its later send slot."""
        return max(self.run_at_ms, self.slot_ms or 0)


@dataclass(frozen=True, slots=True)
class Rejected:
    message: Outgoing
    error_type: str  # e.g. UnknownQueue, MalformedJob, or SQS's error code
    reason: str  # for an operator: shown in the job's history


@dataclass(slots=True)
class SendResult:
    retry: list[Outgoing] = field(default_factory=list)  # not sent; may succeed next time
    rejected: list[Rejected] = field(default_factory=list)  # not sent; never will be as is
    # Of each message sent: when SQS makes it visible (sent + DelaySeconds) minus its due
    # time (a paced job's slot), in ms (0 or more: a message is never visible early). The
    # dispatch lateness metric: it measures Sundial, not the pacing a queue asked for.
    lateness_ms: list[int] = field(default_factory=list)

    @property
    def failed(self) -> list[Outgoing]:
        return self.retry + [r.message for r in self.rejected]


class QueueSender(QueueRoutes):
    """Sends jobs to their SQS queues (routed as transport.routes says) in batches."""

    def send(
        self, outgoing: Sequence[Outgoing], *, now_ms: int | Callable[[], int]
    ) -> list[Outgoing]:
        """Send every message; return those SQS did not accept (the caller must not lose them),
        retryable or rejected alike (see `dispatch` to tell them apart)."""
        return self.dispatch(outgoing, now_ms=now_ms).failed

    def dispatch(
        self,
        outgoing: Sequence[Outgoing],
        *,
        now_ms: int | Callable[[], int],
        pool: Executor | None = None,
    ) -> SendResult:
        """Send every message; return those not accepted, as retryable or rejected.

        `now_ms` is the time now, or the clock to read it from. With a clock, each
        SendMessageBatch's DelaySeconds counts from just before that request, not from before
        the first: a flush of 100 jobs is 10 requests, and the last would otherwise surface
        the time of those before it late. Reading the clock later can only shorten a delay,
        and SQS counts it from when the request arrives, so no message is ever early.
        `pool`: send the requests on it, all at once (the sweeper's claim pool: a flush's ten
        requests then take one round trip, not ten); without it, one after another."""
        clock = now_ms if callable(now_ms) else (lambda: now_ms)
        result = SendResult()
        by_url: dict[str, list[tuple[Outgoing, str]]] = defaultdict(list)
        for message in outgoing:
            job = message.job
            if job.queue not in self._urls:
                # e.g. a queue removed from cdk.json while it still had pending jobs
                reason = f"queue {job.queue!r} is not configured"
                result.rejected.append(Rejected(message, "UnknownQueue", reason))
                continue
            try:
                body = envelope_body(job, attempt=message.attempt, run_at_ms=message.run_at_ms)
            except (ValueError, TypeError, OverflowError) as error:
                reason = f"cannot build the message: {error}"
                result.rejected.append(Rejected(message, "MalformedJob", reason))
                continue
            by_url[self.url_for(job.queue, job.priority)].append((message, body))
        requests = [
            (url, batch) for url, messages in by_url.items() for batch in _batches(messages)
        ]
        if pool is None or len(requests) < 2:
            for url, batch in requests:
                self._send_batch(url, batch, clock(), result)
            return result
        # Each request reads the clock just before it goes, on its own thread; their outcomes
        # are gathered in order, so the result is the same as sending them in turn.
        sends = [pool.submit(self._send_on_pool, url, batch, clock) for url, batch in requests]
        for send in sends:
            part = send.result()
            result.retry += part.retry
            result.rejected += part.rejected
            result.lateness_ms += part.lateness_ms
        return result

    def _send_on_pool(
        self, url: str, batch: list[tuple[Outgoing, dict[str, Any]]], clock: Callable[[], int]
    ) -> SendResult:
        part = SendResult()
        self._send_batch(url, batch, clock(), part)
        return part

    def extend_visibility(
        self, queue: str, receipt_handle: str, seconds: int, priority: Priority = Priority.NORMAL
    ) -> None:
        """Keep a message that is being worked on from being delivered again (heartbeat). The
        message came from where a job of this queue and priority is sent."""
        self.change_visibility(self.url_for(queue, priority), receipt_handle, seconds)

    def _send_batch(
        self,
        url: str,
        batch: list[tuple[Outgoing, dict[str, Any]]],
        now_ms: int,
        result: SendResult,
    ) -> None:
        for message, entry in batch:
            entry["DelaySeconds"] = delay_seconds(message.visible_at_ms, now_ms)
        try:
            response = self._sqs.send_message_batch(QueueUrl=url, Entries=[e for _, e in batch])  # type: ignore[misc]
        except (ClientError, BotoCoreError):
            # Throttled or unreachable after botocore's own retries: the whole call failed, and
            # no one job is to blame, so all are retried.
            result.retry.extend(message for message, _ in batch)
            return
        failures = {f["Id"]: f for f in response.get("Failed", [])}
        for message, entry in batch:
            failure = failures.get(entry["Id"])
            if failure is None:
                visible_ms = now_ms + entry["DelaySeconds"] * 1000
                result.lateness_ms.append(max(0, visible_ms - message.visible_at_ms))
                continue
            if failure.get("SenderFault", False):
                code = failure.get("Code", "SenderFault")
                reason = f"SQS rejected the message: {code}: {failure.get('Message', '')}"
                result.rejected.append(Rejected(message, code, reason.rstrip(": ")))
            else:
                result.retry.append(message)


def _batches(
    messages: Sequence[tuple[Outgoing, str]],
) -> list[list[tuple[Outgoing, dict[str, Any]]]]:
    """Entries of at most SQS_BATCH messages and SQS_BATCH_BYTES; DelaySeconds is set when
    each batch is sent."""
    batches: list[list[tuple[Outgoing, dict[str, Any]]]] = []
    current: list[tuple[Outgoing, dict[str, Any]]] = []
    current_bytes = 0
    for message, body in messages:
        size = len(body.encode())
        if current and (len(current) == SQS_BATCH or current_bytes + size > SQS_BATCH_BYTES):
            batches.append(current)
            current, current_bytes = [], 0
        entry: dict[str, Any] = {"Id": str(len(current)), "MessageBody": body}
        current.append((message, entry))
        current_bytes += size
    if current:
        batches.append(current)
    return batches
