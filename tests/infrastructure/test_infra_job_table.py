"""The job table: keys, billing, TTL, recovery, encryption and stream."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from tests.infrastructure.synthesis import Synthesized

pytestmark = pytest.mark.infra


def test_table_is_keyed_by_string_shard_and_due_time(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    # When we look at the DynamoDB table
    # Then it has exactly the (pk, sk) string key and nothing else to pay for or index
    synthesized.template.resource_count_is("AWS::DynamoDB::Table", 1)
    synthesized.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_equals(
                [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ]
            ),
            "GlobalSecondaryIndexes": Match.absent(),
            "LocalSecondaryIndexes": Match.absent(),
        },
    )


def test_table_billing_ttl_recovery_encryption_and_stream(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    # When we look at the DynamoDB table
    # Then it is on-demand, expires finished jobs, is recoverable, encrypted and streamed
    synthesized.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
            "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
        },
    )


def test_table_survives_stack_deletion(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    # When we look at the table's deletion policies
    # Then jobs are retained if the stack is deleted or the table replaced
    synthesized.template.has_resource(
        "AWS::DynamoDB::Table",
        {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"},
    )
