"""How many messages each SQS queue holds: what `GET /queues` shows beside each queue's state.

SQS's counts are approximate (AWS: "the value might not be accurate for a minute or so"), and
each read is one GetQueueAttributes request per queue; nothing else in Sundial reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_ATTRIBUTES = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """Messages ready to receive, received and not yet deleted, and not yet visible (sent with
    DelaySeconds: Sundial sends up to 15 minutes ahead)."""

    visible: int = 0
    in_flight: int = 0
    delayed: int = 0

    def __add__(self, other: QueueDepth) -> QueueDepth:
        return QueueDepth(
            self.visible + other.visible,
            self.in_flight + other.in_flight,
            self.delayed + other.delayed,
        )


class QueueDepths:
    """Reads the depth of a Sundial queue (with its priority queue, if any) and of its DLQ."""

    def __init__(
        self,
        sqs: Any,
        queue_urls: Mapping[str, str],
        priority_queue_urls: Mapping[str, str],
        dead_letter_urls: Mapping[str, str],
    ) -> None:
        self._sqs = sqs
        self._queues = dict(queue_urls)
        self._priority = dict(priority_queue_urls)
        self._dead = dict(dead_letter_urls)

    def _read(self, url: str) -> QueueDepth:
        found = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(_ATTRIBUTES))
        values = [int(found["Attributes"].get(name, 0)) for name in _ATTRIBUTES]
        return QueueDepth(*values)

    def messages(self, queue: str) -> QueueDepth:
        """The queue's job messages: its SQS queue plus its priority queue."""
        depth = self._read(self._queues[queue])
        if queue in self._priority:
            depth += self._read(self._priority[queue])
        return depth

    def dead_letter_messages(self, queue: str) -> int | None:
        """Messages in the queue's DLQ not yet indexed (the indexer consumes the DLQ)."""
        url = self._dead.get(queue)
        return None if url is None else self._read(url).visible
