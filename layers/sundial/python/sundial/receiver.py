"""Takes messages off the job queues for workers that lease jobs over the HTTP API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

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


class QueueReceiver:
    def __init__(self, client: SQSClient, queue_urls: Mapping[str, str]) -> None:
        self._sqs = client
        self._urls = queue_urls

    def receive(
        self, queue: str, *, wait_s: int, max_messages: int, visibility_s: int
    ) -> list[Received]:
        """Long-poll: returns as soon as a message is there, or empty after `wait_s`."""
        response = self._sqs.receive_message(
            QueueUrl=self._urls[queue],
            WaitTimeSeconds=wait_s,
            MaxNumberOfMessages=max_messages,
            VisibilityTimeout=visibility_s,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [
            Received(
                body=message["Body"],
                receipt_handle=message["ReceiptHandle"],
                receive_count=int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1)),
            )
            for message in response.get("Messages", [])
        ]

    def extend(self, queue: str, receipt_handle: str, seconds: int) -> None:
        try:
            self._sqs.change_message_visibility(
                QueueUrl=self._urls[queue], ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
            )
        except ClientError as error:
            raise _lease_error(error) from error

    def delete(self, queue: str, receipt_handle: str) -> None:
        try:
            self._sqs.delete_message(QueueUrl=self._urls[queue], ReceiptHandle=receipt_handle)
        except ClientError as error:
            raise _lease_error(error) from error


def _lease_error(error: ClientError) -> Exception:
    code = error.response.get("Error", {}).get("Code", "")
    if "ReceiptHandle" in code or "MessageNotInflight" in code:
        return LeaseExpired(code)
    return error
