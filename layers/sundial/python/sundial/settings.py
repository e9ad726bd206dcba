"""Runtime settings, read once from the environment the CDK stack gives each function, and the
one configuration of every AWS client the functions make. The defaults here are the
deployment's too (stacks/settings.py reads them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sundial.access import AccessPolicy
from sundial.quotas import QueueQuota, parse_quotas
from sundial.retry import QueueRetryDefaults, parse_retry_defaults

if TYPE_CHECKING:
    from botocore.config import Config

DEFAULT_SHARD_COUNT = 64
MAX_SHARD_COUNT = 4096
DEFAULT_SHARDS_PER_SWEEPER = 8
DEFAULT_RETENTION_DAYS = 30
MAX_RETENTION_DAYS = 3650
# Fair dispatch (sundial.dispatch.fairness): a queue's share of a sweep is its weight.
DEFAULT_DISPATCH_WEIGHT = 1
MAX_DISPATCH_WEIGHT = 1000
MAX_DISPATCH_PER_SECOND = 1_000_000


# Standard retry mode backs off on throttling; the adaptive limit keeps a burst from failing.
# A fixed User-Agent: botocore otherwise assembles its default one (about 16 components, each
# sanitised) twice per request, a sixth of a sweeper's CPU per job (BENCHMARKS.md, section 4);
# the header carries only SDK telemetry for AWS, nothing a request depends on.
USER_AGENT = "sundial"
# A 5 MiB payload object takes longer than a DynamoDB answer: its reads may take this long
# between bytes.
PAYLOAD_READ_TIMEOUT_S = 30


def boto_config(user_agent: str | None = USER_AGENT, *, read_timeout: int = 5) -> Config:
    """Every client's configuration (`user_agent=None`: botocore's own, for comparison).
    botocore is imported here, not with the module: the CDK app reads these settings too."""
    from botocore.config import Config  # noqa: PLC0415

    return Config(
        retries={"mode": "standard", "max_attempts": 5},
        connect_timeout=2,
        read_timeout=read_timeout,
        user_agent=user_agent,
    )


def payload_boto_config() -> Config:
    """The payload bucket's S3 client (sundial.store.payloads): SigV4 for the presigned GETs a
    lease hands out (botocore's default for S3 in us-east-1 would presign with the legacy
    SigV2), and time for a large object."""
    from botocore.config import Config  # noqa: PLC0415

    return boto_config(read_timeout=PAYLOAD_READ_TIMEOUT_S).merge(Config(signature_version="s3v4"))


class EnvSettings(BaseModel):
    """Settings read from SUNDIAL_<FIELD NAME> environment variables."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self:
        """Build from SUNDIAL_* variables; a missing or bad one fails the cold start loudly."""
        fields = {
            name: environ[f"SUNDIAL_{name.upper()}"]
            for name in cls.model_fields
            if f"SUNDIAL_{name.upper()}" in environ
        }
        try:
            return cls.model_validate(fields)
        except ValidationError as error:
            raise RuntimeError(f"bad SUNDIAL_* environment: {error}") from error


class QueueDispatch(BaseModel):
    """How the sweeper shares out one queue's dispatch (sundial.dispatch.fairness): at most
    `max_per_second` jobs a second made visible in SQS (None: no cap), and `weight` turns in
    the weighted round-robin between queues due at the same moment. Strict: JSON numbers only."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_per_second: int | None = Field(default=None, ge=1, le=MAX_DISPATCH_PER_SECOND)
    weight: int = Field(default=DEFAULT_DISPATCH_WEIGHT, ge=1, le=MAX_DISPATCH_WEIGHT)


class Settings(EnvSettings):
    """What the job functions read: the table, the queues and the deployment's choices."""

    table_name: str = Field(min_length=3)
    queue_urls: dict[str, str] = Field(min_length=1)
    dead_letter_urls: dict[str, str] = Field(default_factory=dict)
    priority_queue_urls: dict[str, str] = Field(default_factory=dict)
    retry_defaults: dict[str, QueueRetryDefaults] = Field(default_factory=dict)
    shard_count: int = Field(default=DEFAULT_SHARD_COUNT, ge=1, le=MAX_SHARD_COUNT)
    retention_days: int = Field(default=DEFAULT_RETENTION_DAYS, ge=1, le=MAX_RETENTION_DAYS)
    sweeper_function: str | None = None
    shards_per_sweeper: int = Field(default=DEFAULT_SHARDS_PER_SWEEPER, ge=1)
    # Per-queue access lists (sundial.access), as SUNDIAL_ACCESS {"queue": {"submit": [...]}}.
    # A queue without an entry is open to the stack's own account.
    access: AccessPolicy = Field(default_factory=AccessPolicy)
    # The queues that declare a quota (sundial.quotas); the functions that create jobs from a
    # client request (submit, dags, schedules) get SUNDIAL_QUOTAS, the others need none.
    quotas: dict[str, QueueQuota] = Field(default_factory=dict)
    # SUNDIAL_DISPATCH (the sweeper's): {"queue": {"max_per_second", "weight"}}; a queue
    # without an entry is uncapped, with weight 1.
    dispatch: dict[str, QueueDispatch] = Field(default_factory=dict)
    # SUNDIAL_PAYLOAD_BUCKET: the S3 bucket of large payloads (sundial.model.payloads). None:
    # every payload is inline, and one over the inline limit is refused (413).
    payload_bucket: str | None = Field(default=None, min_length=3)

    @field_validator(
        "queue_urls", "dead_letter_urls", "priority_queue_urls", "dispatch", mode="before"
    )
    @classmethod
    def _parse_json(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("retry_defaults", mode="before")
    @classmethod
    def _parse_retry(cls, value: object) -> object:
        return parse_retry_defaults(value) if isinstance(value, str) else value

    @field_validator("access", mode="before")
    @classmethod
    def _parse_access(cls, value: object) -> object:
        return {"queues": json.loads(value)} if isinstance(value, str) else value

    @field_validator("quotas", mode="before")
    @classmethod
    def _parse_quotas(cls, value: object) -> object:
        return parse_quotas(value) if isinstance(value, str) else value

    def retry_defaults_for(self, queue: str) -> QueueRetryDefaults:
        return self.retry_defaults.get(queue) or QueueRetryDefaults()
