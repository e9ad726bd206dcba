"""The job queues: one queue and one DLQ per configured name, wired by a redrive policy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infrastructure.synthesis import Synthesized, cdk_json_context

pytestmark = pytest.mark.infra

FOURTEEN_DAYS = 14 * 24 * 3600


def configured_queues() -> dict[str, dict[str, Any]]:
    queues: dict[str, dict[str, Any]] = cdk_json_context()["sundial"]["queues"]
    return queues


def with_priority_queue() -> list[str]:
    return sorted(n for n, q in configured_queues().items() if q.get("priority_queue"))


def test_one_queue_and_one_dlq_per_configured_queue(synthesized: Synthesized) -> None:
    # Given the queues configured in cdk.json
    # When the stack is synthesized
    # Then each name has a queue and a dead-letter queue, and a queue configured with a
    # priority queue has a second pair; besides them there is only the dispatch-failures queue
    # (tests/infrastructure/test_infra_operations.py)
    expected = 2 * len(configured_queues()) + 2 * len(with_priority_queue()) + 1
    synthesized.template.resource_count_is("AWS::SQS::Queue", expected)


@pytest.mark.parametrize(
    "name", sorted(configured_queues()) + [f"{n}-priority" for n in with_priority_queue()]
)
def test_queue_redrives_to_its_own_dlq(synthesized: Synthesized, name: str) -> None:
    # Given a configured queue (or a priority queue, which has its queue's settings)
    settings = configured_queues()[name.removesuffix("-priority")]
    queues = synthesized.resources("AWS::SQS::Queue")
    queue_id = synthesized.logical_id(f"JobQueues/{name}")
    dlq_id = synthesized.logical_id(f"JobQueues/{name}-dlq")

    # When we read its properties
    queue = queues[queue_id]["Properties"]
    dlq = queues[dlq_id]["Properties"]

    # Then it redrives to its DLQ after the configured receive count
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": settings["max_receive_count"],
    }
    assert queue["VisibilityTimeout"] == settings["visibility_timeout_seconds"]
    # And both are SQS-managed-encrypted, and the DLQ keeps messages 14 days
    assert queue["SqsManagedSseEnabled"] is True
    assert dlq["SqsManagedSseEnabled"] is True
    assert dlq["MessageRetentionPeriod"] == FOURTEEN_DAYS
    assert "RedrivePolicy" not in dlq


def test_every_queue_denies_non_tls_access(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    policies = synthesized.resources("AWS::SQS::QueuePolicy").values()

    # When we collect the queues that have an aws:SecureTransport=false deny
    enforced = {
        statement["Resource"]["Fn::GetAtt"][0]
        for policy in policies
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny"
        and statement.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    }

    # Then every queue, DLQs included, is covered
    assert enforced == set(synthesized.resources("AWS::SQS::Queue"))
