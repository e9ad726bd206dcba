"""SQS grants of exactly the actions Sundial's code (or Lambda's poller) uses.

CDK's queue.grant_send_messages and grant_consume_messages (and SqsEventSource, which calls the
latter) also grant sqs:GetQueueAttributes and sqs:GetQueueUrl to every sender and consumer:
Sundial never calls GetQueueUrl (queue URLs come from the environment), and only GET /queues
reads attributes (QUEUE_DEPTH, granted to the queues function alone), so they are left out.
The least-privilege test (tests/infrastructure/test_least_privilege.py) proves each action
here is used.
"""

from __future__ import annotations

import jsii
from aws_cdk import Duration, Names
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

SEND = ("sqs:SendMessage",)  # SendMessage and SendMessageBatch
# A worker's lease (receive), heartbeat (change visibility) and ack/nack (delete).
LEASE = ("sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage")
# What Lambda's SQS poller needs on the function's role (AWS Lambda developer guide, "Using
# Lambda with Amazon SQS": the execution role permissions).
POLL = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
# GET /queues reads each queue's approximate message counts.
QUEUE_DEPTH = ("sqs:GetQueueAttributes",)
# The consumer SDK's heartbeat extends a running job's visibility.
HEARTBEAT = ("sqs:ChangeMessageVisibility",)


def grant_queue(queue: sqs.IQueue, grantee: iam.IGrantable, actions: tuple[str, ...]) -> iam.Grant:
    """`actions` on `queue` alone. (SQS-managed encryption: no key grant is needed.)"""
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=list(actions), resource_arns=[queue.queue_arn]
    )


def grant_send(queue: sqs.IQueue, grantee: iam.IGrantable) -> iam.Grant:
    return grant_queue(queue, grantee, SEND)


@jsii.implements(lambda_.IEventSource)
class PolledQueue:
    """An SQS event source like CDK's SqsEventSource (same mapping, same construct id, so a
    deployed mapping is kept), granting the function's role only what the poller needs."""

    def __init__(
        self,
        queue: sqs.IQueue,
        *,
        batch_size: int,
        max_batching_window: Duration,
        max_concurrency: int,
        report_batch_item_failures: bool = True,
    ) -> None:
        self.queue = queue
        self._batch_size = batch_size
        self._max_batching_window = max_batching_window
        self._max_concurrency = max_concurrency
        self._report_batch_item_failures = report_batch_item_failures
        self.event_source_mapping: lambda_.EventSourceMapping | None = None

    def bind(self, target: lambda_.IFunction) -> None:
        self.event_source_mapping = target.add_event_source_mapping(
            f"SqsEventSource:{Names.node_unique_id(self.queue.node)}",
            event_source_arn=self.queue.queue_arn,
            batch_size=self._batch_size,
            max_batching_window=self._max_batching_window,
            max_concurrency=self._max_concurrency,
            report_batch_item_failures=self._report_batch_item_failures,
        )
        grant_queue(self.queue, target, POLL)
