"""Recurring schedules: what a client submits, and the schedule as the domain sees it.

A schedule is a template plus a recurrence (model.recurrence). Each occurrence is an ordinary
job whose key is derived from (schedule id, occurrence time), so writing it twice is a no-op:
  shard = the schedule's shard (fixed at creation), due = the occurrence time,
  ULID  = that time + 80 bits of sha256(schedule id, occurrence time).
The occurrence chain (services.chain) writes each occurrence when the one before it is dispatched.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError
from ulid import ULID

from sundial.errors import InvalidInput
from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.model.recurrence import CronRecurrence, RateRecurrence, Recurrence, parse_rate, zone
from sundial.model.submission import (
    MAX_PAYLOAD_BYTES,
    Payload,
    Rfc3339,
    idempotency_key_field,
    parse_rfc3339,
)
from sundial.retry import RetryPolicy, integral

SCHEDULE_ID_LENGTH = 26
# A ULID's canonical text: 128 bits in 26 Crockford base32 digits, so the first is at most 7.
SCHEDULE_ID_PATTERN = "^[0-7][0-9A-HJKMNP-TV-Z]{25}$"
SCHEDULE_ID_RE = re.compile(SCHEDULE_ID_PATTERN)
_T = TypeVar("_T")
StrictInt = Annotated[int, Field(strict=True)]


class Misfire(StrEnum):
    """What happens to occurrences missed while nothing could dispatch them (an outage, a
    paused schedule or queue): one catch-up run now, or none; then the normal cadence."""

    FIRE_ONCE = "fire_once"
    SKIP = "skip"


class ScheduleState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    # A resume is releasing the paused occurrences; sweepers advance the schedule as if active.
    # A resume that failed part-way leaves this state; resuming again finishes it.
    RESUMING = "resuming"
    DELETED = "deleted"


class RunOutcome(StrEnum):
    FIRED = "fired"  # handed to SQS as a job
    SKIPPED = "skipped"  # missed, and the misfire policy skipped it (or a catch-up covered it)
    CANCELLED = "cancelled"  # the occurrence was cancelled before its time
    # An update (PATCH) replaced the occurrence before anything decided it: it never runs, and
    # the first occurrence of the new settings follows it (the record's next_at).
    REPLACED = "replaced"


class CreateSchedule(BaseModel):
    """A recurring job. Give exactly one of cron or rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, max_length=200, description="For people; not unique")
    cron: str | None = Field(
        default=None,
        max_length=200,
        description="5 fields (minute hour day-of-month month day-of-week), or 6 with seconds "
        "last; evaluated on the wall clock of `timezone`",
        examples=["0 9 * * 1-5"],
    )
    rate: str | None = Field(
        default=None,
        max_length=40,
        description="'N unit', unit second|minute|hour|day (10 seconds to 365 days)",
        examples=["5 minutes"],
    )
    timezone: str = Field(default="UTC", max_length=64, examples=["Europe/London"])
    queue: str = Field(min_length=1, max_length=40, description="A queue declared in cdk.json")
    payload: Payload = Field(
        default=None, description=f"Any JSON value, at most {MAX_PAYLOAD_BYTES} bytes serialized"
    )
    priority: Priority = Priority.NORMAL
    max_attempts: StrictInt | None = Field(
        default=None, ge=1, le=100, description="Attempts per occurrence; default: the queue's"
    )
    retry: RetryPolicy | None = Field(default=None, description="Default: the queue's")
    start_at: Rfc3339 | None = Field(
        default=None, description="No occurrence before this (RFC 3339); a rate counts from it"
    )
    end_at: Rfc3339 | None = Field(default=None, description="No occurrence after this (RFC 3339)")
    misfire: Misfire = Misfire.FIRE_ONCE
    idempotency_key: str | None = idempotency_key_field(
        "A repeat create on the same queue with the same key returns the first schedule; "
        "keys are per queue (another queue's schedule with the key is another schedule)"
    )

    _integral = integral("max_attempts")

    _known_zone = field_validator("timezone")(lambda cls, v: _known_zone(v))
    _valid_rate = field_validator("rate")(lambda cls, v: _valid_rate(v))
    _valid_cron = field_validator("cron")(lambda cls, v: _valid_cron(v))

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.cron is None) == (self.rate is None):
            raise PydanticCustomError(
                "cron_xor_rate", "give exactly one of cron or rate", {"field": "cron"}
            )
        if self.start_ms is not None and self.end_ms is not None and self.end_ms <= self.start_ms:
            raise PydanticCustomError(
                "end_before_start", "end_at must be after start_at", {"field": "end_at"}
            )
        return self

    @property
    def start_ms(self) -> int | None:
        return parse_rfc3339(self.start_at) if self.start_at else None

    @property
    def end_ms(self) -> int | None:
        return parse_rfc3339(self.end_at) if self.end_at else None

    @property
    def payload_json(self) -> str:
        return json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False)

    def fingerprint(self) -> str:
        canonical = json.dumps(
            self.model_dump(mode="json", exclude={"idempotency_key"}),
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


# What an update may change. Not the queue (authorization relies on it never changing), nor
# start_at / end_at (they bound the whole chain: create a new schedule instead).
UPDATABLE = ("name", "cron", "rate", "timezone", "payload", "priority", "max_attempts", "retry")
# Of those, the ones an update may set to null: back to no name, the queue's defaults.
_NULLABLE = frozenset({"name", "max_attempts", "retry", "payload"})


class UpdateSchedule(BaseModel):
    """The fields to change; a field left out keeps its value. Giving cron switches a rate
    schedule to cron (and rate, to rate). The new settings apply from the next occurrence
    nothing has decided yet (ScheduleService.update)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, max_length=200, description="null: no name")
    cron: str | None = Field(
        default=None, max_length=200, description="As in create; switches a rate schedule to cron"
    )
    rate: str | None = Field(
        default=None, max_length=40, description="As in create; switches a cron schedule to rate"
    )
    timezone: str | None = Field(default=None, max_length=64, examples=["Europe/London"])
    payload: Payload = Field(
        default=None, description=f"Any JSON value (null too), at most {MAX_PAYLOAD_BYTES} bytes"
    )
    priority: Priority | None = None
    max_attempts: StrictInt | None = Field(
        default=None, ge=1, le=100, description="null: the queue's default"
    )
    retry: RetryPolicy | None = Field(default=None, description="null: the queue's")

    _integral = integral("max_attempts")
    _known_zone = field_validator("timezone")(lambda cls, v: _known_zone(v))
    _valid_rate = field_validator("rate")(lambda cls, v: _valid_rate(v))
    _valid_cron = field_validator("cron")(lambda cls, v: _valid_cron(v))

    @model_validator(mode="after")
    def _check(self) -> Self:
        given = self.model_fields_set
        if not given:
            raise PydanticCustomError(
                "empty_update", f"give at least one of {', '.join(UPDATABLE)}", {"field": "body"}
            )
        for name in sorted(given - _NULLABLE):
            if getattr(self, name) is None:
                raise PydanticCustomError("not_nullable", "may not be null", {"field": name})
        if self.cron is not None and self.rate is not None:
            raise PydanticCustomError(
                "cron_xor_rate", "give at most one of cron or rate", {"field": "cron"}
            )
        return self

    @property
    def payload_json(self) -> str:
        return json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False)


def _known_zone(value: str | None) -> str | None:
    if value is not None:
        _as_value_error(lambda: zone(value))
    return value


def _valid_rate(value: str | None) -> str | None:
    if value is not None:
        _as_value_error(lambda: parse_rate(value))
    return value


def _valid_cron(value: str | None) -> str | None:
    """The expression normalised; a 400 naming what is wrong with it."""
    if value is not None:
        return _as_value_error(lambda: CronRecurrence.parse(value, zone("UTC")).expression)
    return value


def _as_value_error(check: Callable[[], _T]) -> _T:
    """Run a domain check inside a pydantic validator: its InvalidInput becomes the field's
    validation error (a 400 naming the field), not an exception escaping validation."""
    try:
        return check()
    except InvalidInput as error:
        raise ValueError(error.reason) from None


def schedule_id_for(queue: str, idempotency_key: str | None) -> str:
    """A new schedule id: random, or derived from the queue and the idempotency key, so a repeat
    on that queue finds it. A key is the queue's own, as a job's is (sundial.store.idempotency):
    the same key on another queue names another schedule, so no team can take a key another
    will use, or learn whether another queue uses it."""
    if idempotency_key is None:
        return str(ULID())
    digest = hashlib.sha256(f"schedule\n{queue}\n{idempotency_key}".encode()).digest()
    return str(ULID.from_bytes(digest[:16]))


def legacy_schedule_id(idempotency_key: str) -> str:
    """The id a schedule created with this key had before keys were per queue (the key alone).
    Ids are stored, so such a schedule keeps its id; a repeat create on its queue still finds
    it here (ScheduleService.create)."""
    digest = hashlib.sha256(f"schedule\n{idempotency_key}".encode()).digest()
    return str(ULID.from_bytes(digest[:16]))


def check_schedule_id(schedule_id: str) -> str:
    """Raises InvalidInput(field="schedule_id") unless it is a ULID as Sundial writes it: 26
    characters of Crockford base32 in upper case, the first 0-7. That is the only spelling of
    each schedule, so no other one (lower case, or the I, L, O a lenient decoder reads as 1,
    1, 0) addresses it."""
    if not SCHEDULE_ID_RE.fullmatch(schedule_id):
        raise InvalidInput(
            "schedule_id",
            f"malformed schedule id (expected {SCHEDULE_ID_LENGTH} characters of "
            "upper-case Crockford base32, as POST /schedules returned it)",
        )
    return schedule_id


@dataclass(slots=True)
class Schedule:
    id: str
    queue: str
    payload_json: str
    priority: Priority
    timezone: str
    misfire: Misfire
    shard: int
    created_at_ms: int
    anchor_ms: int  # a rate's first occurrence; the creation time for a cron
    first_at_ms: int  # the first occurrence: the chain starts here
    cron: str | None = None
    rate: str | None = None
    name: str | None = None
    max_attempts: int | None = None
    retry: RetryPolicy | None = None
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    state: ScheduleState = ScheduleState.ACTIVE
    paused_at_ms: int | None = None
    deleted_at_ms: int | None = None
    fingerprint: str | None = None
    # How many updates (PATCH) it has had. Each starts a new chain of occurrences whose keys
    # name the revision, so an occurrence of the old settings and one of the new never share
    # a key or a run record, even at the same time (ScheduleService.update).
    revision: int = 0

    def recurrence(self) -> Recurrence:
        if self.rate is not None:
            return RateRecurrence(period_ms=parse_rate(self.rate) * 1000, anchor_ms=self.anchor_ms)
        assert self.cron is not None
        return CronRecurrence.parse(self.cron, zone(self.timezone))

    def next_after(self, after_ms: int) -> int | None:
        """The first occurrence strictly after `after_ms` within [start_at, end_at]."""
        if self.start_at_ms is not None:
            after_ms = max(after_ms, self.start_at_ms - 1)
        at = self.recurrence().next_after(after_ms)
        if at is None or (self.end_at_ms is not None and at > self.end_at_ms):
            return None
        return at

    def occurrence_key(self, at_ms: int, revision: int | None = None) -> JobKey:
        """The occurrence at `at_ms` of `revision` (default: the schedule's own). Revision 0
        keeps the key schedules had before updates existed."""
        revision = self.revision if revision is None else revision
        seed = f"{self.id}\n{at_ms}" + (f"\n{revision}" if revision else "")
        digest = hashlib.sha256(seed.encode()).digest()
        ulid = ULID.from_bytes(at_ms.to_bytes(6, "big") + digest[:10])
        return JobKey(shard=self.shard, due_ms=at_ms, ulid=str(ulid))

    def is_original(self, key: JobKey) -> bool:
        """Is `key` an occurrence of revision 0? (Its run record keeps the plain sort key.)"""
        return key == self.occurrence_key(key.due_ms, 0)

    def occurrence(
        self, at_ms: int, *, now_ms: int, default_attempts: int, revision: int | None = None
    ) -> Job:
        """The job for the occurrence at `at_ms` (of `revision`, default the schedule's own),
        as first written (pending)."""
        return Job(
            key=self.occurrence_key(at_ms, revision),
            queue=self.queue,
            payload_json=self.payload_json,
            priority=self.priority,
            max_attempts=self.max_attempts or default_attempts,
            retry=self.retry,
            created_at_ms=now_ms,
            schedule_id=self.id,
        )


@dataclass(frozen=True, slots=True)
class RunRecord:
    """The decision taken for one occurrence, written once (put-if-absent) before the
    occurrence is dispatched: whichever sweeper or API call writes it first decides the
    successor, and every later attempt (a race, a retry after a crash) follows it."""

    schedule_id: str
    at_ms: int  # the occurrence time
    job_id: str
    outcome: RunOutcome
    decided_at_ms: int
    next_at_ms: int | None  # the successor's time; None when the schedule has ended
    next_revision: int = 0  # the successor's revision (its key names it)
    # The occurrence belongs to a revision after the first: its record's sort key also names
    # its job, so it never shares a record with another revision's occurrence at that time.
    revised: bool = False
