"""compact_history's transforms: raw history events (JSON lines) -> the `job_history` table
(Parquet, partitioned by `dt`), deduplicated by event id and laid out in sensibly sized files.

Idempotence: the job recompacts whole days. Each day's raw folder holds exactly that day's
events (the history Lambda partitions by event date), so compacting day D reads `dt=D` only and
replaces the `dt=D` partition of the output (dynamic partition overwrite): re-running a day
replaces it, and no run duplicates anything. No Glue job bookmark is needed or used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sundial_history.columns import JOB_HISTORY

ATTEMPT_ENDS = ("succeeded", "failed", "dead")
# A Parquet file of about this size reads well in Athena and Spark (one or a few row groups,
# few enough files per day). Raw gzip JSON lines come out about 1.2 times the size of the
# zstd Parquet they become (bench/compaction.py measures it), so a day's raw size tells how
# many files it needs without reading it.
TARGET_FILE_BYTES = 128 * 1024 * 1024
RAW_BYTES_PER_OUTPUT_BYTE = 1.2
# zstd: about a third smaller than snappy on this data and no slower to write; Athena, Glue
# 5.0 and Spark 3.5 all read it.
PARQUET_COMPRESSION = "zstd"


def _millis_to_timestamp(column: str) -> Column:
    return F.expr(f"timestamp_millis({column})")


def curate(raw: DataFrame) -> DataFrame:
    """Raw event rows (sundial_history.columns.RAW_EVENT) -> `job_history` rows with a `dt`
    column. Rows without an event id, job id or event time (malformed lines) are dropped.
    `dt` is the event's UTC date (the session time zone must be UTC).

    `lateness_ms`, on the events that end an attempt: its start minus when it became due to
    run, the later of its due time (a retry: the time it was scheduled for) and, for a DAG
    child, its release (all of a DAG's jobs share the DAG's due time, and a child cannot run
    before its parents let it). Events written before releases were captured carry none, so
    their DAG children are measured from the DAG's due time."""
    event_at = _millis_to_timestamp("event_at_ms")
    ends_attempt = F.col("to_status").isin(*ATTEMPT_ENDS)
    became_due_ms = F.greatest(
        F.col("due_at_ms"), F.coalesce(F.col("released_at_ms"), F.col("due_at_ms"))
    )
    return raw.where(
        F.col("event_id").isNotNull()
        & F.col("job_id").isNotNull()
        & F.col("event_at_ms").isNotNull()
        & F.col("to_status").isNotNull()
    ).select(
        "event_id",
        "job_id",
        "queue",
        "priority",
        "schedule_id",
        "dag_id",
        "from_status",
        "to_status",
        F.col("attempt").cast("int").alias("attempt"),
        _millis_to_timestamp("due_at_ms").alias("due_at"),
        event_at.alias("event_at"),
        _millis_to_timestamp("started_at_ms").alias("started_at"),
        F.col("duration_ms").cast("long").alias("duration_ms"),
        F.when(
            ends_attempt & F.col("started_at_ms").isNotNull(),
            F.col("started_at_ms") - became_due_ms,
        )
        .cast("long")
        .alias("lateness_ms"),
        "error_type",
        "correlation_id",
        _millis_to_timestamp("released_at_ms").alias("released_at"),
        F.date_format(event_at, "yyyy-MM-dd").alias("dt"),
    )


def plan_files(
    raw_bytes_by_date: Mapping[str, int],
    *,
    target_file_bytes: int = TARGET_FILE_BYTES,
    raw_bytes_per_output_byte: float = RAW_BYTES_PER_OUTPUT_BYTE,
) -> dict[str, int]:
    """How many Parquet files each day gets: its expected output size over the target file
    size, at least one. Derived from the raw input's size, known from listing it, so planning
    costs no pass over the data."""
    per_file = target_file_bytes * raw_bytes_per_output_byte
    return {date: max(1, math.ceil(size / per_file)) for date, size in raw_bytes_by_date.items()}


def task_keys(spark: SparkSession, tasks: int) -> list[int]:
    """For each shuffle partition 0..tasks-1, an int key that Spark's hash partitioning of
    `tasks` partitions sends there: pmod(murmur3(key), tasks), which is `F.hash` (the same
    expression, seed 42). Found by Spark itself among the first ints, so it cannot drift."""
    keys: dict[int, int] = {}
    limit = 64 * tasks
    while len(keys) < tasks:
        found = (
            spark.range(limit)
            .select(F.col("id").cast("int").alias("key"))
            .select("key", F.pmod(F.hash("key"), F.lit(tasks)).alias("task"))
            .groupBy("task")
            .agg(F.min("key").alias("key"))
            .collect()
        )
        keys = {int(row["task"]): int(row["key"]) for row in found}
        limit *= 4
    return [keys[task] for task in range(tasks)]


def compact(events: DataFrame, files_by_date: Mapping[str, int]) -> DataFrame:
    """Deduplicate curated events by event id and lay them out for writing: one Spark
    partition per planned output file (each day spread over its planned number of files by a
    hash of the event id), rows sorted by queue and time within each file so Parquet
    statistics let readers skip what a query's queue or time filter excludes.

    One shuffle does both: every copy of an event has the same day and id, hence the same
    file, so the deduplication needs no second exchange. Each (day, file) gets a shuffle key
    that Spark's hash partitioning sends to a partition of its own (`task_keys`): hashing the
    (day, file) pairs themselves would make some collide (fewer, larger files than planned)
    and leave other tasks idle. Days missing from `files_by_date` share one extra task (one
    file each)."""
    plan = sorted(files_by_date.items())
    tasks = sum(files for _, files in plan) + 1  # the last one: days not in the plan
    keys = task_keys(events.sparkSession, tasks)
    offsets = itertools.accumulate((files for _, files in plan), initial=0)
    entries = [
        item
        for (date, files), first in zip(plan, offsets, strict=False)
        for item in (F.lit(date), F.array(*[F.lit(k) for k in keys[first : first + files]]))
    ]
    file_of_day = F.pmod(F.xxhash64("event_id"), F.size(F.col("_keys")))
    task_key = F.coalesce(F.col("_keys")[file_of_day], F.lit(keys[-1]))
    return (
        events.withColumn("_keys", F.create_map(*entries)[F.col("dt")] if entries else F.lit(None))
        .withColumn("_task", task_key)
        .repartition(tasks, "_task")
        .dropDuplicates(["_task", "event_id"])
        .drop("_keys", "_task")
        .sortWithinPartitions("dt", "queue", "event_at", "event_id")
        .select(*JOB_HISTORY.column_names, "dt")
    )


def write_partitions(frame: DataFrame, path: str) -> None:
    """Write `frame` as Parquet partitioned by dt, replacing only the days it contains."""
    (
        frame.write.mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .option("compression", PARQUET_COMPRESSION)
        .partitionBy("dt")
        .parquet(path)
    )
