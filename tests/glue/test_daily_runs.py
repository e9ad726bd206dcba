"""Both Glue jobs run as the deployed workflow runs them, day after day with `--dates auto`,
over a week of raw history that arrives a day late (some of it two and three days late), and
over the same history at once with `--dates all`: after every run, every table must hold what
plain Python computes from the raw lines (tests/glue/truth.py, which shares no code with the
jobs).

The history: synthetic jobs (every insert status, DAG chains, hand retries, duplicates) and
hand-made cases, the ones the daily run used to get wrong:
- dag-a: its root dies at 23:50 on day 1, its child (the DAG continues on failure) runs on day
  2: the DAG failed, whatever days a run reads;
- dag-b: running at the end of day 1, finished on day 2: its row moves to day 2 and leaves none
  behind on day 1;
- dag-c: its child is released three hours after the DAG's due time and starts 400 ms later;
- dag-d: its root dies, its blocked child is cancelled; the root's item expires a day later
  (a removal, which does not move the DAG);
- schedule s1: an occurrence dies on day 1 and is retried by hand to success on day 2, one
  fails at 23:59:59 on day 2 and succeeds on day 3, and one is written already cancelled;
- h: its last event (day 2) arrives two days late, within the daily run's reach; i: its last
  event (day 1) arrives three days late, beyond it, until day 1 is run again by hand;
- webhooks on day 3: tied error counts (ranked by name); a duplicated event, lines written
  before `released_at_ms` and `correlation_id` existed, a line that is not JSON and one with no
  event id.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyarrow import dataset  # type: ignore[import-untyped]  # pyarrow ships no type hints
from pyspark.sql import SparkSession

from sundial_history.columns import ALL_TABLES, JOB_HISTORY, TableSpec
from sundial_history.jobs import CompactionResult, ReportResult, run_compaction, run_report
from sundial_history.synthetic import write_raw_history
from tests.glue import truth
from tests.glue.events import MIDNIGHT_MS, raw_event

pytestmark = pytest.mark.spark

DAY1 = date(2026, 11, 21)
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# The workflow runs on these days (day 1 is 0). It misses days 6 and 7, so day 5 is never
# compacted here (the runbook's fix, running it by hand, is left out); days 6 and 7 are quiet.
RUN_DAYS = (1, 2, 3, 4, 7)


def at(day: int, hour: int = 0, minute: int = 0, second: int = 0, ms: int = 0) -> int:
    return MIDNIGHT_MS + day * DAY_MS + hour * HOUR_MS + minute * 60_000 + second * 1_000 + ms


def iso(day: int) -> str:
    return (DAY1 + timedelta(days=day)).isoformat()


def _job(
    job_id: str, queue: str, steps: list[tuple[str, int, dict[str, Any]]], **common: Any
) -> list[dict[str, Any]]:
    """A job's events from (status, time, extra fields) steps, each from the one before."""
    events, before = [], None
    for n, (status, when, extra) in enumerate(steps, start=1):
        fields = {"due_ms": common.get("due_ms", when)} | {
            k: v for k, v in common.items() if k != "due_ms"
        }
        events.append(
            raw_event(
                f"{job_id}-{n}",
                job_id=job_id,
                queue=queue,
                from_status=before,
                to_status=status,
                at_ms=when,
                **(fields | extra),
            )
        )
        before = status
    return events


def _ran(attempt: int, started: int, **extra: Any) -> dict[str, Any]:
    return {"attempt": attempt, "started_ms": started, **extra}


def hand_made() -> list[tuple[dict[str, Any], int]]:
    """(event, the day it reaches the raw bucket) of the hand-made cases (module docstring)."""
    dag_a, dag_b = {"dag_id": "dag-a"}, {"dag_id": "dag-b"}
    dag_c, dag_d = {"dag_id": "dag-c"}, {"dag_id": "dag-d"}
    s1 = {"schedule_id": "s1"}
    released_a, released_b, released_c = at(0, 23, 50, 0, 100), at(0, 21, 0, 1), at(1, 13, 0, 0, 50)
    events = [
        *_job("a-root", "email", [
            ("pending", at(0, 20), {}), ("queued", at(0, 22, 46), {}),
            ("dead", at(0, 23, 50), _ran(1, at(0, 23, 0, 0, 300), error_type="Boom")),
        ], due_ms=at(0, 23), **dag_a),
        *_job("a-child", "email", [
            ("blocked", at(0, 20), {}), ("queued", released_a, {"released_ms": released_a}),
            ("succeeded", at(1, 0, 11), _ran(1, at(1, 0, 10), released_ms=released_a)),
        ], due_ms=at(0, 23), **dag_a),
        *_job("b-root", "default", [
            ("pending", at(0, 20, 30), {}), ("queued", at(0, 20, 46), {}),
            ("succeeded", at(0, 21, 0, 0, 900), _ran(1, at(0, 21, 0, 0, 200))),
        ], due_ms=at(0, 21), **dag_b),
        *_job("b-child", "default", [
            ("blocked", at(0, 20, 30), {}), ("queued", released_b, {"released_ms": released_b}),
            ("succeeded", at(1, 2), _ran(1, at(0, 21, 0, 1, 500), released_ms=released_b)),
        ], due_ms=at(0, 21), **dag_b),
        *_job("c-root", "webhooks", [
            ("pending", at(1, 9), {}), ("queued", at(1, 9, 46), {}),
            ("succeeded", at(1, 13), _ran(1, at(1, 10, 0, 0, 200))),
        ], due_ms=at(1, 10), **dag_c),
        *_job("c-child", "webhooks", [
            ("blocked", at(1, 9), {}), ("queued", released_c, {"released_ms": released_c}),
            ("succeeded", at(1, 13, 0, 1), _ran(1, at(1, 13, 0, 0, 450), released_ms=released_c)),
        ], due_ms=at(1, 10), **dag_c),
        *_job("d-root", "email", [
            ("pending", at(2, 4), {}), ("queued", at(2, 4, 46), {}),
            ("dead", at(2, 5, 0, 2), _ran(1, at(2, 5, 0, 0, 100), error_type="Boom")),
            ("expired", at(3, 6), {"attempt": 1}),
        ], due_ms=at(2, 5), **dag_d),
        *_job("d-child", "email", [
            ("blocked", at(2, 4), {}), ("cancelled", at(2, 5, 0, 2, 10), {}),
        ], due_ms=at(2, 5), **dag_d),
        *_job("e", "email", [
            ("pending", at(0, 11), {"due_ms": at(0, 12)}),
            ("queued", at(0, 11, 46), {"due_ms": at(0, 12)}),
            ("dead", at(0, 12, 0, 3), _ran(1, at(0, 12, 0, 1), due_ms=at(0, 12),
                                            error_type="Timeout")),
            ("pending", at(1, 9), {"attempt": 1}),
            ("queued", at(1, 9, 0, 0, 20), {"attempt": 1, "due_ms": at(1, 9)}),
            ("succeeded", at(1, 9, 0, 2), _ran(2, at(1, 9, 0, 0, 500), due_ms=at(1, 9))),
        ], **s1),
        *_job("f", "email", [
            ("pending", at(1, 20), {}), ("queued", at(1, 23, 45, 59), {}),
            ("failed", at(1, 23, 59, 59, 800), _ran(1, at(1, 23, 59, 59, 300),
                                                    error_type="Timeout")),
            ("succeeded", at(2, 0, 0, 21), _ran(2, at(2, 0, 0, 20, 100), due_ms=at(2, 0, 0, 20))),
        ], due_ms=at(1, 23, 59, 59), **s1),
        *_job("g", "email", [("cancelled", at(1, 8), {})], due_ms=at(1, 12), **s1),
        *_job("h", "default", [
            ("pending", at(1, 3), {}), ("queued", at(1, 3, 0, 0, 50), {}),
            ("succeeded", at(1, 3, 0, 1), _ran(1, at(1, 3, 0, 0, 300))),
        ], due_ms=at(1, 3)),
        *_job("i", "default", [
            ("pending", at(0, 4), {}), ("queued", at(0, 4, 0, 0, 40), {}),
            ("succeeded", at(0, 4, 0, 1), _ran(1, at(0, 4, 0, 0, 250))),
        ], due_ms=at(0, 4)),
    ]  # fmt: skip
    for n, error in enumerate(["HTTPError", "ConnectionError", "Timeout", "HTTPError"]):
        events += _job(f"k{n}", "webhooks", [
            ("pending", at(2, 7, n), {}), ("queued", at(2, 7, n, 0, 30), {}),
            ("dead", at(2, 8, n), _ran(1, at(2, 8, n, 0, 500), error_type=error)),
        ], due_ms=at(2, 8, n))  # fmt: skip
    events += _job("k4", "webhooks", [
        ("pending", at(2, 7), {}), ("queued", at(2, 7, 0, 0, 30), {}),
        ("failed", at(2, 8, 9), _ran(1, at(2, 8, 9, 0, 100), error_type="ConnectionError")),
    ], due_ms=at(2, 8, 9))  # fmt: skip
    late = {"h-3": 3, "i-3": 3}  # h's day 1 + 2 (in reach), i's day 0 + 3 (beyond it)
    arrivals = [
        (e, late.get(e["event_id"], (e["event_at_ms"] - MIDNIGHT_MS) // DAY_MS + 1)) for e in events
    ]
    return arrivals


@dataclass
class History:
    """Raw history files waiting to arrive, by the day they reach the raw bucket."""

    staging: Path
    arrivals: dict[Path, int] = field(default_factory=dict)  # file under staging -> its day

    def add(self, dt: str, name: str, lines: list[str], arrives: int) -> None:
        path = self.staging / f"dt={dt}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress("".join(f"{line}\n" for line in lines).encode()))
        self.arrivals[path] = arrives

    def deliver(self, raw: Path, *, by: int) -> None:
        """Copy every file that has arrived by day `by` into `raw`."""
        for path, arrives in self.arrivals.items():
            target = raw / path.relative_to(self.staging)
            if arrives <= by and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)


def lines_of(folder: Path) -> list[str]:
    return [
        line
        for path in sorted(folder.glob("*.json.gz"))
        for line in gzip.decompress(path.read_bytes()).decode().splitlines()
    ]


def build_history(root: Path) -> History:
    history = History(root / "staging")
    synthetic = root / "synthetic"
    write_raw_history(synthetic, 700, start=DAY1, days=2, seed=11, events_per_file=120)
    for path in sorted(synthetic.rglob("*.json.gz")):
        dt = path.parent.name.removeprefix("dt=")
        arrives = (date.fromisoformat(dt) - DAY1).days + 1
        history.add(
            dt, path.name, gzip.decompress(path.read_bytes()).decode().splitlines(), arrives
        )
    files: dict[tuple[str, int], list[str]] = defaultdict(list)
    for event, arrives in hand_made():
        line = dict(event)
        if event["job_id"] == "b-root":  # written before these fields were captured
            del line["released_at_ms"], line["correlation_id"]
        files[(truth.day(event["event_at_ms"]), arrives)].append(json.dumps(line))
        if event["event_id"] in ("a-root-3", "e-6"):  # a redelivered stream batch
            files[(truth.day(event["event_at_ms"]), arrives)].append(json.dumps(line))
    files[(iso(1), 2)] += ["not json", json.dumps(raw_event("x") | {"event_id": None})]
    for (dt, arrives), lines in files.items():
        history.add(dt, f"hand-{arrives}.json.gz", lines, arrives)
    return history


def all_lines(compacted: dict[str, list[str]]) -> list[str]:
    return [line for lines in compacted.values() for line in lines]


def expected_from(compacted: dict[str, list[str]]) -> dict[str, dict[Any, Any]]:
    """What every table must hold after compacting each day from its lines in `compacted`."""
    return truth.tables(truth.distinct_events(all_lines(compacted)))


def read_tables(curated: Path, reports: Path) -> dict[str, dict[Any, Any]]:
    """Every table as the jobs left it, keyed as truth keys it. Read with pyarrow, as another
    Parquet reader (Athena's stand-in) would read the files, and in milliseconds rather than
    a Spark job per table."""
    result = {}
    for spec in ALL_TABLES:
        path = curated if spec is JOB_HISTORY else reports / spec.name
        result[spec.name] = truth.keyed(spec.name, _rows(path, spec))
    return result


def _rows(path: Path, spec: TableSpec) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    table = dataset.dataset(path, format="parquet", partitioning="hive").to_table()
    assert table.column_names == [*spec.column_names, "dt"], spec.name
    return [
        {
            name: value.replace(tzinfo=None) if isinstance(value, datetime) else value
            for name, value in row.items()
        }
        for row in table.to_pylist()
    ]


@dataclass
class Run:
    today: int
    compaction: CompactionResult
    report: ReportResult
    tables: dict[str, dict[Any, Any]]
    expected: dict[str, dict[Any, Any]]  # truth from the raw lines each day was compacted from
    dag_days: set[str]  # the dag_runs table's dt= folders


@dataclass
class Daily:
    history: History
    raw: Path
    curated: Path
    reports: Path
    runs: dict[int, Run]
    compacted: dict[str, list[str]]  # day -> the raw lines it was last compacted from


@pytest.fixture(scope="module")
def daily(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Daily:
    """The daily workflow, run on each of RUN_DAYS in turn, the raw files arriving meanwhile.
    The daily run compacts (and reports) the two days before it: the truth is computed from
    exactly what those days' raw folders held then."""
    root = tmp_path_factory.mktemp("daily")
    history = build_history(root)
    raw, curated, reports = root / "raw", root / "curated", root / "reports"
    runs, compacted = {}, {}
    for today in RUN_DAYS:
        history.deliver(raw, by=today)
        for day in (today - 2, today - 1):
            if (raw / f"dt={iso(day)}").exists():
                compacted[iso(day)] = lines_of(raw / f"dt={iso(day)}")
        compaction = run_compaction(
            spark, raw_path=str(raw), curated_path=str(curated), today=DAY1 + timedelta(today)
        )
        result = run_report(
            spark,
            curated_path=str(curated),
            reports_path=str(reports),
            today=DAY1 + timedelta(today),
        )
        expected = expected_from(compacted)
        tables = read_tables(curated, reports)
        dag_days = {p.name.removeprefix("dt=") for p in (reports / "dag_runs").glob("dt=*")}
        runs[today] = Run(today, compaction, result, tables, expected, dag_days)
    return Daily(history, raw, curated, reports, runs, compacted)


@pytest.mark.parametrize("today", RUN_DAYS)
@pytest.mark.parametrize("table", [spec.name for spec in ALL_TABLES])
def test_every_table_agrees_with_the_raw_events_after_every_daily_run(
    daily: Daily, today: int, table: str
) -> None:
    run = daily.runs[today]
    assert run.tables[table] == run.expected[table]


def test_a_failed_dag_stays_failed_after_the_run_that_reads_only_its_last_day(
    daily: Daily,
) -> None:
    # Given dag-a, whose root died late on day 1 and whose child ran on day 2
    # When the daily runs of days 3 and 4 read days 2-3 and 3-4
    for today in (2, 3, 4):
        # Then it is failed: two jobs, one dead, dated by its child's end on day 2
        assert daily.runs[today].tables["dag_runs"]["dag-a"] | {"finished_at": None} == {
            "dag_id": "dag-a", "jobs": 2, "succeeded": 1, "dead": 1, "cancelled": 0,
            "unfinished": 0, "outcome": "failed", "finished_at": None, "dt": iso(1),
        }  # fmt: skip


def test_a_dag_finished_a_day_later_leaves_no_row_on_the_first_day(daily: Daily) -> None:
    # Given dag-a and dag-b, both running at the end of day 1
    first = daily.runs[1].tables["dag_runs"]
    assert {(first[d]["outcome"], first[d]["dt"]) for d in ("dag-a", "dag-b")} == {
        ("running", iso(0))
    }
    # When they, and every DAG dated day 1 with them, have changed on a later day
    later = daily.runs[3]
    assert {later.tables["dag_runs"][d]["dt"] for d in ("dag-a", "dag-b")} == {iso(1)}
    assert iso(0) not in {row["dt"] for row in later.expected["dag_runs"].values()}
    # Then day 1 holds no DAG row: its folder is gone, no stale `running` row is left behind
    assert iso(0) in daily.runs[1].dag_days
    assert iso(0) not in later.dag_days
    # And after every run the table's days are exactly those its DAGs are dated by
    for run in daily.runs.values():
        assert run.dag_days == {row["dt"] for row in run.expected["dag_runs"].values()}
    # And a DAG whose job's item expired later stays on the day it ended
    assert daily.runs[4].tables["dag_runs"]["dag-d"]["dt"] == iso(2)


def test_the_daily_report_covers_report_days_not_the_two_days_it_rewrites(daily: Daily) -> None:
    # When the run of day 5 rewrites days 3 and 4
    result = daily.runs[4].report
    assert result.computed == [iso(2), iso(3)]
    # Then its human report covers the 14 days ending with day 4, every day with history in it
    assert result.dates == [iso(day) for day in range(-10, 4)]
    page = (daily.reports / "human" / iso(3) / "index.html").read_text()
    assert "Period: 2026-11-11 to 2026-11-24 (UTC), 14 day(s), 4 of them with job history" in page
    assert all(f"<td>{iso(day)}</td>" in page for day in range(4))


def test_submitted_counts_every_job_inserted(daily: Daily) -> None:
    # Given, on the email queue, a-root and e inserted pending and a-child blocked on day 1,
    # f inserted pending and g written cancelled on day 2 (and the synthetic jobs)
    stats = daily.runs[max(RUN_DAYS)].tables["daily_queue_stats"]
    day1, day2 = stats[(iso(0), "email")], stats[(iso(1), "email")]
    hand1 = {"a-root", "a-child", "e"}
    hand2 = {"f", "g"}
    synthetic1, synthetic2 = (
        _inserts(daily, iso(day), "email", exclude=hand1 | hand2) for day in (0, 1)
    )
    # Then submitted counts them all, with the blocked and cancelled ones apart
    assert (day1["submitted"], day1["submitted_blocked"], day1["submitted_cancelled"]) == (
        3 + sum(synthetic1.values()),
        1 + synthetic1["blocked"],
        synthetic1["cancelled"],
    )
    assert (day2["submitted"], day2["submitted_blocked"], day2["submitted_cancelled"]) == (
        2 + sum(synthetic2.values()),
        synthetic2["blocked"],
        1 + synthetic2["cancelled"],
    )
    # And the synthetic history inserts jobs with every status a job can be inserted with
    everything = truth.distinct_events(all_lines(daily.compacted))
    assert {e["to_status"] for e in everything if e["from_status"] is None} == {
        "pending",
        "blocked",
        "cancelled",
    }


def _inserts(daily: Daily, dt: str, queue: str, *, exclude: set[str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for event in truth.distinct_events(daily.compacted[dt]):
        inserted = event["from_status"] is None and event["job_id"] not in exclude
        if inserted and event["queue"] == queue:
            counts[event["to_status"]] += 1
    return counts


def test_a_dag_childs_lateness_runs_from_its_release(daily: Daily) -> None:
    # Given dag-c's child, released three hours after the DAG's due time, started 400 ms later
    history = daily.runs[max(RUN_DAYS)].tables["job_history"]
    # Then its lateness is 400 ms, not three hours
    assert history["c-child-3"]["lateness_ms"] == 400
    assert history["c-child-3"]["released_at"] == truth.stamp(at(1, 13, 0, 0, 50))
    # And a line written before releases were captured reads with no release
    assert history["b-root-3"]["released_at"] is None
    assert history["b-root-3"]["correlation_id"] is None


def test_a_quiet_day_is_a_success_and_the_report_still_renders(daily: Daily) -> None:
    # Given the run of day 8: nothing happened on days 6 and 7
    run = daily.runs[7]
    # Then compaction and report succeed, and say there was nothing to do
    assert run.compaction.dates == []
    assert run.compaction.summary == f"nothing to compact: no raw history for {iso(5)}, {iso(6)}"
    assert run.report.computed == []
    # And the human report renders its 14 days, the quiet ones included
    assert run.report.dates == [iso(day) for day in range(-7, 7)]
    page = (daily.reports / "human" / "latest" / "index.html").read_text()
    assert f"Period: {iso(-7)} to {iso(6)} (UTC), 14 day(s), 4 of them with job history" in page
    assert f"<td>{iso(0)}</td>" in page


def test_a_fortnight_without_history_renders_and_says_so(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Given a stack with no history yet
    # When the daily report runs
    result = run_report(
        spark,
        curated_path=str(tmp_path / "curated"),
        reports_path=str(tmp_path / "reports"),
        today=DAY1,
    )
    # Then it succeeds and its human report renders the 14 days, saying there was nothing
    assert (result.computed, result.events, len(result.dates)) == ([], 0, 14)
    page = Path(result.report_uri).read_text()
    assert "14 day(s), no job history in this period, 0 history events" in page
    assert page.count("<img src=") == 3


def test_events_more_than_two_days_late_wait_for_their_day_to_be_run_again(
    daily: Daily, spark: SparkSession
) -> None:
    # Given i's success on day 1, which reached the raw bucket on day 4: the daily runs of
    # days 2 and 3 compacted day 1 before it came, and no daily run compacts day 1 again
    assert "i-3" not in daily.runs[max(RUN_DAYS)].tables["job_history"]
    # When day 1 is run again by hand (compaction, then report), as the runbook says
    run_compaction(spark, raw_path=str(daily.raw), curated_path=str(daily.curated), dates=iso(0))
    result = run_report(
        spark, curated_path=str(daily.curated), reports_path=str(daily.reports), dates=iso(0)
    )
    # Then every table holds it, as the raw events say
    compacted = daily.compacted | {iso(0): lines_of(daily.raw / f"dt={iso(0)}")}
    expected = expected_from(compacted)
    assert "i-3" in expected["job_history"]
    assert read_tables(daily.curated, daily.reports) == expected
    # And `latest` still shows the newest report, not day 1's
    assert result.dates[-1] == iso(0)
    latest = (daily.reports / "human" / "latest" / "index.html").read_text()
    assert f"to {iso(6)} (UTC)" in latest


def test_all_of_history_at_once_agrees_with_the_raw_events(
    daily: Daily, spark: SparkSession, tmp_path: Path
) -> None:
    # Given the whole history, every file arrived
    raw, curated, reports = tmp_path / "raw", tmp_path / "curated", tmp_path / "reports"
    daily.history.deliver(raw, by=99)
    # When both jobs run over all of it
    run_compaction(spark, raw_path=str(raw), curated_path=str(curated), dates="all")
    result = run_report(
        spark, curated_path=str(curated), reports_path=str(reports), dates="all", notes=["test"]
    )
    # Then every table holds what the raw events say
    everything = [line for folder in sorted(raw.glob("dt=*")) for line in lines_of(folder)]
    assert read_tables(curated, reports) == truth.tables(truth.distinct_events(everything))
    # And the human report is there, for the last day and as `latest`, with its charts
    assert result.report_uri == str(reports / "human" / result.dates[-1] / "index.html")
    for folder in (result.dates[-1], "latest"):
        human = reports / "human" / folder
        page = (human / "index.html").read_text()
        assert page.count("<img src=") == 3
        assert "test" in page
        assert "Per queue" in (human / "report.md").read_text()
        for chart in ("volume.png", "lateness.png", "duration.png"):
            assert (human / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
