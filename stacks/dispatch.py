"""The dispatch clock: an EventBridge rule that runs the fanout function every minute, and the
queue where a tick or a sweep that could not run ends up instead of vanishing."""

from __future__ import annotations

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.nag import acknowledge

SCHEDULE = events.Schedule.rate(Duration.minutes(1))

# A tick or a sweep still failing after two minutes is superseded by a newer tick: every tick
# sweeps everything due, from each shard's cursor, so a lost tick delays jobs, never loses one.
MAX_EVENT_AGE = Duration.seconds(120)
RETRY_ATTEMPTS = 2
# What failed stays readable for the runbook's post-mortem.
FAILURES_RETENTION = Duration.days(14)


@jsii.implements(lambda_.IDestination)
class _SendOnlyQueueDestination:
    """An async invocation's on-failure destination: an SQS queue, to which Lambda sends with
    the function's role. Unlike the CDK's SqsDestination (grant_send_messages), this grants
    sqs:SendMessage only: the queue's attributes and URL are never read."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self._queue = queue

    def bind(
        self,
        _scope: Construct,
        fn: lambda_.IFunction,
        *,
        type: lambda_.DestinationType | None = None,  # the jsii interface names it so
    ) -> lambda_.DestinationConfig:
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self._queue.queue_arn])
        )
        return lambda_.DestinationConfig(destination=self._queue.queue_arn)


class DispatchSchedule(Construct):
    """Ticks once a minute; each tick starts one sweeper per shard group via `fanout`.

    Jobs due between ticks still become visible at their due second: the sweeper sends them
    ahead of time with SQS DelaySeconds.

    Nothing on this path fails silently: a tick EventBridge could not deliver (after
    RETRY_ATTEMPTS retries within MAX_EVENT_AGE) goes to `failures`, as does an async
    invocation of the fan-out or of a sweeper that still failed after Lambda's retries, with
    the request and the error. An alarm watches its depth (stacks/monitoring.py).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fanout: lambda_.Function,
        sweeper: lambda_.Function,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.failures = sqs.Queue(
            self,
            "Failures",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=FAILURES_RETENTION,
            removal_policy=removal_policy,
        )
        acknowledge(
            self.failures,
            "AwsSolutions-SQS3",
            reason=(
                "This queue is itself the dead-letter target of the dispatch tick and of the "
                "fan-out's and sweepers' async invocations; nothing consumes it but an operator."
            ),
        )
        on_failure = _SendOnlyQueueDestination(self.failures)
        for function in (fanout, sweeper):
            function.configure_async_invoke(
                retry_attempts=RETRY_ATTEMPTS,
                max_event_age=MAX_EVENT_AGE,
                on_failure=on_failure,
            )
        self.rule = events.Rule(
            self,
            "EveryMinute",
            description="Sundial dispatch tick: fan out one sweeper per shard group",
            schedule=SCHEDULE,
            targets=[
                targets.LambdaFunction(
                    fanout,
                    dead_letter_queue=self.failures,
                    retry_attempts=RETRY_ATTEMPTS,
                    max_event_age=MAX_EVENT_AGE,
                )
            ],
        )
