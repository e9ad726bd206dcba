"""history_report's transforms: `job_history` events -> the report tables (per queue per day
volumes, lateness and duration percentiles, retry rate, top errors, DAG and schedule outcomes).

Definitions (also in the report's documentation, docs/history.md):
- submitted: jobs inserted (an event with no from-status), whatever their first status:
  `pending`, `blocked` (a DAG child waiting for its parents: also in submitted_blocked) or
  `cancelled` (a schedule occurrence written already cancelled: also in submitted_cancelled);
- succeeded / failed / dead / cancelled / expired: events moving a job to that status
  (failed: an attempt failed and a retry was scheduled);
- attempts: events that end an attempt (succeeded, failed, dead); retries: those of attempt > 1;
  retry rate = retries / attempts;
- lateness (job_history.lateness_ms, sundial_history.compaction.curate): attempt start minus
  when the attempt became due to run (its due time, a retry's scheduled time, a DAG child's
  release if later), for every attempt that ended;
- duration: how long an attempt ran;
- percentiles: exact, the smallest value with at least p of the group's values at or below it
  (`percentile_disc`; memory per group grows with its number of distinct values);
- finished, per group (a queue's day, a schedule's day, a report's window): jobs with a
  succeeded, dead or cancelled event in it, each once, by its latest such event there; DAG
  and schedule success rates are the succeeded share of those. A job that died on Monday and
  was retried by hand to success on Tuesday counts as dead on Monday and as succeeded on
  Tuesday (a day's figures are final once its events are in); in one group, once.
- dag_runs: per DAG over its whole history (every day of job_history), each job by its
  latest succeeded, dead or cancelled event.

Every per-day table is computed from its day's events alone, so recomputing a day changes no
other day; `dag_runs` is the one table computed from all of history.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sundial_history.columns import DAG_RUNS, DAILY_QUEUE_STATS, SCHEDULE_RUNS, TOP_ERRORS

ATTEMPT_ENDS = ("succeeded", "failed", "dead")
FINAL = ("succeeded", "dead", "cancelled")
# The item left the table (sundial.history.capture): not a state change of the job's run.
REMOVALS = ("expired", "deleted")
PERCENTILES = (0.5, 0.95, 0.99)


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def _ratio(numerator: str, denominator: str) -> Column:
    return F.when(F.col(denominator) > 0, F.col(numerator) / F.col(denominator)).cast("double")


def _percentiles(column: str) -> Column:
    """PERCENTILES of `column` over the attempt-ending events of a group, exact."""
    share = ", ".join(str(q) for q in PERCENTILES)
    ends = ", ".join(f"'{status}'" for status in ATTEMPT_ENDS)
    return F.expr(
        f"percentile_disc(array({share})) WITHIN GROUP (ORDER BY {column}) "
        f"FILTER (WHERE to_status IN ({ends}))"
    )


def final_outcomes(events: DataFrame, per: Sequence[str] = ()) -> DataFrame:
    """Each job's latest succeeded, dead or cancelled event (ties: the smallest event id), per
    value of `per` (("dt",): each job once per day it finished on; (): once over `events`)."""
    latest = Window.partitionBy("job_id", *per).orderBy(F.col("event_at").desc(), F.col("event_id"))
    return (
        events.where(F.col("to_status").isin(*FINAL))
        .withColumn("_n", F.row_number().over(latest))
        .where(F.col("_n") == 1)
        .drop("_n")
    )


def queue_stats(events: DataFrame, keys: Sequence[str] = ("dt", "queue")) -> DataFrame:
    """Events, volumes, retry rate, lateness/duration percentiles and DAG/schedule success
    rates grouped by `keys` (per queue per day for the table; per queue alone for a report
    window).
    A job's queue never changes, so its finishes count once per group."""
    status = F.col("to_status")
    ends = status.isin(*ATTEMPT_ENDS)
    inserted = F.col("from_status").isNull()
    stats = events.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("events"),
        _count(inserted).alias("submitted"),
        _count(inserted & (status == "blocked")).alias("submitted_blocked"),
        _count(inserted & (status == "cancelled")).alias("submitted_cancelled"),
        _count(status == "succeeded").alias("succeeded"),
        _count(status == "failed").alias("failed"),
        _count(status == "dead").alias("dead"),
        _count(status == "cancelled").alias("cancelled"),
        _count(status == "expired").alias("expired"),
        _count(ends).alias("attempts"),
        _count(ends & (F.col("attempt") > 1)).alias("retries"),
        _percentiles("lateness_ms").alias("_lateness"),
        _percentiles("duration_ms").alias("_duration"),
    )
    outcomes = (
        final_outcomes(events, per=[k for k in keys if k != "queue"])
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
        "events",
        "submitted",
        "submitted_blocked",
        "submitted_cancelled",
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
    """The `dag_runs` table from `events` holding each DAG's whole history: per DAG, how its
    jobs ended. outcome: `succeeded` when every job succeeded, `failed` when all ended and one
    did not succeed, else `running`. finished_at (and dt, its day): the DAG's latest state
    change, which for a finished DAG is when its last job ended (removals from the table by
    TTL or otherwise are not state changes: they would move every DAG a retention later)."""
    # One pass: each job's rows ranked with its latest finish first (as final_outcomes picks
    # it), so the DAG rows are read once.
    final = F.col("to_status").isin(*FINAL)
    latest = Window.partitionBy("job_id").orderBy(
        final.desc(), F.col("event_at").desc(), F.col("event_id")
    )
    ended = (F.row_number().over(latest) == 1) & final
    runs = (
        events.where(F.col("dag_id").isNotNull())
        .withColumn("_ended", ended)
        .groupBy("dag_id")
        .agg(
            F.countDistinct("job_id").alias("jobs"),
            *[
                _count(F.col("_ended") & (F.col("to_status") == status)).alias(status)
                for status in FINAL
            ],
            F.max(F.when(~F.col("to_status").isin(*REMOVALS), F.col("event_at"))).alias("_last"),
            F.max("event_at").alias("_last_any"),
        )
        .withColumn("finished_at", F.coalesce("_last", "_last_any"))
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
        "finished_at",
        F.date_format("finished_at", "yyyy-MM-dd").alias("dt"),
    ).select(*DAG_RUNS.column_names, "dt")


def schedule_runs(events: DataFrame) -> DataFrame:
    """The `schedule_runs` table: per schedule per day, the runs (jobs) that finished that day,
    each once by its latest succeeded, dead or cancelled event of the day, and how."""
    return (
        final_outcomes(events.where(F.col("schedule_id").isNotNull()), per=("dt",))
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
