"""Retry policy: exponential backoff with full jitter ("Exponential Backoff And Jitter", AWS
Architecture Blog): retry n waits a uniform random time in [0, min(cap, base * f^(n-1))]."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_RETRY_DELAY_S = 7 * 86_400


class RetryPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    initial_delay_seconds: int = Field(default=10, ge=0, le=86_400, strict=True)
    factor: float = Field(default=2.0, ge=1.0, le=10.0)
    max_delay_seconds: int = Field(default=3600, ge=0, le=MAX_RETRY_DELAY_S, strict=True)

    @model_validator(mode="after")
    def _cap_above_base(self) -> Self:
        if self.max_delay_seconds < self.initial_delay_seconds:
            raise ValueError("max_delay_seconds must be at least initial_delay_seconds")
        return self

    def delay_ms(self, retry_number: int, rng: random.Random) -> int:
        """Delay before retry `retry_number` (1 for the first retry), full jitter."""
        ceiling_s = min(
            float(self.max_delay_seconds),
            self.initial_delay_seconds * self.factor ** (retry_number - 1),
        )
        return round(rng.uniform(0, ceiling_s) * 1000)


class QueueRetryDefaults(RetryPolicy):
    """A queue's defaults: the policy plus how many attempts a job gets."""

    max_attempts: int = Field(default=3, ge=1, le=100, strict=True)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial_delay_seconds=self.initial_delay_seconds,
            factor=self.factor,
            max_delay_seconds=self.max_delay_seconds,
        )


def parse_retry_defaults(value: str | Mapping[str, object]) -> dict[str, QueueRetryDefaults]:
    raw = json.loads(value) if isinstance(value, str) else value
    return {name: QueueRetryDefaults.model_validate(policy) for name, policy in raw.items()}
