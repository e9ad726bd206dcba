"""The fan-out: once a minute, start one sweeper per group of shards."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sundial.store.sweeps import SweepStore

if TYPE_CHECKING:
    from mypy_boto3_lambda.client import LambdaClient

logger = logging.getLogger(__name__)

Launch = Callable[[Sequence[int]], None]


def shard_groups(shard_count: int, group_size: int) -> list[list[int]]:
    shards = list(range(shard_count))
    return [shards[start : start + group_size] for start in range(0, shard_count, group_size)]


def fan_out(
    *,
    sweeps: SweepStore,
    shard_count: int,
    group_size: int,
    launch: Launch,
    failed: list[Sequence[int]] | None = None,
) -> int:
    """Start a sweep of every shard there has ever been. Returns how many sweepers started;
    the groups whose start failed are appended to `failed`, if given.

    Shards may only grow: if the configured count was lowered, the shards above it may still
    hold jobs, so the highest count ever recorded is swept. A group that fails to start does
    not stop the others (its shards keep their cursors; the next tick sweeps them).
    """
    recorded = sweeps.recorded_shard_count()
    if shard_count > recorded:
        sweeps.record_shard_count(shard_count)
    groups = shard_groups(max(shard_count, recorded), group_size)
    started = 0
    for group in groups:
        try:
            launch(group)
        except Exception:
            logger.exception("starting the sweep of shards %s failed", group)
            if failed is not None:
                failed.append(group)
            continue
        started += 1
    return started


class LambdaLauncher:
    """Starts a sweeper Lambda asynchronously (InvocationType=Event).

    Async invoke, not an SQS sweep queue: a tick is idempotent and superseded by the next one a
    minute later, so Lambda's own async retries are all the durability it needs, and it adds no
    polling delay and no extra resource.
    """

    def __init__(self, client: LambdaClient, function_name: str) -> None:
        self._lambda = client
        self._function = function_name

    def __call__(self, shards: Sequence[int]) -> None:
        self._lambda.invoke(
            FunctionName=self._function,
            InvocationType="Event",
            Payload=json.dumps({"shards": list(shards)}).encode(),
        )
