"""Sundial's own CPU per job: the real handlers against the zero-latency stub (bench.stub), so
what is measured is Sundial, Powertools, pydantic and botocore, not the emulator.

Each scenario runs in a fresh process (so its memory is its own, as a Lambda container's is):
`python -m bench.cpu SCENARIO JOBS REPEATS OUT.json`. CPU is process time (time.process_time,
all threads, so the consumer's heartbeat thread counts); memory is tracemalloc's peak during
one timed unit of work, and the process's peak RSS (what Lambda reports as Max Memory Used).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.latency import vcpu_share

SCENARIOS = (
    "submit",
    "submit_immediate",
    "submit_batch",
    "sweeper",
    "sweeper_default_user_agent",
    "consumer",
    "botocore_update_item",
)
TABLE = "sundial-jobs"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/default"
DLQ_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/default-dlq"
PAGE_BYTES = 1_048_576  # DynamoDB returns at most 1 MB of items per Query page


def _system(responders: dict[tuple[str, str], Any]) -> Any:
    """The process's Sundial, wired as in Lambda, on a session answered by the stub."""
    import boto3  # noqa: PLC0415 - imported after the environment is set

    from bench.stub import ZeroLatencyAws  # noqa: PLC0415
    from sundial.clock import SystemClock  # noqa: PLC0415
    from sundial.wiring import configure  # noqa: PLC0415

    session = boto3.Session(region_name="us-east-1")
    stub = ZeroLatencyAws(responders)
    stub.install(session)
    environ = {
        "SUNDIAL_TABLE_NAME": TABLE,
        "SUNDIAL_QUEUE_URLS": json.dumps({"default": QUEUE_URL}),
        "SUNDIAL_DEAD_LETTER_URLS": json.dumps({"default": DLQ_URL}),
        "SUNDIAL_SHARD_COUNT": "64",
        "SUNDIAL_RETENTION_DAYS": "30",
        "SUNDIAL_SWEEPER_FUNCTION": "sweeper",
        "SUNDIAL_SHARDS_PER_SWEEPER": "8",
    }
    configure(clock=SystemClock(), environ=environ, session=session)
    return stub


def _job_item(shard: int, due_ms: int, *, status: str) -> dict[str, Any]:
    from ulid import ULID  # noqa: PLC0415

    from bench.system import PAYLOAD  # noqa: PLC0415
    from sundial.ids import JobKey  # noqa: PLC0415
    from sundial.model.job import Job, Priority, Status  # noqa: PLC0415
    from sundial.store.job_items import job_to_item  # noqa: PLC0415

    job = Job(
        key=JobKey(shard=shard, due_ms=due_ms, ulid=str(ULID())),
        queue="default",
        payload_json=json.dumps(PAYLOAD, separators=(",", ":")),
        priority=Priority.NORMAL,
        max_attempts=3,
        created_at_ms=due_ms - 3_600_000,
        status=Status(status),
    )
    if job.status is Status.QUEUED:
        job.claim_token, job.lease_until_ms, job.queued_at_ms = "sweep:bench", due_ms, due_ms
    return job_to_item(job)


def _api_event(path: str, body: Any) -> dict[str, Any]:
    from tests.support import http_api_event  # noqa: PLC0415

    return http_api_event("POST", path, body=json.dumps(body))


def _submit(jobs: int, *, delay_s: int, per_request: int) -> Callable[[], int]:
    from bench.system import PAYLOAD  # noqa: PLC0415
    from tests.support import FakeLambdaContext, load_handler  # noqa: PLC0415

    _system({})
    handler = load_handler("submit").handler
    job = {"queue": "default", "delay_seconds": delay_s, "payload": PAYLOAD}
    if per_request == 1:
        event = _api_event("/jobs", job)
    else:
        event = _api_event("/jobs/batch", {"jobs": [job] * per_request})
    requests = max(1, jobs // per_request)

    def run() -> int:
        for _ in range(requests):
            response = handler(event, FakeLambdaContext())
            assert response["statusCode"] in (200, 201), response
        return requests * per_request

    return run


def _sweeper(jobs: int) -> Callable[[], int]:
    from bench.capacity import item_size  # noqa: PLC0415
    from sundial.store.sweeps import _DUE_REF_ATTRIBUTES  # noqa: PLC0415
    from tests.support import FakeLambdaContext, load_handler  # noqa: PLC0415

    shards = list(range(8))
    now = time.time_ns() // 1_000_000
    per_shard = jobs // len(shards)
    pages: dict[str, list[list[dict[str, Any]]]] = {}
    for shard in shards:
        items = sorted(
            (_job_item(shard, now + 60_000 + i * 97, status="pending") for i in range(per_shard)),
            key=lambda item: item["sk"]["S"],
        )
        shard_pages: list[list[dict[str, Any]]] = [[]]
        size = 0
        for item in items:
            if size + item_size(item) > PAGE_BYTES:
                shard_pages.append([])
                size = 0
            shard_pages[-1].append(item)
            size += item_size(item)
        pages[f"shard#{shard}"] = shard_pages

    by_key = {
        (item["pk"]["S"], item["sk"]["S"]): item
        for shard_pages in pages.values()
        for page in shard_pages
        for item in page
    }
    projected = {name.strip().lstrip("#") for name in _DUE_REF_ATTRIBUTES.split(",")}

    def query(request: dict[str, Any]) -> dict[str, Any]:
        partition = request["ExpressionAttributeValues"][":pk"]["S"]
        if partition not in pages:
            return {"Items": [], "Count": 0}  # the queue states: no queue is paused
        shard_pages = [
            [{k: v for k, v in item.items() if k in projected} for item in page]
            for page in pages[partition]
        ]
        index = int(request.get("ExclusiveStartKey", {}).get("page", {}).get("N", "0"))
        answer: dict[str, Any] = {"Items": shard_pages[index], "Count": len(shard_pages[index])}
        if index + 1 < len(shard_pages):
            answer["LastEvaluatedKey"] = {**shard_pages[index][-1], "page": {"N": str(index + 1)}}
        return answer

    def batch_get(request: dict[str, Any]) -> dict[str, Any]:
        # The cursor items (none: never swept), or a batch of jobs read right before their send.
        [(table, wanted)] = request["RequestItems"].items()
        found = [by_key.get((k["pk"]["S"], k["sk"]["S"])) for k in wanted["Keys"]]
        return {"Responses": {table: [item for item in found if item is not None]}}

    def lease(_request: dict[str, Any]) -> dict[str, Any]:
        return {}  # a shard's lease taken, or released with its cursor moved

    _system(
        {
            ("dynamodb", "Query"): query,
            ("dynamodb", "BatchGetItem"): batch_get,
            ("dynamodb", "UpdateItem"): lease,
        }
    )
    handler = load_handler("sweeper").handler

    def run() -> int:
        report = handler({"shards": shards}, FakeLambdaContext(remaining_ms=60_000))
        assert report["dispatched"] == per_shard * len(shards), report
        return int(report["dispatched"])

    return run


def _consumer(jobs: int) -> Callable[[], int]:
    from sundial.consumer import consumer  # noqa: PLC0415
    from sundial.local.triggers import sqs_record  # noqa: PLC0415
    from sundial.store.job_items import item_to_job  # noqa: PLC0415
    from sundial.transport.envelope import envelope_body  # noqa: PLC0415
    from tests.support import FakeLambdaContext  # noqa: PLC0415

    now = time.time_ns() // 1_000_000
    items = [_job_item(i % 64, now - 1_000, status="queued") for i in range(10)]
    by_key = {(i["pk"]["S"], i["sk"]["S"]): i for i in items}
    records = [
        sqs_record(
            {
                "MessageId": f"m{n}",
                "ReceiptHandle": f"r{n}",
                "Body": envelope_body(item_to_job(item), attempt=1),
                "Attributes": {"ApproximateReceiveCount": "1"},
            },
            "arn:aws:sqs:us-east-1:123456789012:default",
        )
        for n, item in enumerate(items)
    ]

    def get_item(request: dict[str, Any]) -> dict[str, Any]:
        return {"Item": by_key[(request["Key"]["pk"]["S"], request["Key"]["sk"]["S"])]}

    _system({("dynamodb", "GetItem"): get_item})

    @consumer()
    def handler(_job: Any) -> None:
        return None  # the team's work: nothing, so what is left is the SDK's

    event = {"Records": records}
    invocations = max(1, jobs // len(records))

    def run() -> int:
        for _ in range(invocations):
            response = handler(event, FakeLambdaContext())
            assert not response.get("batchItemFailures"), response
        return invocations * len(records)

    return run


def _botocore_update_item(calls: int) -> Callable[[], int]:
    """One sweeper claim's UpdateItem, made with botocore alone: the floor under every per-job
    DynamoDB call, whatever Sundial does around it."""
    from sundial.wiring import dependencies  # noqa: PLC0415

    _system({})
    client = dependencies().store._db  # the process's DynamoDB client, configured as in Lambda
    key = _job_item(1, 1_795_276_800_000, status="pending")
    request: dict[str, Any] = {
        "TableName": TABLE,
        "Key": {"pk": key["pk"], "sk": key["sk"]},
        "UpdateExpression": (
            "SET #status = :queued, claim_token = :token, lease_until = :lease, queued_at = :at"
            " REMOVE expires_at"
        ),
        "ConditionExpression": "#status = :pending",
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {
            ":pending": {"S": "pending"},
            ":queued": {"S": "queued"},
            ":token": {"S": "sweep:01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"},
            ":lease": {"N": "1795277100000"},
            ":at": {"N": "1795276800000"},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }

    def run() -> int:
        for _ in range(calls):
            client.update_item(**request)
        return calls

    return run


def _with_botocore_default_user_agent() -> None:
    """Side by side with the sweeper as built: its clients with botocore's own User-Agent,
    which botocore assembles twice per request (sundial.settings fixes it)."""
    import sundial.wiring  # noqa: PLC0415
    from sundial.settings import boto_config  # noqa: PLC0415

    sundial.wiring._BOTO_CONFIG = boto_config(user_agent=None)


def _sweeper_default_user_agent(jobs: int) -> Callable[[], int]:
    _with_botocore_default_user_agent()
    return _sweeper(jobs)


_BUILDERS: dict[str, Callable[[int], Callable[[], int]]] = {
    "botocore_update_item": _botocore_update_item,
    "submit": lambda jobs: _submit(jobs, delay_s=3600, per_request=1),
    "submit_immediate": lambda jobs: _submit(jobs, delay_s=0, per_request=1),
    "submit_batch": lambda jobs: _submit(jobs, delay_s=3600, per_request=25),
    "sweeper": _sweeper,
    "sweeper_default_user_agent": _sweeper_default_user_agent,
    "consumer": _consumer,
}


def _scenario(name: str, jobs: int) -> Callable[[], int]:
    if name not in _BUILDERS:
        raise ValueError(f"unknown scenario {name}")
    return _BUILDERS[name](jobs)


def measure(name: str, jobs: int, repeats: int) -> dict[str, Any]:
    run = _scenario(name, jobs)
    run()  # warm: imports, clients, caches (a warm container; cold starts are not per job)
    per_job_us = []
    for _ in range(repeats):
        started = time.process_time()
        done = run()
        per_job_us.append((time.process_time() - started) / done * 1e6)
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "scenario": name,
        "jobs_per_unit": jobs,
        "cpu_us_per_job": per_job_us,
        "cpu_us_per_job_median": statistics.median(per_job_us),
        "tracemalloc_peak_kb": peak / 1024,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_scenario(name: str, jobs: int, repeats: int, workdir: Path) -> dict[str, Any]:
    """Measure one scenario in a fresh Python process."""
    out = workdir / f"cpu-{name}.json"
    with (workdir / f"cpu-{name}.log").open("w") as log:
        subprocess.run(
            [sys.executable, "-m", "bench.cpu", name, str(jobs), str(repeats), str(out)],
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parent.parent,
        )
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# Compared side by side: run in alternating fresh processes, PAIRED_ROUNDS each, and pooled,
# so the machine's noise (other work on the shared cores) falls on both alike.
PAIRED = ("sweeper", "sweeper_default_user_agent")
PAIRED_ROUNDS = 2


def _paired_runs(sizes: dict[str, int], repeats: int, workdir: Path) -> dict[str, dict[str, Any]]:
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in PAIRED}
    for _ in range(PAIRED_ROUNDS):
        for name in PAIRED:
            runs[name].append(run_scenario(name, sizes["sweeper"], repeats, workdir))
    pooled = {}
    for name, results in runs.items():
        per_job = [value for result in results for value in result["cpu_us_per_job"]]
        pooled[name] = {
            **results[-1],
            "cpu_us_per_job": per_job,
            "cpu_us_per_job_median": statistics.median(per_job),
            "tracemalloc_peak_kb": max(r["tracemalloc_peak_kb"] for r in results),
            "max_rss_mb": max(r["max_rss_mb"] for r in results),
            "rounds": PAIRED_ROUNDS,
        }
    return pooled


def run_cpu(
    sizes: dict[str, int], repeats: int, memory_mb: dict[str, int], workdir: Path
) -> dict[str, Any]:
    rows = []
    paired = _paired_runs(sizes, repeats, workdir)
    for name in SCENARIOS:
        result = paired.get(name) or run_scenario(
            name, sizes.get(name, sizes["sweeper"]), repeats, workdir
        )
        function = {
            "consumer": "consumer",
            "botocore_update_item": "sweeper",
            "sweeper_default_user_agent": "sweeper",
        }.get(name, name.split("_")[0])
        share = vcpu_share(memory_mb[function])
        median = result["cpu_us_per_job_median"]
        rows.append(
            {
                **result,
                "function": function,
                "memory_mb": memory_mb[function],
                "jobs_per_s_one_core": 1e6 / median,
                "jobs_per_s_at_memory": 1e6 / median * share,
                "vcpu_share": share,
            }
        )
    return {"scenarios": rows, "repeats": repeats}


def main() -> None:
    name, jobs, repeats, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    from bench.system import set_lambda_environment  # noqa: PLC0415

    set_lambda_environment()
    os.environ["POWERTOOLS_LOG_LEVEL"] = "INFO"  # as deployed (stacks/functions.py)
    # Log lines and metrics go to stdout, as in Lambda; here they are thrown away.
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        result = measure(name, jobs, repeats)
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
