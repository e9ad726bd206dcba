"""The two jobs, end to end: read, transform (compaction.py, report.py), write. The Glue entry
scripts (glue/compact_history.py, glue/history_report.py) and `make report` call these.

Which days each run rewrites (the daily run asks for `auto`: the two days before today, UTC):
- compaction: the days asked that have raw history, each replaced whole;
- the per-day report tables (daily_queue_stats, top_errors, schedule_runs): the days asked
  that have compacted history, each replaced whole, from that day's events alone (a day left
  with no rows loses its old ones);
- dag_runs: recomputed from every DAG's whole history on every run; only the days whose rows
  changed are rewritten (a DAG's row moves to the day of its latest state change);
- the human report: the `report_days` days ending with the last day asked, whatever of them
  has history, written under human/<last day>/ and human/latest/ (a re-run of chosen days
  leaves `latest` alone when a newer day is compacted).
A day with no history is nothing to do, not an error: the run succeeds and says so.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sundial_history import compaction, render, report
from sundial_history.columns import (
    DAG_RUNS,
    DAILY_QUEUE_STATS,
    JOB_HISTORY,
    SCHEDULE_RUNS,
    TOP_ERRORS,
    TableSpec,
)
from sundial_history.schema import RAW_EVENT_SCHEMA, table_struct
from sundial_history.storage import delete_partitions, join, partition_sizes, write_bytes

# `--dates auto`: the two days before today (UTC). The daily run compacts yesterday, and the
# day before again so events that reached S3 late (stream retries) are included.
AUTO_LOOKBACK_DAYS = 2
REPORT_DAYS = 14


def _today(today: date | None) -> date:
    return today or datetime.now(tz=UTC).date()


def resolve_dates(spec: str, available: Sequence[str], *, today: date | None = None) -> list[str]:
    """`all` (every day present), `auto` (the days before today) or a comma-separated list of
    YYYY-MM-DD days."""
    spec = spec.strip()
    if spec == "all":
        return sorted(available)
    if spec == "auto":
        last = _today(today)
        return [(last - timedelta(days=n)).isoformat() for n in range(AUTO_LOOKBACK_DAYS, 0, -1)]
    days = sorted({d.strip() for d in spec.split(",") if d.strip()})
    for day in days:
        try:
            date.fromisoformat(day)
        except ValueError:
            raise ValueError(f"--dates: {day!r} is not a YYYY-MM-DD day") from None
    return days


@dataclass(frozen=True)
class CompactionResult:
    asked: list[str]
    dates: list[str]  # the days compacted: those asked that have raw history
    input_bytes: int
    files_planned: int

    @property
    def summary(self) -> str:
        if not self.dates:
            return f"nothing to compact: no raw history for {', '.join(self.asked) or 'any day'}"
        return f"compacted {', '.join(self.dates)}: {self.input_bytes} raw bytes"


def run_compaction(
    spark: SparkSession,
    *,
    raw_path: str,
    curated_path: str,
    dates: str = "auto",
    target_file_bytes: int = compaction.TARGET_FILE_BYTES,
    today: date | None = None,
) -> CompactionResult:
    """Compact the raw history of `dates` into `curated_path`, replacing those days. Days with
    no raw history are skipped (their compacted history, if any, is kept)."""
    sizes = partition_sizes(spark, raw_path)
    asked = resolve_dates(dates, list(sizes), today=today)
    wanted = [d for d in asked if d in sizes]
    if not wanted:
        return CompactionResult(asked=asked, dates=[], input_bytes=0, files_planned=0)
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
        asked=asked,
        dates=wanted,
        input_bytes=sum(sizes[d] for d in wanted),
        files_planned=sum(files.values()),
    )


def read_table(spark: SparkSession, path: str, spec: TableSpec) -> DataFrame:
    """A table's rows with its declared schema (columns added since a file was written read
    as null); no rows if the table has no partition yet."""
    schema = table_struct(spec)
    if not partition_sizes(spark, path):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(path)


def days_with_rows(tables: Mapping[str, DataFrame]) -> dict[str, set[str]]:
    """{name: the days `tables[name]` has rows on}, all found by one Spark job."""
    tagged = [table.select(F.lit(name).alias("_table"), "dt") for name, table in tables.items()]
    found: dict[str, set[str]] = {name: set() for name in tables}
    for row in functools.reduce(DataFrame.unionByName, tagged).distinct().collect():
        found[row["_table"]].add(row["dt"])
    return found


def replace_days(
    spark: SparkSession, table: DataFrame, path: str, days: Sequence[str], *, present: set[str]
) -> None:
    """Make `days` of the table at `path` hold exactly `table`'s rows of those days: the days
    with rows (`present`, from days_with_rows) are overwritten, the others lose their folder
    (dynamic partition overwrite alone would leave a day that now has no rows as it was)."""
    if present & set(days):
        compaction.write_partitions(table.where(F.col("dt").isin(list(days))), path)
    delete_partitions(spark, path, [d for d in days if d not in present])


def replace_changed(spark: SparkSession, table: DataFrame, path: str, spec: TableSpec) -> list[str]:
    """Make the table at `path` equal to `table` (best cached: it is read twice), rewriting
    only the days whose rows differ. Returns those days."""
    before = read_table(spark, path, spec)
    # The rows in one and not the other, duplicates counted (both ways of exceptAll, in one
    # aggregation): +1 for each row of `table`, -1 for each row written before.
    columns = [*spec.column_names, "dt"]
    difference = (
        table.select(*columns, F.lit(1).alias("_n"))
        .unionByName(before.select(*columns, F.lit(-1).alias("_n")))
        .groupBy(*columns)
        .agg(F.sum("_n").alias("_n"))
        .where(F.col("_n") != 0)
    )
    found = days_with_rows({"changed": difference, "present": table})
    changed = sorted(found["changed"])
    if changed:
        replace_days(spark, table, path, changed, present=found["present"])
    return changed


@dataclass(frozen=True)
class ReportResult:
    dates: list[str]  # the human report's window
    computed: list[str]  # the days whose report tables were rewritten
    events: int  # history events in the window
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
    today: date | None = None,
) -> ReportResult:
    """Rewrite the report tables for `dates` (the module docstring says which days), and write
    the human report (HTML, Markdown, PNG charts) for the `report_days` days ending with the
    last of `dates` to `<reports_path>/human/<last day>/` and `<reports_path>/human/latest/`."""
    available = list(partition_sizes(spark, curated_path))
    asked = resolve_dates(dates, available, today=today)
    computed = [d for d in asked if d in available]
    end = date.fromisoformat(asked[-1]) if asked else _today(today) - timedelta(days=1)
    window = [(end - timedelta(days=n)).isoformat() for n in range(report_days - 1, -1, -1)]
    history = read_table(spark, curated_path, JOB_HISTORY)
    events = history.where(F.col("dt").isin(sorted(set(computed) | set(window)))).cache()
    daily = report.daily_queue_stats(events).cache()
    dags = report.dag_runs(history.where(F.col("dag_id").isNotNull())).cache()
    try:
        _replace_day_tables(spark, events, daily, reports_path, computed)
        replace_changed(spark, dags, join(reports_path, DAG_RUNS.name), DAG_RUNS)
        data = _report_data(
            events.where(F.col("dt").isin(window)),
            daily.where(F.col("dt").isin(window)),
            dags.where(F.col("dt").isin(window)),
            window,
            notes,
        )
    finally:
        for frame in (events, daily, dags):
            frame.unpersist()
    # `latest` is the daily run's (auto) and a full rebuild's; a re-run of chosen days moves
    # it only if none is newer than they are.
    latest = dates.strip() in ("auto", "all") or window[-1] >= max(available, default="")
    human = _write_human_report(data, reports_path, latest=latest)
    return ReportResult(
        dates=window,
        computed=computed,
        events=data.events,
        report_uri=join(human, "index.html"),
        markdown_uri=join(human, "report.md"),
    )


def _replace_day_tables(
    spark: SparkSession, events: DataFrame, daily: DataFrame, reports_path: str, days: list[str]
) -> None:
    """Replace `days` of the per-day tables, each day from its own events."""
    if not days:
        return
    tables = {
        spec.name: table.where(F.col("dt").isin(days))
        for spec, table in (
            (DAILY_QUEUE_STATS, daily),
            (TOP_ERRORS, report.top_errors_table(events)),
            (SCHEDULE_RUNS, report.schedule_runs(events)),
        )
    }
    present = days_with_rows(tables)
    for name, table in tables.items():
        replace_days(spark, table, join(reports_path, name), days, present=present[name])


def _write_human_report(data: render.ReportData, reports_path: str, *, latest: bool) -> str:
    """The HTML, Markdown and charts under human/<last day>/, and human/latest/ if `latest`
    (not for a re-run of an old day); returns the first folder."""
    files = {name: (png, "image/png") for name, png in render.charts(data).items()}
    files["index.html"] = (render.html_page(data).encode(), "text/html; charset=utf-8")
    files["report.md"] = (render.markdown(data).encode(), "text/markdown; charset=utf-8")
    folders = (data.dates[-1], "latest") if latest else (data.dates[-1],)
    for folder in folders:
        for name, (content, content_type) in files.items():
            write_bytes(join(reports_path, "human", folder, name), content, content_type)
    return join(reports_path, "human", data.dates[-1])


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


def _report_data(
    events: DataFrame,
    daily: DataFrame,
    dags: DataFrame,
    window: list[str],
    notes: Sequence[str],
) -> render.ReportData:
    """The small aggregates the human report shows, collected to the driver: the window's
    events per queue, its days, its top errors, the DAGs whose latest change is in it, and
    its schedules' runs (each job once, by its latest finish in the window)."""
    dag_outcomes = {
        row["outcome"]: int(row["count"]) for row in dags.groupBy("outcome").count().collect()
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
    by_queue = _rows(report.queue_stats(events, keys=("queue",)).orderBy("queue"))
    return render.ReportData(
        dates=window,
        events=sum(int(row["events"]) for row in by_queue),
        daily=_rows(daily),
        by_queue=by_queue,
        top_errors=_rows(report.top_errors(events, keys=("queue",)).orderBy("queue", "rank")),
        dag_outcomes=dag_outcomes,
        schedules=_rows(schedules),
        notes=notes,
    )
