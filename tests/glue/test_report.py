"""history_report: the transforms on a hand-made day, checked against synthetic history's own
truth, and the job writing its tables and its human report."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from sundial_history import compaction, report
from sundial_history.columns import DAG_RUNS, DAILY_QUEUE_STATS, REPORT_TABLES, SCHEDULE_RUNS
from sundial_history.jobs import run_compaction, run_report
from sundial_history.schema import struct, table_struct
from sundial_history.synthetic import write_raw_history
from tests.glue.events import DAY, MIDNIGHT_MS, raw_event, raw_frame, timestamp

pytestmark = pytest.mark.spark

D = MIDNIGHT_MS + 3_600_000  # the jobs' due time: 01:00
RETRY = D + 60_000


def _day(spark: SparkSession) -> DataFrame:
    """One day of two queues:
    A (email, schedule s1): succeeds first time, 100 ms late, runs 1 s;
    B (email, DAG d1): fails (Timeout) 200 ms late, its retry succeeds 300 ms late;
    C (email, DAG d1): cancelled while pending;
    D (webhooks, DAG d2, schedule s2): dies on its only attempt (HTTPError), 50 ms late;
    E (email, DAG d3): still pending."""
    events = [
        raw_event("a1", job_id="A", schedule_id="s1", due_ms=D),
        raw_event("a2", job_id="A", schedule_id="s1", due_ms=D, from_status="pending",
                  to_status="queued", at_ms=D - 1_000),
        raw_event("a3", job_id="A", schedule_id="s1", due_ms=D, from_status="queued",
                  to_status="succeeded", attempt=1, started_ms=D + 100, at_ms=D + 1_100),
        raw_event("b1", job_id="B", dag_id="d1", due_ms=D),
        raw_event("b2", job_id="B", dag_id="d1", due_ms=D, from_status="pending",
                  to_status="queued", at_ms=D - 1_000),
        raw_event("b3", job_id="B", dag_id="d1", due_ms=D, from_status="queued",
                  to_status="failed", attempt=1, started_ms=D + 200, at_ms=D + 250,
                  error_type="Timeout"),
        raw_event("b4", job_id="B", dag_id="d1", due_ms=RETRY, from_status="failed",
                  to_status="succeeded", attempt=2, started_ms=RETRY + 300, at_ms=RETRY + 360),
        raw_event("c1", job_id="C", dag_id="d1", due_ms=D),
        raw_event("c2", job_id="C", dag_id="d1", due_ms=D, from_status="pending",
                  to_status="cancelled", at_ms=D - 5_000),
        raw_event("d1", job_id="D", queue="webhooks", dag_id="d2", schedule_id="s2", due_ms=D),
        raw_event("d2", job_id="D", queue="webhooks", dag_id="d2", schedule_id="s2", due_ms=D,
                  from_status="pending", to_status="queued", at_ms=D - 1_000),
        raw_event("d3", job_id="D", queue="webhooks", dag_id="d2", schedule_id="s2", due_ms=D,
                  from_status="queued", to_status="dead", attempt=1, started_ms=D + 50,
                  at_ms=D + 80, error_type="HTTPError"),
        raw_event("e1", job_id="E", dag_id="d3", due_ms=D + 86_400_000),
    ]  # fmt: skip
    return compaction.curate(raw_frame(spark, events))


def _rows(spark: SparkSession, spec_columns: Any, rows: list[dict[str, Any]]) -> DataFrame:
    schema = struct(spec_columns)
    return spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)


def test_daily_queue_stats(spark: SparkSession) -> None:
    # Given the hand-made day
    # When the per queue per day statistics are computed
    stats = report.daily_queue_stats(_day(spark))

    # Then each queue's volumes, retry rate, percentiles and DAG/schedule rates are these
    zero = {"expired": 0}
    email = zero | {
        "queue": "email", "submitted": 4, "succeeded": 2, "failed": 1, "dead": 0,
        "cancelled": 1, "attempts": 3, "retries": 1, "retry_rate": 1 / 3,
        "lateness_p50_ms": 200, "lateness_p95_ms": 300, "lateness_p99_ms": 300,
        "duration_p50_ms": 60, "duration_p95_ms": 1_000, "duration_p99_ms": 1_000,
        "dag_jobs_finished": 2, "dag_job_success_rate": 0.5,
        "schedule_jobs_finished": 1, "schedule_job_success_rate": 1.0, "dt": DAY,
    }  # fmt: skip
    webhooks = zero | {
        "queue": "webhooks", "submitted": 1, "succeeded": 0, "failed": 0, "dead": 1,
        "cancelled": 0, "attempts": 1, "retries": 0, "retry_rate": 0.0,
        "lateness_p50_ms": 50, "lateness_p95_ms": 50, "lateness_p99_ms": 50,
        "duration_p50_ms": 30, "duration_p95_ms": 30, "duration_p99_ms": 30,
        "dag_jobs_finished": 1, "dag_job_success_rate": 0.0,
        "schedule_jobs_finished": 1, "schedule_job_success_rate": 0.0, "dt": DAY,
    }  # fmt: skip
    expected = _rows(
        spark, [*DAILY_QUEUE_STATS.columns, *DAILY_QUEUE_STATS.partition_keys], [email, webhooks]
    )
    assertDataFrameEqual(stats, expected)


def test_top_errors_dag_runs_and_schedule_runs(spark: SparkSession) -> None:
    # Given the hand-made day
    day = _day(spark)

    # Then the errors rank per queue
    assertDataFrameEqual(
        report.top_errors_table(day),
        [
            Row(queue="email", error_type="Timeout", errors=1, rank=1, dt=DAY),
            Row(queue="webhooks", error_type="HTTPError", errors=1, rank=1, dt=DAY),
        ],
    )
    # And a DAG failed if a job of it did not succeed, and runs while one has not ended
    assertDataFrameEqual(
        report.dag_runs(day),
        _rows(
            spark,
            [*DAG_RUNS.columns, *DAG_RUNS.partition_keys],
            [
                {"dag_id": "d1", "jobs": 2, "succeeded": 1, "dead": 0, "cancelled": 1,
                 "unfinished": 0, "outcome": "failed", "finished_at": timestamp(RETRY + 360),
                 "dt": DAY},
                {"dag_id": "d2", "jobs": 1, "succeeded": 0, "dead": 1, "cancelled": 0,
                 "unfinished": 0, "outcome": "failed", "finished_at": timestamp(D + 80),
                 "dt": DAY},
                {"dag_id": "d3", "jobs": 1, "succeeded": 0, "dead": 0, "cancelled": 0,
                 "unfinished": 1, "outcome": "running", "finished_at": timestamp(MIDNIGHT_MS),
                 "dt": DAY},
            ],
        ),
    )  # fmt: skip
    # And each schedule's runs and success rate
    assertDataFrameEqual(
        report.schedule_runs(day),
        _rows(
            spark,
            [*SCHEDULE_RUNS.columns, *SCHEDULE_RUNS.partition_keys],
            [
                {"schedule_id": "s1", "queue": "email", "runs": 1, "succeeded": 1, "dead": 0,
                 "cancelled": 0, "success_rate": 1.0, "dt": DAY},
                {"schedule_id": "s2", "queue": "webhooks", "runs": 1, "succeeded": 0,
                 "dead": 1, "cancelled": 0, "success_rate": 0.0, "dt": DAY},
            ],
        ),
    )  # fmt: skip


def _truth(raw: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (day, queue) counts and lateness percentiles computed in plain Python from the
    generated files, duplicates dropped: what the Spark report must agree with."""
    events = {}
    for path in raw.rglob("*.json.gz"):
        for line in gzip.decompress(path.read_bytes()).decode().splitlines():
            event = json.loads(line)
            events[event["event_id"]] = event
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    lateness: dict[tuple[str, str], list[int]] = defaultdict(list)
    for event in events.values():
        key = (path_day(event["event_at_ms"]), event["queue"])
        counts[key][event["to_status"]] += 1
        if event["from_status"] is None:
            counts[key]["submitted"] += 1
        if event["to_status"] in ("succeeded", "failed", "dead"):
            counts[key]["attempts"] += 1
            lateness[key].append(event["started_at_ms"] - event["due_at_ms"])
    truth: dict[tuple[str, str], dict[str, Any]] = {}
    for key, counter in counts.items():
        values = sorted(lateness[key])
        truth[key] = {
            name: counter[name]
            for name in ("submitted", "succeeded", "failed", "dead", "cancelled", "attempts")
        } | {
            # percentile_approx's definition: the smallest value with at least q of all <= it
            f"lateness_p{round(q * 100)}_ms": values[math.ceil(q * len(values)) - 1]
            if values
            else None
            for q in (0.5, 0.95, 0.99)
        }
    return truth


def path_day(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def test_the_jobs_agree_with_synthetic_historys_truth_and_write_a_report(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Given a few days of synthetic history (retries, deaths, cancels, DAGs, duplicates)
    raw, curated, reports = tmp_path / "raw", tmp_path / "curated", tmp_path / "reports"
    write_raw_history(raw, 3_000, days=3, events_per_file=500)
    run_compaction(spark, raw_path=str(raw), curated_path=str(curated), dates="all")

    # When the report job runs over all of it
    result = run_report(
        spark,
        curated_path=str(curated),
        reports_path=str(reports),
        dates="all",
        notes=["test data"],
    )

    # Then the daily table's counts and lateness agree with the events themselves
    truth = _truth(raw)
    daily = spark.read.parquet(str(reports / DAILY_QUEUE_STATS.name))
    measured = {
        (row["dt"], row["queue"]): {name: row[name] for name in next(iter(truth.values()))}
        for row in daily.collect()
    }
    assert measured == truth
    # And every report table has the columns its Glue table declares
    for spec in REPORT_TABLES:
        table = spark.read.parquet(str(reports / spec.name))
        assert table.schema == table_struct(spec), spec.name
    # And the human report is there, for the last day and as `latest`, with its charts
    assert result.report_uri == str(reports / "human" / result.dates[-1] / "index.html")
    for folder in (result.dates[-1], "latest"):
        human = reports / "human" / folder
        page = (human / "index.html").read_text()
        assert page.count("<img src=") == 3
        assert "test data" in page
        assert "Per queue" in (human / "report.md").read_text()
        for chart in ("volume.png", "lateness.png", "duration.png"):
            assert (human / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
