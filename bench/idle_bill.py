"""What a deployed stack costs a month with no jobs at all (issue 29, goal 4): the whole bill,
from the synthesized template and one measured idle tick, not typed in.

Counted in the template (cdk.out): alarms (each metric an alarm evaluates), dashboards, KMS
keys, the event source mappings on SQS queues (Lambda's pollers long-poll each one whether or
not a message comes), the scheduled rules and Glue triggers and what each starts, the log
groups and their retention. Measured on moto (`run_idle`): one tick with nothing due (the
fan-out and the sweepers, priced item by item as bench.costs prices a job), and the custom
metrics those invocations publish (EMF lines, as bench.logs reads them): an idle stack is
billed for those metrics only, each month.

Modelled, with the assumption beside it: an SQS event source mapping polls with 5 pollers, each
a 20-second long poll (Lambda's starting poller count for a standard queue; AWS does not
document idle polling further), so 5 x 3 receives a minute. A Glue job started on a schedule
runs at least its billing minimum (1 minute) on its workers even with nothing to read. Left
at $0, with the reason: DynamoDB on demand and its stream reads by Lambda (free), API
Gateway, SNS, SQS storage, S3 (empty buckets), the Glue Data Catalog (a few objects, under its
free first million), EventBridge scheduled rules (no charge).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bench.costs import DEFAULTS, CostOptions, SideQuantities, price
from bench.logs import LAMBDA_PLATFORM_LOG_BYTES
from bench.prices import PRICES, Prices

MINUTES_PER_MONTH = 43_200  # 30 days
DAYS_PER_MONTH = 30
GB = 1024**3
ESM_POLLERS = 5
LONG_POLL_S = 20
GLUE_MINIMUM_MINUTES = 1.0
DPU_PER_WORKER = {"G.025X": 0.25, "G.1X": 1.0, "G.2X": 2.0, "G.4X": 4.0, "G.8X": 8.0}
TARGET_DOLLARS = 5.0

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_PER_MONTH = {"minute": MINUTES_PER_MONTH, "hour": MINUTES_PER_MONTH // 60, "day": DAYS_PER_MONTH}


def runs_per_month(expression: str) -> float:
    """How often a schedule expression fires in a 30-day month: rate(N unit), or a cron of one
    fixed minute and hour every day (the only cron the stack uses)."""
    rate = _RATE.match(expression)
    if rate:
        return _PER_MONTH[rate.group(2).rstrip("s")] / int(rate.group(1))
    fields = expression.removeprefix("cron(").removesuffix(")").split()
    if len(fields) == 6 and fields[0].isdigit() and fields[1].isdigit() and fields[2] in "*?":
        return DAYS_PER_MONTH
    raise ValueError(f"cannot price the schedule {expression!r}")


def _ref(value: Any) -> str | None:
    """The logical id a Ref or Fn::GetAtt names."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def _alarm_metrics(props: Mapping[str, Any]) -> int:
    """Metrics an alarm evaluates (a metric-math alarm is billed per metric in it)."""
    if "Metrics" in props:
        return sum(1 for m in props["Metrics"] if "MetricStat" in m) or 1
    return 1


def inventory(resources: Mapping[str, Any]) -> dict[str, Any]:
    """What in a synthesized template costs money by the month whatever the load."""
    by_type: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for logical_id, resource in resources.items():
        by_type.setdefault(resource["Type"], []).append(
            (logical_id, resource.get("Properties", {}))
        )

    def of(kind: str) -> list[tuple[str, Mapping[str, Any]]]:
        return by_type.get(kind, [])

    sqs_sources: list[str] = []
    stream_sources: list[str] = []
    for logical_id, props in of("AWS::Lambda::EventSourceMapping"):
        source = _ref(props.get("EventSourceArn"))
        kind = resources.get(source or "", {}).get("Type")
        (sqs_sources if kind == "AWS::SQS::Queue" else stream_sources).append(logical_id)
    rules = [
        {
            "id": logical_id,
            "schedule": props["ScheduleExpression"],
            "per_month": runs_per_month(props["ScheduleExpression"]),
            "targets": [_ref(t["Arn"]) for t in props.get("Targets", [])],
        }
        for logical_id, props in of("AWS::Events::Rule")
        if "ScheduleExpression" in props and props.get("State", "ENABLED") == "ENABLED"
    ]
    return {
        "alarms": [
            {
                "id": logical_id,
                "metrics": _alarm_metrics(props),
                "high_resolution": int(props.get("Period", 60)) < 60,
            }
            for logical_id, props in of("AWS::CloudWatch::Alarm")
        ],
        "composite_alarms": len(of("AWS::CloudWatch::CompositeAlarm")),
        "dashboards": len(of("AWS::CloudWatch::Dashboard")),
        "kms_keys": [logical_id for logical_id, _ in of("AWS::KMS::Key")],
        "sqs_event_sources": sqs_sources,
        "stream_event_sources": stream_sources,
        "scheduled_rules": rules,
        "glue_runs": _glue_runs(of("AWS::Glue::Job"), of("AWS::Glue::Trigger")),
        "log_groups": [
            {"id": logical_id, "retention_days": int(props.get("RetentionInDays", 0))}
            for logical_id, props in of("AWS::Logs::LogGroup")
        ],
        "functions": len(of("AWS::Lambda::Function")),
        "provisioned_concurrency": sum(
            1
            for kind in ("AWS::Lambda::Alias", "AWS::Lambda::Version")
            for _, props in of(kind)
            if "ProvisionedConcurrencyConfig" in props
        ),
    }


def _glue_runs(
    jobs: list[tuple[str, Mapping[str, Any]]], triggers: list[tuple[str, Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """Each Glue job a schedule starts, directly or on a predecessor's success, with its
    workers and runs a month (an idle compaction succeeds, so its successor runs too)."""
    props = dict(jobs)
    runs: dict[str, float] = {}
    for _, trigger in triggers:
        if trigger.get("Type") == "SCHEDULED":
            for action in trigger.get("Actions", []):
                job = _ref(action.get("JobName"))
                if job:
                    runs[job] = runs.get(job, 0.0) + runs_per_month(trigger["Schedule"])
    for _ in triggers:  # conditional chains, to a fixed point
        for _, trigger in triggers:
            if trigger.get("Type") != "CONDITIONAL":
                continue
            after = [_ref(c.get("JobName")) for c in trigger["Predicate"]["Conditions"]]
            count = min((runs.get(job or "", 0.0) for job in after), default=0.0)
            for action in trigger.get("Actions", []):
                job = _ref(action.get("JobName"))
                if job:
                    runs[job] = max(runs.get(job, 0.0), count)
    return [
        {
            "job": job,
            "runs_per_month": count,
            "workers": int(props[job].get("NumberOfWorkers", 2)),
            "dpu_per_worker": DPU_PER_WORKER.get(str(props[job].get("WorkerType")), 1.0),
        }
        for job, count in sorted(runs.items())
        if job in props
    ]


def _line(item: str, quantity: str, dollars: float, how: str) -> dict[str, Any]:
    return {"item": item, "quantity": quantity, "dollars": dollars, "how": how}


def bill(
    idle: Mapping[str, Any], options: CostOptions = DEFAULTS, prices: Prices = PRICES
) -> list[dict[str, Any]]:
    """The month's bill of an idle stack, line by line, from the `idle` section's result
    (its inventory and measured tick) under `options` (tracing and log level)."""
    inv = idle["inventory"]
    tick = SideQuantities.from_dict(idle["tick"])
    ticks = next(
        (r["per_month"] for r in inv["scheduled_rules"] if idle["tick_rule"] == r["id"]),
        MINUTES_PER_MONTH,
    )
    tick_dollars = price(tick, options.at(60.0), prices)
    lines = [
        _line(
            "dispatch ticks: fan-out and sweepers, nothing due",
            f"{ticks:,.0f} ticks x {tick.lambda_requests:g} invocations, "
            f"{tick.read_units:g} read units",
            sum(tick_dollars.values()) * ticks,
            ", ".join(f"{k.replace('_', ' ')} ${v * ticks:.2f}" for k, v in tick_dollars.items()),
        )
    ]
    other = [r for r in inv["scheduled_rules"] if r["id"] != idle["tick_rule"]]
    invocations = sum(r["per_month"] for r in other)
    traces = invocations if options.tracing == "active" else 0.0
    lines.append(
        _line(
            "other scheduled invocations (" + ", ".join(r["schedule"] for r in other) + ")",
            f"{invocations:,.0f} invocations",
            invocations * prices.lambda_request
            + traces * prices.xray_trace
            + invocations * LAMBDA_PLATFORM_LOG_BYTES / GB * prices.cloudwatch_logs_gb,
            "a request, a trace and Lambda's log lines each; their duration left out",
        )
    )
    receives = len(inv["sqs_event_sources"]) * ESM_POLLERS * 60 / LONG_POLL_S * MINUTES_PER_MONTH
    lines.append(
        _line(
            "SQS event source mappings' empty receives",
            f"{len(inv['sqs_event_sources'])} mappings, {receives:,.0f} receives",
            receives * prices.sqs_request,
            f"{ESM_POLLERS} pollers x a {LONG_POLL_S} s long poll each (modelled)",
        )
    )
    alarm_metrics = sum(a["metrics"] for a in inv["alarms"] if not a["high_resolution"])
    fast = sum(a["metrics"] for a in inv["alarms"] if a["high_resolution"])
    lines.append(
        _line(
            "CloudWatch alarms",
            f"{len(inv['alarms'])} alarms, {alarm_metrics + fast} metrics",
            alarm_metrics * prices.cloudwatch_alarm_metric_month
            + fast * prices.cloudwatch_high_resolution_alarm_metric_month
            + inv["composite_alarms"] * 0.50,
            "per metric an alarm evaluates, counted in the template",
        )
    )
    lines.append(
        _line(
            "CloudWatch dashboards",
            str(inv["dashboards"]),
            inv["dashboards"] * prices.cloudwatch_dashboard_month,
            "charged: the account's first 3 free ones are a free tier, left out as all",
        )
    )
    lines.append(
        _line(
            "KMS customer managed keys",
            str(len(inv["kms_keys"])),
            len(inv["kms_keys"]) * prices.kms_key_month,
            ", ".join(inv["kms_keys"]),
        )
    )
    metrics = idle["metrics"]
    lines.append(
        _line(
            "custom metrics an idle tick publishes",
            str(len(metrics)),
            len(metrics) * prices.cloudwatch_custom_metric_month,
            ", ".join(sorted({name for name, _ in metrics})),
        )
    )
    lines.append(_log_storage(idle, tick, (ticks, invocations), options, prices))
    glue = sum(
        run["runs_per_month"]
        * run["workers"]
        * run["dpu_per_worker"]
        * GLUE_MINIMUM_MINUTES
        / 60
        * prices.glue_dpu_hour
        for run in inv["glue_runs"]
    )
    lines.append(
        _line(
            "Glue jobs on their schedule, nothing to compact",
            ", ".join(
                f"{r['runs_per_month']:g} runs x {r['workers']} workers" for r in inv["glue_runs"]
            ),
            glue,
            f"at least the {GLUE_MINIMUM_MINUTES:g}-minute billing minimum a run",
        )
    )
    return lines


def _log_storage(
    idle: Mapping[str, Any],
    tick: SideQuantities,
    counts: tuple[float, float],
    options: CostOptions,
    prices: Prices,
) -> dict[str, Any]:
    """A month of idle logs kept for the log groups' retention (uncompressed: an upper bound),
    from `counts`: (ticks, other scheduled invocations) a month."""
    ticks, invocations = counts
    tick_bytes = tick.log_bytes - (tick.info_log_bytes if options.log_level == "WARNING" else 0)
    per_month = (
        ticks * (tick_bytes + LAMBDA_PLATFORM_LOG_BYTES * tick.lambda_requests)
        + invocations * LAMBDA_PLATFORM_LOG_BYTES
    )
    retention = max((g["retention_days"] for g in idle["inventory"]["log_groups"]), default=30)
    stored = per_month / GB * (retention / DAYS_PER_MONTH)
    return _line(
        "CloudWatch Logs storage",
        f"{stored:.2f} GB kept ({retention} days)",
        stored * prices.cloudwatch_logs_stored_gb_month,
        "ingestion is in the ticks above",
    )


def total(lines: list[dict[str, Any]]) -> float:
    return float(sum(line["dollars"] for line in lines))


def _changed(idle: Mapping[str, Any], **inventory: Any) -> dict[str, Any]:
    return {**idle, "inventory": {**idle["inventory"], **inventory}}


def knobs(idle: Mapping[str, Any], prices: Prices = PRICES) -> list[dict[str, Any]]:
    """The bill under each setting that lowers it (docs/configuration.md), and all together."""
    pass_through = replace(DEFAULTS, tracing="pass_through")
    inv = idle["inventory"]
    # An existing topic: no topic of the stack's own, so no key for it.
    kept_keys = [k for k in inv["kms_keys"] if "AlarmTopicKey" not in k]
    no_example = [e for e in inv["sqs_event_sources"] if "ExampleConsumer" not in e]
    variants: list[tuple[str, dict[str, Any], CostOptions]] = [
        ("as deployed by default", dict(idle), DEFAULTS),
        ("`observability.tracing: pass_through`", dict(idle), pass_through),
        (
            "`operations.alarm_topic_arn` (an existing topic: no key of the stack's own)",
            _changed(idle, kms_keys=kept_keys),
            DEFAULTS,
        ),
        ("`operations.dashboard: false`", _changed(idle, dashboards=0), DEFAULTS),
        (
            "`example_consumer_queue: null` (no example consumer's pollers)",
            _changed(idle, sqs_event_sources=no_example),
            DEFAULTS,
        ),
        (
            "all of the above",
            _changed(idle, kms_keys=kept_keys, dashboards=0, sqs_event_sources=no_example),
            pass_through,
        ),
    ]
    return [
        {"knob": knob, "dollars": total(bill(changed, options, prices))}
        for knob, changed, options in variants
    ]


def run_idle(config: Any) -> dict[str, Any]:
    """The `idle` section: the template's inventory, and one idle tick measured on moto."""
    import json  # noqa: PLC0415

    from bench.config import STACK  # noqa: PLC0415
    from bench.ledger import Metered, summarize  # noqa: PLC0415
    from bench.system import InProcessSundial  # noqa: PLC0415

    resources = json.loads((config.cdk_out / f"{STACK}.template.json").read_text())["Resources"]
    inv = inventory(resources)
    with InProcessSundial(config) as system:
        system.tick()  # the first tick records the shard count: not a steady-state cost
        system.meter.reset()
        system.invocations.clear()
        system.logs.metrics.clear()
        system.tick()
        metered = Metered.of(system, 1, {})
        metrics = sorted([name, list(dims)] for name, dims in system.logs.metrics)
    summary = summarize(metered, config)
    fanout_rules = [
        r["id"] for r in inv["scheduled_rules"] if any(t and "Fanout" in t for t in r["targets"])
    ]
    return {
        "inventory": inv,
        "tick": summary["sides"]["schedule"],
        "tick_rule": fanout_rules[0] if fanout_rules else None,
        "metrics": metrics,
    }
