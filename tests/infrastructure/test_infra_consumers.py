"""Consumers: the example consumer fed by the demo queue, and QueueConsumer's synth-time checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from stacks.consumers import QueueConsumer
from stacks.job_queues import JobQueues
from stacks.settings import QueueSettings, SundialSettings
from stacks.sundial import SundialStack
from sundial.store.queue_states import QUEUES_PK
from tests.infrastructure.synthesis import Synthesized, allowed_actions, cdk_json_context

pytestmark = pytest.mark.infra


def _mappings(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """The example consumer's event source mappings' properties, by the logical id of the
    queue each reads."""
    example_consumer = {"Ref": synthesized.function_id("example_consumer")}
    return {
        mapping["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]: mapping["Properties"]
        for mapping in synthesized.resources("AWS::Lambda::EventSourceMapping").values()
        if mapping["Properties"]["FunctionName"] == example_consumer
    }


def test_demo_queues_feed_the_example_consumer(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack (example_consumer_queue defaults to "demo", which
    # has a priority queue)
    # When we look for the example consumer's event source mappings
    # Then there are exactly two: from the demo queue and from its priority queue
    assert set(_mappings(synthesized)) == {
        synthesized.logical_id("JobQueues/demo"),
        synthesized.logical_id("JobQueues/demo-priority"),
    }


@pytest.mark.parametrize("queue", ["demo", "demo-priority"])
def test_example_consumer_mapping_reports_partial_batch_failures(
    synthesized: Synthesized, queue: str
) -> None:
    # Given one of the example consumer's event source mappings
    properties = _mappings(synthesized)[synthesized.logical_id(f"JobQueues/{queue}")]

    # Then it takes batches of up to 10, and invokes as soon as a receive returns messages (no
    # batching window: a job starts when it becomes visible)
    assert properties["BatchSize"] == 10
    assert properties.get("MaximumBatchingWindowInSeconds", 0) == 0
    # And only the records the function lists as failed are retried
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # And at most two concurrent invocations drain each queue (the lowest value SQS allows):
    # the priority queue's consumers are its own, whatever the backlog of the other
    assert properties["ScalingConfig"] == {"MaximumConcurrency": 2}


def test_demo_queue_visibility_covers_six_example_consumer_timeouts(
    synthesized: Synthesized,
) -> None:
    # Given the demo queue and the example consumer, as synthesized
    queue = synthesized.resources("AWS::SQS::Queue")[synthesized.logical_id("JobQueues/demo")]
    timeout = synthesized.function_properties("example_consumer")["Timeout"]

    # Then the queue's visibility timeout is at least 6 x the function timeout (AWS guidance)
    assert queue["Properties"]["VisibilityTimeout"] >= 6 * timeout


def test_example_consumer_may_drive_the_job_lifecycle_on_its_queue(
    synthesized: Synthesized,
) -> None:
    # Given the example consumer's role
    allowed = synthesized.allowed("example_consumer")
    table = {"Fn::GetAtt": [synthesized.logical_id("JobTable/Table"), "Arn"]}
    demo = {"Fn::GetAtt": [synthesized.logical_id("JobQueues/demo"), "Arn"]}
    demo_dlq = {"Fn::GetAtt": [synthesized.logical_id("JobQueues/demo-dlq"), "Arn"]}
    priority = {"Fn::GetAtt": [synthesized.logical_id("JobQueues/demo-priority"), "Arn"]}

    # When we look at its DynamoDB and SQS actions
    table_actions = {a: r for a, r in allowed.items() if a.startswith("dynamodb:")}
    sqs_actions = {a: r for a, r in allowed.items() if a.startswith("sqs:")}

    # Then on the job table it may read (the fence), update (status) and put (retry timers),
    # and query (only the queue states, test_infra_permissions)
    assert table_actions == {
        "dynamodb:GetItem": [table],
        "dynamodb:UpdateItem": [table],
        "dynamodb:PutItem": [table],
        "dynamodb:Query": [table],
    }
    # And it may consume the demo queue and its priority queue, heartbeat included, and nothing
    # else
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert sorted(sqs_actions[action], key=str) == sorted([demo, priority], key=str), action
    # And send retries to those two and dead jobs to the demo DLQ only
    assert sorted(sqs_actions["sqs:SendMessage"], key=str) == sorted(
        [demo, demo_dlq, priority], key=str
    )


def test_no_example_consumer_when_its_queue_is_unset() -> None:
    # Given the cdk.json settings with example_consumer_queue set to null
    settings = SundialSettings.from_context(
        cdk_json_context()["sundial"] | {"example_consumer_queue": None}
    )

    # When the stack is built
    stack = SundialStack(cdk.App(), "NoExample", settings=settings)
    template = Template.from_stack(stack)

    # Then there is no example consumer: only the dead-letter indexer reads queues (the DLQs,
    # priority queues' included)
    assert stack.sundial.example_consumer is None
    priority = sum(1 for queue in settings.queues.values() if queue.priority_queue)
    # (and the history recorder reads the job table's stream)
    template.resource_count_is(
        "AWS::Lambda::EventSourceMapping", len(settings.queues) + priority + 1
    )
    template.resource_count_is("AWS::Lambda::Function", 10)


def _attach(
    *, with_dlq: bool = False, dag_children: int = 0, **props: Any
) -> Callable[[], QueueConsumer]:
    """A QueueConsumer on a fresh queue, table and function (and dead-letter queue if
    `with_dlq`; `dag_children` more queues as its DAG child queues, its own queue too), with
    `props` overriding the defaults."""

    def build() -> QueueConsumer:
        stack = cdk.Stack(cdk.App(), "Consumers")
        queue = sqs.Queue(stack, "Queue", visibility_timeout=cdk.Duration.seconds(30))
        table = dynamodb.Table(
            stack,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        )
        function = lambda_.Function(
            stack,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="index.handler",
            code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
            timeout=cdk.Duration.seconds(5),
        )
        children = [sqs.Queue(stack, f"Child{n}") for n in range(dag_children)]
        return QueueConsumer(
            stack,
            "Consumer",
            queue=queue,
            function=function,
            table=table,
            dead_letter_queue=sqs.Queue(stack, "Dlq") if with_dlq else None,
            dag_child_queues=[*children, queue] if children else (),
            **{
                "function_timeout": cdk.Duration.seconds(5),
                "queue_visibility_timeout": cdk.Duration.seconds(30),
                **props,
            },
        )

    return build


def test_queue_consumer_accepts_visibility_of_exactly_six_timeouts() -> None:
    # Given a 5 s function on a queue with a 30 s visibility timeout
    # When they are attached with the default props
    consumer = _attach()()

    # Then the function gets an SQS event source mapping with partial batch failures
    Template.from_stack(cdk.Stack.of(consumer)).has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"BatchSize": 10, "FunctionResponseTypes": ["ReportBatchItemFailures"]},
    )


def test_queue_consumer_rejects_visibility_below_six_timeouts() -> None:
    # Given a 10 s function and a queue whose visibility timeout is 30 s (< 6 x 10 s)
    build = _attach(function_timeout=cdk.Duration.seconds(10))

    # When they are attached
    # Then synth stops with an error naming both numbers
    with pytest.raises(ValueError, match=r"visibility timeout \(30 s\).*function timeout \(10 s\)"):
        build()


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"batch_size": 0}, "batch_size must be 1..10000, got 0"),
        ({"batch_size": 10_001}, "batch_size must be 1..10000, got 10001"),
        ({"max_concurrency": 1}, "max_concurrency must be 2..1000, got 1"),
        ({"max_concurrency": 1_001}, "max_concurrency must be 2..1000, got 1001"),
        ({"priority_max_concurrency": 1}, "priority_max_concurrency must be 2..1000, got 1"),
    ],
)
def test_queue_consumer_rejects_props_outside_aws_limits(
    props: dict[str, Any], message: str
) -> None:
    # Given a batch size or concurrency outside what an SQS event source mapping allows
    build = _attach(**props)

    # When the consumer is attached
    # Then synth stops with an error naming the prop, its range and the value
    with pytest.raises(ValueError, match=message):
        build()


def _statements(consumer: QueueConsumer) -> dict[str, list[Any]]:
    """{action: resources} of every statement in the consumer function's role policies."""
    template = Template.from_stack(cdk.Stack.of(consumer))
    return allowed_actions(template.find_resources("AWS::IAM::Policy").values())


def _raw_statements(consumer: QueueConsumer) -> list[dict[str, Any]]:
    template = Template.from_stack(cdk.Stack.of(consumer))
    return [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _arn(consumer: QueueConsumer, construct: Any) -> dict[str, Any]:
    stack = cdk.Stack.of(consumer)
    return {"Fn::GetAtt": [stack.get_logical_id(construct.node.default_child), "Arn"]}


def test_queue_consumer_grants_exactly_the_job_lifecycle() -> None:
    # Given a function attached to a queue and the job table, without a dead-letter queue
    # When the consumer is built
    consumer = _attach()()
    allowed = _statements(consumer)
    queue, table = _arn(consumer, consumer.queue), _arn(consumer, consumer.table)

    # Then it may consume the queue (Lambda's poller: receive, delete, queue attributes; the
    # SDK's heartbeats) and send retries to it, and never look queues up by name
    assert set(allowed) == {
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:SendMessage",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
    }
    for action in sorted(set(allowed) - {"sqs:SendMessage"}):
        if action.startswith("sqs:"):
            assert allowed[action] == [queue], action
    assert allowed["sqs:SendMessage"] == [queue]
    # And get, update and put items of the table, and query its queue states, nothing more:
    # its item actions on job partitions only (stacks/job_table.py, grant_runner_items)
    for action in ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"):
        assert allowed[action] == [table], action
        [statement] = [s for s in _raw_statements(consumer) if s["Action"] == action]
        leading = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
        assert leading == ["shard#*"], action
    [query] = [s for s in _raw_statements(consumer) if "dynamodb:Query" in s["Action"]]
    assert (query["Action"], query["Resource"]) == ("dynamodb:Query", table)
    assert query["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [QUEUES_PK]}
    }


def test_queue_consumer_may_send_to_the_dead_letter_queue_it_is_given() -> None:
    # Given a function attached to a queue, the job table and the queue's dead-letter queue
    # When the consumer is built
    consumer = _attach(with_dlq=True)()
    assert consumer.dead_letter_queue is not None
    allowed = _statements(consumer)
    dlq = _arn(consumer, consumer.dead_letter_queue)

    # Then it may also send to the dead-letter queue (dead jobs)
    assert sorted(allowed["sqs:SendMessage"], key=str) == sorted(
        [_arn(consumer, consumer.queue), dlq], key=str
    )
    # And never take messages off it
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert dlq not in allowed[action], action


def test_queue_consumer_may_send_to_the_dag_child_queues_it_is_given() -> None:
    # Given a consumer whose DAG nodes may release children onto two other queues (and its own)
    consumer = _attach(dag_children=2)()
    allowed = _statements(consumer)
    stack = cdk.Stack.of(consumer)
    children = [_arn(consumer, stack.node.find_child(f"Child{n}")) for n in range(2)]

    # Then it may send to them and to its own queue, once each
    assert sorted(allowed["sqs:SendMessage"], key=str) == sorted(
        [_arn(consumer, consumer.queue), *children], key=str
    )
    # And never take messages off a child queue
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert allowed[action] == [_arn(consumer, consumer.queue)], action


def test_queue_consumer_feeds_a_priority_queue_with_its_own_concurrency() -> None:
    # Given a queue's priority queue, attached with a concurrency of its own
    stack = cdk.Stack(cdk.App(), "Priority")
    queue = sqs.Queue(stack, "Queue", visibility_timeout=cdk.Duration.seconds(30))
    urgent = sqs.Queue(stack, "Urgent", visibility_timeout=cdk.Duration.seconds(30))
    table = dynamodb.Table(
        stack,
        "Table",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
    )
    function = lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
        timeout=cdk.Duration.seconds(5),
    )
    consumer = QueueConsumer(
        stack,
        "Consumer",
        queue=queue,
        function=function,
        table=table,
        function_timeout=cdk.Duration.seconds(5),
        queue_visibility_timeout=cdk.Duration.seconds(30),
        max_concurrency=2,
        priority_queue=urgent,
        priority_max_concurrency=10,
    )
    # When it is built
    template = Template.from_stack(stack)
    # Then each queue has its own mapping and concurrency
    template.resource_count_is("AWS::Lambda::EventSourceMapping", 2)
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"EventSourceArn": _arn(consumer, urgent), "ScalingConfig": {"MaximumConcurrency": 10}},
    )
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"EventSourceArn": _arn(consumer, queue), "ScalingConfig": {"MaximumConcurrency": 2}},
    )
    # And retries of its jobs may go back to it
    assert sorted(_statements(consumer)["sqs:SendMessage"], key=str) == sorted(
        [_arn(consumer, queue), _arn(consumer, urgent)], key=str
    )


def test_queue_consumer_may_send_to_the_priority_queues_of_its_queue_and_dag_child_queues() -> None:
    # Given Sundial's queues: etl and email with priority queues, plain without one
    stack = cdk.Stack(cdk.App(), "PriorityChildren")
    with_priority = QueueSettings(
        max_receive_count=5, visibility_timeout_seconds=30, priority_queue=True
    )
    queues = JobQueues(
        stack,
        "JobQueues",
        queue_settings={
            "etl": with_priority,
            "email": with_priority,
            "plain": QueueSettings(max_receive_count=5, visibility_timeout_seconds=30),
        },
    )
    table = dynamodb.Table(
        stack,
        "Table",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
    )
    function = lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
        timeout=cdk.Duration.seconds(5),
    )
    # When a consumer of etl (not fed by etl's priority queue) is given email and plain as
    # the queues of its DAG nodes' children
    consumer = QueueConsumer(
        stack,
        "Consumer",
        queue=queues.queues["etl"],
        function=function,
        table=table,
        dead_letter_queue=queues.dead_letter_queues["etl"],
        dag_child_queues=[queues.queues["email"], queues.queues["plain"], queues.queues["etl"]],
        function_timeout=cdk.Duration.seconds(5),
        queue_visibility_timeout=cdk.Duration.seconds(30),
    )
    allowed = _statements(consumer)

    # Then it may send to each child queue and to each child's priority queue (a critical or
    # high child goes there), to etl's priority queue (a critical job's retry), and to etl's
    # DLQ, once each; not to any other DLQ
    expected = [
        queues.queues["etl"],
        queues.priority_queues["etl"],
        queues.queues["email"],
        queues.priority_queues["email"],
        queues.queues["plain"],
        queues.dead_letter_queues["etl"],
    ]
    assert sorted(allowed["sqs:SendMessage"], key=str) == sorted(
        (_arn(consumer, queue) for queue in expected), key=str
    )
    # And it consumes etl alone
    assert allowed["sqs:ReceiveMessage"] == [_arn(consumer, queues.queues["etl"])]


def test_send_targets_are_a_queue_and_its_priority_queue() -> None:
    stack = cdk.Stack(cdk.App(), "Targets")
    queues = JobQueues(
        stack,
        "JobQueues",
        queue_settings={
            "etl": QueueSettings(
                max_receive_count=5, visibility_timeout_seconds=30, priority_queue=True
            ),
            "plain": QueueSettings(max_receive_count=5, visibility_timeout_seconds=30),
        },
    )
    other = sqs.Queue(stack, "Other")
    etl = JobQueues.send_targets(queues.queues["etl"])
    assert len(etl) == 2
    assert etl[0] is queues.queues["etl"] and etl[1] is queues.priority_queues["etl"]
    [plain] = JobQueues.send_targets(queues.queues["plain"])
    assert plain is queues.queues["plain"]
    [alone] = JobQueues.send_targets(other)
    assert alone is other
