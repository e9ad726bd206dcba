"""The PNG plots under bench/results/ (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

COMPONENTS = (
    ("dynamodb_writes", "DynamoDB writes"),
    ("dynamodb_reads", "DynamoDB reads"),
    ("sqs", "SQS"),
    ("lambda_requests", "Lambda requests"),
    ("lambda_duration", "Lambda GB-s"),
    ("logs", "CloudWatch Logs"),
    ("xray", "X-Ray"),
    ("api_gateway", "API Gateway"),
    ("scheduler_invocations", "EventBridge Scheduler"),
)


def _save(figure: Any, path: Path) -> str:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path.name


def cost_per_million(rows: list[tuple[str, dict[str, Any]]], path: Path) -> str:
    """Stacked bars: $ per million jobs by component, scheduling and consuming sides summed."""
    figure, axes = plt.subplots(figsize=(11, 5.2))
    # Bars at positions, not at their labels: two paths may share a label.
    positions = list(range(len(rows)))
    bottoms = [0.0] * len(rows)
    for key, name in COMPONENTS:
        values = [
            sum(d["dollars_per_million"][s].get(key, 0.0) for s in ("schedule", "consume"))
            for _, d in rows
        ]
        if any(values):
            axes.bar(positions, values, bottom=bottoms, label=name)
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    for x, total in zip(positions, bottoms, strict=True):
        axes.text(x, total, f"${total:.2f}", ha="center", va="bottom", fontsize=9)
    axes.set_xticks(positions, [label for label, _ in rows], rotation=20, ha="right", fontsize=8)
    axes.set_ylim(0, max(bottoms) * 1.12)
    axes.set_ylabel("$ per million jobs")
    axes.set_title("Cost per million jobs, all in, as deployed by default (us-east-1)")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(figure, path)


def _design_curves(
    axes: Any, rows: list[dict[str, Any]], sundial: str, eventbridge: str
) -> list[int]:
    """$ per million against jobs per tick for Sundial (single submits, batches of 25), the
    Dynein-style model and EventBridge Scheduler; returns the x values (jobs per tick)."""
    xs = [r["jobs_per_tick"] for r in rows]
    for key, label, style in (
        ("sundial", f"{sundial}, single submits", "o-"),
        ("sundial_batched", f"{sundial}, batches of 25", "o--"),
        ("dynein", "Dynein-style (model)", "s-"),
        ("eventbridge", eventbridge, "^-"),
    ):
        axes.plot(xs, [r[key] for r in rows], style, label=label, markersize=4)
    return xs


def _log_dollars(axes: Any) -> FuncFormatter:
    """Log scales on both axes, the y axis in dollars; returns its formatter."""
    axes.set_xscale("log")
    axes.set_yscale("log")
    dollars = FuncFormatter(lambda value, _position: f"${value:g}")
    axes.yaxis.set_major_formatter(dollars)
    return dollars


def cost_curve(rows: list[dict[str, Any]], design_load: dict[str, Any], path: Path) -> str:
    """$ per million delayed jobs against jobs per tick, each design as deployed by default;
    and the design card's steady load in the high-volume configuration."""
    figure, axes = plt.subplots(figsize=(9, 5))
    _design_curves(axes, rows, "Sundial", "EventBridge Scheduler (model)")
    load = design_load["jobs_per_tick"]
    for key, label, marker in (
        ("sundial_high_volume", "Sundial, high-volume configuration", "*"),
        ("eventbridge_high_volume", "EventBridge Scheduler, same consumer", "^"),
    ):
        axes.plot([load], [design_load[key]["total"]], marker, markersize=11, label=label)
    dollars = _log_dollars(axes)
    axes.yaxis.set_minor_formatter(dollars)
    axes.tick_params(axis="y", which="minor", labelsize=7)
    axes.set_xlabel("delayed jobs due per one-minute tick (the design card's load at the right)")
    axes.set_ylabel("$ per million delayed jobs, all in")
    axes.set_title("Cost per job against volume")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    return _save(figure, path)


def dispatch_batching(rows: list[dict[str, Any]], target: float, path: Path) -> str:
    figure, axes = plt.subplots(figsize=(7, 4))
    xs = [r["jobs_per_tick"] for r in rows]
    axes.plot(xs, [r["sqs_requests_per_job"] for r in rows], marker="o", label="Sundial (measured)")
    axes.axhline(1.0, color="grey", linestyle=":", label="one SendMessage per job (Dynein)")
    axes.axhline(target, color="red", linestyle="--", label=f"target {target}")
    axes.set_xscale("log")
    axes.set_xlabel("jobs dispatched by one tick (64 shards)")
    axes.set_ylabel("SQS requests per job, dispatch side")
    axes.set_title("Batching on dispatch against volume")
    axes.legend(fontsize=8)
    return _save(figure, path)


def lateness_histogram(lateness_ms: list[float], p99: float, path: Path) -> str:
    figure, axes = plt.subplots(figsize=(8, 4))
    axes.hist(lateness_ms, bins=60, color="tab:blue")
    axes.axvline(p99, color="black", linestyle="--", label=f"p99 {p99:.0f} ms")
    axes.axvline(1000, color="red", linestyle=":", label="target p99 1,000 ms")
    axes.axvline(0, color="grey", linewidth=1)
    axes.set_xlabel("lateness: receivable in SQS minus due time (ms)")
    axes.set_ylabel("jobs")
    axes.set_title(f"Timing precision, {len(lateness_ms)} jobs on the local runtime")
    axes.legend(fontsize=8)
    return _save(figure, path)


def pickup(samples: dict[str, list[float]], path: Path) -> str:
    figure, axes = plt.subplots(figsize=(8, 4))
    for label, values in samples.items():
        axes.hist(values, bins=40, alpha=0.6, label=label)
    axes.axvline(100, color="red", linestyle=":", label="target 100 ms")
    axes.set_xlabel("submit call to visible in SQS (ms)")
    axes.set_ylabel("jobs")
    axes.set_title("Pickup latency of an immediate critical job")
    axes.legend(fontsize=8)
    return _save(figure, path)


def cpu_per_job(rows: list[dict[str, Any]], path: Path) -> str:
    figure, axes = plt.subplots(figsize=(8, 4))
    names = [r["scenario"] for r in rows]
    axes.bar(names, [r["cpu_us_per_job_median"] for r in rows], color="tab:green")
    for x, r in enumerate(rows):
        axes.text(
            x,
            r["cpu_us_per_job_median"],
            f"{r['cpu_us_per_job_median']:.0f}",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    axes.set_ylabel("µs of CPU per job (one core, median)")
    axes.set_title("Sundial's own CPU per job, against a zero-latency stub of AWS")
    return _save(figure, path)


def throughput_model(model: dict[str, Any], path: Path) -> str:
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    shards = model["shard_counts"]
    for axes, key, target, title in (
        (left, "submissions", 10_000, "Submissions/s (steady state)"),
        (right, "dispatches", 100_000, "Dispatches/s"),
    ):
        for name, series in model[key].items():
            axes.plot(shards, [series["rates"][str(s)] for s in shards], marker=".", label=name)
        axes.axhline(target, color="red", linestyle="--", label=f"target {target:,}")
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel("shards")
        axes.set_ylabel("jobs per second")
        axes.set_title(title)
        axes.legend(fontsize=7)
    writes = model["writes_per_job"]
    quota = model["table_quota_wcu_per_s"] / writes
    left.axhline(quota, color="grey", linestyle=":", label=f"default table quota / {writes} writes")
    right.axhline(quota, color="grey", linestyle=":")
    return _save(figure, path)


def market(rows: list[dict[str, Any]], hosted: list[dict[str, Any]], path: Path) -> str:
    """The buyer's plot: $ per million delayed jobs against jobs per tick, all in, for Sundial
    and the AWS-built alternatives (modelled), and the hosted services' list prices (flat; a
    band where the price is a range)."""
    figure, axes = plt.subplots(figsize=(9, 5))
    xs = _design_curves(axes, rows, "Sundial exact", "EventBridge Scheduler + SQS (model)")
    for offer in hosted:
        if offer["low"] == offer["high"]:
            axes.plot(xs, [offer["low"]] * len(xs), ":", label=f"{offer['name']} (list price)")
        else:
            axes.fill_between(
                xs, offer["low"], offer["high"], alpha=0.2, label=f"{offer['name']} (list price)"
            )
    _log_dollars(axes)
    axes.set_xlabel("delayed jobs due per one-minute tick")
    axes.set_ylabel("$ per million delayed jobs")
    axes.set_title("What a million delayed jobs cost, against volume")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="upper right")
    return _save(figure, path)
