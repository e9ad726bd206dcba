"""Sundial app configuration: the "sundial" key of the cdk.json context, validated by pydantic.

The Lambda runtime and architecture live here too, in one place: the dependencies layer
(`make deps`, see LAMBDA_PYTHON_VERSION / LAMBDA_PLATFORM in the Makefile) is built for exactly
this pair, so change them together.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)

CONTEXT_KEY = "sundial"

LAMBDA_RUNTIME: lambda_.Runtime = lambda_.Runtime.PYTHON_3_13
LAMBDA_ARCH: lambda_.Architecture = lambda_.Architecture.ARM_64

# How long CloudWatch keeps function and API access logs (operational logs, not job history).
LOG_RETENTION: logs.RetentionDays = logs.RetentionDays.ONE_MONTH

QueueName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,39}$")]


class SettingsError(ValueError):
    """The "sundial" context is missing or invalid; the message names every bad key."""


class QueueSettings(BaseModel):
    """One job queue: an SQS queue plus its dead-letter queue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_receive_count: int = Field(ge=1, le=1000)
    visibility_timeout_seconds: int = Field(ge=1, le=43200)


class SundialSettings(BaseModel):
    """The whole Sundial deployment configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shard_count: int = Field(ge=1, le=4096)
    shards_per_sweeper: int = Field(ge=1)
    retention_days: int = Field(ge=1, le=3650)
    queues: dict[QueueName, QueueSettings] = Field(min_length=1)
    example_consumer_queue: str | None = "demo"
    """The queue the example consumer Lambda (lambdas/example_consumer) reads; None: no example."""

    @field_validator("example_consumer_queue")
    @classmethod
    def _example_queue_is_configured(cls, value: str | None, info: ValidationInfo) -> str | None:
        queues = info.data.get("queues")  # absent when the queues themselves are invalid
        if value is not None and queues is not None and value not in queues:
            raise ValueError(
                f"{value!r} is not a configured queue; use one of {sorted(queues)}, "
                "or null to deploy no example consumer"
            )
        return value

    @classmethod
    def from_context(cls, raw: Any) -> SundialSettings:
        """Validate the raw context value, raising SettingsError that names each bad key."""
        if not isinstance(raw, dict):
            raise SettingsError(
                f'cdk.json context "{CONTEXT_KEY}" must be an object, got {type(raw).__name__}'
            )
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{CONTEXT_KEY}.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                for error in exc.errors()
            )
            raise SettingsError(f"invalid cdk.json context: {problems}") from exc
