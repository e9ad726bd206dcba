"""Running it in production (stacks/monitoring.py, stacks/dispatch.py, settings.operations):
every alarm with its metric and threshold, the dashboard, what a stack operation may delete,
where a failed tick or sweep goes, and the dispatch path's reserved concurrency."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infrastructure.synthesis import Synthesized, synthesize

pytestmark = pytest.mark.infra

STATEFUL = ("AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::KMS::Key")


def _alarms(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """{alarm name as in the runbook ("sweeper/errors"): its properties}."""
    alarms = {}
    for resource in synthesized.resources("AWS::CloudWatch::Alarm").values():
        properties = resource["Properties"]
        description: str = properties["AlarmDescription"]
        name = description.removeprefix("Sundial ").split(":", maxsplit=1)[0]
        alarms[name] = properties
    return alarms


def _queue_alarm_ref(synthesized: Synthesized, path: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [synthesized.logical_id(path), "QueueName"]}


def test_every_alarm_watches_its_metric_at_its_threshold(synthesized: Synthesized) -> None:
    # Given the stack as cdk.json configures it (queues default, email; demo with a priority
    # queue; default thresholds)
    alarms = _alarms(synthesized)

    def watches(name: str, metric: str, statistic: str, threshold: float, periods: int = 1) -> None:
        alarm = alarms[name]
        assert alarm["MetricName"] == metric, name
        assert alarm.get("Statistic", alarm.get("ExtendedStatistic")) == statistic, name
        assert alarm["Threshold"] == threshold, name
        assert alarm["EvaluationPeriods"] == periods, name
        assert alarm["Period"] == 300, name
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold", name
        assert alarm["TreatMissingData"] == "notBreaching", name

    # Then each queue has its dead letters, an undrained DLQ and its backlog's age watched
    for queue in ("default", "email", "demo"):
        watches(f"queue/{queue}/dead-letters", "DeadLetters", "Sum", 1)
        assert {"Name": "queue", "Value": queue} in alarms[f"queue/{queue}/dead-letters"][
            "Dimensions"
        ]
    for queue in ("default", "email", "demo", "demo-priority"):
        watches(
            f"queue/{queue}/dlq-undrained", "ApproximateNumberOfMessagesVisible", "Minimum", 1, 3
        )
        watches(f"queue/{queue}/oldest-message", "ApproximateAgeOfOldestMessage", "Maximum", 1800)
    assert alarms["queue/email/oldest-message"]["Dimensions"] == [
        {"Name": "QueueName", "Value": _queue_alarm_ref(synthesized, "JobQueues/email")}
    ]
    assert alarms["queue/email/dlq-undrained"]["Dimensions"] == [
        {"Name": "QueueName", "Value": _queue_alarm_ref(synthesized, "JobQueues/email-dlq")}
    ]
    # And each background function's errors, throttles and duration near its timeout
    for function, timeout_s in (
        ("fanout", 30),
        ("sweeper", 60),
        ("dead-letter-indexer", 10),
        ("history", 60),
    ):
        watches(f"{function}/errors", "Errors", "Sum", 1)
        watches(f"{function}/throttles", "Throttles", "Sum", 1)
        watches(f"{function}/duration", "Duration", "Maximum", timeout_s * 1000 * 0.8)
    assert alarms["sweeper/errors"]["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": synthesized.function_id("sweeper")}}
    ]
    # And dispatch: lateness p99 for 15 minutes, send failures, sweep errors, poison jobs,
    # sweepers the fan-out could not start, and ticks or sweeps that failed after retries
    watches("dispatch/lateness", "DispatchLatenessMs", "p99", 5000, 3)
    for name, metric in (
        ("dispatch/send-failures", "SendFailures"),
        ("dispatch/sweep-errors", "SweepErrors"),
        ("dispatch/poison-jobs", "PoisonJobs"),
        ("dispatch/sweeper-start-failures", "SweeperStartFailures"),
    ):
        watches(name, metric, "Sum", 1)
        assert alarms[name]["Namespace"] == "Sundial"
        assert alarms[name]["Dimensions"] == [{"Name": "service", "Value": "sundial"}]
    watches("dispatch/failures", "ApproximateNumberOfMessagesVisible", "Maximum", 1)
    watches("api/server-errors", "5xx", "Sum", 5)
    # And the history's stream reader: behind, records it failed, batches its on-failure
    # destination could not take (test_a_stuck_history_stream_raises_an_alarm)
    watches("history/iterator-age", "IteratorAge", "Maximum", 15 * 60 * 1000)
    watches("history/failed-records", "HistoryRecordsFailed", "Sum", 1)
    watches("history/destination-failures", "DestinationDeliveryFailures", "Sum", 1)
    # And nothing else: a new alarm is pinned here when it is added
    assert len(alarms) == 3 + 4 * 2 + 4 * 3 + 6 + 1 + 3


def test_a_stuck_history_stream_raises_an_alarm(synthesized: Synthesized) -> None:
    """Issue 26: the local history stopped without a word. In AWS every way a history batch
    can end in the on-failure destination raises an alarm first: an invocation that fails
    (history/errors), a record the function cannot read (history/failed-records, which the
    function writes), a shard that stops moving (history/iterator-age; records go to the
    destination at 12 hours); and one the destination refuses raises its own."""
    alarms = _alarms(synthesized)
    function_id = synthesized.logical_id("HistoryCapture/Function/Function")
    history = {"Name": "FunctionName", "Value": {"Ref": function_id}}
    for name in ("history/errors", "history/iterator-age", "history/destination-failures"):
        assert alarms[name]["Namespace"] == "AWS/Lambda", name
        assert alarms[name]["Dimensions"] == [history], name
    failed = alarms["history/failed-records"]
    assert failed["Namespace"] == "Sundial"
    assert failed["Dimensions"] == [{"Name": "service", "Value": "sundial"}]
    # (the 12-hour limit is far past the age alarm: it fires first, with time to act)
    assert alarms["history/iterator-age"]["Threshold"] < 12 * 3600 * 1000


def test_every_alarm_notifies_the_topic_and_names_its_runbook_section(
    synthesized: Synthesized,
) -> None:
    [topic_id] = synthesized.resources("AWS::SNS::Topic")
    for name, alarm in _alarms(synthesized).items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], name
        assert alarm["OKActions"] == [{"Ref": topic_id}], name
        section = name.rsplit("/", maxsplit=1)[-1]
        assert alarm["AlarmDescription"].endswith(f"Runbook: docs/operations.md#{section}")


def test_the_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use(
    synthesized: Synthesized,
) -> None:
    [topic] = synthesized.resources("AWS::SNS::Topic").values()
    key_ref = topic["Properties"]["KmsMasterKeyId"]
    key = synthesized.resources("AWS::KMS::Key")[key_ref["Fn::GetAtt"][0]]
    assert key["Properties"]["EnableKeyRotation"] is True
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    assert any(
        s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
        and set(s["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
        for s in statements
    )


def test_a_given_topic_is_notified_instead_of_a_new_one(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    arn = "arn:aws:sns:eu-west-1:123456789012:on-call"
    synthesized = synthesize(
        tmp_path_factory.mktemp("cdk.out"), {"operations": {"alarm_topic_arn": arn}}
    )
    assert synthesized.resources("AWS::SNS::Topic") == {}
    assert all(a["AlarmActions"] == [arn] for a in _alarms(synthesized).values())
    assert synthesized.synth_error is None and synthesized.nag_violations == []


def test_the_dashboard_can_be_left_out_and_the_alarms_stay(
    tmp_path_factory: pytest.TempPathFactory, synthesized: Synthesized
) -> None:
    # Given a deployment that turns the dashboard off (the idle bill's $3)
    quiet = synthesize(tmp_path_factory.mktemp("cdk.out"), {"operations": {"dashboard": False}})
    # Then there is no dashboard, and every alarm of the default deployment is still there
    assert quiet.resources("AWS::CloudWatch::Dashboard") == {}
    assert len(_alarms(quiet)) == len(_alarms(synthesized))
    assert quiet.synth_error is None and quiet.nag_violations == []


def test_the_dashboard_draws_traffic_lateness_depths_and_errors(
    synthesized: Synthesized,
) -> None:
    [dashboard] = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    # The body is a Fn::Join of text and references; the text is what we check.
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = "".join(p for p in parts if isinstance(p, str))
    for title in (
        "Jobs submitted and dispatched",
        "Dispatch lateness",
        "API requests and errors",
        "Queue depth",
        "DLQ depth",
        "Function errors",
        "Alarms",
    ):
        assert f'"title":"{title}' in body, title
    for metric in ("JobsSubmitted", "JobsDispatched", "DispatchLatenessMs", "DeadLetters"):
        assert f'"Sundial","{metric}"' in body, metric
    assert '"stat":"p50"' in body and '"stat":"p99"' in body


def test_nothing_stateful_is_deleted_by_a_stack_operation(synthesized: Synthesized) -> None:
    # Every queue (jobs, DLQs, dispatch failures), the table, each bucket and each key is
    # retained on delete and on replacement
    for resource_type in STATEFUL:
        resources = synthesized.resources(resource_type)
        assert resources, resource_type
        for logical_id, resource in resources.items():
            assert resource.get("DeletionPolicy") == "Retain", logical_id
            assert resource.get("UpdateReplacePolicy") == "Retain", logical_id
    [table] = synthesized.resources("AWS::DynamoDB::Table").values()
    assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_the_history_buckets_are_versioned_and_expire_old_versions(
    synthesized: Synthesized,
) -> None:
    # The payload bucket is not one of them: its objects are content-addressed and never
    # overwritten with other content (tests/infrastructure/test_infra_payloads.py)
    payloads = synthesized.logical_id("Payloads/Bucket")
    buckets = {
        logical_id: bucket
        for logical_id, bucket in synthesized.resources("AWS::S3::Bucket").items()
        if logical_id != payloads
    }
    assert len(buckets) == 4  # raw, curated, reports, access logs
    for logical_id, bucket in buckets.items():
        properties = bucket["Properties"]
        assert properties["VersioningConfiguration"] == {"Status": "Enabled"}, logical_id
        rules = {r["Id"]: r for r in properties["LifecycleConfiguration"]["Rules"]}
        assert rules["expire-noncurrent-versions"] == {
            "Id": "expire-noncurrent-versions",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
            "ExpiredObjectDeleteMarker": True,
            "Status": "Enabled",
        }, logical_id


def test_a_throwaway_stack_may_destroy_its_queues_and_table(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    synthesized = synthesize(
        tmp_path_factory.mktemp("cdk.out"), {"operations": {"removal_policy": "destroy"}}
    )
    for resource_type in ("AWS::SQS::Queue", "AWS::DynamoDB::Table"):
        for logical_id, resource in synthesized.resources(resource_type).items():
            assert resource["DeletionPolicy"] == "Delete", logical_id
    [table] = synthesized.resources("AWS::DynamoDB::Table").values()
    assert table["Properties"].get("DeletionProtectionEnabled") is False
    # The history stays: it is the record
    for logical_id, bucket in synthesized.resources("AWS::S3::Bucket").items():
        assert bucket["DeletionPolicy"] == "Retain", logical_id
    # And reserved concurrency can be left off (an account at the default quota)
    synthesized_unreserved = synthesize(
        tmp_path_factory.mktemp("cdk.out"), {"operations": {"reserve_dispatch_concurrency": False}}
    )
    for name in ("sweeper", "fanout"):
        properties = synthesized_unreserved.function_properties(name)
        assert "ReservedConcurrentExecutions" not in properties, name


def test_failed_ticks_and_sweeps_land_in_the_dispatch_failures_queue(
    synthesized: Synthesized,
) -> None:
    failures = synthesized.logical_id("Dispatch/Failures")
    failures_arn = {"Fn::GetAtt": [failures, "Arn"]}
    # The fan-out's and the sweepers' async invocations: 2 retries, 2 minutes, then the queue
    configs = {
        c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
        for c in synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
    }
    assert set(configs) == {synthesized.function_id("sweeper"), synthesized.function_id("fanout")}
    for config in configs.values():
        assert config["MaximumRetryAttempts"] == 2
        assert config["MaximumEventAgeInSeconds"] == 120
        assert config["DestinationConfig"] == {"OnFailure": {"Destination": failures_arn}}
    # The tick's rule target: its own retry policy and the same queue as its DLQ
    rule = synthesized.resources("AWS::Events::Rule")[
        synthesized.logical_id("Dispatch/EveryMinute")
    ]
    [target] = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [synthesized.function_id("fanout"), "Arn"]}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 120}
    assert target["DeadLetterConfig"] == {"Arn": failures_arn}
    # EventBridge may send to it (only for this rule), and both functions may
    [policy] = [
        p["Properties"]
        for p in synthesized.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": failures} in p["Properties"]["Queues"]
    ]
    document = json.dumps(policy["PolicyDocument"])
    assert "events.amazonaws.com" in document and "aws:SourceArn" in document
    for name in ("sweeper", "fanout"):
        assert "sqs:SendMessage" in synthesized.allowed(name)
        assert failures_arn in synthesized.allowed(name)["sqs:SendMessage"]


def test_the_dispatch_path_has_reserved_concurrency_sized_from_the_shards(
    synthesized: Synthesized,
) -> None:
    # 64 shards, 8 per sweeper: 8 sweepers a tick, and two ticks' worth reserved
    assert synthesized.function_properties("sweeper")["ReservedConcurrentExecutions"] == 16
    assert synthesized.function_properties("fanout")["ReservedConcurrentExecutions"] == 2
