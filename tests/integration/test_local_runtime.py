"""`make run` for real: the local runtime started as a subprocess on free ports, from a freshly
synthesized cloud assembly, driven over HTTP and read with boto3 like any client would."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from pyspark.sql import SparkSession

from sundial.ids import JobKey
from sundial.local.history import HistoryLocation, export_history, history_location
from sundial.local.provision import assign_names
from sundial.local.template import LocalTemplate
from sundial.model.submission import parse_rfc3339
from sundial.transport.envelope import Envelope
from sundial.worker import Worker
from sundial_history.jobs import run_compaction, run_report
from tests.infrastructure.synthesis import Synthesized
from tests.support import DAILY_REPORT

JOBS = 100


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Running:
    process: subprocess.Popen[str]
    api: str
    emulator: str
    startup_s: float
    env: dict[str, str]
    banner: list[str]
    log: Path


def _start(
    synthesized: Synthesized, tmp_path: Path, api_port: int, emulator_port: int
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SUNDIAL_CDK_OUT": str(synthesized.outdir),
        "SUNDIAL_API_PORT": str(api_port),
        "SUNDIAL_EMULATOR_PORT": str(emulator_port),
        "SUNDIAL_LOG": str(tmp_path / "functions.log"),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "sundial.local"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture(scope="module")
def running(
    synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    tmp_path = tmp_path_factory.mktemp("local")
    api_port, emulator_port = _free_port(), _free_port()
    started = time.monotonic()
    process = _start(synthesized, tmp_path, api_port, emulator_port)
    assert process.stdout is not None
    banner: list[str] = []
    for line in process.stdout:
        if line.startswith("SUNDIAL_READY"):
            break
        banner.append(line.rstrip("\n"))
    else:
        pytest.fail(f"the local runtime exited with {process.wait()} before it was ready")
    ready = Running(
        banner=banner,
        log=tmp_path / "functions.log",
        process=process,
        api=f"http://127.0.0.1:{api_port}",
        emulator=f"http://127.0.0.1:{emulator_port}",
        startup_s=time.monotonic() - started,
        env={"api_port": str(api_port), "emulator_port": str(emulator_port)},
    )
    threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
    yield ready
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)


def _http(
    method: str, url: str, body: Any = None, timeout: float = 10, caller: str | None = None
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json"}
    if caller is not None:
        headers["X-Sundial-Caller"] = caller
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _sqs(running: Running) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=running.emulator,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def test_100_jobs_arrive_once_on_time(running: Running) -> None:
    sqs = _sqs(running)
    job_queues = [
        u
        for u in sqs.list_queues()["QueueUrls"]
        if not any(word in u for word in ("dlq", "demo", "DispatchFailures"))
    ]
    assert len(job_queues) == 2  # default and email, each read by this test only
    arrivals: dict[str, list[int]] = defaultdict(list)
    stop = threading.Event()

    def consume(url: str) -> None:
        client = _sqs(running)
        while not stop.is_set():
            messages = client.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1
            ).get("Messages", [])
            now_ms = time.time_ns() // 1_000_000
            for message in messages:
                arrivals[json.loads(message["Body"])["id"]].append(now_ms)
                client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    consumers = [threading.Thread(target=consume, args=(url,), daemon=True) for url in job_queues]
    for consumer in consumers:
        consumer.start()
    try:
        _submit_and_check_arrivals(running, arrivals)
    finally:
        stop.set()  # even on a failure: the next tests read these queues themselves


def _submit_and_check_arrivals(running: Running, arrivals: dict[str, list[int]]) -> None:
    # Given 100 jobs submitted over HTTP with delays of 1 to 20 s
    rng = random.Random(7)
    due: dict[str, int] = {}
    for n in range(JOBS):
        body = {
            "queue": rng.choice(["default", "email"]),
            "delay_seconds": rng.randint(1, 20),
            "payload": {"n": n},
        }
        status, created = _http("POST", f"{running.api}/jobs", body)
        assert status == 201, created
        due[created["id"]] = parse_rfc3339(created["run_at"])
    # When they come due and a consumer reads them from the emulator's SQS
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(arrivals) < JOBS:
        time.sleep(0.2)
    time.sleep(1.5)  # a duplicate would surface now
    # Then each arrived exactly once, none before its due second
    assert set(arrivals) == set(due)
    assert all(len(times) == 1 for times in arrivals.values())
    lateness = sorted(arrivals[j][0] - due[j] for j in due)
    assert all(arrivals[j][0] >= due[j] // 1000 * 1000 for j in due)
    p50 = statistics.median(lateness)
    p95 = lateness[int(0.95 * len(lateness)) - 1]
    print(
        f"\nlocal runtime: started in {running.startup_s:.2f} s; lateness over {JOBS} jobs: "
        f"p50 {p50:.0f} ms, p95 {p95} ms, max {lateness[-1]} ms, min {lateness[0]} ms"
    )
    assert p95 < 1500


def test_cancel_and_errors_over_http(running: Running) -> None:
    status, job = _http("POST", f"{running.api}/jobs", {"queue": "email", "delay_seconds": 3600})
    assert (status, job["status"]) == (201, "pending")
    assert _http("DELETE", f"{running.api}/jobs/{job['id']}") == (
        200,
        {"id": job["id"], "status": "cancelled"},
    )
    assert _http("GET", f"{running.api}/jobs/{job['id']}")[1]["status"] == "cancelled"
    status, error = _http("POST", f"{running.api}/jobs", {"queue": "email", "delay_seconds": -1})
    assert status == 400 and error["errors"][0]["field"] == "delay_seconds"
    status, error = _http("GET", f"{running.api}/jobs/not-an-id")
    assert status == 400 and error["errors"][0]["field"] == "job_id"
    unknown = job["id"][:-6] + ("A" if job["id"][-6] != "A" else "B") + job["id"][-5:]
    assert _http("GET", f"{running.api}/jobs/{unknown}")[0] in (400, 404)
    assert _http("GET", f"{running.api}/jobs/{_unknown_id()}")[0] == 404
    keyed = {"queue": "email", "delay_seconds": 3600, "idempotency_key": "order-1"}
    assert _http("POST", f"{running.api}/jobs", keyed)[0] == 201
    status, error = _http("POST", f"{running.api}/jobs", {**keyed, "payload": "different"})
    assert status == 409 and "idempotency_key" in error["message"]
    assert _http("GET", f"{running.api}/nowhere")[0] == 404


def _unknown_id() -> str:
    return JobKey(shard=0, due_ms=1_900_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id


def test_a_schedule_fires_and_a_queue_pauses_over_http(running: Running) -> None:
    # Given a schedule every 10 seconds on `default`, created over HTTP
    sqs = _sqs(running)
    [url] = [u for u in sqs.list_queues()["QueueUrls"] if "default" in u and "dlq" not in u]
    started = time.time_ns() // 1_000_000
    status, schedule = _http(
        "POST",
        f"{running.api}/schedules",
        {"rate": "10 seconds", "queue": "default", "payload": {"tick": True}},
        timeout=30,  # it sends 91 occurrences; API Gateway would wait 29 s
    )
    assert status == 201, schedule
    created_in_ms = time.time_ns() // 1_000_000 - started
    # When `default` is read for 25 seconds
    seen: dict[str, str] = {}
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        for message in sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", []):
            envelope = json.loads(message["Body"])
            seen[envelope["run_at"]] = envelope["id"]
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # Then its occurrences arrived 10 seconds apart, and its runs say so
    times = sorted(parse_rfc3339(t) for t in seen)
    assert len(times) >= 2
    assert all(b - a == 10_000 for a, b in itertools.pairwise(times))
    status, runs = _http("GET", f"{running.api}/schedules/{schedule['id']}/runs?limit=100")
    assert status == 200 and len(runs["runs"]) >= len(times)
    print(f"\nlocal runtime: POST /schedules (every 10 s, 91 occurrences sent) {created_in_ms} ms")
    # And the queue can be paused, shown paused, and resumed
    assert _http("POST", f"{running.api}/queues/email/pause")[1]["paused"] is True
    assert _http("GET", f"{running.api}/queues/email")[1]["paused"] is True
    assert _http("POST", f"{running.api}/queues/email/resume")[1]["paused"] is False
    assert _http("DELETE", f"{running.api}/schedules/{schedule['id']}")[0] == 200


def test_the_emulator_holds_the_templates_resources(running: Running) -> None:
    session = boto3.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    )
    dynamodb = session.client("dynamodb", endpoint_url=running.emulator)
    [table] = dynamodb.list_tables()["TableNames"]
    description = dynamodb.describe_table(TableName=table)["Table"]
    assert [k["AttributeName"] for k in description["KeySchema"]] == ["pk", "sk"]
    assert description["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert (
        dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]["AttributeName"]
        == "expires_at"
    )
    sqs = session.client("sqs", endpoint_url=running.emulator)
    redrives = {}
    for url in sqs.list_queues()["QueueUrls"]:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        if "RedrivePolicy" in attributes:
            redrives[url.rsplit("/", 1)[1]] = json.loads(attributes["RedrivePolicy"])[
                "maxReceiveCount"
            ]
    assert sorted(redrives.values()) == [5, 5, 5, 5]  # default, email, demo, demo-priority
    rules = session.client("events", endpoint_url=running.emulator).list_rules()["Rules"]
    # The dispatch tick, and the history's hourly replay of failed batches
    assert sorted(rule["ScheduleExpression"] for rule in rules) == [
        "rate(1 hour)",
        "rate(1 minute)",
    ]


def test_a_busy_port_names_the_variable_to_change(
    running: Running, synthesized: Synthesized, tmp_path: Path
) -> None:
    second = _start(synthesized, tmp_path, _free_port(), int(running.env["emulator_port"]))
    output, _ = second.communicate(timeout=60)
    assert second.returncode == 2
    assert "SUNDIAL_EMULATOR_PORT" in output


def _until_ready(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("SUNDIAL_READY"):
            return
    pytest.fail(f"the local runtime exited with {process.wait()} before it was ready")


def test_ctrl_c_stops_everything_quietly_and_a_restart_may_reuse_the_ports(
    synthesized: Synthesized, tmp_path: Path
) -> None:
    api_port, emulator_port = _free_port(), _free_port()
    process = _start(synthesized, tmp_path, api_port, emulator_port)
    _until_ready(process)
    # A request leaves the API's connection in TIME-WAIT after the stop
    _http("GET", f"http://127.0.0.1:{api_port}/queues/email", timeout=60)  # a cold start
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=20)
    assert process.returncode == 0, rest
    assert "Traceback" not in rest and "BrokenPipeError" not in rest, rest
    # And started again at once on the same ports, it starts
    again = _start(synthesized, tmp_path, api_port, emulator_port)
    _until_ready(again)
    again.send_signal(signal.SIGINT)
    assert again.wait(timeout=20) == 0


def test_the_banner_off_a_terminal_is_plain_and_copy_paste_safe(running: Running) -> None:
    text = "\n".join(running.banner)
    assert not set("╭╮╰╯│─") & set(text), text
    submit = next(line for line in running.banner if "curl -s -X POST" in line)
    assert "-d '{" in submit and submit.rstrip().endswith("}'")  # one whole command
    # Every command names this runtime's ports (tests/integration/test_first_ten_minutes.py
    # runs them as printed)
    settings = f"SUNDIAL_API_PORT={running.env['api_port']}"
    assert f"{settings} SUNDIAL_EMULATOR_PORT={running.env['emulator_port']}" in text
    assert "make demo" in text and "make report" in text
    assert f"Admin UI  {running.api}/ui/" in text
    assert len(running.banner) <= 12  # it fits above the live table on a 24-line terminal


def test_the_local_runtime_serves_the_admin_ui_and_its_api_calls(running: Running) -> None:
    # The page, from the package data, with its content security policy
    with urllib.request.urlopen(f"{running.api}/ui/", timeout=10) as page:
        assert page.headers["Content-Type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        assert b'<script src="app.js"' in page.read()
    # And the API where the page calls it, /api/…, the same as at the root (the queues
    # function's first call starts its process: a cold start, slow on a busy machine)
    # (depths move while other tests' jobs run, so the queues and their states are compared)
    under_api = _http("GET", f"{running.api}/api/queues", timeout=60)
    at_root = _http("GET", f"{running.api}/queues", timeout=60)
    assert under_api[0] == at_root[0] == 200
    states = [{q["queue"]: q["paused"] for q in r[1]["queues"]} for r in (under_api, at_root)]
    assert states[0] == states[1] and "demo" in states[0]
    assert _http("GET", f"{running.api}/ui/../openapi.json")[0] == 404


def _worker(running: Running, log: Path, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "sundial.worker", "tests.integration.worker_jobs:slow",
            "--api", running.api, "--queue", "email", "--wait-seconds", "1", *options,
        ],
        env={**os.environ, "SUNDIAL_TEST_LOG": str(log)},
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def _lines(log: Path, word: str) -> list[str]:
    text = log.read_text() if log.exists() else ""
    return [line.split()[1] for line in text.splitlines() if line.startswith(word)]


def test_a_worker_drains_on_sigterm_over_http(running: Running, tmp_path: Path) -> None:
    # Given three 3-second jobs due now on a queue with no Lambda consumer
    ids = []
    for _ in range(3):
        status, job = _http(
            "POST",
            f"{running.api}/jobs",
            {"queue": "email", "delay_seconds": 0, "payload": {"seconds": 3}},
        )
        assert status == 201, job
        ids.append(job["id"])
    log = tmp_path / "jobs.log"
    # And a worker with two slots that has started two of them
    worker = _worker(running, log, "--concurrency", "2")
    deadline = time.monotonic() + 60
    while len(_lines(log, "start")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # waiting for the worker subprocess to report, not for a due time
    if len(_lines(log, "start")) < 2:
        worker.kill()  # so its output can be read (it never exits by itself)
        pytest.fail(f"the worker started {_lines(log, 'start')}: {worker.communicate()[0]}")
    # When it gets SIGTERM
    worker.send_signal(signal.SIGTERM)
    output, _ = worker.communicate(timeout=60)
    # Then it exits cleanly after finishing and acking both, and never starts the third
    assert worker.returncode == 0, output
    assert sorted(_lines(log, "done")) == sorted(_lines(log, "start"))
    statuses = {i: _http("GET", f"{running.api}/jobs/{i}")[1]["status"] for i in ids}
    assert sorted(statuses.values()) == ["queued", "succeeded", "succeeded"], statuses
    # And a burst worker on a process pool picks up the one left, and exits when done
    burst = _worker(running, log, "--pool", "process", "--burst")
    output, _ = burst.communicate(timeout=120)
    assert burst.returncode == 0, output
    assert [_http("GET", f"{running.api}/jobs/{i}")[1]["status"] for i in ids] == ["succeeded"] * 3
    assert len(_lines(log, "start")) == 3


def test_a_lease_long_polls_longer_than_a_client_read_timeout(running: Running) -> None:
    # Given the email queue with nothing ready (the worker test before this one drained it)
    # When a worker leases with a wait longer than the 5 s read timeout of Sundial's other clients
    started = time.monotonic()
    status, leased = _http(
        "POST", f"{running.api}/queues/email/lease", {"wait": 7, "max": 1}, timeout=30
    )
    # Then the long poll ends normally: a 200 with no jobs after the whole wait (it was a 500
    # after about 30 s while the SQS client read for 5 s and botocore retried)
    assert status == 200, leased
    assert leased == {"jobs": []} and time.monotonic() - started >= 6.5


def _s3(running: Running) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=running.emulator,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _history_by_job(running: Running, location: HistoryLocation) -> dict[str, set[str]]:
    """The statuses each job reached, as the emulator's raw history has them so far."""
    s3 = _s3(running)
    statuses: dict[str, set[str]] = defaultdict(set)
    for entry in s3.list_objects_v2(Bucket=location.bucket).get("Contents", []):
        if not entry["Key"].startswith(f"{location.prefix}/"):
            continue
        body = s3.get_object(Bucket=location.bucket, Key=entry["Key"])["Body"].read()
        for line in gzip.decompress(body).decode().splitlines():
            event = json.loads(line)
            statuses[event["job_id"]].add(event["to_status"])
    return statuses


@pytest.mark.spark
def test_history_flows_to_s3_and_reports_what_was_submitted(
    running: Running, synthesized: Synthesized, spark: SparkSession, tmp_path: Path
) -> None:
    # Given jobs on the demo queue (its example consumer runs them): some succeed, some fail
    # on their only attempt, some are cancelled while they wait
    outcomes = {"succeeded": 6, "dead": 3, "cancelled": 2}
    submitted: dict[str, str] = {}
    for n in range(outcomes["succeeded"]):
        body = {"queue": "demo", "delay_seconds": n % 3, "payload": {"n": n}}
        submitted[_http("POST", f"{running.api}/jobs", body)[1]["id"]] = "succeeded"
    for _ in range(outcomes["dead"]):
        body = {"queue": "demo", "delay_seconds": 0, "max_attempts": 1, "payload": {"fail": True}}
        submitted[_http("POST", f"{running.api}/jobs", body)[1]["id"]] = "dead"
    for _ in range(outcomes["cancelled"]):
        job = _http("POST", f"{running.api}/jobs", {"queue": "demo", "delay_seconds": 3600})[1]
        assert _http("DELETE", f"{running.api}/jobs/{job['id']}")[0] == 200
        submitted[job["id"]] = "cancelled"

    # When their history reaches the emulator's S3 (stream -> history Lambda)
    template = LocalTemplate.load(synthesized.outdir)
    assign_names(template, running.emulator)
    location = history_location(template)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        history = _history_by_job(running, location)
        if all(final in history.get(job, set()) for job, final in submitted.items()):
            break
        time.sleep(0.5)
    # Then every job's final status is there
    assert {job: final for job, final in submitted.items() if final in history[job]} == submitted

    # And when it is exported and both Glue jobs run on local Spark
    s3 = _s3(running)
    raw, curated, reports = tmp_path / "raw", tmp_path / "curated", tmp_path / "reports"
    assert export_history(s3, location, raw) > 0
    run_compaction(spark, raw_path=str(raw), curated_path=str(curated), dates="all")
    result = run_report(spark, curated_path=str(curated), reports_path=str(reports), dates="all")

    # Then the report counts for the demo queue are what was submitted (none of the other
    # tests use the demo queue)
    totals: Counter[str] = Counter()
    for row in spark.read.parquet(str(reports / "daily_queue_stats")).collect():
        if row["queue"] == "demo":
            for name in ("submitted", "succeeded", "dead", "cancelled", "failed"):
                totals[name] += row[name]
    assert dict(totals) == {"submitted": len(submitted), "failed": 0, **outcomes}
    assert Path(result.report_uri).is_file()


def test_a_dag_completes_on_the_example_consumer(running: Running) -> None:
    # Given the card's daily_report DAG on the demo queue, which the example consumer runs
    nodes = {name: {**node, "queue": "demo"} for name, node in DAILY_REPORT["nodes"].items()}
    status, dag = _http("POST", f"{running.api}/dags", {**DAILY_REPORT, "nodes": nodes})
    assert status == 201, dag
    # When its nodes run, each released by its parents' successes
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and dag["status"] == "running":
        time.sleep(0.2)
        dag = _http("GET", f"{running.api}/dags/{dag['id']}")[1]
    # Then it succeeded, each node once, after its parents
    assert dag["status"] == "succeeded", dag
    finished = {name: parse_rfc3339(node["finished_at"]) for name, node in dag["nodes"].items()}
    for name, node in dag["nodes"].items():
        assert node["attempts"] == 1
        for parent in node["depends_on"]:
            assert finished[parent] <= parse_rfc3339(node["released_at"]) <= finished[name]
    # And a cycle is refused, naming it
    status, error = _http(
        "POST",
        f"{running.api}/dags",
        {"name": "loop", "nodes": {"a": {"queue": "demo", "depends_on": ["a"]}}},
    )
    assert status == 400 and error["errors"][0]["field"] == "nodes.a.depends_on"


# Last in the file: these add jobs to `demo` (its example consumer takes them), which the
# history test above counts exactly.
def test_the_caller_header_chooses_who_signs_the_request(running: Running) -> None:
    # Given cdk.json declares no access lists: the emulator account may do everything
    body = {"queue": "demo", "delay_seconds": 3600}
    status, job = _http("POST", f"{running.api}/jobs", body, timeout=60)  # maybe a cold start
    assert status == 201
    own_role = "arn:aws:iam::123456789012:role/anything"
    assert _http("GET", f"{running.api}/jobs/{job['id']}", timeout=60, caller=own_role)[0] == 200
    # When another account's role calls, Then it is refused, naming the queue and permission
    foreign = "arn:aws:iam::210987654321:role/intruder"
    status, error = _http("DELETE", f"{running.api}/jobs/{job['id']}", caller=foreign)
    assert status == 403 and "lacks 'control' on queue 'demo'" in error["message"]
    assert _http("GET", f"{running.api}/jobs/{job['id']}")[1]["status"] == "pending"
    # And a header that names no IAM identity is a 403 too
    assert _http("GET", f"{running.api}/jobs/{job['id']}", caller="bob")[0] == 403


def test_every_line_of_the_functions_log_is_json(running: Running) -> None:
    # Given some traffic (on `demo`, whose example consumer takes it: it runs after the
    # tests that count what reaches `default`, `email` and `demo`)
    _http("POST", f"{running.api}/jobs", {"queue": "demo", "delay_seconds": 60}, timeout=60)
    _http("GET", f"{running.api}/queues/email", timeout=60)
    # Then every line the functions wrote is one JSON object (warnings and tracebacks too)
    lines = [line for line in running.log.read_text().splitlines() if line.strip()]
    assert lines
    for line in lines:
        assert isinstance(json.loads(line), dict), line


def _cli(running: Running, *args: str) -> subprocess.CompletedProcess[str]:
    """The `sundial` command (sundial.client.cli, the console script's entry) over real HTTP."""
    command = [sys.executable, "-m", "sundial.client.cli", *args, "--api", running.api]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_the_cli_drives_the_local_runtime_end_to_end(running: Running, tmp_path: Path) -> None:
    # (on `demo`, whose example consumer takes the retried job: it runs after the tests
    # that count what reaches `default`, `email` and `demo`)
    # Given a payload file, When a job is submitted with the CLI, Then it prints it as JSON
    payload = tmp_path / "job.json"
    payload.write_text(json.dumps({"to": "ada@example.com"}))
    submitted = _cli(
        running, "jobs", "submit", "--queue", "demo", "--in", "1h", "--payload", f"@{payload}",
        "--json",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    assert job["status"] == "pending" and job["queue"] == "demo"
    # And get shows it in a table, cancel cancels it, and a second retry conflicts (exit 5)
    shown = _cli(running, "jobs", "get", job["id"])
    assert shown.returncode == 0 and job["id"] in shown.stdout
    assert _cli(running, "jobs", "cancel", job["id"]).returncode == 0
    assert _cli(running, "jobs", "retry", job["id"]).returncode == 0
    assert _cli(running, "jobs", "retry", job["id"]).returncode == 5
    # And the queue listing and an unknown job (exit 4) behave as documented
    listed = _cli(running, "queues", "ls", "--json")
    assert listed.returncode == 0
    assert "email" in [json.loads(line)["queue"] for line in listed.stdout.splitlines()]
    assert _cli(running, "jobs", "get", _unknown_id()).returncode == 4


def test_a_5_mib_payload_runs_on_the_example_consumer_and_on_a_worker(
    running: Running, tmp_path: Path
) -> None:
    # (last: it adds a job to `demo` and one to `email`, which the earlier tests count)
    # Given a 5 MiB payload file, submitted to `demo` with the CLI
    payload = {"blob": "z" * (5 * 1024 * 1024 - len('{"blob":""}'))}
    big = tmp_path / "big.json"
    big.write_text(json.dumps(payload, separators=(",", ":")))
    submitted = _cli(
        running, "jobs", "submit", "--queue", "demo", "--in", "0s", "--payload", f"@{big}",
        "--json",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]
    # Then the example consumer (the consumer SDK, over the moto server's S3) runs it
    deadline = time.monotonic() + 90
    detail: dict[str, Any] = {}
    while time.monotonic() < deadline:
        detail = _http("GET", f"{running.api}/jobs/{job_id}", timeout=60)[1]
        if detail["status"] in ("succeeded", "dead"):
            break
        time.sleep(0.5)  # waiting for the consumer to run it, not for a due time
    assert detail["status"] == "succeeded", detail
    # And GET shows the reference, not the payload
    assert detail["payload"] is None and detail["payload_ref"]["bytes"] == 5 * 1024 * 1024
    # And a worker leasing one from `email` fetches it through its presigned URL
    status, job = _http(
        "POST",
        f"{running.api}/jobs",
        {"queue": "email", "delay_seconds": 0, "payload": payload},
        timeout=60,
    )
    assert status == 201, job
    seen: list[Any] = []

    def run(leased: Envelope) -> None:
        seen.append(leased.payload)

    Worker(run, queue="email", api_url=running.api, burst=True, wait_seconds=1).run()
    assert payload in seen
    assert _http("GET", f"{running.api}/jobs/{job['id']}")[1]["status"] == "succeeded"
