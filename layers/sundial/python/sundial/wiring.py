"""Builds the real collaborators (boto3 clients, store, sender, services) once per process.

Handlers call `dependencies()`. Tests and the local runtime call `configure()` to swap the clock
or the environment; nothing else is global.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import boto3
from botocore.config import Config

from sundial.clock import Clock, SystemClock
from sundial.fanout import LambdaLauncher
from sundial.sender import QueueSender
from sundial.service import JobService
from sundial.settings import Settings
from sundial.store import JobStore
from sundial.sweeper import Sweeper

# Standard retry mode backs off on throttling; the adaptive limit keeps a burst from failing.
_BOTO_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5}, connect_timeout=2, read_timeout=5
)


@dataclass
class Dependencies:
    settings: Settings
    clock: Clock

    @cached_property
    def store(self) -> JobStore:
        return JobStore(boto3.client("dynamodb", config=_BOTO_CONFIG), self.settings.table_name)

    @cached_property
    def sender(self) -> QueueSender:
        return QueueSender(boto3.client("sqs", config=_BOTO_CONFIG), self.settings.queue_urls)

    @cached_property
    def jobs(self) -> JobService:
        return JobService(
            store=self.store,
            sender=self.sender,
            clock=self.clock,
            queues=self.settings.queue_urls.keys(),
            shard_count=self.settings.shard_count,
            retention_days=self.settings.retention_days,
        )

    @cached_property
    def sweeper(self) -> Sweeper:
        return Sweeper(store=self.store, sender=self.sender, clock=self.clock)

    @cached_property
    def launcher(self) -> LambdaLauncher:
        if not self.settings.sweeper_function:
            raise RuntimeError("SUNDIAL_SWEEPER_FUNCTION is not set")
        return LambdaLauncher(
            boto3.client("lambda", config=_BOTO_CONFIG), self.settings.sweeper_function
        )


_current: Dependencies | None = None


def dependencies() -> Dependencies:
    global _current  # noqa: PLW0603 - one set of clients per Lambda container, built lazily
    if _current is None:
        _current = Dependencies(settings=Settings.from_env(os.environ), clock=SystemClock())
    return _current


def configure(
    *, clock: Clock | None = None, environ: Mapping[str, str] | None = None
) -> Dependencies:
    """Replace the process's dependencies, e.g. with a ManualClock. Returns the new set."""
    global _current  # noqa: PLW0603
    _current = Dependencies(
        settings=Settings.from_env(environ if environ is not None else os.environ),
        clock=clock or SystemClock(),
    )
    return _current
