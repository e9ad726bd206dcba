"""The local runtime (`python -m sundial.local`, what `make run` starts) as a subprocess on free
ports, for the benchmarks that need the whole system running in real time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

READY_TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class LocalSundial:
    api: str
    emulator: str
    startup_s: float
    pid: int

    def client(self, service: str, session: boto3.Session | None = None) -> Any:
        session = session or boto3.Session()
        return session.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.emulator,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def queue_url(self, queue: str) -> str:
        """The URL of a Sundial queue, as the functions' environment names it."""
        sqs = self.client("sqs")
        for url in sqs.list_queues()["QueueUrls"]:
            name = url.rsplit("/", 1)[1]
            if name.startswith(f"Sundial-SundialJobQueues{queue}") and "dlq" not in name:
                return str(url)
        raise LookupError(f"no queue {queue!r} in the emulator")

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.api}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


@contextmanager
def local_sundial(cdk_out: Path, log: Path) -> Iterator[LocalSundial]:
    api_port, emulator_port = free_port(), free_port()
    environment = {
        **os.environ,
        "SUNDIAL_CDK_OUT": str(cdk_out),
        "SUNDIAL_API_PORT": str(api_port),
        "SUNDIAL_EMULATOR_PORT": str(emulator_port),
        "SUNDIAL_LOG": str(log),
    }
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "sundial.local"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        for line in process.stdout:
            if line.startswith("SUNDIAL_READY"):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the local runtime did not become ready")
        else:
            raise RuntimeError(
                f"the local runtime exited with {process.wait()} before it was ready"
            )
        # Keep draining its output so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
        yield LocalSundial(
            api=f"http://127.0.0.1:{api_port}",
            emulator=f"http://127.0.0.1:{emulator_port}",
            startup_s=time.monotonic() - started,
            pid=process.pid,
        )
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
