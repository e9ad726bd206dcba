"""What a consumer Lambda's cold start loads and pays until its first job is done: a fresh
interpreter imports `sundial.consumer` and handles one SQS record end to end (the fence, the
take, the function, the success write) against a moto server, as a Lambda would against AWS.

The job is prepared beforehand by the full runtime, in this process. Each probe puts the job's
item back as the submit wrote it once it is done, so every probe handles the same first
delivery of a queued job. Used by tests/unit/test_layers.py (the module budget) and
bench/sdk_import.py (the time). To time whole processes with a tool of your own:

    python -m tests.consumer_footprint serve DIR   # a moto server, the job, DIR/probe.py
    env PYTHONPATH=layers/sundial/python /usr/bin/time -v python -P DIR/probe.py DIR/state.json
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from sundial.clock import SystemClock
from sundial.local.triggers import sqs_record
from sundial.model.submission import SubmitJob
from sundial.settings import Settings
from sundial.wiring import Dependencies
from tests.support import TABLE, create_priority_queues, create_queues, create_table

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "layers" / "sundial" / "python"

# Run in the fresh interpreter, given the state file (PreparedRecord.save): prints how long the
# import and the first record took, the batch response, the job's status after it, and the
# package's entries in sys.modules: `loaded`, all of them; `modules`, the modules of code
# among them (packages' `__init__` aside, as BENCHMARKS.md counts). Then it puts the job's item
# back for the next probe (untimed).
PROBE = """
import json, os, sys, time
state = json.load(open(sys.argv[1]))
os.environ.update(state["environ"])
started = time.perf_counter()
from sundial.consumer import JobConsumer
imported = time.perf_counter()
consumer = JobConsumer(lambda job: {"ran": job.id}, visibility_timeout_s=120)
response = consumer.lambda_handler(state["event"], None)
done = time.perf_counter()
loaded = sorted(m for m in sys.modules if m == "sundial" or m.startswith("sundial."))
import boto3
dynamodb = boto3.client("dynamodb")
item = state["item"]
key = {"pk": item["pk"], "sk": item["sk"]}
status = dynamodb.get_item(TableName=state["table"], Key=key)["Item"]["status"]["S"]
dynamodb.put_item(TableName=state["table"], Item=item)
print(json.dumps({
    "import_ms": (imported - started) * 1000,
    "first_record_ms": (done - imported) * 1000,
    "total_ms": (done - started) * 1000,
    "loaded": loaded,
    "modules": [m for m in loaded if not hasattr(sys.modules[m], "__path__")],
    "all_modules": len(sys.modules),
    "response": response,
    "status": status,
}))
"""


@contextmanager
def emulator() -> Iterator[str]:
    """A moto server on a free local port, for the probes' fresh interpreters: its URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@dataclass(frozen=True)
class PreparedRecord:
    """A queued job and the SQS event of its first delivery, on a moto server."""

    environ: dict[str, str]  # the consumer's SUNDIAL_* and AWS_* environment
    event: dict[str, Any]
    job_id: str
    item: dict[str, Any]  # the job's item as the submit wrote it (queued)

    def save(self, directory: Path) -> Path:
        """The probe's state file (and the probe beside it, probe.py), in `directory`."""
        (directory / "probe.py").write_text(PROBE)
        state = directory / "state.json"
        body = {"environ": self.environ, "event": self.event, "item": self.item, "table": TABLE}
        state.write_text(json.dumps(body))
        return state

    def probe(self, package_root: Path = PACKAGE_ROOT) -> dict[str, Any]:
        """Run PROBE in a fresh interpreter on the package under `package_root`; with the
        whole process's wall and CPU time (as the OS accounts the reaped child)."""
        env = {
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(package_root),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        with tempfile.TemporaryDirectory() as directory:
            state = self.save(Path(directory))
            before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-P", "-c", PROBE, str(state)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            wall_s, after = (
                time.perf_counter() - started,
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        # The whole process, interpreter start to exit (the item's reset included: one call).
        cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return result | {"process_wall_ms": wall_s * 1000, "process_cpu_ms": cpu_s * 1000}


def _client(service: str, environ: Mapping[str, str]) -> Any:
    return boto3.session.Session(
        aws_access_key_id=environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=environ["AWS_SECRET_ACCESS_KEY"],
        region_name=environ["AWS_DEFAULT_REGION"],
    ).client(service, endpoint_url=environ["AWS_ENDPOINT_URL"])  # type: ignore[call-overload]


@contextmanager
def prepared_record(emulator_url: str) -> Iterator[PreparedRecord]:
    """A table and queues on the moto server at `emulator_url`, one job submitted to `default`
    (due now, so sent at once) and its message received: the record a consumer gets."""
    environ = {
        "AWS_ENDPOINT_URL": emulator_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    dynamodb, sqs = _client("dynamodb", environ), _client("sqs", environ)
    create_table(dynamodb)
    urls, dead_letter_urls = create_queues(sqs)
    environ |= {
        "SUNDIAL_TABLE_NAME": TABLE,
        "SUNDIAL_QUEUE_URLS": json.dumps(urls),
        "SUNDIAL_DEAD_LETTER_URLS": json.dumps(dead_letter_urls),
        "SUNDIAL_PRIORITY_QUEUE_URLS": json.dumps(create_priority_queues(sqs)),
        "SUNDIAL_SHARD_COUNT": "8",
    }
    with _aws_environment(environ):  # the runtime's clients go to the emulator too
        wired = Dependencies(settings=Settings.from_env(environ), clock=SystemClock())
        submitted = wired.jobs.submit(SubmitJob(queue="default", delay_seconds=0, payload=1))
    [message] = sqs.receive_message(QueueUrl=urls["default"], AttributeNames=["All"])["Messages"]
    [item] = [
        i for i in dynamodb.scan(TableName=TABLE)["Items"] if i.get("status") == {"S": "queued"}
    ]
    yield PreparedRecord(
        environ=environ,
        event={"Records": [sqs_record(message, "arn:aws:sqs:us-east-1:123456789012:default")]},
        job_id=submitted.job.id,
        item=item,
    )


@contextmanager
def _aws_environment(environ: Mapping[str, str]) -> Iterator[None]:
    """The AWS_* variables of `environ` set in this process while the block runs."""
    names = [name for name in environ if name.startswith("AWS_")]
    previous = {name: os.environ.get(name) for name in names}
    os.environ.update({name: environ[name] for name in names})
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def serve(directory: Path) -> None:
    """Prepare a record on a moto server and keep it up until SIGTERM or SIGINT, with the
    probe and its state file in `directory`."""
    with emulator() as url, prepared_record(url) as record:
        state = record.save(directory)
        print(f"ready: python -P {directory / 'probe.py'} {state}", flush=True)
        signal.sigwait({signal.SIGTERM, signal.SIGINT})


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "serve":
        raise SystemExit("usage: python -m tests.consumer_footprint serve DIR")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    serve(Path(sys.argv[2]))
