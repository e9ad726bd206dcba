"""The human report: PNG charts (matplotlib) and the same content as Markdown and as HTML,
from the small, already aggregated rows the report job collects. No Spark here."""

from __future__ import annotations

import html
import io
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt

Row = Mapping[str, Any]
STATUS_COLOURS = {
    "succeeded": "#2e7d32",
    "failed": "#f9a825",
    "dead": "#c62828",
    "cancelled": "#757575",
}
CHARTS = {
    "volume.png": "Jobs by status per day",
    "lateness.png": "Lateness (start - due) per day, p95 by queue",
    "duration.png": "Run duration per day, p95 by queue",
}


@dataclass(frozen=True)
class ReportData:
    dates: Sequence[str]
    events: int
    daily: Sequence[Row]  # daily_queue_stats rows (with dt)
    by_queue: Sequence[Row]  # queue_stats over the whole window, per queue
    top_errors: Sequence[Row]  # top_errors over the window, per queue
    dag_outcomes: Mapping[str, int]  # outcome -> DAGs
    schedules: Sequence[Row]  # schedule_runs over the window, per schedule
    notes: Sequence[str] = field(default_factory=tuple)

    @property
    def period(self) -> str:
        if not self.dates:
            return "no data"
        return self.dates[0] if len(self.dates) == 1 else f"{self.dates[0]} to {self.dates[-1]}"


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def _by_queue(rows: Sequence[Row], value: str) -> dict[str, dict[str, float]]:
    series: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row[value] is not None:
            series[row["queue"]][row["dt"]] = float(row[value])
    return series


def _days_axis(axes: Any, data: ReportData) -> list[str]:
    """Every day of the report's window on the x axis, those without history included."""
    days = list(data.dates)
    axes.set_xticks(range(len(days)), days)
    axes.set_xlim(-0.5, len(days) - 0.5)
    return days


def _line_chart(data: ReportData, value: str, title: str, unit_ms: float, unit: str) -> bytes:
    figure, axes = plt.subplots(figsize=(9, 4))
    position = {day: index for index, day in enumerate(_days_axis(axes, data))}
    for queue, points in sorted(_by_queue(data.daily, value).items()):
        days = sorted(d for d in points if d in position)
        axes.plot(
            [position[d] for d in days],
            [points[d] / unit_ms for d in days],
            marker="o",
            label=queue,
        )
    axes.set_title(title)
    axes.set_ylabel(unit)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize="small")
    axes.tick_params(axis="x", labelrotation=45)
    return _png(figure)


def _volume_chart(data: ReportData) -> bytes:
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in data.daily:
        for status in (*STATUS_COLOURS, "submitted"):
            totals[row["dt"]][status] += int(row[status] or 0)
    figure, axes = plt.subplots(figsize=(9, 4))
    days = _days_axis(axes, data)
    x = list(range(len(days)))
    bottom = [0] * len(days)
    for status, colour in STATUS_COLOURS.items():
        heights = [totals[d][status] for d in days]
        axes.bar(x, heights, bottom=bottom, color=colour, label=status)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.plot(x, [totals[d]["submitted"] for d in days], "k--", marker=".", label="submitted")
    axes.set_title(CHARTS["volume.png"])
    axes.set_ylabel("jobs")
    axes.grid(alpha=0.3, axis="y")
    axes.legend(fontsize="small")
    axes.tick_params(axis="x", labelrotation=45)
    return _png(figure)


def charts(data: ReportData) -> dict[str, bytes]:
    """The report's PNG charts, by file name."""
    return {
        "volume.png": _volume_chart(data),
        "lateness.png": _line_chart(
            data, "lateness_p95_ms", CHARTS["lateness.png"], 1000.0, "seconds"
        ),
        "duration.png": _line_chart(
            data, "duration_p95_ms", CHARTS["duration.png"], 1000.0, "seconds"
        ),
    }


def _fmt(value: Any, kind: str = "") -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * float(value):.1f}%"
    if kind == "ms":
        ms = int(value)
        return f"{ms} ms" if abs(ms) < 10_000 else f"{ms / 1000:.1f} s"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


QUEUE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("queue", "queue", ""),
    ("submitted", "submitted", ""),
    ("succeeded", "succeeded", ""),
    ("failed", "failed (retried)", ""),
    ("dead", "dead", ""),
    ("cancelled", "cancelled", ""),
    ("retry_rate", "retry rate", "pct"),
    ("lateness_p50_ms", "lateness p50", "ms"),
    ("lateness_p95_ms", "p95", "ms"),
    ("lateness_p99_ms", "p99", "ms"),
    ("duration_p50_ms", "duration p50", "ms"),
    ("duration_p95_ms", "p95", "ms"),
    ("duration_p99_ms", "p99", "ms"),
)
DAILY_COLUMNS = (("dt", "day", ""), *QUEUE_COLUMNS)


def _sections(data: ReportData) -> list[tuple[str, list[str], list[list[str]]]]:
    """(heading, header, rows) of every table, shared by the Markdown and the HTML."""
    sections = [
        (
            "Per queue",
            [label for _, label, _ in QUEUE_COLUMNS],
            [[_fmt(row[k], kind) for k, _, kind in QUEUE_COLUMNS] for row in data.by_queue],
        ),
        (
            "Top error types",
            ["queue", "rank", "error type", "failed or dead attempts"],
            [
                [row["queue"], str(row["rank"]), row["error_type"], _fmt(row["errors"])]
                for row in data.top_errors
            ],
        ),
    ]
    dags = sum(data.dag_outcomes.values())
    finished = data.dag_outcomes.get("succeeded", 0) + data.dag_outcomes.get("failed", 0)
    rate = data.dag_outcomes.get("succeeded", 0) / finished if finished else None
    sections.append(
        (
            "DAGs",
            ["DAGs", "succeeded", "failed", "running", "success rate (of finished)"],
            [
                [
                    _fmt(dags),
                    _fmt(data.dag_outcomes.get("succeeded", 0)),
                    _fmt(data.dag_outcomes.get("failed", 0)),
                    _fmt(data.dag_outcomes.get("running", 0)),
                    _fmt(rate, "pct"),
                ]
            ]
            if dags
            else [],
        )
    )
    sections.append(
        (
            "Schedules (most runs first)",
            ["schedule", "queue", "runs", "succeeded", "dead", "cancelled", "success rate"],
            [
                [
                    row["schedule_id"],
                    row["queue"],
                    _fmt(row["runs"]),
                    _fmt(row["succeeded"]),
                    _fmt(row["dead"]),
                    _fmt(row["cancelled"]),
                    _fmt(row["success_rate"], "pct"),
                ]
                for row in data.schedules
            ],
        )
    )
    sections.append(
        (
            "Per queue per day",
            [label for _, label, _ in DAILY_COLUMNS],
            [
                [_fmt(row[k], kind) for k, _, kind in DAILY_COLUMNS]
                for row in sorted(data.daily, key=lambda r: (r["dt"], r["queue"]))
            ],
        )
    )
    return sections


def _intro(data: ReportData) -> list[str]:
    with_history = len({row["dt"] for row in data.daily})
    quiet = (
        "no job history in this period"
        if not with_history
        else f"{with_history} of them with job history"
    )
    return [
        f"Period: {data.period} (UTC), {len(data.dates)} day(s), {quiet}, "
        f"{data.events:,} history events.",
        "Lateness is attempt start minus when the attempt became due to run (its due time, a "
        "retry's scheduled time, a DAG child's release), SQS delivery and consumer pickup "
        "included; failed counts attempts that failed and were retried; submitted counts "
        "every job inserted (DAG children waiting for their parents included).",
        *data.notes,
    ]


def markdown(data: ReportData) -> str:
    lines = ["# Sundial job history report", ""]
    lines += [f"{line}  " for line in _intro(data)] + [""]
    for name, title in CHARTS.items():
        lines += [f"![{title}]({name})", ""]
    for heading, header, rows in _sections(data):
        lines += [f"## {heading}", ""]
        if not rows:
            lines += ["(none in this period)", ""]
            continue
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def html_page(data: ReportData) -> str:
    escape = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>Sundial job history report</title><style>",
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}",
        "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:14px}",
        "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}",
        "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}",
        "img{max-width:100%;border:1px solid #eee;margin:0.5em 0}.note{color:#b00020}",
        "</style></head><body><h1>Sundial job history report</h1>",
    ]
    intro = _intro(data)
    parts += [f"<p>{escape(line)}</p>" for line in intro[:2]]
    parts += [f"<p class='note'>{escape(line)}</p>" for line in intro[2:]]
    for name, title in CHARTS.items():
        parts.append(f"<figure><img src='{name}' alt='{escape(title)}'></figure>")
    for heading, header, rows in _sections(data):
        parts.append(f"<h2>{escape(heading)}</h2>")
        if not rows:
            parts.append("<p>(none in this period)</p>")
            continue
        parts.append("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>")
        parts += [
            "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
        ]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
