"""Takes messages off the job queues for workers that lease jobs over the HTTP API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sundial.transport.routes import QueueRoutes

if TYPE_CHECKING:
    pass

SQS_MAX_WAIT_S = 20
SQS_MAX_RECEIVE = 10
SQS_MAX_VISIBILITY_S = 43_200


@dataclass(frozen=True, slots=True)
class Received:
    body: str
    receipt_handle: str
    receive_count: int


class LeaseExpired(Exception):
    """SQS no longer accepts the receipt handle: the lease ran out (or was never valid)."""


# A receipt handle from a queue's priority queue is handed out with this prefix, so extending
# or deleting it later goes to the queue it came from.
_PRIORITY_RECEIPT = "priority:"


class QueueReceiver(QueueRoutes):
    """Receives, extends and deletes job messages for leases (routed as transport.routes says:
    a message is extended and deleted on the queue it came from)."""

    def receive(
        self, queue: str, *, wait_s: int, max_messages: int, visibility_s: int
    ) -> list[Received]:
        """Long-poll: returns as soon as a message is there, or empty after `wait_s`. A queue
        with a priority queue is read there first (without waiting): its critical and high
        jobs go ahead of the rest."""
        priority_url = self.priority_url(queue)
        if priority_url is not None:
            urgent = self._receive(priority_url, 0, max_messages, visibility_s, _PRIORITY_RECEIPT)
            if urgent:
                return urgent
        return self._receive(self._urls[queue], wait_s, max_messages, visibility_s, "")

    def _receive(
        self, url: str, wait_s: int, max_messages: int, visibility_s: int, prefix: str
    ) -> list[Received]:
        response = self._sqs.receive_message(
            QueueUrl=url,
            WaitTimeSeconds=wait_s,
            MaxNumberOfMessages=max_messages,
            VisibilityTimeout=visibility_s,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [
            Received(
                body=message["Body"],
                receipt_handle=prefix + message["ReceiptHandle"],
                receive_count=int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1)),
            )
            for message in response.get("Messages", [])
        ]

    def _source(self, queue: str, receipt_handle: str) -> tuple[str, str]:
        priority_url = self.priority_url(queue)
        if receipt_handle.startswith(_PRIORITY_RECEIPT) and priority_url is not None:
            return priority_url, receipt_handle.removeprefix(_PRIORITY_RECEIPT)
        return self._urls[queue], receipt_handle

    def extend(self, queue: str, receipt_handle: str, seconds: int) -> None:
        url, handle = self._source(queue, receipt_handle)
        try:
            self.change_visibility(url, handle, seconds)
        except ClientError as error:
            raise _lease_error(error) from error

    def delete(self, queue: str, receipt_handle: str) -> None:
        url, handle = self._source(queue, receipt_handle)
        try:
            self._sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
        except ClientError as error:
            raise _lease_error(error) from error


def _lease_error(error: ClientError) -> Exception:
    code = error.response.get("Error", {}).get("Code", "")
    if "ReceiptHandle" in code or "MessageNotInflight" in code:
        return LeaseExpired(code)
    return error
