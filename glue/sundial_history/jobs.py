"""The two jobs, end to end: read, transform (compaction.py, report.py), write. The Glue entry
scripts (glue/compact_history.py, glue/history_report.py) and `make report` call these."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sundial_history import compaction, render, report
from sundial_history.columns import DAG_RUNS, DAILY_QUEUE_STATS, SCHEDULE_RUNS, TOP_ERRORS
from sundial_history.schema import RAW_EVENT_SCHEMA
from sundial_history.storage import join, partition_sizes, write_bytes

# `--dates auto`: the two days before today (UTC). The daily run compacts yesterday, and the
# day before again so events that reached S3 late (stream retries) are included.
AUTO_LOOKBACK_DAYS = 2
REPORT_DAYS = 14


class NoHistoryError(Exception):
    """There is nothing to compact or report on for the dates asked."""


def resolve_dates(spec: str, available: Sequence[str], *, today: date | None = None) -> list[str]:
    """`all` (every day present), `auto` (the days before today) or a comma-separated list of
    YYYY-MM-DD days."""
    spec = spec.strip()
    if spec == "all":
        return sorted(available)
    if spec == "auto":
        today = today or datetime.now(tz=UTC).date()
        return [(today - timedelta(days=n)).isoformat() for n in range(AUTO_LOOKBACK_DAYS, 0, -1)]
    days = sorted({d.strip() for d in spec.split(",") if d.strip()})
    for day in days:
        try:
            date.fromisoformat(day)
        except ValueError:
            raise ValueError(f"--dates: {day!r} is not a YYYY-MM-DD day") from None
    return days


@dataclass(frozen=True)
class CompactionResult:
    dates: list[str]
    input_bytes: int
    files_planned: int


def run_compaction(
    spark: SparkSession,
    *,
    raw_path: str,
    curated_path: str,
    dates: str = "auto",
    target_file_bytes: int = compaction.TARGET_FILE_BYTES,
) -> CompactionResult:
    """Compact the raw history of `dates` into `curated_path`, replacing those days."""
    sizes = partition_sizes(spark, raw_path)
    wanted = [d for d in resolve_dates(dates, list(sizes)) if d in sizes]
    if not wanted:
        raise NoHistoryError(f"no raw history under {raw_path} for dates={dates!r}")
    files = compaction.plan_files(
        {d: sizes[d] for d in wanted}, target_file_bytes=target_file_bytes
    )
    raw = (
        spark.read.schema(RAW_EVENT_SCHEMA)
        .option("mode", "DROPMALFORMED")
        .json([join(raw_path, f"dt={d}") for d in wanted])
    )
    # A day's folder holds that day's events; the filter only guards against a stray line.
    curated = compaction.curate(raw).where(F.col("dt").isin(wanted))
    compaction.write_partitions(compaction.compact(curated, files), curated_path)
    return CompactionResult(
        dates=wanted, input_bytes=sum(sizes[d] for d in wanted), files_planned=sum(files.values())
    )


@dataclass(frozen=True)
class ReportResult:
    dates: list[str]
    events: int
    report_uri: str  # the HTML report
    markdown_uri: str


def run_report(
    spark: SparkSession,
    *,
    curated_path: str,
    reports_path: str,
    dates: str = "auto",
    report_days: int = REPORT_DAYS,
    notes: Sequence[str] = (),
) -> ReportResult:
    """Write the report tables (Parquet, dt partitions) for the `report_days` days ending with
    the last of `dates`, and the human report (HTML, Markdown, PNG charts) for that window, to
    `<reports_path>/human/<last day>/` and `<reports_path>/human/latest/`."""
    available = list(partition_sizes(spark, curated_path))
    asked = resolve_dates(dates, available)
    if not asked:
        raise NoHistoryError(f"no compacted history under {curated_path} for dates={dates!r}")
    end = date.fromisoformat(asked[-1])
    first = max(date.fromisoformat(asked[0]), end - timedelta(days=report_days - 1))
    window = [d for d in available if first.isoformat() <= d <= end.isoformat()]
    if not window:
        raise NoHistoryError(f"no compacted history under {curated_path} for {asked}")
    events = spark.read.parquet(curated_path).where(F.col("dt").isin(window)).cache()
    try:
        tables = {
            DAILY_QUEUE_STATS.name: report.daily_queue_stats(events),
            TOP_ERRORS.name: report.top_errors_table(events),
            DAG_RUNS.name: report.dag_runs(events),
            SCHEDULE_RUNS.name: report.schedule_runs(events),
        }
        for name, table in tables.items():
            compaction.write_partitions(table, join(reports_path, name))
        data = _report_data(events, tables, window, notes)
    finally:
        events.unpersist()
    files = {name: (png, "image/png") for name, png in render.charts(data).items()}
    files["index.html"] = (render.html_page(data).encode(), "text/html; charset=utf-8")
    files["report.md"] = (render.markdown(data).encode(), "text/markdown; charset=utf-8")
    for folder in (window[-1], "latest"):
        for name, (content, content_type) in files.items():
            write_bytes(join(reports_path, "human", folder, name), content, content_type)
    latest = join(reports_path, "human", window[-1])
    return ReportResult(
        dates=window,
        events=data.events,
        report_uri=join(latest, "index.html"),
        markdown_uri=join(latest, "report.md"),
    )


def _rows(frame: DataFrame) -> list[dict[str, object]]:
    return [row.asDict() for row in frame.collect()]


def _report_data(
    events: DataFrame, tables: dict[str, DataFrame], window: list[str], notes: Sequence[str]
) -> render.ReportData:
    """The small aggregates the human report shows, collected to the driver."""
    dag_outcomes = {
        row["outcome"]: int(row["count"])
        for row in tables[DAG_RUNS.name].groupBy("outcome").count().collect()
    }
    schedules = (
        report.final_outcomes(events.where(F.col("schedule_id").isNotNull()))
        .groupBy("schedule_id", "queue")
        .agg(
            F.count(F.lit(1)).alias("runs"),
            F.sum((F.col("to_status") == "succeeded").cast("long")).alias("succeeded"),
            F.sum((F.col("to_status") == "dead").cast("long")).alias("dead"),
            F.sum((F.col("to_status") == "cancelled").cast("long")).alias("cancelled"),
        )
        .withColumn("success_rate", F.col("succeeded") / F.col("runs"))
        .orderBy(F.col("runs").desc(), "schedule_id")
        .limit(15)
    )
    return render.ReportData(
        dates=window,
        events=events.count(),
        daily=_rows(tables[DAILY_QUEUE_STATS.name]),
        by_queue=_rows(report.queue_stats(events, keys=("queue",)).orderBy("queue")),
        top_errors=_rows(report.top_errors(events, keys=("queue",)).orderBy("queue", "rank")),
        dag_outcomes=dag_outcomes,
        schedules=_rows(schedules),
        notes=notes,
    )
