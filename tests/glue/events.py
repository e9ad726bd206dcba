"""Builders of history rows for the Spark tests: raw events (as the history Lambda writes
them) and curated `job_history` rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sundial_history.columns import JOB_HISTORY, RAW_EVENT, names
from sundial_history.schema import RAW_EVENT_SCHEMA, table_struct

DAY = "2026-11-21"
MIDNIGHT_MS = int(datetime(2026, 11, 21, tzinfo=UTC).timestamp() * 1000)


def raw_event(
    event_id: str,
    *,
    job_id: str = "job-1",
    queue: str = "email",
    to_status: str = "pending",
    from_status: str | None = None,
    attempt: int = 0,
    at_ms: int = MIDNIGHT_MS,
    due_ms: int = MIDNIGHT_MS,
    started_ms: int | None = None,
    error_type: str | None = None,
    dag_id: str | None = None,
    schedule_id: str | None = None,
    correlation_id: str | None = "req-1",
    released_ms: int | None = None,
) -> dict[str, Any]:
    return {
        "v": 1,
        "event_id": event_id,
        "job_id": job_id,
        "queue": queue,
        "priority": "normal",
        "schedule_id": schedule_id,
        "dag_id": dag_id,
        "from_status": from_status,
        "to_status": to_status,
        "attempt": attempt,
        "due_at_ms": due_ms,
        "event_at_ms": at_ms,
        "started_at_ms": started_ms,
        "duration_ms": at_ms - started_ms if started_ms is not None else None,
        "error_type": error_type,
        "correlation_id": correlation_id,
        "released_at_ms": released_ms,
    }


def raw_frame(spark: SparkSession, events: list[dict[str, Any]]) -> DataFrame:
    fields = names(RAW_EVENT)
    return spark.createDataFrame([tuple(e[f] for f in fields) for e in events], RAW_EVENT_SCHEMA)


def timestamp(epoch_ms: int) -> datetime:
    """A Spark TIMESTAMP as collected in a UTC session: a naive datetime in local wall time of
    the Python process, which the tests pin to UTC."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).replace(tzinfo=None)


def job_history_frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    schema = table_struct(JOB_HISTORY)
    # Rows that leave out the correlation id are of jobs no API request submitted; those that
    # leave out the release are of jobs no DAG released.
    optional = {"correlation_id", "released_at"}
    return spark.createDataFrame(
        [
            tuple(r.get(f.name) if f.name in optional else r[f.name] for f in schema.fields)
            for r in rows
        ],
        schema,
    )
