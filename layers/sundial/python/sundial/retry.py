"""Retry policy: exponential backoff with full jitter ("Exponential Backoff And Jitter", AWS
Architecture Blog): retry n waits a uniform random time in [0, min(cap, base * f^(n-1))].

The one set of retry defaults: the runtime applies them to a queue with none configured, and
the CDK settings (stacks/settings.py, cdk.json) build on these models."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

# The longest a retry may wait: a retry beyond SQS's 15-minute DelaySeconds waits as a timer
# item in the job table, so this is a product limit rather than an SQS one.
MAX_RETRY_DELAY_S = 7 * 86_400
DEFAULT_MAX_ATTEMPTS = 3


def _integral(cls: type, value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def integral(*fields: str) -> Any:
    """A before-validator that reads 5.0 as 5 for these strict int fields: JSON has one number
    type, and JSON Schema's `integer` includes 5.0. A fraction, a bool or a string is still
    refused by the strict check. A field validator, not a type: a validator inside an optional
    type's Annotated makes pydantic write its bounds as `ge`/`le` instead of minimum/maximum."""
    return field_validator(*fields, mode="before")(_integral)


class RetryPolicy(BaseModel):
    # validate_default: the cap is checked against the initial delay even when left at its
    # default (an initial delay of 2 h with the default 1 h cap is an error).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    initial_delay_seconds: int = Field(default=10, ge=0, le=86_400, strict=True)
    factor: float = Field(default=2.0, ge=1.0, le=10.0)
    max_delay_seconds: int = Field(default=3600, ge=0, le=MAX_RETRY_DELAY_S, strict=True)

    _integral = integral("initial_delay_seconds", "max_delay_seconds")

    @field_validator("max_delay_seconds")
    @classmethod
    def _not_below_initial_delay(cls, value: int, info: ValidationInfo) -> int:
        initial = info.data.get("initial_delay_seconds")  # absent when itself invalid
        if initial is not None and value < initial:
            raise ValueError(f"must be >= initial_delay_seconds ({initial}), got {value}")
        return value

    def delay_ms(self, retry_number: int, rng: random.Random) -> int:
        """Delay before retry `retry_number` (1 for the first retry), full jitter."""
        ceiling_s = min(
            float(self.max_delay_seconds),
            self.initial_delay_seconds * self.factor ** (retry_number - 1),
        )
        return round(rng.uniform(0, ceiling_s) * 1000)


class QueueRetryDefaults(RetryPolicy):
    """A queue's defaults: the policy plus how many attempts a job gets."""

    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=100, strict=True)

    _integral_attempts = integral("max_attempts")

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial_delay_seconds=self.initial_delay_seconds,
            factor=self.factor,
            max_delay_seconds=self.max_delay_seconds,
        )


def parse_retry_defaults(value: str | Mapping[str, object]) -> dict[str, QueueRetryDefaults]:
    raw = json.loads(value) if isinstance(value, str) else value
    return {name: QueueRetryDefaults.model_validate(policy) for name, policy in raw.items()}
