"""Least privilege: each function may do what its job needs, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infrastructure.synthesis import Synthesized

pytestmark = pytest.mark.infra

# Every role may write its own logs and send X-Ray traces.
BASELINE = {
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}
# Sending (SendMessage and SendMessageBatch); only GET /queues reads queue metadata.
SEND = {"sqs:SendMessage"}
# A worker's lease, heartbeat and ack/nack.
LEASE = {"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage"}
# What Lambda's SQS poller needs on a consumer's role (the event source mapping).
POLL = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
# The consumer SDK's heartbeat.
HEARTBEAT = {"sqs:ChangeMessageVisibility"}
# A transaction's check that a queue or schedule is still paused.
CONDITION_CHECK = {"dynamodb:ConditionCheckItem"}
# What the consumer SDK does on the job table: the fence read, status updates, retry timers.
CONSUMER_TABLE = {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"}
# Which queues are paused (a query of the queue states' partition only): a runner that
# releases a DAG node's children must leave those of a paused queue for its catch-up.
QUEUE_STATES = {"dynamodb:Query"}
QUEUE_STATES_ONLY = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["queues"]}}
# Large payloads (stacks/payload_bucket.py): store one and tag it referenced once its job is
# written (or unreferenced once a change replaced it); read one (a consumer, a lease's GET).
PAYLOAD_PUT = {"s3:PutObject", "s3:PutObjectTagging"}
PAYLOAD_READ = {"s3:GetObject"}
API_TABLE = {
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:Query",
    "dynamodb:BatchGetItem",
}
EXPECTED = {
    "submit": {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:BatchWriteItem",
    }
    | CONDITION_CHECK
    | SEND
    | PAYLOAD_PUT,
    # Read, cancel and retry jobs; query, delete (purge, replay) dead letters; a change's new
    # payload stored, or a later time's payload refreshed; a pending job's shard cursor read
    # (BatchGetItem) to tell whether a sweep sent it (`queued` is derived).
    "jobs": CONSUMER_TABLE
    | {"dynamodb:Query", "dynamodb:DeleteItem", "dynamodb:BatchGetItem"}
    | SEND
    | PAYLOAD_PUT,
    # Lease jobs from every queue and run their lifecycle as the consumer SDK does.
    "workers": LEASE | SEND | CONSUMER_TABLE | QUEUE_STATES | PAYLOAD_READ,
    # Drain every DLQ into index items, marking redriven jobs dead (and releasing a redriven
    # DAG node's children under on_failure=continue).
    "dead_letters": POLL | CONSUMER_TABLE | SEND | QUEUE_STATES,
    # Write a DAG's nodes, read them back in one range query, claim and cancel them, send roots;
    # a root due now on a paused queue is put in a transaction that checks the pause.
    "dags": {
        "dynamodb:BatchWriteItem",
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
    }
    | CONDITION_CHECK
    | SEND,
    # Read and update its state item, start the sweepers; its own failed invocation goes to
    # the dispatch-failures queue (Lambda sends it with the function's role).
    "fanout": {
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "lambda:InvokeFunction",
        "sqs:SendMessage",
    },
    "sweeper": {
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
    }
    | CONDITION_CHECK
    | SEND,
    # Schedules and queue control: read and write schedules, runs and queue states, query a
    # schedule's runs (or a shard's range, to catch a queue up), and send what is due soon.
    # A schedule's delete also deletes its item in the queue's schedule index (one transaction).
    "schedules": API_TABLE | CONDITION_CHECK | SEND | {"dynamodb:DeleteItem"},
    # (a resume's catch-up parks an occurrence of a schedule paused meanwhile: ConditionCheck;
    # GET /queues reads each queue's depth: GetQueueAttributes)
    "queues": API_TABLE | CONDITION_CHECK | SEND | {"sqs:GetQueueAttributes"},
    # Consume its queue, send retries to it and dead jobs to its DLQ, drive the job's item.
    "example_consumer": POLL | HEARTBEAT | SEND | CONSUMER_TABLE | QUEUE_STATES | PAYLOAD_READ,
}
# The functions that hand jobs to SQS: submit; the jobs function (a retry, a job's resume, a
# DAG node's cancel under on_failure=continue); dags (roots, and what a resume releases); the
# sweeper and schedules (occurrences); queues (a resume's catch-up); the workers' ack and the
# dead-letter indexer (a DAG node's children). Any of them may send any job of any queue.
SENDERS = ["submit", "jobs", "dags", "sweeper", "schedules", "queues", "workers", "dead_letters"]


def table_arn(synthesized: Synthesized) -> dict[str, Any]:
    return {"Fn::GetAtt": [synthesized.logical_id("JobTable/Table"), "Arn"]}


def job_queue_arns(synthesized: Synthesized) -> list[dict[str, Any]]:
    return sorted(
        (
            {"Fn::GetAtt": [logical_id, "Arn"]}
            for logical_id, queue in synthesized.resources("AWS::SQS::Queue").items()
            if "RedrivePolicy" in queue["Properties"]
        ),
        key=str,
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_function_is_allowed_exactly_its_actions(synthesized: Synthesized, name: str) -> None:
    # Given one of the Sundial functions
    # When we collect every action its role allows
    allowed = synthesized.allowed(name)

    # Then they are exactly its job's actions plus logging and tracing
    assert set(allowed) == EXPECTED[name] | BASELINE


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_table_actions_apply_to_the_job_table_only(synthesized: Synthesized, name: str) -> None:
    # Given one of the Sundial functions
    allowed = synthesized.allowed(name)

    # When we look at the resources of its DynamoDB actions
    # Then each is the job table itself (no indexes, no streams, no other table)
    for action, resources in allowed.items():
        if action.startswith("dynamodb:"):
            assert resources == [table_arn(synthesized)], action


@pytest.mark.parametrize(
    "name", ["submit", "sweeper", "jobs", "dags", "dead_letters", "schedules", "queues"]
)
def test_dispatching_functions_may_send_to_every_job_queue_only(
    synthesized: Synthesized, name: str
) -> None:
    # Given a function that hands jobs to SQS (jobs: a manual retry re-sends the job)
    allowed = synthesized.allowed(name)

    # When we look at where it may send
    # Then it is every job queue, and never a dead-letter queue (the sweeper also sends its
    # own failed invocation to the dispatch-failures queue, as Lambda's on-failure destination)
    expected = job_queue_arns(synthesized)
    if name == "sweeper":
        failures = {"Fn::GetAtt": [synthesized.logical_id("Dispatch/Failures"), "Arn"]}
        expected = sorted([*expected, failures], key=str)
    assert sorted(allowed["sqs:SendMessage"], key=str) == expected


def priority_queue_arns(synthesized: Synthesized) -> list[dict[str, Any]]:
    priority = synthesized.stack.sundial.job_queues.priority_queues
    return [
        {"Fn::GetAtt": [synthesized.logical_id(f"JobQueues/{name}-priority"), "Arn"]}
        for name in sorted(priority)
    ]


@pytest.mark.parametrize("name", SENDERS)
def test_every_function_that_sends_jobs_may_send_to_every_queue_priority_queues_included(
    synthesized: Synthesized, name: str
) -> None:
    # Given a function that hands jobs (a DAG node, a schedule's occurrence, a retry) to SQS
    sends = synthesized.allowed(name)["sqs:SendMessage"]

    # Then it may send to every job queue, and to every priority queue (where a critical or
    # high job of a queue that has one goes)
    assert priority_queue_arns(synthesized), "cdk.json configures a priority queue"
    for queue in [*job_queue_arns(synthesized), *priority_queue_arns(synthesized)]:
        assert queue in sends, queue


@pytest.mark.parametrize("name", ["workers", "dead_letters", "example_consumer"])
def test_runners_may_query_the_queue_states_and_no_other_partition(
    synthesized: Synthesized, name: str
) -> None:
    # Given a function that ends attempts, and so releases DAG nodes' children
    queries = [
        statement
        for statement in synthesized.statements(name)
        if "dynamodb:Query" in statement["Action"]
    ]

    # Then its one query permission is on the queue states' partition of the job table alone
    assert len(queries) == 1
    assert queries[0]["Action"] == "dynamodb:Query"
    assert queries[0]["Resource"] == table_arn(synthesized)
    assert queries[0]["Condition"] == QUEUE_STATES_ONLY


def test_sweeper_may_query_but_submit_may_not(synthesized: Synthesized) -> None:
    # Given the sweeper and submit roles
    # Then only the sweeper may range-query the table
    assert "dynamodb:Query" in synthesized.allowed("sweeper")
    assert "dynamodb:Query" not in synthesized.allowed("submit")


def test_jobs_may_put_items_but_not_consume_nor_invoke(synthesized: Synthesized) -> None:
    # Given the jobs (get, cancel, retry) role
    allowed = synthesized.allowed("jobs")

    # Then it may put items in the job table (a manual retry's timer item)
    assert allowed["dynamodb:PutItem"] == [table_arn(synthesized)]
    # And it can neither take messages off a queue nor start functions
    assert not [
        action
        for action in allowed
        if action.startswith("lambda:")
        or action in {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}
    ]


def test_example_consumer_sends_to_its_queue_and_its_dlq_only(synthesized: Synthesized) -> None:
    # Given the example consumer, attached to the demo queue and its priority queue
    allowed = synthesized.allowed("example_consumer")
    demo = {"Fn::GetAtt": [synthesized.logical_id("JobQueues/demo"), "Arn"]}
    demo_dlq = {"Fn::GetAtt": [synthesized.logical_id("JobQueues/demo-dlq"), "Arn"]}
    priority = {"Fn::GetAtt": [synthesized.logical_id("JobQueues/demo-priority"), "Arn"]}
    consumed = sorted([demo, priority], key=str)

    # When we look at where it may send
    # Then it is the demo queues (retries) and the demo DLQ (dead jobs), no other queue
    assert sorted(allowed["sqs:SendMessage"], key=str) == sorted([*consumed, demo_dlq], key=str)
    # And every SQS action applies to those queues only
    for action, resources in allowed.items():
        if action.startswith("sqs:"):
            assert {str(r) for r in resources} <= {str(demo), str(demo_dlq), str(priority)}
    # And the actions that take messages off a queue apply to the demo queues alone (never
    # the DLQ)
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert sorted(allowed[action], key=str) == consumed, action


def test_fanout_may_invoke_the_sweeper_only(synthesized: Synthesized) -> None:
    # Given the fanout role
    sweeper_arn = {"Fn::GetAtt": [synthesized.function_id("sweeper"), "Arn"]}

    # When we look at what it may invoke
    resources = synthesized.allowed("fanout")["lambda:InvokeFunction"]

    # Then it is the sweeper and the sweeper's own versions and aliases
    assert resources == [sweeper_arn, {"Fn::Join": ["", [sweeper_arn, ":*"]]}]
    # And nobody else may invoke functions
    for name in ("submit", "jobs", "dags", "sweeper", "schedules", "queues", "example_consumer"):
        assert "lambda:InvokeFunction" not in synthesized.allowed(name)


def test_only_wildcard_resource_is_xray(synthesized: Synthesized) -> None:
    # Given every function role
    for name in EXPECTED:
        # When we look for statements on Resource "*"
        wildcard = {
            action for action, resources in synthesized.allowed(name).items() if "*" in resources
        }
        # Then only the X-Ray actions, which have no resource-level permissions, use it
        assert wildcard == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, name
