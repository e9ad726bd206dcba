"""Dead letters: every message that reaches a queue's DLQ is indexed in the job table, so
operators can browse it page by page, replay it, and purge it.

A DLQ receives a message two ways: the consumer SDK sends a job there when it marks it `dead`
(attempts ran out, or the error was not retryable), and SQS redrives a message that a consumer
kept crashing on (maxReceiveCount). The dead-letter indexer Lambda drains every DLQ into
index items: the DLQ is a buffer, the table is where dead letters are kept. (SQS cannot list a
queue page by page, filter it, or delete by age; a DynamoDB range can.)

Index item: pk "dead#<queue>", sk "<dead at, epoch ms, 13 digits>#<job id or message id>".
The sort key is the same each time the same death is indexed (a DLQ message delivered twice),
so indexing is idempotent. Replay re-queues a still-dead job through `JobService.retry`
(dead → queued) and then deletes its index item, so a repeated replay finds nothing to do, or
finds the job no longer dead and skips it: it never runs a job twice.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from sundial.clock import Clock
from sundial.errors import Conflict, InvalidInput, JobNotFound, QueueNotFound
from sundial.ids import JobKey
from sundial.model.job import AttemptError, Job, Status
from sundial.services.jobs import JobService
from sundial.store.jobs import JobStore
from sundial.transport.envelope import Envelope

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

logger = Logger(child=True)

DEAD_PREFIX = "dead#"
MAX_PAGE = 100
# One replay or purge request does at most this much, then says `more`; the caller repeats.
MAX_PER_REQUEST = 500
# Why a redriven message died: its consumer failed or timed out without ending the attempt.
REDRIVE_ERROR = "DeliveryLimitExceeded"
INVALID_ENVELOPE_ERROR = "InvalidEnvelope"
MAX_BODY_CHARS = 4_096

Item = dict[str, Any]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    queue: str
    dead_at_ms: int
    ref: str  # the job id, or the SQS message id of a body that is not an envelope
    job_id: str | None
    attempt: int | None
    error_type: str
    message: str
    body: str  # the envelope as it reached the DLQ (truncated)

    @property
    def sk(self) -> str:
        return f"{self.dead_at_ms:013d}#{self.ref}"


def dead_pk(queue: str) -> str:
    return f"{DEAD_PREFIX}{queue}"


def time_sk(epoch_ms: int) -> str:
    """The lowest sort key at `epoch_ms`: every letter that died at or after it sorts above."""
    return f"{max(epoch_ms, 0):013d}"


class DeadLetterStore:
    """The index items in the job table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def put(self, letter: DeadLetter, *, expires_at_s: int) -> None:
        item: Item = {
            "pk": {"S": dead_pk(letter.queue)},
            "sk": {"S": letter.sk},
            "ref": {"S": letter.ref},
            "error_type": {"S": letter.error_type},
            "message": {"S": letter.message},
            "body": {"S": letter.body},
            "expires_at": {"N": str(expires_at_s)},
        }
        if letter.job_id is not None:
            item["job_id"] = {"S": letter.job_id}
        if letter.attempt is not None:
            item["attempt"] = {"N": str(letter.attempt)}
        self._db.put_item(TableName=self._table, Item=item)

    def page(
        self,
        queue: str,
        *,
        from_sk: str,
        to_sk: str,
        error_type: str | None,
        limit: int,
        after_sk: str | None = None,
    ) -> tuple[list[DeadLetter], str | None]:
        """Up to `limit` letters with from_sk <= sk < to_sk, oldest first, and the sort key to
        continue after (None at the end). A filter by error type still reads the skipped
        items, so a page may come back short before the end."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": {"S": dead_pk(queue)},
                ":from": {"S": from_sk},
                ":to": {"S": to_sk},
            },
            "Limit": limit,
        }
        if error_type is not None:
            request["FilterExpression"] = "error_type = :error_type"
            request["ExpressionAttributeValues"][":error_type"] = {"S": error_type}
        if after_sk is not None:
            request["ExclusiveStartKey"] = {"pk": {"S": dead_pk(queue)}, "sk": {"S": after_sk}}
        response = self._db.query(**request)
        letters = [_letter(queue, item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return letters, (last["sk"]["S"] if last else None)

    def scan_range(
        self, queue: str, *, from_sk: str, to_sk: str, error_type: str | None
    ) -> Iterator[DeadLetter]:
        after: str | None = None
        while True:
            letters, after = self.page(
                queue,
                from_sk=from_sk,
                to_sk=to_sk,
                error_type=error_type,
                limit=MAX_PAGE,
                after_sk=after,
            )
            yield from letters
            if after is None:
                return

    def delete(self, letter: DeadLetter) -> None:
        self._db.delete_item(
            TableName=self._table,
            Key={"pk": {"S": dead_pk(letter.queue)}, "sk": {"S": letter.sk}},
        )


def _letter(queue: str, item: Item) -> DeadLetter:
    sk = item["sk"]["S"]
    return DeadLetter(
        queue=queue,
        dead_at_ms=int(sk.partition("#")[0]),
        ref=item["ref"]["S"],
        job_id=item["job_id"]["S"] if "job_id" in item else None,
        attempt=int(item["attempt"]["N"]) if "attempt" in item else None,
        error_type=item["error_type"]["S"],
        message=item["message"]["S"],
        body=item["body"]["S"],
    )


class DeadLetterIndexer:
    """Turns DLQ messages into index items (the dead-letter indexer Lambda's record handler)."""

    def __init__(
        self,
        *,
        store: JobStore,
        letters: DeadLetterStore,
        clock: Clock,
        dead_letter_urls: Mapping[str, str],
        retention_days: int,
        on_redriven: Callable[[Job], None] | None = None,
    ) -> None:
        """`on_redriven` is called with a job this indexer marked dead, so a DAG node's death
        reaches its descendants (sundial.services.dags), as a death recorded by its runner does."""
        self._store = store
        self._letters = letters
        self._clock = clock
        self._on_redriven = on_redriven
        # A DLQ's ARN and URL both end with its name: {DLQ name: job queue}.
        self._queue_of_dlq = {url.rsplit("/", 1)[-1]: q for q, url in dead_letter_urls.items()}
        self._retention_s = retention_days * 86_400

    def index(self, record: SQSRecord) -> DeadLetter | None:
        now = self._clock.now_ms()
        queue = self._queue_of_dlq.get(record.event_source_arn.rsplit(":", 1)[-1])
        try:
            envelope = Envelope.model_validate_json(record.body)
        except ValidationError as error:
            if queue is None:
                raise RuntimeError(f"message from unknown DLQ {record.event_source_arn}") from error
            sent_ms = int(record.attributes.sent_timestamp)
            letter = DeadLetter(
                queue=queue,
                dead_at_ms=sent_ms,
                ref=record.message_id,
                job_id=None,
                attempt=None,
                error_type=INVALID_ENVELOPE_ERROR,
                message=f"not a Sundial envelope: {error.errors()[0]['msg']}"[:500],
                body=record.body[:MAX_BODY_CHARS],
            )
            self._letters.put(letter, expires_at_s=now // 1000 + self._retention_s)
            return letter
        job = self._store.get(JobKey.from_job_id(envelope.id))
        if job is None:
            logger.warning("dead letter for an expired job dropped", extra={"id": envelope.id})
            return None
        if job.status is not Status.DEAD:
            # SQS redrove the message: its consumer kept failing before it ended the attempt.
            redriven = AttemptError(
                attempt=envelope.attempt,
                at_ms=now,
                error_type=REDRIVE_ERROR,
                message="the consumer failed or timed out on every delivery (maxReceiveCount)",
                traceback_head="",
            )
            marked, current = self._store.mark_dead(
                job.key, error=redriven, now_ms=now, expires_at_s=now // 1000 + self._retention_s
            )
            if marked and current is not None:
                job = current
            elif current is not None and current.status is Status.DEAD:
                job = current  # marked dead meanwhile, e.g. by this record's earlier delivery
            else:
                status = current.status if current else "gone"
                logger.info(
                    "dead letter dropped: the job finished", extra={"id": job.id, "status": status}
                )
                return None
        marked_here = job.last_error is not None and job.last_error.error_type == REDRIVE_ERROR
        if marked_here and self._on_redriven is not None:
            self._on_redriven(job)  # again on a repeat: an earlier delivery may have died first
        last = job.last_error
        letter = DeadLetter(
            queue=job.queue,
            dead_at_ms=job.finished_at_ms or now,
            ref=job.id,
            job_id=job.id,
            attempt=job.attempts or envelope.attempt,
            error_type=last.error_type if last else "Unknown",
            message=last.message if last else "",
            body=record.body[:MAX_BODY_CHARS],
        )
        self._letters.put(letter, expires_at_s=job.expires_at_s or now // 1000 + self._retention_s)
        return letter


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    since_ms: int | None = None  # inclusive
    until_ms: int | None = None  # exclusive
    error_type: str | None = None

    def bounds(self) -> tuple[str, str]:
        low = time_sk(self.since_ms) if self.since_ms is not None else "0"
        high = time_sk(self.until_ms) if self.until_ms is not None else "9"
        return low, high


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    replayed: list[str]  # job ids re-queued
    skipped: int  # no longer dead (replayed before, retried, or expired): index item removed
    unreplayable: int  # bodies that are not envelopes: kept for inspection, purge removes them
    more: bool  # the request stopped at its limit; repeat it to go on


@dataclass(frozen=True, slots=True)
class PurgeOutcome:
    purged: int
    more: bool


class DeadLetterService:
    def __init__(
        self, *, letters: DeadLetterStore, jobs: JobService, queues: frozenset[str]
    ) -> None:
        self._letters = letters
        self._jobs = jobs
        self._queues = queues

    def browse(
        self, queue: str, which: DeadLetterFilter, *, limit: int, cursor: str | None
    ) -> tuple[list[DeadLetter], str | None]:
        self._known(queue)
        low, high = which.bounds()
        letters, after = self._letters.page(
            queue,
            from_sk=low,
            to_sk=high,
            error_type=which.error_type,
            limit=limit,
            after_sk=decode_cursor(cursor, queue) if cursor else None,
        )
        return letters, encode_cursor(queue, after) if after else None

    def replay(self, queue: str, which: DeadLetterFilter, *, limit: int) -> ReplayOutcome:
        self._known(queue)
        low, high = which.bounds()
        replayed: list[str] = []
        skipped = unreplayable = 0
        seen = 0
        for letter in self._letters.scan_range(
            queue, from_sk=low, to_sk=high, error_type=which.error_type
        ):
            if seen == limit:
                return ReplayOutcome(replayed, skipped, unreplayable, more=True)
            seen += 1
            if letter.job_id is None:
                unreplayable += 1
                continue
            try:
                job = self._jobs.retry(letter.job_id, only_dead=True)
            except (Conflict, JobNotFound):
                skipped += 1
            else:
                replayed.append(job.id)
            # Only after the retry: a crash in between leaves the item, and the next replay
            # finds the job queued (a 409) and skips it.
            self._letters.delete(letter)
        return ReplayOutcome(replayed, skipped, unreplayable, more=False)

    def purge(self, queue: str, *, before_ms: int, limit: int) -> PurgeOutcome:
        self._known(queue)
        purged = 0
        for letter in self._letters.scan_range(
            queue, from_sk="0", to_sk=time_sk(before_ms), error_type=None
        ):
            if letter.dead_at_ms >= before_ms:
                break
            if purged == limit:
                return PurgeOutcome(purged, more=True)
            self._letters.delete(letter)
            purged += 1
        return PurgeOutcome(purged, more=False)

    def _known(self, queue: str) -> None:
        if queue not in self._queues:
            raise QueueNotFound(queue)


def encode_cursor(queue: str, sk: str) -> str:
    raw = json.dumps({"q": queue, "sk": sk}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, queue: str) -> str:
    """The sort key a page cursor continues after; a cursor that is not ours is a 400."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
        sk = value["sk"]
        if value["q"] != queue or not isinstance(sk, str) or not sk[:13].isdigit():
            raise ValueError("cursor of another listing")
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise InvalidInput("cursor", "not a cursor returned by this listing") from None
    return sk
