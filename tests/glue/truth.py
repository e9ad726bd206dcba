"""What every history table must hold, computed in plain Python from raw history lines,
independently of the Glue jobs' code (sundial_history is not imported here): the tests compare
the tables the jobs write with these, row for row and figure for figure.

The definitions are the documented ones (docs/history.md, "Report definitions"):
- an event counts once (redelivered copies share its id); lines without an event id, job id,
  event time or status, and lines that are not JSON, are not events;
- lateness: attempt start - max(attempt due, release), on the events that end an attempt;
- percentiles: nearest rank, the smallest value with at least p of the values at or below it;
- a job finished in a group (a day) by its latest succeeded/dead/cancelled event there (ties:
  the smallest event id); a DAG's jobs by their latest such event over all of history;
- a DAG's day: its latest event that is not a removal (expired, deleted).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

Event = dict[str, Any]
Row = dict[str, Any]

ENDS = ("succeeded", "failed", "dead")
FINAL = ("succeeded", "dead", "cancelled")
REMOVALS = ("expired", "deleted")
REQUIRED = ("event_id", "job_id", "event_at_ms", "to_status")


def day(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def stamp(epoch_ms: int | None) -> datetime | None:
    """As Spark collects a TIMESTAMP in a UTC session and process: naive UTC wall time."""
    if epoch_ms is None:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).replace(tzinfo=None)


def distinct_events(lines: Iterable[str]) -> list[Event]:
    events: dict[str, Event] = {}
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if all(event.get(name) is not None for name in REQUIRED):
            events.setdefault(event["event_id"], event)
    return list(events.values())


def lateness(event: Event) -> int | None:
    if event["to_status"] not in ENDS or event.get("started_at_ms") is None:
        return None
    due = event["due_at_ms"]
    released = event.get("released_at_ms")
    return int(event["started_at_ms"] - max(due, released if released is not None else due))


def job_history(events: list[Event]) -> dict[str, Row]:
    return {
        e["event_id"]: {
            "event_id": e["event_id"],
            "job_id": e["job_id"],
            "queue": e["queue"],
            "priority": e["priority"],
            "schedule_id": e.get("schedule_id"),
            "dag_id": e.get("dag_id"),
            "from_status": e.get("from_status"),
            "to_status": e["to_status"],
            "attempt": e["attempt"],
            "due_at": stamp(e.get("due_at_ms")),
            "event_at": stamp(e["event_at_ms"]),
            "started_at": stamp(e.get("started_at_ms")),
            "duration_ms": e.get("duration_ms"),
            "lateness_ms": lateness(e),
            "error_type": e.get("error_type"),
            "correlation_id": e.get("correlation_id"),
            "released_at": stamp(e.get("released_at_ms")),
            "dt": day(e["event_at_ms"]),
        }
        for e in events
    }


def nearest_rank(values: list[int], share: str) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[math.ceil(Fraction(share) * len(ordered)) - 1]


def last_finish(events: Iterable[Event]) -> Event | None:
    """The latest succeeded/dead/cancelled event; of those at the same time, the smallest id."""
    finals = [e for e in events if e["to_status"] in FINAL]
    if not finals:
        return None
    latest = max(e["event_at_ms"] for e in finals)
    return min((e for e in finals if e["event_at_ms"] == latest), key=lambda e: e["event_id"])


def _finishes_per_day(events: list[Event]) -> list[Event]:
    """Each job's last finish of each day it finished on."""
    by_job_day: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        by_job_day[(e["job_id"], day(e["event_at_ms"]))].append(e)
    return [f for group in by_job_day.values() if (f := last_finish(group)) is not None]


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def daily_queue_stats(events: list[Event]) -> dict[tuple[str, str], Row]:
    groups: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        groups[(day(e["event_at_ms"]), e["queue"])].append(e)
    finishes: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for f in _finishes_per_day(events):
        finishes[(day(f["event_at_ms"]), f["queue"])].append(f)
    table = {}
    for key, group in groups.items():
        status = Counter(e["to_status"] for e in group)
        inserts = Counter(e["to_status"] for e in group if e.get("from_status") is None)
        ends = [e for e in group if e["to_status"] in ENDS]
        retries = sum(1 for e in ends if e["attempt"] > 1)
        late = [v for e in ends if (v := lateness(e)) is not None]
        took = [e["duration_ms"] for e in ends if e.get("duration_ms") is not None]
        dag = [f for f in finishes[key] if f.get("dag_id")]
        scheduled = [f for f in finishes[key] if f.get("schedule_id")]
        table[key] = {
            "dt": key[0],
            "queue": key[1],
            "submitted": sum(inserts.values()),
            "submitted_blocked": inserts["blocked"],
            "submitted_cancelled": inserts["cancelled"],
            **{s: status[s] for s in ("succeeded", "failed", "dead", "cancelled", "expired")},
            "attempts": len(ends),
            "retries": retries,
            "retry_rate": _rate(retries, len(ends)),
            **{f"lateness_p{p}_ms": nearest_rank(late, f"0.{p}") for p in ("50", "95", "99")},
            **{f"duration_p{p}_ms": nearest_rank(took, f"0.{p}") for p in ("50", "95", "99")},
            "dag_jobs_finished": len(dag),
            "dag_job_success_rate": _rate(
                sum(f["to_status"] == "succeeded" for f in dag), len(dag)
            ),
            "schedule_jobs_finished": len(scheduled),
            "schedule_job_success_rate": _rate(
                sum(f["to_status"] == "succeeded" for f in scheduled), len(scheduled)
            ),
        }
    return table


def top_errors(events: list[Event], limit: int = 5) -> dict[tuple[str, str, int], Row]:
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for e in events:
        if e["to_status"] in ("failed", "dead") and e.get("error_type"):
            counts[(day(e["event_at_ms"]), e["queue"])][e["error_type"]] += 1
    table = {}
    for (dt, queue), counter in counts.items():
        ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:limit]
        for rank, (error, errors) in enumerate(ranked, start=1):
            table[(dt, queue, rank)] = {
                "dt": dt,
                "queue": queue,
                "error_type": error,
                "errors": errors,
                "rank": rank,
            }
    return table


def dag_runs(events: list[Event]) -> dict[str, Row]:
    dags: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.get("dag_id"):
            dags[e["dag_id"]].append(e)
    table = {}
    for dag_id, group in dags.items():
        jobs: dict[str, list[Event]] = defaultdict(list)
        for e in group:
            jobs[e["job_id"]].append(e)
        ended = Counter(
            f["to_status"] for history in jobs.values() if (f := last_finish(history)) is not None
        )
        unfinished = len(jobs) - sum(ended.values())
        changes = [e for e in group if e["to_status"] not in REMOVALS] or group
        last = max(e["event_at_ms"] for e in changes)
        if ended["succeeded"] == len(jobs):
            outcome = "succeeded"
        elif unfinished == 0:
            outcome = "failed"
        else:
            outcome = "running"
        table[dag_id] = {
            "dag_id": dag_id,
            "jobs": len(jobs),
            "succeeded": ended["succeeded"],
            "dead": ended["dead"],
            "cancelled": ended["cancelled"],
            "unfinished": unfinished,
            "outcome": outcome,
            "finished_at": stamp(last),
            "dt": day(last),
        }
    return table


def schedule_runs(events: list[Event]) -> dict[tuple[str, str, str], Row]:
    runs: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    for f in _finishes_per_day([e for e in events if e.get("schedule_id")]):
        runs[(day(f["event_at_ms"]), f["schedule_id"], f["queue"])][f["to_status"]] += 1
    return {
        key: {
            "dt": key[0],
            "schedule_id": key[1],
            "queue": key[2],
            "runs": sum(counter.values()),
            "succeeded": counter["succeeded"],
            "dead": counter["dead"],
            "cancelled": counter["cancelled"],
            "success_rate": _rate(counter["succeeded"], sum(counter.values())),
        }
        for key, counter in runs.items()
    }


def tables(events: list[Event]) -> dict[str, dict[Any, Row]]:
    """Every table the jobs write, by its Glue table name, keyed as `keyed` keys rows."""
    return {
        "job_history": job_history(events),
        "daily_queue_stats": daily_queue_stats(events),
        "top_errors": top_errors(events),
        "dag_runs": dag_runs(events),
        "schedule_runs": schedule_runs(events),
    }


KEYS: dict[str, tuple[str, ...]] = {
    "job_history": ("event_id",),
    "daily_queue_stats": ("dt", "queue"),
    "top_errors": ("dt", "queue", "rank"),
    "dag_runs": ("dag_id",),
    "schedule_runs": ("dt", "schedule_id", "queue"),
}


def keyed(name: str, rows: Iterable[Row]) -> dict[Any, Row]:
    """Rows of table `name` by the key `tables` uses (one column: the value; else a tuple)."""
    columns = KEYS[name]
    result: dict[Any, Row] = {}
    for row in rows:
        key = row[columns[0]] if len(columns) == 1 else tuple(row[c] for c in columns)
        assert key not in result, f"{name}: two rows for {key}"
        result[key] = row
    return result
