"""Pickup latency of an immediate critical job: from the submit call to visible in SQS.

Measured two ways in one local runtime:
- end to end: a client POSTs /jobs to the local API and the message's SentTimestamp (the
  emulator's clock when SQS accepted it; with no delay it is visible from then) minus the
  client's clock just before the request. Same machine, same clock. This includes the local
  gateway, the hop to the function's process, and the emulator's own time.
- Sundial's own share: the real submit handler, called in this process against the same
  emulator, every AWS call timed by botocore hooks (bench.meter: before-send to before-parse,
  the emulator's work plus the loopback round trip). Visible = when SendMessageBatch returned;
  own time = that moment minus the handler's start, minus the emulator time of the calls
  made until then. The AWS figure adds the documented latencies (bench.latency) back.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import boto3

from bench.latency import API_GATEWAY_MS, modelled_ms
from bench.localrun import LocalSundial, local_sundial
from bench.meter import AwsMeter
from bench.precision import Receiver, percentile
from bench.system import PAYLOAD, set_lambda_environment
from sundial.clock import SystemClock
from sundial.local.provision import assign_names
from sundial.local.template import LocalTemplate
from sundial.wiring import configure

IMMEDIATE = {"queue": "email", "delay_seconds": 0, "priority": "critical", "payload": PAYLOAD}


def _end_to_end(local: LocalSundial, jobs: int) -> list[float]:
    receiver = Receiver(local, local.queue_url("email"))
    receiver.start()
    local.post("/jobs", IMMEDIATE)  # warm: the function's first request imports and connects
    asked_at: dict[str, float] = {}
    for _ in range(jobs):
        before_ms = time.time_ns() / 1e6
        status, job = local.post("/jobs", IMMEDIATE)
        if status != 201:
            raise RuntimeError(f"submit failed: {status} {job}")
        asked_at[job["id"]] = before_ms
        time.sleep(0.02)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len({a.job_id for a in receiver.arrivals}) < jobs:
        time.sleep(0.2)
    receiver.finish()
    sent = {a.job_id: a.sent_ms for a in receiver.arrivals}
    return [sent[j] - asked for j, asked in asked_at.items() if j in sent]


def _submit_environment(cdk_out: Path, emulator: str) -> dict[str, str]:
    template = LocalTemplate.load(cdk_out)
    assign_names(template, emulator)
    for logical_id, spec in template.functions().items():
        if logical_id.startswith("SundialFunctionsSubmitFunction"):
            return spec.environment
    raise LookupError("no submit function in the template")


def _in_process(local: LocalSundial, cdk_out: Path, jobs: int) -> list[dict[str, float]]:
    from tests.support import FakeLambdaContext, http_api_event, load_handler  # noqa: PLC0415

    set_lambda_environment()
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": local.emulator,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
        }
    )
    session = boto3.Session(region_name="us-east-1")
    meter = AwsMeter(session)
    configure(
        clock=SystemClock(), environ=_submit_environment(cdk_out, local.emulator), session=session
    )
    with contextlib.redirect_stdout(io.StringIO()):
        handler = load_handler("submit").handler
        event = http_api_event("POST", "/jobs", body=json.dumps(IMMEDIATE))
        with meter.paused():
            handler(event, FakeLambdaContext())  # warm: clients and imports
        samples = []
        for _ in range(jobs):
            meter.reset()
            started = time.perf_counter()
            response = handler(event, FakeLambdaContext())
            finished = time.perf_counter()
            assert response["statusCode"] == 201, response
            [send] = [c for c in meter.calls if c.operation == "SendMessageBatch"]
            before = [c for c in meter.calls if c.ended_s <= send.ended_s]
            wall_ms = (send.ended_s - started) * 1000
            emulator_ms = sum(c.emulator_s for c in before) * 1000
            own_ms = wall_ms - emulator_ms
            samples.append(
                {
                    "wall_ms": wall_ms,
                    "emulator_ms": emulator_ms,
                    "own_ms": own_ms,
                    "aws_ms": own_ms
                    + API_GATEWAY_MS
                    + sum(modelled_ms(c.service, c.operation) for c in before),
                    "handler_ms": (finished - started) * 1000,
                    "calls_to_visible": len(before),
                }
            )
            time.sleep(0.02)
    return samples


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50": statistics.median(values),
        "p99": percentile(values, 0.99),
        "max": max(values),
        "min": min(values),
    }


def run_pickup(cdk_out: Path, *, jobs: int, workdir: Path) -> dict[str, Any]:
    with local_sundial(cdk_out, workdir / "local-pickup.log") as local:
        end_to_end = _end_to_end(local, jobs)
        samples = _in_process(local, cdk_out, jobs)
    return {
        "jobs": jobs,
        "end_to_end_ms": _stats(end_to_end),
        "end_to_end_received": len(end_to_end),
        "in_process": {
            key: _stats([s[key] for s in samples])
            for key in ("wall_ms", "emulator_ms", "own_ms", "aws_ms", "handler_ms")
        },
        "calls_to_visible": samples[0]["calls_to_visible"],
        "samples_own_ms": [s["own_ms"] for s in samples],
        "samples_end_to_end_ms": end_to_end,
    }
