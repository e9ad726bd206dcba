"""The dispatch clock: an EventBridge rule that runs the fanout function every minute."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

SCHEDULE = events.Schedule.rate(Duration.minutes(1))


class DispatchSchedule(Construct):
    """Ticks once a minute; each tick starts one sweeper per shard group via `fanout`.

    Jobs due between ticks still become visible at their due second: the sweeper sends them
    ahead of time with SQS DelaySeconds.
    """

    def __init__(self, scope: Construct, construct_id: str, *, fanout: lambda_.IFunction) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "EveryMinute",
            description="Sundial dispatch tick: fan out one sweeper per shard group",
            schedule=SCHEDULE,
            targets=[targets.LambdaFunction(fanout)],
        )
