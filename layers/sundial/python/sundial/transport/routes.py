"""The SQS queues behind Sundial's job queues, and the one routing rule the sender and the
receiver share: a critical or high job goes to its queue's priority queue when the queue has
one (SQS has no priorities), so a flood of normal and low jobs cannot delay it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sundial.model.job import Priority

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

URGENT = frozenset({Priority.CRITICAL, Priority.HIGH})


class QueueRoutes:
    """One SQS client and the URLs of the job queues (and of their priority queues)."""

    def __init__(
        self,
        client: SQSClient,
        queue_urls: Mapping[str, str],
        priority_urls: Mapping[str, str] | None = None,
    ) -> None:
        self._sqs = client
        self._urls = queue_urls
        self._priority_urls = dict(priority_urls or {})

    def url_for(self, queue: str, priority: Priority) -> str:
        """The SQS queue a job goes to: its queue's priority queue if critical or high and the
        queue has one, else the queue itself."""
        if priority in URGENT and queue in self._priority_urls:
            return self._priority_urls[queue]
        return self._urls[queue]

    def priority_url(self, queue: str) -> str | None:
        return self._priority_urls.get(queue)

    def change_visibility(self, url: str, receipt_handle: str, seconds: int) -> None:
        """Keep a message that is being worked on from being delivered again for `seconds`."""
        self._sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
        )
