"""Issue 26's acceptance, as a newcomer meets the local runtime: a fresh `make run` (its own, on
free ports), the commands its banner prints run as printed, `make demo` five times, every run
complete and without a traceback, then `make report`, whose figures are the table's, job by
job and DAG by DAG, and Ctrl-C, within a bound.

The five demos run at once: each takes about a minute alone (its schedule is watched for two
runs, its DAGs until they end), so five in a row would take five; at once they are also the
load a slow pause used to fail under. They leave their schedules running (a newcomer is told
how to delete one); the test deletes them, so the table stops changing before it is counted.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pyarrow.dataset as ds  # type: ignore[import-untyped]
import pytest

from sundial.history.capture import is_job_key
from sundial.model.dag import dag_status
from sundial.model.job import Status
from tests.infrastructure.synthesis import Synthesized
from tests.integration.test_local_runtime import _free_port, _http, _start

ROOT = Path(__file__).resolve().parents[2]
DEMOS = 5
STOP_BOUND_S = 30  # generous: the runtime gives itself 5 s (on a loaded 2-core machine)


@dataclass
class Fresh:
    process: subprocess.Popen[str]
    api: str
    emulator: str
    banner: list[str]
    output: list[str] = field(default_factory=list)  # everything it printed after the banner
    demos: list[subprocess.CompletedProcess[str]] = field(default_factory=list)


@pytest.fixture(scope="module")
def fresh(synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fresh]:
    tmp_path = tmp_path_factory.mktemp("fresh")
    api_port, emulator_port = _free_port(), _free_port()
    process = _start(synthesized, tmp_path, api_port, emulator_port)
    assert process.stdout is not None
    banner: list[str] = []
    for line in process.stdout:
        if line.startswith("SUNDIAL_READY"):
            break
        banner.append(line.rstrip("\n"))
    else:
        pytest.fail(f"the local runtime exited with {process.wait()} before it was ready")
    runtime = Fresh(
        process=process,
        api=f"http://127.0.0.1:{api_port}",
        emulator=f"http://127.0.0.1:{emulator_port}",
        banner=banner,
    )

    def drain() -> None:
        for line in process.stdout or []:
            runtime.output.append(line)

    threading.Thread(target=drain, daemon=True).start()
    yield runtime
    if process.poll() is None:
        process.kill()
        process.wait()


def _command(fresh: Fresh, tool: str) -> str:
    """The banner's command line that runs `tool`, exactly as printed."""
    [line] = [line.strip() for line in fresh.banner if line.strip().endswith(tool)]
    return line


def _run(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A printed command, through a shell, from the repository (where the banner says to)."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_the_banners_commands_carry_this_runtimes_ports_and_reach_it(fresh: Fresh) -> None:
    port = fresh.api.rsplit(":", 1)[1]
    emulator_port = fresh.emulator.rsplit(":", 1)[1]
    for tool in ("make demo", ".venv/bin/sundial queues ls", "make report"):
        words = shlex.split(_command(fresh, tool))
        assert f"SUNDIAL_API_PORT={port}" in words, tool
        assert f"SUNDIAL_EMULATOR_PORT={emulator_port}" in words, tool
    # When the printed CLI command is run as printed, Then it lists this runtime's queues
    listed = _run(_command(fresh, ".venv/bin/sundial queues ls"))
    assert listed.returncode == 0, listed.stderr
    assert {"default", "demo", "email"} <= set(listed.stdout.split())


def test_make_demo_completes_five_times_out_of_five(fresh: Fresh) -> None:
    # When `make demo` is run five times, at once, as the banner prints it
    command = _command(fresh, "make demo")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=DEMOS) as pool:
        fresh.demos = list(pool.map(lambda _: _run(command), range(DEMOS)))
    took = time.monotonic() - started
    # Then each completes: both DAGs end, and nothing prints a traceback
    for demo in fresh.demos:
        output = demo.stdout + demo.stderr
        assert demo.returncode == 0, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert "A whole DAG, node by node:" in output
        assert re.search(r"^200  pause the schedule .* paused$", demo.stdout, re.M), output
    # And the runtime printed no traceback meanwhile (a client that gave up is a log line)
    assert "Traceback" not in "".join(fresh.output)
    print(f"\n{DEMOS} demos at once: {took:.0f} s")


def _table(fresh: Fresh) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=fresh.emulator,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


@dataclass(frozen=True)
class TableCounts:
    jobs: dict[str, int]  # queue -> jobs
    statuses: dict[str, Counter[str]]  # queue -> status -> jobs
    dags: dict[str, str]  # DAG id -> its status


def _count(fresh: Fresh) -> TableCounts:
    """The table, as it stands: every job (not retry timers or moved jobs' pointers)."""
    client = _table(fresh)
    [name] = client.list_tables()["TableNames"]
    jobs: Counter[str] = Counter()
    statuses: dict[str, Counter[str]] = defaultdict(Counter)
    nodes: dict[str, list[Status]] = defaultdict(list)
    for page in client.get_paginator("scan").paginate(TableName=name):
        for item in page["Items"]:
            if not is_job_key(item["pk"]["S"], item["sk"]["S"]):
                continue
            if "retry_of" in item or "moved_to" in item:
                continue
            queue, status = item["queue"]["S"], item["status"]["S"]
            jobs[queue] += 1
            statuses[queue][status] += 1
            if "dag_id" in item:
                nodes[item["dag_id"]["S"]].append(Status(status))
    dags = {dag_id: str(dag_status(members)) for dag_id, members in nodes.items()}
    return TableCounts(dict(jobs), dict(statuses), dags)


def _settled(fresh: Fresh, *, quiet_s: float = 20, limit_s: float = 240) -> TableCounts:
    """The table once it has not changed for `quiet_s` (jobs due within a minute have run)."""
    last, since, deadline = _count(fresh), time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(2)  # waiting for the runtime's consumers, not for a due time
        now = _count(fresh)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
    pytest.fail(f"the table kept changing for {limit_s} s: {last}")


def _parquet(folder: Path) -> Any:
    """A table the report wrote (partitioned by dt=), as Athena would read it."""
    return ds.dataset(folder, format="parquet", partitioning="hive").to_table()


def test_make_report_counts_every_job_and_dag_the_demos_made(fresh: Fresh, tmp_path: Path) -> None:
    assert len(fresh.demos) == DEMOS, "runs after the demos"
    # Given the demos' schedules deleted (the demo prints how), and the table settled
    for demo in fresh.demos:
        [schedule] = re.findall(r"curl -s -X DELETE \S+/schedules/(\w+)", demo.stdout)
        assert _http("DELETE", f"{fresh.api}/schedules/{schedule}", timeout=60)[0] == 200
    table = _settled(fresh)
    # When `make report` runs as the banner prints it
    report = _run(_command(fresh, "make report"), SUNDIAL_REPORT_DIR=str(tmp_path))
    output = report.stdout + report.stderr
    assert report.returncode == 0, output[-3000:]
    assert "History complete: all" in output and "PARTIAL" not in output
    assert _count(fresh) == table, "the table changed while the report ran"
    # Then the history it compacted holds every job of the table, and the report every DAG
    history = _parquet(tmp_path / "curated")
    reported_jobs: dict[str, set[str]] = defaultdict(set)
    for row in history.select(["queue", "job_id"]).to_pylist():
        reported_jobs[row["queue"]].add(row["job_id"])
    assert {queue: len(ids) for queue, ids in reported_jobs.items()} == table.jobs
    dag_runs = _parquet(tmp_path / "reports" / "dag_runs")
    outcomes = {row["dag_id"]: row["outcome"] for row in dag_runs.to_pylist()}
    assert outcomes == table.dags
    assert Counter(outcomes.values()) == Counter(succeeded=DEMOS, failed=DEMOS)
    # And its daily figures add up to the table's, queue by queue
    stats = _parquet(tmp_path / "reports" / "daily_queue_stats")
    totals: dict[str, Counter[str]] = defaultdict(Counter)
    for row in stats.to_pylist():
        for outcome in ("succeeded", "dead", "cancelled"):
            totals[row["queue"]][outcome] += row[outcome]
    for queue, by_status in table.statuses.items():
        for outcome in ("succeeded", "dead", "cancelled"):
            assert totals[queue][outcome] == by_status[outcome], (queue, outcome)


def test_ctrl_c_after_the_demos_stops_everything_within_a_bound(fresh: Fresh) -> None:
    # Given the runtime after five demos (every function has warm processes)
    children = subprocess.run(
        ["pgrep", "-P", str(fresh.process.pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    assert children
    # When it gets Ctrl-C
    started = time.monotonic()
    fresh.process.send_signal(signal.SIGINT)
    fresh.process.wait(timeout=STOP_BOUND_S)
    took = time.monotonic() - started
    # Then it and every function process are gone within the bound, quietly
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{pid}").exists() for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)  # waiting for the kernel to reap them, not for a due time
    assert fresh.process.returncode == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)
    assert "Traceback" not in "".join(fresh.output)
    print(f"\nCtrl-C after {DEMOS} demos: stopped in {took:.1f} s")
