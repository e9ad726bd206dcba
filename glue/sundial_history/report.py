"""history_report's transforms: `job_history` events -> the report tables (per queue per day
volumes, lateness and duration percentiles, retry rate, top errors, DAG and schedule outcomes).

Definitions (also in glue/README.md):
- submitted: jobs inserted (an event with no from-status);
- succeeded / failed / dead / cancelled / expired: events moving a job to that status
  (failed: an attempt failed and a retry was scheduled);
- attempts: events that end an attempt (succeeded, failed, dead); retries: those of attempt > 1;
  retry rate = retries / attempts;
- lateness: (attempt start - attempt due), for every attempt that ended: the time from the due
  second to the consumer starting the job, which includes SQS delivery and consumer pickup;
- duration: how long an attempt ran;
- a job's final outcome: its latest succeeded, dead or cancelled event; DAG and schedule
  success rates count final outcomes, so a dead job retried by hand to success counts once.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sundial_history.columns import DAG_RUNS, DAILY_QUEUE_STATS, SCHEDULE_RUNS, TOP_ERRORS

ATTEMPT_ENDS = ("succeeded", "failed", "dead")
FINAL = ("succeeded", "dead", "cancelled")
PERCENTILES = (0.5, 0.95, 0.99)
# percentile_approx's accuracy: 1/accuracy is the relative rank error; at 10,000 the result
# is exact for up to 10,000 values per group and within 0.01% of the rank beyond.
PERCENTILE_ACCURACY = 10_000


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def _ratio(numerator: str, denominator: str) -> Column:
    return F.when(F.col(denominator) > 0, F.col(numerator) / F.col(denominator)).cast("double")


def final_outcomes(events: DataFrame) -> DataFrame:
    """Each job's latest succeeded, dead or cancelled event (the job as it ended)."""
    latest = Window.partitionBy("job_id").orderBy(F.col("event_at").desc(), F.col("event_id"))
    return (
        events.where(F.col("to_status").isin(*FINAL))
        .withColumn("_n", F.row_number().over(latest))
        .where(F.col("_n") == 1)
        .drop("_n")
    )


def queue_stats(events: DataFrame, keys: Sequence[str] = ("dt", "queue")) -> DataFrame:
    """Volumes, retry rate and lateness/duration percentiles grouped by `keys` (per queue per
    day for the table; per queue alone for a report window)."""
    status = F.col("to_status")
    ends = status.isin(*ATTEMPT_ENDS)
    stats = events.groupBy(*keys).agg(
        _count(F.col("from_status").isNull() & (status == "pending")).alias("submitted"),
        _count(status == "succeeded").alias("succeeded"),
        _count(status == "failed").alias("failed"),
        _count(status == "dead").alias("dead"),
        _count(status == "cancelled").alias("cancelled"),
        _count(status == "expired").alias("expired"),
        _count(ends).alias("attempts"),
        _count(ends & (F.col("attempt") > 1)).alias("retries"),
        F.percentile_approx(
            F.when(ends, F.col("lateness_ms")), list(PERCENTILES), PERCENTILE_ACCURACY
        ).alias("_lateness"),
        F.percentile_approx(
            F.when(ends, F.col("duration_ms")), list(PERCENTILES), PERCENTILE_ACCURACY
        ).alias("_duration"),
    )
    outcomes = (
        final_outcomes(events)
        .groupBy(*keys)
        .agg(
            _count(F.col("dag_id").isNotNull()).alias("dag_jobs_finished"),
            _count(F.col("dag_id").isNotNull() & (F.col("to_status") == "succeeded")).alias(
                "_dag_succeeded"
            ),
            _count(F.col("schedule_id").isNotNull()).alias("schedule_jobs_finished"),
            _count(F.col("schedule_id").isNotNull() & (F.col("to_status") == "succeeded")).alias(
                "_schedule_succeeded"
            ),
        )
    )
    joined = stats.join(outcomes, on=list(keys), how="left").fillna(
        0,
        subset=[
            "dag_jobs_finished",
            "_dag_succeeded",
            "schedule_jobs_finished",
            "_schedule_succeeded",
        ],
    )
    percentile_columns = [
        F.col(f"_{measure}")[index].cast("long").alias(f"{measure}_p{round(q * 100)}_ms")
        for measure in ("lateness", "duration")
        for index, q in enumerate(PERCENTILES)
    ]
    return joined.select(
        *keys,
        "submitted",
        "succeeded",
        "failed",
        "dead",
        "cancelled",
        "expired",
        "attempts",
        "retries",
        _ratio("retries", "attempts").alias("retry_rate"),
        *percentile_columns,
        "dag_jobs_finished",
        _ratio("_dag_succeeded", "dag_jobs_finished").alias("dag_job_success_rate"),
        "schedule_jobs_finished",
        _ratio("_schedule_succeeded", "schedule_jobs_finished").alias("schedule_job_success_rate"),
    )


def daily_queue_stats(events: DataFrame) -> DataFrame:
    """The `daily_queue_stats` table: queue_stats per queue per day."""
    return queue_stats(events).select(*DAILY_QUEUE_STATS.column_names, "dt")


def top_errors(
    events: DataFrame, *, limit: int = 5, keys: Sequence[str] = ("dt", "queue")
) -> DataFrame:
    """The `limit` most frequent error types of failed and dead attempts per `keys`; ties by
    name, so the ranking is stable."""
    counted = (
        events.where(F.col("to_status").isin("failed", "dead") & F.col("error_type").isNotNull())
        .groupBy(*keys, "error_type")
        .agg(F.count(F.lit(1)).alias("errors"))
    )
    ranking = Window.partitionBy(*keys).orderBy(F.col("errors").desc(), F.col("error_type"))
    ranked = counted.withColumn("rank", F.row_number().over(ranking)).where(F.col("rank") <= limit)
    return ranked.select(*keys, "error_type", "errors", F.col("rank").cast("int").alias("rank"))


def top_errors_table(events: DataFrame, *, limit: int = 5) -> DataFrame:
    return top_errors(events, limit=limit).select(*TOP_ERRORS.column_names, "dt")


def dag_runs(events: DataFrame) -> DataFrame:
    """The `dag_runs` table: per DAG, how its jobs ended. outcome: `succeeded` when every job
    succeeded, `failed` when all ended and one did not succeed, else `running`. dt and
    finished_at: when its latest job ended (its latest event while it runs)."""
    members = (
        events.where(F.col("dag_id").isNotNull())
        .groupBy("dag_id")
        .agg(
            F.countDistinct("job_id").alias("jobs"),
            F.max("event_at").alias("_last_event_at"),
        )
    )
    ended = (
        final_outcomes(events.where(F.col("dag_id").isNotNull()))
        .groupBy("dag_id")
        .agg(
            _count(F.col("to_status") == "succeeded").alias("succeeded"),
            _count(F.col("to_status") == "dead").alias("dead"),
            _count(F.col("to_status") == "cancelled").alias("cancelled"),
        )
    )
    runs = members.join(ended, on="dag_id", how="left").fillna(
        0, subset=["succeeded", "dead", "cancelled"]
    )
    unfinished = F.col("jobs") - F.col("succeeded") - F.col("dead") - F.col("cancelled")
    return runs.select(
        "dag_id",
        "jobs",
        "succeeded",
        "dead",
        "cancelled",
        unfinished.cast("long").alias("unfinished"),
        F.when(F.col("succeeded") == F.col("jobs"), "succeeded")
        .when(unfinished == 0, "failed")
        .otherwise("running")
        .alias("outcome"),
        F.col("_last_event_at").alias("finished_at"),
        F.date_format("_last_event_at", "yyyy-MM-dd").alias("dt"),
    ).select(*DAG_RUNS.column_names, "dt")


def schedule_runs(events: DataFrame) -> DataFrame:
    """The `schedule_runs` table: per schedule per day, the runs (jobs) that ended and how."""
    return (
        final_outcomes(events.where(F.col("schedule_id").isNotNull()))
        .groupBy("dt", "schedule_id", "queue")
        .agg(
            F.count(F.lit(1)).alias("runs"),
            _count(F.col("to_status") == "succeeded").alias("succeeded"),
            _count(F.col("to_status") == "dead").alias("dead"),
            _count(F.col("to_status") == "cancelled").alias("cancelled"),
        )
        .withColumn("success_rate", _ratio("succeeded", "runs"))
        .select(*SCHEDULE_RUNS.column_names, "dt")
    )
