"""The messages of one sweeper's shard sweeps, sent to SQS together.

Each shard sweep decides its jobs and reads their items (dispatch.shard_sweep); what it would
send goes into the sweeper's one outbox, and the outbox sends everything it holds in as few
SendMessageBatch requests as SQS allows (10 messages each, per queue), whichever shard each
message comes from. So a sweep over many shards with a few due jobs each costs requests by
the jobs it sends, not by its shards. Each shard sweep then settles its own messages (what was
sent, refused or rejected) before it releases its lease: the sweeper empties the outbox before
it finishes any shard, and a shard sweep's own flush empties it too (urgent jobs, a full flush),
so no shard releases its lease with a message of its own still unsent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Protocol

from sundial.clock import Clock
from sundial.transport.sender import Outgoing, QueueSender, SendResult

logger = logging.getLogger(__name__)


class Settler(Protocol):
    def settle(self, outgoing: Sequence[Outgoing], result: SendResult) -> None:
        """Take the outcome of this owner's messages (`result` names only them)."""


class Outbox:
    def __init__(self, sender: QueueSender, clock: Clock, pool: Executor) -> None:
        self._sender, self._clock, self._pool = sender, clock, pool
        self._entries: list[tuple[Settler, Outgoing]] = []

    def add(self, owner: Settler, outgoing: Sequence[Outgoing]) -> None:
        self._entries += [(owner, message) for message in outgoing]

    def send(self) -> None:
        """Send every message held, then hand each owner the outcome of its own."""
        entries, self._entries = self._entries, []
        if not entries:
            return
        messages = [message for _, message in entries]
        try:
            result = self._sender.dispatch(messages, now_ms=self._clock.now_ms, pool=self._pool)
        except Exception:
            # Whatever went wrong, every message counts as not sent: each owner holds its
            # cursor at its own (a message SQS did take is then sent again: a no-op).
            logger.exception("sending a sweep's messages failed")
            result = SendResult(retry=messages)
        retry = {id(message) for message in result.retry}
        rejected = {id(r.message): r for r in result.rejected}
        owners: dict[int, tuple[Settler, list[Outgoing], SendResult]] = {}
        for owner, message in entries:
            _, mine, outcome = owners.setdefault(id(owner), (owner, [], SendResult()))
            mine.append(message)
            if id(message) in retry:
                outcome.retry.append(message)
            elif id(message) in rejected:
                outcome.rejected.append(rejected[id(message)])
        # The lateness of every message sent is reported once, by the first owner.
        next(iter(owners.values()))[2].lateness_ms = list(result.lateness_ms)
        for owner, mine, outcome in owners.values():
            owner.settle(mine, outcome)
