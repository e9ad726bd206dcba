"""Job history: every state change of a job becomes one event, read from the job table's
DynamoDB stream (NEW_AND_OLD_IMAGES) and written to S3 as gzip JSON lines under
`<prefix>/dt=YYYY-MM-DD/`, partitioned by the event's date (UTC).

Only job items become events. The table holds other items too (sweep cursors, the shard
count, idempotency keys, and whatever later features add), so a job item is recognised
positively: pk `shard#<n>` and an sk of 13 due-time digits, `#`, and a ULID. Retry timers
(job-shaped items with `retry_of`) are bookkeeping: the retried job's own item records its
attempts, so timers produce no events. So are a moved job's pointer and the put and delete
that move its item (PATCH /jobs/{id}): a moved job's events carry the id it was submitted with
and its current due time.

An event is written when a job item is inserted, when its status or its attempt count changes,
and when it is removed. A removal by DynamoDB's TTL (the stream record's userIdentity is the
DynamoDB service) is the end of the job's retention, not a cancellation: its `to_status` is
`expired`. Any other removal is `deleted`.

Each event's id is the stream record's eventID, which is the same every time Lambda delivers
that record again, so a redelivered batch yields the same ids and the compaction job drops the
duplicates. A batch's S3 key is derived from the events in it, so an identical redelivered
batch overwrites its own object instead of adding one.

The raw JSON line is a public contract for the Glue jobs (glue/sundial_history/columns.py
declares the same fields; a test keeps the two in step).
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)
from pydantic import BaseModel, ConfigDict, Field

from sundial.ids import SHARD_PREFIX, SK_DIGITS, JobKey
from sundial.settings import EnvSettings

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

logger = Logger(child=True)

EVENT_VERSION = 1
# Statuses that only the history knows: the item left the table.
EXPIRED = "expired"  # removed by DynamoDB TTL at the end of the job's retention
DELETED = "deleted"  # removed by anything else
ATTEMPT_ENDS = frozenset({"succeeded", "failed", "dead"})

_JOB_SK = re.compile(rf"^\d{{{SK_DIGITS}}}#[0-9A-HJKMNP-TV-Z]{{26}}$")
_TTL_PRINCIPAL = "dynamodb.amazonaws.com"


def is_job_key(pk: object, sk: object) -> bool:
    """True for the keys of a job item (or a retry timer), and for nothing else in the table."""
    return (
        isinstance(pk, str)
        and isinstance(sk, str)
        and pk.startswith(SHARD_PREFIX)
        and pk[len(SHARD_PREFIX) :].isdigit()
        and _JOB_SK.match(sk) is not None
    )


class HistoryEvent(BaseModel):
    """One job state change: one line of the raw history. Times are epoch milliseconds (UTC)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: int = EVENT_VERSION
    event_id: str = Field(min_length=1)
    job_id: str = Field(min_length=1)
    queue: str
    priority: str
    schedule_id: str | None = None
    dag_id: str | None = None
    from_status: str | None  # None when the job was inserted (submitted)
    to_status: str  # a job status, or `expired` / `deleted`
    attempt: int  # attempts made so far; for succeeded/failed/dead the attempt that just ended
    due_at_ms: int  # when the job, or for a retry the attempt, was due
    event_at_ms: int
    started_at_ms: int | None = None  # when the attempt that ended (or is running) started
    duration_ms: int | None = None  # how long that attempt ran, when it ended
    error_type: str | None = None  # the exception type of a failed or dead attempt
    correlation_id: str | None = None  # the API request that submitted the job (Job's)
    # A DAG child's release (its parents done: it became due to run), from the item's
    # `released_at` (sundial.store.job_items); None for every other job. Lines written before
    # it was captured lack it, and read as None.
    released_at_ms: int | None = None

    @property
    def event_date(self) -> str:
        return datetime.fromtimestamp(self.event_at_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def _int(image: Mapping[str, Any], name: str) -> int | None:
    value = image.get(name)
    return int(value) if isinstance(value, Decimal | int) else None


def _str(image: Mapping[str, Any], name: str) -> str | None:
    value = image.get(name)
    return value if isinstance(value, str) else None


def _last_error(image: Mapping[str, Any], attempt: int) -> Mapping[str, Any] | None:
    """The error the job's history recorded for `attempt`, if it is the latest entry."""
    entries = image.get("history")
    if not isinstance(entries, list) or not entries or not isinstance(entries[-1], dict):
        return None
    last: Mapping[str, Any] = entries[-1]
    return last if _int(last, "attempt") == attempt else None


def _attempt_due_ms(new: Mapping[str, Any], old: Mapping[str, Any] | None, due_ms: int) -> int:
    """When the attempt this change concerns was due: the job's due time for the first attempt,
    the scheduled retry time for a retry, the retry request's time for a manual retry."""
    attempt = _int(new, "attempts") or 0
    if attempt <= 1:
        return due_ms
    # A retry is taken (failed -> running) and then ended (running -> ...): both old images
    # still carry the time it was scheduled for.
    if old is not None and _str(old, "status") in ("failed", "running"):
        scheduled = _int(old, "next_attempt_at")
        if scheduled is not None:
            return scheduled
    return _int(new, "retried_at") or _int(new, "next_attempt_at") or due_ms


def _event_time_ms(new: Mapping[str, Any], status: str, inserted: bool, fallback_ms: int) -> int:
    """When the change happened, by the job's own clock-stamped fields (millisecond precision);
    the stream's approximate creation time (seconds) when the item carries none."""
    stamp: int | None = None
    if status == "pending":
        # Made pending again by a manual retry or by a resume (sundial.services.jobs).
        later = _int(new, "resumed_at") or _int(new, "retried_at")
        stamp = _int(new, "created_at") if inserted else later
    elif status == "paused":
        stamp = _int(new, "paused_at")
    elif status == "queued":
        stamp = _int(new, "queued_at")
    elif status == "running":
        stamp = _int(new, "started_at")
    elif status in ("succeeded", "dead"):
        stamp = _int(new, "finished_at")
    elif status == "cancelled":
        stamp = _int(new, "cancelled_at")
    if status in ("failed", "dead") and stamp is None:
        error = _last_error(new, _int(new, "attempts") or 0)
        stamp = _int(error, "at") if error else None
    return stamp if stamp is not None else fallback_ms


def is_ttl_removal(record: DynamoDBRecord) -> bool:
    """A REMOVE made by DynamoDB's time-to-live process, as AWS marks it in the stream."""
    identity = record.get("userIdentity") or {}  # absent on every other record
    return (
        record.event_name is DynamoDBRecordEventName.REMOVE
        and identity.get("type") == "Service"
        and identity.get("principalId") == _TTL_PRINCIPAL
    )


def event_from_record(record: DynamoDBRecord) -> HistoryEvent | None:
    """The history event of one stream record, or None when the record is not a job's state
    change. Raises ValueError for a job record that cannot be read (the batch reports it)."""
    stream = record.dynamodb
    if stream is None:
        raise ValueError("stream record without a dynamodb section")
    keys = stream.keys
    pk, sk = keys.get("pk"), keys.get("sk")
    if not is_job_key(pk, sk):
        return None
    assert isinstance(pk, str) and isinstance(sk, str)
    new = stream.new_image or None
    old = stream.old_image or None
    image = new if new is not None else old
    if image is None:
        raise ValueError("job record without images: the stream must be NEW_AND_OLD_IMAGES")
    if "retry_of" in image:
        return None  # a retry timer
    if _moving(record, new, old):
        return None
    key = JobKey.from_item_keys(pk, sk)
    origin = _str(image, "origin")  # a moved job: its id names its origin
    job_id = (JobKey.from_item_keys(pk, origin) if origin else key).job_id
    approximate_ms = (stream.approximate_creation_date_time or 0) * 1000
    queue, priority = _str(image, "queue"), _str(image, "priority")
    status = _str(image, "status")
    if queue is None or priority is None or status is None:
        raise ValueError(f"job item {pk}/{sk} lacks queue, priority or status")
    common: dict[str, Any] = {
        "event_id": record.event_id or _fallback_event_id(record),
        "job_id": job_id,
        "queue": queue,
        "priority": priority,
        "schedule_id": _str(image, "schedule_id"),
        "dag_id": _str(image, "dag_id"),
        "correlation_id": _str(image, "correlation_id"),
        "released_at_ms": _int(image, "released_at"),
    }
    if new is None:  # REMOVE
        return HistoryEvent(
            **common,
            from_status=status,
            to_status=EXPIRED if is_ttl_removal(record) else DELETED,
            attempt=_int(image, "attempts") or 0,
            due_at_ms=key.due_ms,
            event_at_ms=approximate_ms,
        )
    return _change_event(common, new, old, key=key, status=status, approximate_ms=approximate_ms)


def _moving(
    record: DynamoDBRecord, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None
) -> bool:
    """A record of a move's bookkeeping (PATCH /jobs/{id}; sundial.store.job_items): a pointer
    written, changed or replaced, or a moved job's item put at its new key or deleted from its
    previous one. The job's state changes afterwards are recorded under its id as usual; a
    move itself is not a state change (GET /jobs/{id} shows it)."""
    if any(image is not None and "moved_to" in image for image in (new, old)):
        return True
    moved = (new or old or {}).get("origin") is not None
    inserted, removed = old is None, new is None
    return moved and (inserted or (removed and not is_ttl_removal(record)))


def _change_event(
    common: dict[str, Any],
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    *,
    key: JobKey,
    status: str,
    approximate_ms: int,
) -> HistoryEvent | None:
    """The event of an INSERT or MODIFY; None when the status and attempt did not change."""
    before = _str(old, "status") if old is not None else None
    attempt = _int(new, "attempts") or 0
    if old is not None and before == status and _int(old, "attempts") == attempt:
        return None  # not a state change (a lease renewal, a takeover, a result update)
    started_ms = _int(new, "started_at") if status in ATTEMPT_ENDS | {"running"} else None
    event_at = _event_time_ms(new, status, inserted=old is None, fallback_ms=approximate_ms)
    duration_ms = error_type = None
    if status in ATTEMPT_ENDS and started_ms is not None:
        duration_ms = max(0, event_at - started_ms)
    if status in ("failed", "dead"):
        error = _last_error(new, attempt)
        error_type = _str(error, "type") if error else None
    return HistoryEvent(
        **common,
        from_status=before,
        to_status=status,
        attempt=attempt,
        due_at_ms=_attempt_due_ms(new, old, key.due_ms),
        event_at_ms=event_at,
        started_at_ms=started_ms,
        duration_ms=duration_ms,
        error_type=error_type,
    )


def _fallback_event_id(record: DynamoDBRecord) -> str:
    """Stream records always carry an eventID; should one not, its sequence number is unique
    within the stream and just as stable across redeliveries."""
    sequence = record.dynamodb.sequence_number if record.dynamodb else None
    if not sequence:
        raise ValueError("stream record without eventID or sequence number")
    return hashlib.sha256(f"{record.event_source_arn}|{sequence}".encode()).hexdigest()[:32]


class HistoryWriter:
    """Writes events to S3: one gzip JSON-lines object per event date and batch."""

    def __init__(self, client: S3Client, bucket: str, prefix: str) -> None:
        self._s3 = client
        self._bucket = bucket
        self._prefix = prefix.strip("/")

    def object_key(self, events: Sequence[HistoryEvent]) -> str:
        """Deterministic for the same events: a redelivered batch overwrites its object."""
        digest = hashlib.sha256("\n".join(e.event_id for e in events).encode()).hexdigest()
        first_ms = min(e.event_at_ms for e in events)
        return f"{self._prefix}/dt={events[0].event_date}/{first_ms:013d}-{digest[:20]}.json.gz"

    def write(self, events: Sequence[HistoryEvent]) -> list[str]:
        """Put every event; returns the keys written. Raises if S3 refuses (the whole batch is
        then retried: nothing is acknowledged before it is stored)."""
        by_date: dict[str, list[HistoryEvent]] = defaultdict(list)
        for event in events:
            by_date[event.event_date].append(event)
        keys = []
        for date in sorted(by_date):
            group = by_date[date]
            key = self.object_key(group)
            body = "".join(e.model_dump_json() + "\n" for e in group).encode()
            self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                # mtime=0: the same events give the same bytes, so a rewrite changes nothing.
                Body=gzip.compress(body, compresslevel=6, mtime=0),
                ContentType="application/x-ndjson",
                Metadata={"events": str(len(group))},
            )
            keys.append(key)
        return keys


class Retention(Protocol):
    """What a job owns outside its item, kept and removed with it
    (sundial.services.job_retention): the history sits below the services, so it names only
    what it needs of it. Items are the stream's images, as DynamoDB's low-level attributes."""

    def expired(self, item: Mapping[str, Any]) -> None: ...

    def written(self, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None: ...


class HistoryRecorder:
    """The history Lambda's logic: stream batch in, S3 objects out, partial batch response.

    A record that cannot be read fails alone (Powertools batch processing reports its sequence
    number); Lambda then resumes the shard from the first failed record, so only the events
    before it are written now, and everything from it on comes again. If S3 refuses the write,
    the invocation fails as a whole and Lambda retries (bisecting the batch)."""

    def __init__(self, writer: HistoryWriter, retention: Retention | None = None) -> None:
        """`retention`: told of each job item DynamoDB's TTL removed and of each job item
        written, so what the job owns goes with it (None: a recorder that only records, as in
        tests of the history alone). A failure of it fails the record, which comes again."""
        self._writer = writer
        self._retention = retention

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        processor = BatchProcessor(
            event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
        )
        with processor(records=list(event.get("Records", [])), handler=self._record):
            outcomes = processor.process()
        events: list[HistoryEvent] = []
        for outcome, result, _ in outcomes:
            if outcome != "success":
                break
            if result is not None:
                events.append(result)
        if events:
            keys = self._writer.write(events)
            logger.info("history written", extra={"events": len(events), "objects": keys})
        return dict(processor.response())

    def _record(self, record: DynamoDBRecord) -> HistoryEvent | None:
        event = event_from_record(record)
        if self._retention is not None and event_from_job(record):
            images = record.raw_event.get("dynamodb", {})  # low-level, as the stores read them
            if is_ttl_removal(record):
                self._retention.expired(images["OldImage"])
            elif "NewImage" in images:
                self._retention.written(images["NewImage"], images.get("OldImage"))
        return event


def event_from_job(record: DynamoDBRecord) -> bool:
    """Whether a stream record is of a job item (a job, a retry timer or a moved job's
    pointer): the items whose life sundial.services.job_retention follows."""
    stream = record.dynamodb
    return stream is not None and is_job_key(stream.keys.get("pk"), stream.keys.get("sk"))


class HistorySettings(EnvSettings):
    """The history Lambda's environment: SUNDIAL_HISTORY_BUCKET, SUNDIAL_HISTORY_PREFIX."""

    history_bucket: str = Field(min_length=3)
    history_prefix: str = Field(default="history", min_length=1)
    # The job table and the payload bucket, where what an expired job owned is removed
    # (SUNDIAL_TABLE_NAME, SUNDIAL_PAYLOAD_BUCKET; no table: the recorder only records).
    table_name: str | None = None
    payload_bucket: str | None = None
