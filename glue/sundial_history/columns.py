"""Every table of the history pipeline, as (column, Hive type) pairs: the one description the
Spark jobs, the Glue Data Catalog tables (stacks/history_glue.py) and the tests read.

Kept free of pyspark imports so the CDK app can read it without starting Spark."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Column = tuple[str, str]


@dataclass(frozen=True)
class TableSpec:
    name: str  # the Glue table name
    description: str
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...] = (("dt", "string"),)

    @property
    def column_names(self) -> list[str]:
        return [name for name, _ in self.columns]


# One line of raw history (gzip JSON lines written by the history Lambda; the pydantic model
# sundial.history.capture.HistoryEvent is the writer's side). Times are epoch milliseconds, UTC.
RAW_EVENT: tuple[Column, ...] = (
    ("v", "int"),
    ("event_id", "string"),
    ("job_id", "string"),
    ("queue", "string"),
    ("priority", "string"),
    ("schedule_id", "string"),
    ("dag_id", "string"),
    ("from_status", "string"),
    ("to_status", "string"),
    ("attempt", "int"),
    ("due_at_ms", "bigint"),
    ("event_at_ms", "bigint"),
    ("started_at_ms", "bigint"),
    ("duration_ms", "bigint"),
    ("error_type", "string"),
    ("correlation_id", "string"),
    ("released_at_ms", "bigint"),
)

JOB_HISTORY = TableSpec(
    name="job_history",
    description="Every job state change, deduplicated, one row per event (compact_history)",
    columns=(
        ("event_id", "string"),
        ("job_id", "string"),
        ("queue", "string"),
        ("priority", "string"),
        ("schedule_id", "string"),
        ("dag_id", "string"),
        ("from_status", "string"),
        ("to_status", "string"),
        ("attempt", "int"),
        ("due_at", "timestamp"),
        ("event_at", "timestamp"),
        ("started_at", "timestamp"),
        ("duration_ms", "bigint"),
        ("lateness_ms", "bigint"),
        ("error_type", "string"),
        # The API request that submitted the job: its logs' correlation id. Appended last, so
        # Parquet written before it existed reads it as null.
        ("correlation_id", "string"),
        # A DAG child's release: when its parents let it run (null for any other job, and in
        # events written before it was captured). Appended last, as correlation_id.
        ("released_at", "timestamp"),
    ),
)

DAILY_QUEUE_STATS = TableSpec(
    name="daily_queue_stats",
    description="Per queue per day: volumes by status, lateness, durations, retries",
    columns=(
        ("queue", "string"),
        ("submitted", "bigint"),
        ("submitted_blocked", "bigint"),
        ("submitted_cancelled", "bigint"),
        ("succeeded", "bigint"),
        ("failed", "bigint"),
        ("dead", "bigint"),
        ("cancelled", "bigint"),
        ("expired", "bigint"),
        ("attempts", "bigint"),
        ("retries", "bigint"),
        ("retry_rate", "double"),
        ("lateness_p50_ms", "bigint"),
        ("lateness_p95_ms", "bigint"),
        ("lateness_p99_ms", "bigint"),
        ("duration_p50_ms", "bigint"),
        ("duration_p95_ms", "bigint"),
        ("duration_p99_ms", "bigint"),
        ("dag_jobs_finished", "bigint"),
        ("dag_job_success_rate", "double"),
        ("schedule_jobs_finished", "bigint"),
        ("schedule_job_success_rate", "double"),
    ),
)

TOP_ERRORS = TableSpec(
    name="top_errors",
    description="Per queue per day: the most frequent error types of failed and dead attempts",
    columns=(
        ("queue", "string"),
        ("error_type", "string"),
        ("errors", "bigint"),
        ("rank", "int"),
    ),
)

DAG_RUNS = TableSpec(
    name="dag_runs",
    description="Per DAG: its jobs' final outcomes; dt is the day of its latest state change",
    columns=(
        ("dag_id", "string"),
        ("jobs", "bigint"),
        ("succeeded", "bigint"),
        ("dead", "bigint"),
        ("cancelled", "bigint"),
        ("unfinished", "bigint"),
        ("outcome", "string"),
        ("finished_at", "timestamp"),
    ),
)

SCHEDULE_RUNS = TableSpec(
    name="schedule_runs",
    description="Per schedule per day: runs finished and how many succeeded",
    columns=(
        ("schedule_id", "string"),
        ("queue", "string"),
        ("runs", "bigint"),
        ("succeeded", "bigint"),
        ("dead", "bigint"),
        ("cancelled", "bigint"),
        ("success_rate", "double"),
    ),
)

REPORT_TABLES: tuple[TableSpec, ...] = (DAILY_QUEUE_STATS, TOP_ERRORS, DAG_RUNS, SCHEDULE_RUNS)
ALL_TABLES: tuple[TableSpec, ...] = (JOB_HISTORY, *REPORT_TABLES)


def names(columns: Sequence[Column]) -> list[str]:
    return [name for name, _ in columns]
