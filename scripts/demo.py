"""`make demo`: submits a realistic mix of jobs to a running `make run` and shows what happened.

Immediate jobs, jobs 5 to 60 s out, one 20 minutes out (it waits in the table for the sweeper),
a batch, a cancel, an idempotent repeat and one bad request; a schedule every 15 seconds, its
runs as they fire, a pause and a resume. Then two DAGs on the `demo` queue (run by the example
consumer): the design card's daily_report, followed until it succeeds, and one whose node dies,
cancelling what depends on it; and a DAG with a cycle, rejected. Reads SUNDIAL_HOST and
SUNDIAL_API_PORT like `make run` (give it the same SUNDIAL_* settings as `make run`).

Each call waits up to CALL_TIMEOUT_S: more than the API's own limit (API Gateway's 29 s) plus a
function's cold start on a busy machine. A call that gets no answer ends the demo with a line
saying which call, never a traceback.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
from typing import Any

HOST = os.environ.get("SUNDIAL_HOST", "127.0.0.1")
API = f"http://{HOST}:{os.environ.get('SUNDIAL_API_PORT', '8000')}"
CALL_TIMEOUT_S = 60
# The schedule part watches its runs until this many have succeeded (or SCHEDULE_WATCH_S).
SCHEDULE_RUNS_SHOWN = 2
SCHEDULE_WATCH_S = 45


class NoAnswer(Exception):
    """The API did not answer a call in time."""


def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{API}{path}", data=data, method=method, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
    except TimeoutError:
        raise NoAnswer(f"{method} {path}: no answer within {CALL_TIMEOUT_S} s") from None


def show(label: str, status: int, body: Any) -> None:
    summary = (
        body.get("status") or body.get("state") or body.get("message")
        if isinstance(body, dict)
        else body
    )
    job_id = body.get("id", "") if isinstance(body, dict) else ""
    print(f"{status}  {label:<44} {job_id:<37} {summary}")


def main() -> int:
    try:
        call("GET", "/jobs/ping")
    except urllib.error.URLError:
        print(f"Nothing answers at {API}: start `make run` first.", file=sys.stderr)
        return 1
    try:
        return _tour()
    except NoAnswer as error:
        print(f"\nThe demo stopped: {error}. See `make run`'s window and log.", file=sys.stderr)
        return 1


def _tour() -> int:
    rng = random.Random()
    for n in range(3):
        status, job = call(
            "POST",
            "/jobs",
            {
                "queue": "demo",
                "delay_seconds": 0,
                "priority": "critical",
                "payload": {"kind": "welcome-email", "n": n},
            },
        )
        show("immediate, critical (demo)", status, job)
    delayed = []
    for n in range(8):
        delay = rng.randint(5, 60)
        queue = rng.choice(["demo", "default", "email"])
        status, job = call(
            "POST",
            "/jobs",
            {"queue": queue, "delay_seconds": delay, "payload": {"kind": "reminder", "n": n}},
        )
        show(f"in {delay:>2} s ({queue})", status, job)
        delayed.append(job)
    status, job = call(
        "POST", "/jobs", {"queue": "demo", "delay_seconds": 1200, "payload": {"kind": "report"}}
    )
    show("in 20 min: pending until a sweep claims it", status, job)
    status, batch = call(
        "POST",
        "/jobs/batch",
        {
            "jobs": [
                {"queue": "demo", "delay_seconds": 5 * i, "payload": {"kind": "batch", "i": i}}
                for i in range(5)
            ]
        },
    )
    print(
        f"{status}  batch of 5 (demo, 0-20 s)                    "
        + ", ".join(str(r["status_code"]) for r in batch["results"])
    )
    victim = delayed[-1]
    status, cancelled = call("DELETE", f"/jobs/{victim['id']}")
    show("cancel the last delayed job", status, cancelled)
    key = f"demo-{int(time.time())}"
    for attempt in ("first", "repeat"):
        status, job = call(
            "POST", "/jobs", {"queue": "email", "delay_seconds": 30, "idempotency_key": key}
        )
        show(f"idempotency_key, {attempt} (201 then 200)", status, job)
    status, error = call("POST", "/jobs", {"queue": "nope", "run_at": "tomorrow"})
    show("bad request: 400 naming the fields", status, error)
    schedule_id = demo_schedule()
    print("\nWatch them move in the `make run` window. Get one:")
    print(f"  curl -s {API}/jobs/{delayed[0]['id']}")
    print(f"  curl -s {API}/schedules/{schedule_id}/runs")
    return run_dags()


DAILY_REPORT = {
    "name": "daily_report",
    "parent_results": "inline",
    "nodes": {
        "extract": {"queue": "demo", "payload": {"step": "extract"}},
        "transform": {"queue": "demo", "depends_on": ["extract"]},
        "load_warehouse": {"queue": "demo", "depends_on": ["transform"]},
        "load_cache": {"queue": "demo", "depends_on": ["transform"]},
        "notify": {"queue": "demo", "depends_on": ["load_warehouse", "load_cache"]},
    },
}
# The example consumer fails a job whose payload says {"fail": true}; one attempt, so it dies.
NIGHTLY_IMPORT = {
    "name": "nightly_import",
    "nodes": {
        "fetch": {"queue": "demo", "payload": {"fail": True}, "max_attempts": 1},
        "parse": {"queue": "demo", "depends_on": ["fetch"]},
        "publish": {"queue": "demo", "depends_on": ["parse"]},
        "heartbeat": {"queue": "demo"},
    },
}


def run_dags() -> int:
    print("\nDAGs (on the demo queue, run by the example consumer):")
    dags = {}
    for body in (DAILY_REPORT, NIGHTLY_IMPORT):
        status, dag = call("POST", "/dags", body)
        show(f"DAG {body['name']}", status, dag)
        if status != 201:
            return 1
        dags[body["name"]] = dag
    first_id = dags[DAILY_REPORT["name"]]["id"]
    status, error = call(
        "POST",
        "/dags",
        {
            "name": "loop",
            "nodes": {
                "a": {"queue": "demo", "depends_on": ["c"]},
                "b": {"queue": "demo", "depends_on": ["a"]},
                "c": {"queue": "demo", "depends_on": ["b"]},
            },
        },
    )
    show("DAG with a cycle: 400 naming it", status, error)
    deadline = time.monotonic() + 60
    shown: dict[str, str] = {}
    while dags and time.monotonic() < deadline:
        for name, dag in list(dags.items()):
            _, now = call("GET", f"/dags/{dag['id']}")
            line = " ".join(f"{node}={n['status']}" for node, n in now["nodes"].items())
            if shown.get(name) != line:
                print(f"  {name:<15} {now['status']:<10} {line}")
                shown[name] = line
            if now["status"] != "running":
                del dags[name]
        time.sleep(0.5)
    if dags:
        print(f"  still running after 60 s: {', '.join(dags)}")
        return 1
    print(f"\nA whole DAG, node by node:\n  curl -s {API}/dags/{first_id}")
    return 0


def demo_schedule() -> str:
    """A schedule firing every 15 seconds on `demo` (whose consumer runs each occurrence), its
    runs as they happen, a pause and a resume, and a schedule refused for a bad time zone."""
    status, error = call(
        "POST", "/schedules", {"queue": "demo", "cron": "0 9 * * *", "timezone": "Mars/Base"}
    )
    show("schedule with a bad time zone: 400", status, error)
    status, schedule = call(
        "POST",
        "/schedules",
        {"name": "demo heartbeat", "queue": "demo", "rate": "15 seconds", "payload": "tick"},
    )
    show("schedule every 15 s on demo", status, schedule)
    print(f"   next run at {schedule.get('next_run_at')}; its first runs as they succeed:")
    shown: set[str] = set()
    deadline = time.monotonic() + SCHEDULE_WATCH_S
    while len(shown) < SCHEDULE_RUNS_SHOWN and time.monotonic() < deadline:
        time.sleep(2)
        _, page = call("GET", f"/schedules/{schedule['id']}/runs?limit=100")
        for run in reversed(page["runs"]):
            if run["status"] == "succeeded" and run["scheduled_for"] not in shown:
                shown.add(run["scheduled_for"])
                print(f"   run for {run['scheduled_for']}: {run['status']} ({run['job_id']})")
    status, paused = call("POST", f"/schedules/{schedule['id']}/pause")
    print(f"{status}  {'pause the schedule':<44} {schedule['id']:<37} {paused['state']}")
    status, resumed = call("POST", f"/schedules/{schedule['id']}/resume")
    print(
        f"{status}  {'resume it (misfire: fire_once)':<44} {schedule['id']:<37} {resumed['state']}"
    )
    print(f"   delete it with: curl -s -X DELETE {API}/schedules/{schedule['id']}")
    return str(schedule["id"])


if __name__ == "__main__":
    sys.exit(main())
