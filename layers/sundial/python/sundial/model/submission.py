"""What a client may submit, validated at the boundary (pydantic v2)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, model_validator
from pydantic_core import PydanticCustomError

import sundial.quotas
from sundial.model.job import Priority
from sundial.model.payloads import MAX_STORED_PAYLOAD_BYTES, PayloadStorage
from sundial.retry import RetryPolicy, integral

MAX_PAYLOAD_BYTES = sundial.quotas.MAX_PAYLOAD_BYTES  # the API's limit; a queue may set a lower one
MAX_HORIZON_S = 366 * 24 * 3600  # how far ahead a job may be scheduled
MAX_BATCH = 25

# RFC 3339 section 5.6: time-numoffset is ("+" / "-") time-hour ":" time-minute, hours 00-23
# and minutes 00-59. Python's fromisoformat takes any two digits (+14:61 as +15:01), so the
# offset's range is checked here.
_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)
StrictInt = Annotated[int, Field(strict=True)]


def idempotency_key_field(description: str) -> Any:
    """An optional idempotency key: 1-200 printable ASCII characters, no spaces."""
    return Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[\x21-\x7e]+$",
        description=description,
    )


def parse_rfc3339(value: str) -> int:
    """RFC 3339 timestamp -> epoch ms. Requires an explicit offset (Z or +hh:mm)."""
    if not _RFC3339.fullmatch(value):
        raise ValueError("not an RFC 3339 timestamp (e.g. 2026-11-21T09:00:00Z)")
    head, _, tail = value.partition(".")
    if tail:  # Python parses at most microseconds: drop finer digits
        digits = re.match(r"\d+", tail)
        assert digits is not None
        value = f"{head}.{digits.group()[:6]}{tail[digits.end() :]}"
    try:
        moment = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("not a valid date or time") from None
    return int(moment.timestamp() * 1000)


def json_size(value: JsonValue) -> int:
    """Bytes of `value` as compact UTF-8 JSON, as it is stored and sent."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def check_payload_size(value: JsonValue) -> JsonValue:
    size = json_size(value)
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload is {size} bytes; the limit is {MAX_PAYLOAD_BYTES}")
    return value


def check_stored_payload_size(value: JsonValue) -> JsonValue:
    """A job's payload, which may be stored in S3: at most MAX_STORED_PAYLOAD_BYTES. A larger
    one is refused with 413 (sundial.api.app answers this error type so), naming the field."""
    size = json_size(value)
    if size > MAX_STORED_PAYLOAD_BYTES:
        raise PydanticCustomError(
            PAYLOAD_TOO_LARGE,
            "payload is {size} bytes; the limit is {limit}",
            {"size": size, "limit": MAX_STORED_PAYLOAD_BYTES},
        )
    return value


def check_rfc3339(value: str) -> str:
    parse_rfc3339(value)
    return value


# Field types that validate themselves, for every request model.
Rfc3339 = Annotated[str, AfterValidator(check_rfc3339)]
Payload = Annotated[JsonValue, AfterValidator(check_payload_size)]
# A job's payload (POST /jobs, PATCH /jobs/{id}): over the inline limit it is stored in S3.
JobPayload = Annotated[JsonValue, AfterValidator(check_stored_payload_size)]
# The validation error type of a payload over MAX_STORED_PAYLOAD_BYTES: a 413, not a 400.
PAYLOAD_TOO_LARGE = "payload_too_large"
_STORAGE_DESCRIPTION = (
    "Where the payload is kept: `auto` (the default) in the job itself up to "
    f"{MAX_PAYLOAD_BYTES} bytes and in the stack's S3 payload bucket beyond; `s3` in the bucket "
    "whatever its size (the job and its messages then carry a reference, `payload_ref`)"
)


class SubmitJob(BaseModel):
    """One job to schedule. Give exactly one of run_at or delay_seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queue: str = Field(min_length=1, max_length=40, description="A queue declared in cdk.json")
    payload: JobPayload = Field(
        default=None,
        description=f"Any JSON value, at most {MAX_STORED_PAYLOAD_BYTES} bytes serialized "
        f"(over {MAX_PAYLOAD_BYTES} it is stored in S3: see payload_storage)",
    )
    payload_storage: PayloadStorage = Field(
        default=PayloadStorage.AUTO, description=_STORAGE_DESCRIPTION
    )
    run_at: Rfc3339 | None = Field(
        default=None,
        description="When to run, RFC 3339 with offset",
        examples=["2026-11-22T09:00:00Z"],
    )
    delay_seconds: StrictInt | None = Field(
        default=None, ge=0, le=MAX_HORIZON_S, description="Run this many seconds from now"
    )
    priority: Priority = Priority.NORMAL
    max_attempts: StrictInt | None = Field(
        default=None, ge=1, le=100, description="Attempts in all; default: the queue's"
    )
    retry: RetryPolicy | None = Field(
        default=None, description="Backoff between attempts; default: the queue's"
    )
    idempotency_key: str | None = idempotency_key_field(
        "A repeat submit with the same key on the same queue returns the first job"
    )

    _integral = integral("delay_seconds", "max_attempts")

    @model_validator(mode="after")
    def _one_time(self) -> Self:
        if (self.run_at is None) == (self.delay_seconds is None):
            raise PydanticCustomError(
                "run_at_xor_delay",
                "give exactly one of run_at or delay_seconds",
                {"field": "run_at"},
            )
        return self

    @property
    def payload_json(self) -> str:
        return json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False)

    def due_ms(self, now_ms: int) -> int:
        if self.run_at is not None:
            return max(parse_rfc3339(self.run_at), now_ms)  # a time in the past means now
        assert self.delay_seconds is not None
        return now_ms + self.delay_seconds * 1000

    def fingerprint(self) -> str:
        """Identifies the request's content, to tell a true repeat from a reused key."""
        canonical = json.dumps(
            # Where the payload is kept is not what the job is: a repeat asking for another
            # storage is the same job, and gets the first one.
            self.model_dump(mode="json", exclude={"idempotency_key", "payload_storage"}),
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class SubmitBatch(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: list[SubmitJob] = Field(min_length=1, max_length=MAX_BATCH)


class ChangeJob(BaseModel):
    """Changes to a job waiting for its first attempt (PATCH /jobs/{id}): any of its time,
    priority, payload and attempt budget. At most one of run_at or delay_seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_at: Rfc3339 | None = Field(
        default=None,
        description="The new time, RFC 3339 with offset; a time in the past means now",
        examples=["2026-11-22T10:00:00Z"],
    )
    delay_seconds: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_HORIZON_S,
        description="Run this many seconds from now (0: now)",
    )
    priority: Priority | None = None
    payload: JobPayload = Field(
        default=None,
        description="The new payload, replacing the old one (null is a payload too: leave the "
        f"field out to keep the old one); at most {MAX_STORED_PAYLOAD_BYTES} bytes, stored as "
        "payload_storage says",
    )
    payload_storage: PayloadStorage = Field(
        default=PayloadStorage.AUTO,
        description=f"For a new payload: {_STORAGE_DESCRIPTION}",
    )
    max_attempts: StrictInt | None = Field(default=None, ge=1, le=100)

    _integral = integral("delay_seconds", "max_attempts")

    @model_validator(mode="after")
    def _one_change_at_least(self) -> Self:
        given = self.model_fields_set
        if {"run_at", "delay_seconds"} <= given:
            raise PydanticCustomError(
                "run_at_and_delay",
                "give at most one of run_at or delay_seconds",
                {"field": "run_at"},
            )
        if not given:
            raise PydanticCustomError(
                "nothing_to_change",
                "give at least one of run_at, delay_seconds, priority, payload or max_attempts",
                {"field": "body"},
            )
        if "payload_storage" in given and "payload" not in given:
            raise PydanticCustomError(
                "storage_without_payload",
                "payload_storage applies to a new payload: give payload too",
                {"field": "payload_storage"},
            )
        for name in sorted(given - {"payload", "payload_storage"}):
            if getattr(self, name) is None:
                raise PydanticCustomError(
                    "null_change",
                    "{field} cannot be null: leave it out to keep the job's",
                    {"field": name},
                )
        return self

    @property
    def changed_fields(self) -> tuple[str, ...]:
        """The fields this change sets, in a fixed order; a delay counts as run_at."""
        given = {"run_at" if name == "delay_seconds" else name for name in self.model_fields_set}
        return tuple(n for n in ("run_at", "priority", "payload", "max_attempts") if n in given)

    @property
    def time_field(self) -> str:
        return "delay_seconds" if self.delay_seconds is not None else "run_at"

    def fingerprint(self) -> str:
        """Identifies the request as the client sent it (the fields it set), so that its repeat
        is told from a new change (sundial.services.moves)."""
        canonical = json.dumps(
            self.model_dump(mode="json", exclude_unset=True), sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    @property
    def changes_payload(self) -> bool:
        return "payload" in self.model_fields_set

    @property
    def payload_json(self) -> str:
        return json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False)

    def due_ms(self, now_ms: int) -> int | None:
        """The new due time (a time in the past means now), or None to keep the job's."""
        if self.run_at is not None:
            return max(parse_rfc3339(self.run_at), now_ms)
        if self.delay_seconds is not None:
            return now_ms + self.delay_seconds * 1000
        return None
