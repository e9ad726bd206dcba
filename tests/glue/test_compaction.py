"""compact_history: the transforms on hand-made rows, and the job on files, twice."""

from __future__ import annotations

import gzip
import json
from datetime import date, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from sundial_history import compaction
from sundial_history.jobs import resolve_dates, run_compaction
from sundial_history.synthetic import write_raw_history
from tests.glue.events import (
    DAY,
    MIDNIGHT_MS,
    job_history_frame,
    raw_event,
    raw_frame,
    timestamp,
)

pytestmark = pytest.mark.spark


def test_curate_types_the_times_derives_lateness_and_the_day(spark: SparkSession) -> None:
    # Given a submit and the success of its first attempt, 250 ms late, and a malformed line
    started = MIDNIGHT_MS + 60_250
    raw = raw_frame(
        spark,
        [
            raw_event("e1", at_ms=MIDNIGHT_MS + 5, due_ms=MIDNIGHT_MS + 60_000),
            raw_event(
                "e2",
                from_status="queued",
                to_status="succeeded",
                attempt=1,
                at_ms=started + 1_000,
                due_ms=MIDNIGHT_MS + 60_000,
                started_ms=started,
            ),
            raw_event("e3") | {"event_id": None},
        ],
    )

    # When it is curated
    curated = compaction.curate(raw)

    # Then times are timestamps, the success carries its lateness, the day is the event's
    common = {
        "job_id": "job-1",
        "queue": "email",
        "priority": "normal",
        "schedule_id": None,
        "correlation_id": "req-1",
    }
    expected = job_history_frame(
        spark,
        [
            common
            | {
                "event_id": "e1",
                "dag_id": None,
                "from_status": None,
                "to_status": "pending",
                "attempt": 0,
                "due_at": timestamp(MIDNIGHT_MS + 60_000),
                "event_at": timestamp(MIDNIGHT_MS + 5),
                "started_at": None,
                "duration_ms": None,
                "lateness_ms": None,
                "error_type": None,
                "dt": DAY,
            },
            common
            | {
                "event_id": "e2",
                "dag_id": None,
                "from_status": "queued",
                "to_status": "succeeded",
                "attempt": 1,
                "due_at": timestamp(MIDNIGHT_MS + 60_000),
                "event_at": timestamp(started + 1_000),
                "started_at": timestamp(started),
                "duration_ms": 1_000,
                "lateness_ms": 250,
                "error_type": None,
                "dt": DAY,
            },
        ],
    )
    assertDataFrameEqual(curated, expected)


def test_plan_files_sizes_days_by_their_raw_bytes() -> None:
    # Given days of 0, 100 MB, 500 MB and 2 GB of raw history
    mb = 1024 * 1024
    sizes = {"d0": 0, "d1": 100 * mb, "d2": 500 * mb, "d3": 2048 * mb}

    # When files are planned for 128 MB outputs at 1.2 raw bytes per output byte
    plan = compaction.plan_files(sizes, target_file_bytes=128 * mb, raw_bytes_per_output_byte=1.2)

    # Then small days get one file and big ones about size / (128 MB * 1.2)
    assert plan == {"d0": 1, "d1": 1, "d2": 4, "d3": 14}


def test_compact_drops_duplicates_in_one_shuffle(spark: SparkSession) -> None:
    # Given 30 events over two days, each of the first ten delivered three times
    events = [
        raw_event(f"e{n}", job_id=f"j{n}", at_ms=MIDNIGHT_MS + n * 3_600_000) for n in range(30)
    ]
    curated = compaction.curate(raw_frame(spark, events + events[:10] + events[:10]))

    # When it is compacted with three files planned for the first day
    compacted = compaction.compact(curated, {DAY: 3, "2026-11-22": 1})

    # Then the plan has one exchange (the deduplication needs none of its own)
    plan = compacted._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1
    # And every event is there once, in one partition per planned file (and one, empty here,
    # shared by days the plan leaves out)
    assertDataFrameEqual(compacted, compaction.curate(raw_frame(spark, events)))
    assert compacted.rdd.getNumPartitions() == 5


def _parquet_files(root: Path) -> dict[str, list[str]]:
    return {
        folder.name: sorted(p.name for p in folder.glob("*.parquet"))
        for folder in sorted(root.glob("dt=*"))
    }


def test_the_job_is_idempotent_and_a_rerun_replaces_only_its_day(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Given two days of synthetic raw history (with redelivered duplicates)
    raw, curated = tmp_path / "raw", tmp_path / "curated"
    stats = write_raw_history(raw, 1_500, days=2, events_per_file=400)
    distinct = {
        json.loads(line)["event_id"]
        for path in raw.rglob("*.json.gz")
        for line in gzip.decompress(path.read_bytes()).decode().splitlines()
    }
    assert stats.events > len(distinct)  # the generator wrote duplicates

    # When all of it is compacted, twice
    first = run_compaction(spark, raw_path=str(raw), curated_path=str(curated), dates="all")
    run_compaction(spark, raw_path=str(raw), curated_path=str(curated), dates="all")

    # Then the table holds each event exactly once, one file per (small) day
    table = spark.read.parquet(str(curated))
    assert table.count() == len(distinct)
    assert table.select("event_id").distinct().count() == len(distinct)
    files = _parquet_files(curated)
    assert set(files) == {f"dt={d}" for d in first.dates}
    assert all(len(names) == 1 for names in files.values())

    # And when an event of the first day arrives late and only that day is compacted again
    day = first.dates[0]
    midnight = datetime.fromisoformat(f"{day}T00:00:00+00:00")
    late = raw_event("late-1", at_ms=int(midnight.timestamp() * 1000) + 1_000)
    (raw / f"dt={day}" / "late.json.gz").write_bytes(
        gzip.compress((json.dumps(late) + "\n").encode())
    )
    run_compaction(spark, raw_path=str(raw), curated_path=str(curated), dates=day)

    # Then that day is replaced (one more event) and every other day is untouched
    table = spark.read.parquet(str(curated))
    assert table.count() == len(distinct) + 1
    assert table.where(F.col("event_id") == "late-1").select("dt").first() == (day,)
    after = _parquet_files(curated)
    assert {d: f for d, f in after.items() if d != f"dt={day}"} == {
        d: f for d, f in files.items() if d != f"dt={day}"
    }


def test_nothing_to_compact_is_a_success_that_says_so(spark: SparkSession, tmp_path: Path) -> None:
    # Given no raw history at all, and then one day of it
    raw, curated = tmp_path / "raw", tmp_path / "curated"

    # When the daily run compacts the two days before today
    result = run_compaction(
        spark, raw_path=str(raw), curated_path=str(curated), today=date(2026, 11, 23)
    )

    # Then it succeeds, compacts nothing and says which days had no history
    assert (result.asked, result.dates, result.files_planned) == (
        ["2026-11-21", "2026-11-22"],
        [],
        0,
    )
    assert result.summary == "nothing to compact: no raw history for 2026-11-21, 2026-11-22"
    assert not curated.exists()


def test_each_planned_file_is_one_file_of_its_day(spark: SparkSession, tmp_path: Path) -> None:
    # Given three days of events planned for 3, 3 and 2 files: eight (day, file) pairs, which
    # hashed into eight tasks would collide
    days = {"2026-11-21": 3, "2026-11-22": 3, "2026-11-23": 2}
    events = [
        raw_event(f"e{day}-{n}", job_id=f"j{n}", at_ms=MIDNIGHT_MS + day * 86_400_000 + n * 1_000)
        for day in range(3)
        for n in range(60)
    ]
    curated = compaction.curate(raw_frame(spark, events))

    # When it is compacted and written
    compaction.write_partitions(compaction.compact(curated, days), str(tmp_path))

    # Then each day has exactly its planned number of files, and every event once
    assert {day: len(names) for day, names in _parquet_files(tmp_path).items()} == {
        f"dt={day}": files for day, files in days.items()
    }
    assert spark.read.parquet(str(tmp_path)).count() == 180


def test_dates_resolve() -> None:
    assert resolve_dates("all", ["2026-11-02", "2026-11-01"]) == ["2026-11-01", "2026-11-02"]
    assert resolve_dates("auto", [], today=date(2026, 11, 21)) == ["2026-11-19", "2026-11-20"]
    assert resolve_dates("2026-11-03, 2026-11-01", []) == ["2026-11-01", "2026-11-03"]
    with pytest.raises(ValueError, match="'2026-13-01' is not a YYYY-MM-DD day"):
        resolve_dates("2026-13-01", [])
