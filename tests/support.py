"""Test helpers: the table and queues as the CDK stack declares them, and SQS reading."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

TABLE = "sundial-jobs"
QUEUES = ("default", "email")


def create_table(client: DynamoDBClient) -> None:
    client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
    )
    client.update_time_to_live(
        TableName=TABLE,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )


def create_queues(client: SQSClient) -> dict[str, str]:
    urls = {}
    for name in QUEUES:
        dlq = client.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5})
        urls[name] = client.create_queue(
            QueueName=name, Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": "120"}
        )["QueueUrl"]
    return urls


def receive_all(client: SQSClient, url: str) -> list[dict[str, Any]]:
    """Every message visible now (deleting each), as envelopes."""
    bodies: list[dict[str, Any]] = []
    while True:
        response = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=600
        )
        messages = response.get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
