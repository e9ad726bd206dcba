"""The idle bill (bench.idle_bill, issue 29 goal 4): what a template holds that costs money by
the month, and the month's bill priced line by line, against hand-worked figures."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from bench.costs import CostOptions, SideQuantities
from bench.idle_bill import bill, inventory, knobs, runs_per_month, total
from bench.logs import LogMeter


def _template() -> dict[str, Any]:
    def get_att(logical_id: str, attribute: str = "Arn") -> dict[str, Any]:
        return {"Fn::GetAtt": [logical_id, attribute]}

    return {
        "Queue": {"Type": "AWS::SQS::Queue"},
        "Table": {"Type": "AWS::DynamoDB::Table"},
        "Fanout": {"Type": "AWS::Lambda::Function"},
        "OnQueue": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": get_att("Queue")},
        },
        "OnStream": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": get_att("Table", "StreamArn")},
        },
        "Tick": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "ScheduleExpression": "rate(1 minute)",
                "Targets": [{"Arn": get_att("Fanout")}],
            },
        },
        "Hourly": {
            "Type": "AWS::Events::Rule",
            "Properties": {"ScheduleExpression": "rate(1 hour)", "Targets": []},
        },
        "Plain": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Period": 300}},
        "Math": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "Metrics": [{"MetricStat": {}}, {"MetricStat": {}}, {"Expression": "a+b"}]
            },
        },
        "Board": {"Type": "AWS::CloudWatch::Dashboard"},
        "MonitoringAlarmTopicKey": {"Type": "AWS::KMS::Key"},
        "Compact": {
            "Type": "AWS::Glue::Job",
            "Properties": {"WorkerType": "G.1X", "NumberOfWorkers": 2},
        },
        "Report": {
            "Type": "AWS::Glue::Job",
            "Properties": {"WorkerType": "G.2X", "NumberOfWorkers": 3},
        },
        "Daily": {
            "Type": "AWS::Glue::Trigger",
            "Properties": {
                "Type": "SCHEDULED",
                "Schedule": "cron(15 1 * * ? *)",
                "Actions": [{"JobName": {"Ref": "Compact"}}],
            },
        },
        "After": {
            "Type": "AWS::Glue::Trigger",
            "Properties": {
                "Type": "CONDITIONAL",
                "Predicate": {"Conditions": [{"JobName": {"Ref": "Compact"}}]},
                "Actions": [{"JobName": {"Ref": "Report"}}],
            },
        },
        "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 30}},
    }


def test_schedules_fire_so_often_in_a_30_day_month() -> None:
    assert runs_per_month("rate(1 minute)") == 43_200
    assert runs_per_month("rate(5 minutes)") == 8_640
    assert runs_per_month("rate(1 hour)") == 720
    assert runs_per_month("cron(15 1 * * ? *)") == 30
    with pytest.raises(ValueError, match="cannot price"):
        runs_per_month("cron(0/5 * * * ? *)")


def test_the_inventory_counts_what_bills_by_the_month() -> None:
    inv = inventory(_template())
    # Then the SQS mapping is told from the stream's, and a math alarm counts its metrics
    assert inv["sqs_event_sources"] == ["OnQueue"]
    assert inv["stream_event_sources"] == ["OnStream"]
    assert sorted(a["metrics"] for a in inv["alarms"]) == [1, 2]
    assert (inv["dashboards"], inv["kms_keys"]) == (1, ["MonitoringAlarmTopicKey"])
    # And the report job runs as often as the compaction it follows
    runs = {
        r["job"]: (r["runs_per_month"], r["workers"], r["dpu_per_worker"]) for r in inv["glue_runs"]
    }
    assert runs == {"Compact": (30, 2, 1.0), "Report": (30, 3, 2.0)}


def _idle() -> dict[str, Any]:
    tick = SideQuantities(read_units=100, lambda_requests=2, gb_s=0.0, log_bytes=0)
    tick.invocations.update({"fanout": 1, "sweeper": 1})
    return {
        "inventory": inventory(_template()),
        "tick": tick.as_dict(),
        "tick_rule": "Tick",
        "metrics": [["SweepersStarted", ["service"]], ["JobsDispatched", ["service"]]],
    }


def test_the_bill_prices_each_line_by_hand() -> None:
    lines = {line["item"].split(" (")[0]: line["dollars"] for line in bill(_idle())}
    # Ticks: 43,200 x (100 read units x $0.125/M + 2 requests x $0.20/M + 2 traces x $5/M
    #        + Lambda's 272-byte lines x 2 at $0.50/GB)
    tick = 100 * 0.125e-6 + 2 * 0.20e-6 + 2 * 5e-6 + 2 * 272 / 1024**3 * 0.50
    assert lines["dispatch ticks: fan-out and sweepers, nothing due"] == pytest.approx(
        43_200 * tick
    )
    # One SQS mapping: 5 pollers x 3 long polls a minute x 43,200 minutes at $0.40/M
    assert lines["SQS event source mappings' empty receives"] == pytest.approx(
        5 * 3 * 43_200 * 0.40e-6
    )
    assert lines["CloudWatch alarms"] == pytest.approx(0.30)  # 3 metrics
    assert lines["CloudWatch dashboards"] == pytest.approx(3.00)
    assert lines["KMS customer managed keys"] == pytest.approx(1.00)
    assert lines["custom metrics an idle tick publishes"] == pytest.approx(0.60)
    # Glue: 30 runs x 2 DPU + 30 runs x 6 DPU, a minute each at $0.44 per DPU-hour
    assert lines["Glue jobs on their schedule, nothing to compact"] == pytest.approx(
        30 * (2 + 6) / 60 * 0.44
    )


def test_the_knobs_take_out_what_they_name() -> None:
    idle = _idle()
    default, pass_through, own_topic, no_dashboard, no_example, every = (
        k["dollars"] for k in knobs(idle)
    )
    assert default == pytest.approx(total(bill(idle)))
    # No active tracing: the ticks' 2 traces a minute and the hourly rule's are gone
    assert default - pass_through == pytest.approx(43_200 * 2 * 5e-6 + 720 * 5e-6)
    # An existing topic: the stack's topic key; no dashboard: its $3
    assert default - own_topic == pytest.approx(1.00)
    assert default - no_dashboard == pytest.approx(3.00)
    assert no_example == pytest.approx(default)  # the template here has no example consumer
    quiet = {**idle, "inventory": {**idle["inventory"], "kms_keys": [], "dashboards": 0}}
    assert every == pytest.approx(total(bill(quiet, CostOptions(tracing="pass_through"))))


def test_the_log_meter_notes_each_emf_metric_it_sees() -> None:
    meter = LogMeter(io.StringIO())
    emf = {
        "_aws": {
            "CloudWatchMetrics": [
                {"Dimensions": [["service"]], "Metrics": [{"Name": "A"}, {"Name": "B"}]}
            ]
        }
    }
    meter.write(json.dumps(emf) + "\n" + json.dumps({"level": "INFO"}) + "\n")
    assert meter.metrics == {("A", ("service",)), ("B", ("service",))}
