"""history_report's transforms on a hand-made day (the jobs end to end, day after day and over
all of history, are in test_daily_runs.py)."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from sundial_history import compaction, report
from sundial_history.columns import DAG_RUNS, DAILY_QUEUE_STATS, SCHEDULE_RUNS
from sundial_history.schema import struct
from tests.glue.events import (
    DAY,
    MIDNIGHT_MS,
    job_history_frame,
    raw_event,
    raw_frame,
    timestamp,
)

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
    zero = {"expired": 0, "submitted_blocked": 0, "submitted_cancelled": 0}
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


def test_percentiles_are_exact_for_ten_thousand_values(spark: SparkSession) -> None:
    # Given one queue's day of 10,000 attempts whose lateness and duration are drawn from a
    # lognormal (percentile_approx at accuracy 10,000 missed the p99 of this one by a rank)
    rng = random.Random(0)
    values = [int(rng.lognormvariate(math.log(250), 0.6)) for _ in range(10_000)]
    start = timestamp(MIDNIGHT_MS)
    rows = [
        {
            "event_id": f"e{n}", "job_id": f"j{n}", "queue": "email", "priority": "normal",
            "schedule_id": None, "dag_id": None, "from_status": "running",
            "to_status": "succeeded", "attempt": 1, "due_at": start, "event_at": start,
            "started_at": start, "duration_ms": value, "lateness_ms": value,
            "error_type": None, "dt": DAY,
        }
        for n, value in enumerate(values)
    ]  # fmt: skip

    # When its statistics are computed
    [stats] = report.daily_queue_stats(job_history_frame(spark, rows)).collect()

    # Then every percentile is the value of nearest rank: the smallest with at least p of
    # all values at or below it
    ordered = sorted(values)
    for p in ("50", "95", "99"):
        expected = ordered[math.ceil(Fraction(f"0.{p}") * len(ordered)) - 1]
        assert (stats[f"lateness_p{p}_ms"], stats[f"duration_p{p}_ms"]) == (expected, expected)
