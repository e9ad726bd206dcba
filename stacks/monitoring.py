"""Alarms, the topic they notify, and one CloudWatch dashboard per stack.

Each alarm's description names the runbook section (docs/operations.md) that says what it means
and what to do; the thresholds and why they are what they are are documented there too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.functions import POWERTOOLS_ENVIRONMENT
from stacks.settings import OperationsSettings, QueueSettings

RUNBOOK = "docs/operations.md"
PERIOD = Duration.minutes(5)
# The custom metrics' namespace and dimension, as Powertools Metrics writes them (EMF).
NAMESPACE = POWERTOOLS_ENVIRONMENT["POWERTOOLS_METRICS_NAMESPACE"]
SERVICE = {"service": POWERTOOLS_ENVIRONMENT["POWERTOOLS_SERVICE_NAME"]}
# A function whose longest invocation in 5 minutes reaches this share of its timeout is about
# to be cut off mid-work (a sweeper then leaves the rest of its shards to the next tick).
DURATION_ALARM_SHARE = 0.8
# A DLQ the indexer drains stays near empty; messages there for this long mean it is not.
DLQ_UNDRAINED_PERIODS = 3
# 5xx answers from the API in 5 minutes: a handful is an incident, one may be a cold AWS call.
API_SERVER_ERRORS = 5
# The history's stream reader this far behind (its oldest record read, in ms): a batch keeps
# failing or the function cannot keep up. Normally a few seconds; records reach the on-failure
# destination at 12 hours (stacks.history_capture.MAX_RECORD_AGE), long after this fires.
HISTORY_ITERATOR_AGE_ALARM_MS = 15 * 60 * 1000


@dataclass(frozen=True)
class WatchedFunction:
    """A function whose errors, throttles and duration are alarmed (and drawn)."""

    name: str  # as in the runbook: "sweeper", "fanout", "history", "dead-letter-indexer"
    function: lambda_.IFunction
    timeout: Duration


@dataclass(frozen=True)
class WatchedStream:
    """A function reading a stream (the history's): how far behind it is, the records it
    could not read, and batches its on-failure destination could not take."""

    name: str  # as in the runbook: "history"
    function: lambda_.IFunction
    failed_records_metric: str  # the custom metric the function writes for records it fails


@dataclass(frozen=True)
class WatchedQueue:
    """A job queue (or a priority queue) with the DLQ SQS redrives it to."""

    name: str
    queue: sqs.IQueue
    dead_letter_queue: sqs.IQueue
    settings: QueueSettings
    priority: bool = False  # `name` is then "<queue>-priority"


class SundialMonitoring(Construct):
    """The alarms of one Sundial deployment, the SNS topic they notify (`topic`, created
    unless settings.alarm_topic_arn names one), and its dashboard (`dashboard`, None when
    settings.dashboard is off).

    `alarms` maps a stable name (e.g. "queue/email/dead-letters", "sweeper/errors") to its
    alarm: the runbook and the tests use these names."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: OperationsSettings,
        queues: Sequence[WatchedQueue],
        functions: Sequence[WatchedFunction],
        dispatch_failures: sqs.IQueue,
        stage: apigwv2.HttpStage,
        api_functions: Mapping[str, lambda_.IFunction],
        streams: Sequence[WatchedStream] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(settings)
        self._action = cloudwatch_actions.SnsAction(self.topic)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for watched in queues:
            self._watch_queue(watched)
        for function in functions:
            self._watch_function(function)
        for stream in streams:
            self._watch_stream(stream)
        self._watch_dispatch(settings, dispatch_failures)
        self._alarm(
            "api/server-errors",
            stage.metric_server_error(period=PERIOD, statistic="Sum"),
            threshold=API_SERVER_ERRORS,
            what=f"the API answered {API_SERVER_ERRORS} or more 5xx in 5 minutes",
        )
        self.dashboard: cloudwatch.Dashboard | None = None
        if settings.dashboard:
            self.dashboard = self._dashboard(queues, functions, stage, api_functions)

    # -- alarms ------------------------------------------------------------------------------

    def _topic(self, settings: OperationsSettings) -> sns.ITopic:
        if settings.alarm_topic_arn is not None:
            return sns.Topic.from_topic_arn(self, "AlarmTopic", settings.alarm_topic_arn)
        # CloudWatch cannot publish to a topic encrypted with the AWS-managed SNS key, so the
        # topic has a key of its own that CloudWatch may use.
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Sundial alarm topic encryption (CloudWatch alarms may use it)",
            enable_key_rotation=True,
        )
        key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        return sns.Topic(
            self,
            "AlarmTopic",
            display_name="Sundial alarms",
            master_key=key,
            enforce_ssl=True,
        )

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        what: str,
        periods: int = 1,
    ) -> cloudwatch.Alarm:
        anchor = name.rsplit("/", maxsplit=1)[-1]
        alarm = cloudwatch.Alarm(
            self,
            name.replace("/", "-"),
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            # No data is a quiet system (no sends, no errors), never a failure of its own.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"Sundial {name}: {what}. Runbook: {RUNBOOK}#{anchor}",
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms[name] = alarm
        return alarm

    def _watch_queue(self, watched: WatchedQueue) -> None:
        name, settings = watched.name, watched.settings
        if not watched.priority:  # a priority queue's dead jobs count under its queue's name
            self._alarm(
                f"queue/{name}/dead-letters",
                _custom("DeadLetters", "Sum", queue=name),
                threshold=settings.dead_letter_alarm_threshold,
                what=f"{settings.dead_letter_alarm_threshold} or more jobs of {name} died "
                "in 5 minutes",
            )
        self._alarm(
            f"queue/{name}/dlq-undrained",
            watched.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=PERIOD, statistic="Minimum"
            ),
            threshold=1,
            periods=DLQ_UNDRAINED_PERIODS,
            what=f"{name}'s DLQ has held messages for 15 minutes: the indexer is not draining",
        )
        self._alarm(
            f"queue/{name}/oldest-message",
            watched.queue.metric_approximate_age_of_oldest_message(
                period=PERIOD, statistic="Maximum"
            ),
            threshold=settings.oldest_message_alarm_seconds,
            what=f"a message of {name} is {settings.oldest_message_alarm_seconds} s old or "
            "more: its consumers are not keeping up",
        )

    def _watch_function(self, watched: WatchedFunction) -> None:
        function, name = watched.function, watched.name
        self._alarm(
            f"{name}/errors",
            function.metric_errors(period=PERIOD, statistic="Sum"),
            threshold=1,
            what=f"the {name} function failed",
        )
        self._alarm(
            f"{name}/throttles",
            function.metric_throttles(period=PERIOD, statistic="Sum"),
            threshold=1,
            what=f"the {name} function was throttled",
        )
        limit_ms = watched.timeout.to_milliseconds() * DURATION_ALARM_SHARE
        self._alarm(
            f"{name}/duration",
            function.metric_duration(period=PERIOD, statistic="Maximum"),
            threshold=limit_ms,
            what=f"a {name} invocation ran {limit_ms:.0f} ms or more, near its timeout",
        )

    def _watch_stream(self, watched: WatchedStream) -> None:
        """A reader that stops, falls behind or fails records is never silent: each way a batch
        can end in the on-failure destination raises one of these (an invocation that fails:
        `<name>/errors`), and a batch the destination could not take raises its own."""
        name, function = watched.name, watched.function
        self._alarm(
            f"{name}/iterator-age",
            function.metric("IteratorAge", period=PERIOD, statistic="Maximum"),
            threshold=HISTORY_ITERATOR_AGE_ALARM_MS,
            what=f"the {name} stream reader is 15 minutes or more behind: a batch keeps failing "
            "or the function cannot keep up",
        )
        self._alarm(
            f"{name}/failed-records",
            _custom(watched.failed_records_metric, "Sum"),
            threshold=1,
            what=f"the {name} function could not read a stream record: its batch is retried, "
            "then put in the on-failure destination and replayed hourly",
        )
        self._alarm(
            f"{name}/destination-failures",
            function.metric("DestinationDeliveryFailures", period=PERIOD, statistic="Sum"),
            threshold=1,
            what=f"a failed {name} batch could not be put in its on-failure destination: "
            "its records are lost from the history",
        )

    def _watch_dispatch(self, settings: OperationsSettings, failures: sqs.IQueue) -> None:
        self._alarm(
            "dispatch/lateness",
            _custom("DispatchLatenessMs", "p99"),
            threshold=settings.dispatch_lateness_alarm_ms,
            periods=3,
            what=f"p99 dispatch lateness (visible in SQS - due) of "
            f"{settings.dispatch_lateness_alarm_ms} ms or more for 15 minutes",
        )
        for metric, what in (
            ("SendFailures", "the sweeper could not send claimed jobs (they stay due)"),
            ("SweepErrors", "a sweep met an AWS error (its shard waits for the next tick)"),
            ("PoisonJobs", "a job could never be sent as it is and was marked dead"),
            ("SweeperStartFailures", "the fan-out could not start a sweeper"),
        ):
            self._alarm(
                f"dispatch/{_kebab(metric)}", _custom(metric, "Sum"), threshold=1, what=what
            )
        self._alarm(
            "dispatch/failures",
            failures.metric_approximate_number_of_messages_visible(
                period=PERIOD, statistic="Maximum"
            ),
            threshold=1,
            what="a dispatch tick or sweeper invocation failed after its retries",
        )

    # -- dashboard ---------------------------------------------------------------------------

    def _dashboard(
        self,
        queues: Sequence[WatchedQueue],
        functions: Sequence[WatchedFunction],
        stage: apigwv2.HttpStage,
        api_functions: Mapping[str, lambda_.IFunction],
    ) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        every_function = {w.name: w.function for w in functions} | dict(api_functions)
        dashboard.add_widgets(
            _graph(
                "Jobs submitted and dispatched (per 5 min)",
                [_custom("JobsSubmitted", "Sum"), _custom("JobsDispatched", "Sum")],
            ),
            _graph(
                "Dispatch lateness: visible in SQS - due (ms)",
                [
                    _custom("DispatchLatenessMs", "p50", label="p50"),
                    _custom("DispatchLatenessMs", "p99", label="p99"),
                ],
            ),
            _graph(
                "API requests and errors",
                [
                    stage.metric_count(period=PERIOD, statistic="Sum", label="requests"),
                    stage.metric_client_error(period=PERIOD, statistic="Sum", label="4xx"),
                    stage.metric_server_error(period=PERIOD, statistic="Sum", label="5xx"),
                ],
            ),
        )
        dashboard.add_widgets(
            _graph(
                "Queue depth (visible messages)",
                [
                    w.queue.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic="Maximum", label=w.name
                    )
                    for w in queues
                ],
            ),
            _graph(
                "DLQ depth (visible messages) and dead letters indexed",
                [
                    w.dead_letter_queue.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic="Maximum", label=f"{w.name}-dlq"
                    )
                    for w in queues
                ]
                + [
                    _custom("DeadLetters", "Sum", label=f"{w.name} dead letters", queue=w.name)
                    for w in queues
                    if not w.priority
                ],
            ),
            _graph(
                "Function errors",
                [
                    function.metric_errors(period=PERIOD, statistic="Sum", label=name)
                    for name, function in sorted(every_function.items())
                ],
            ),
        )
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Alarms", alarms=list(self.alarms.values()), width=24, height=6
            )
        )
        return dashboard


def _custom(
    name: str, statistic: str, *, label: str | None = None, queue: str | None = None
) -> cloudwatch.Metric:
    """A metric Sundial's functions write with Powertools (namespace Sundial, service dim)."""
    dimensions = SERVICE | ({"queue": queue} if queue is not None else {})
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map=dimensions,
        period=PERIOD,
        statistic=statistic,
        label=label,
    )


def _graph(title: str, metrics: Sequence[cloudwatch.IMetric]) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=list(metrics), width=8, height=6)


def _kebab(name: str) -> str:
    """'SweeperStartFailures' -> 'sweeper-start-failures'."""
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in name).lstrip("-")
