"""Runtime settings, read once from the environment the CDK stack gives each function."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sundial.retry import QueueRetryDefaults, parse_retry_defaults


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    table_name: str = Field(min_length=3)
    queue_urls: dict[str, str] = Field(min_length=1)
    dead_letter_urls: dict[str, str] = Field(default_factory=dict)
    priority_queue_urls: dict[str, str] = Field(default_factory=dict)
    retry_defaults: dict[str, QueueRetryDefaults] = Field(default_factory=dict)
    shard_count: int = Field(default=64, ge=1, le=4096)
    retention_days: int = Field(default=30, ge=1, le=3650)
    sweeper_function: str | None = None
    shards_per_sweeper: int = Field(default=8, ge=1)

    @field_validator("queue_urls", "dead_letter_urls", "priority_queue_urls", mode="before")
    @classmethod
    def _parse_json(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("retry_defaults", mode="before")
    @classmethod
    def _parse_retry(cls, value: object) -> object:
        return parse_retry_defaults(value) if isinstance(value, str) else value

    def retry_defaults_for(self, queue: str) -> QueueRetryDefaults:
        return self.retry_defaults.get(queue) or QueueRetryDefaults()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
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
