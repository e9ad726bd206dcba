"""Hosts each Lambda function of the template in its own process, as Lambda would: the code
from its asset folder, its layers, exactly the environment the template gives it, and its
timeout. Each container serves one call at a time; concurrent calls get more containers."""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
import uuid
import warnings
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sundial.local.template import FunctionSpec

# Concurrent containers per function: enough for a long-polling worker and its acks.
MAX_CONTAINERS = 4
# How long a stopping runtime waits for its containers (all at once) before it kills them.
STOP_GRACE_S = 5.0


class InvocationError(Exception):
    """The function raised, or timed out. Carries Lambda's errorType and errorMessage."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


@dataclass(frozen=True)
class HostOptions:
    emulator_url: str  # AWS_ENDPOINT_URL for every SDK call
    lambda_url: str  # AWS_ENDPOINT_URL_LAMBDA: the runtime's own Invoke API
    log_path: Path | None  # where function output goes; None means this process's stdout


class FunctionHost:
    """One function's containers. Like Lambda, a call that finds every container busy gets a
    new one (up to `max_containers`), so a 20-second long poll does not hold up other calls."""

    def __init__(
        self, spec: FunctionSpec, options: HostOptions, *, max_containers: int = MAX_CONTAINERS
    ) -> None:
        self.spec = spec
        self._options = options
        self._max = max_containers
        self._ready = threading.Condition()
        self._idle: list[_Container] = []
        self._all: list[_Container] = []
        self._count = 0

    def start(self) -> None:
        """Start one container ahead of the first call (a cold start at launch, not later);
        `wait_loaded` waits for it."""
        with self._ready:
            if self._count:
                return
            self._count = 1
        container = self._new_container()
        container.start()
        self._release(container)

    def wait_loaded(self, deadline: float) -> bool:
        """Wait until the containers started so far have loaded the handler, or `deadline`
        (time.monotonic()) passes. False if one did not (its first call will say why)."""
        with self._ready:
            every = list(self._all)
        return all(c.wait_loaded(max(0.0, deadline - time.monotonic())) for c in every)

    def stop(self) -> None:
        self.terminate()
        self.reap(time.monotonic() + STOP_GRACE_S)

    def terminate(self) -> None:
        """Ask every container to end (SIGTERM), without waiting: a runtime stopping ends
        all its functions' containers at once, then reaps them (`reap`)."""
        with self._ready:
            every, self._idle = list(self._all), []
        for container in every:
            container.terminate()

    def reap(self, deadline: float) -> None:
        """Wait for the containers until `deadline` (time.monotonic()), then kill the rest."""
        with self._ready:
            every = list(self._all)
        for container in every:
            container.reap(max(0.0, deadline - time.monotonic()))

    def invoke(self, event: Any) -> Any:
        """Run the handler once. Raises InvocationError for an error or a timeout."""
        container = self._acquire()
        try:
            return container.invoke(event)
        finally:
            self._release(container)

    def _acquire(self) -> _Container:
        with self._ready:
            while not self._idle and self._count >= self._max:
                self._ready.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        return self._new_container()

    def _new_container(self) -> _Container:
        container = _Container(self.spec, self._environment(), self._options.log_path)
        with self._ready:
            self._all.append(container)
        return container

    def _release(self, container: _Container) -> None:
        with self._ready:
            self._idle.append(container)
            self._ready.notify()

    def _environment(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SUNDIAL_"))}
        return {
            **base,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self._options.emulator_url,
            "AWS_ENDPOINT_URL_LAMBDA": self._options.lambda_url,
            "AWS_LAMBDA_FUNCTION_NAME": self.spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.spec.memory_mb),
            "POWERTOOLS_TRACE_DISABLED": "1",  # no X-Ray daemon locally
            **self.spec.environment,
        }


class _Container:
    """One warm process serving one call at a time; restarted after a timeout or a crash."""

    def __init__(
        self, spec: FunctionSpec, environment: dict[str, str], log_path: Path | None
    ) -> None:
        self.spec = spec
        self._environment = environment
        self._log_path = log_path
        self._process: Any = None
        self._conn: Connection | None = None
        self._loaded = False  # the process has said its handler is loaded

    def start(self) -> None:
        self._loaded = False
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(self.spec, self._environment, child, self._log_path),
            name=f"lambda:{self.spec.name}",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._conn = parent

    def wait_loaded(self, timeout_s: float) -> bool:
        """Wait until the process has loaded its handler (its first message); False if it did
        not in time or died (the first call then starts it again and reports why)."""
        if self._loaded:
            return True
        if self._conn is None or not self._conn.poll(timeout_s):
            return False
        try:
            self._conn.recv()  # ("loaded", None)
        except EOFError:
            return False
        self._loaded = True
        return True

    def stop(self) -> None:
        self.terminate()
        self.reap(STOP_GRACE_S)

    def terminate(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.terminate()

    def reap(self, timeout_s: float) -> None:
        process = self._process
        if process is None:
            return
        process.join(timeout=timeout_s)
        if process.is_alive():  # SIGTERM ignored or not handled in time
            process.kill()
            process.join(timeout=1)
        self._process = None

    def invoke(self, event: Any) -> Any:
        if self._process is None or not self._process.is_alive():
            self.start()
        assert self._conn is not None
        # A cold start: the handler's module loads before the first call (Lambda's init).
        if not self.wait_loaded(self.spec.timeout_s + 30):
            self.stop()
            raise InvocationError("Runtime.ExitError", "the function's process did not start")
        request_id = str(uuid.uuid4())
        try:
            self._conn.send((event, request_id, time.time() + self.spec.timeout_s))
        except OSError:  # BrokenPipeError: the process died between calls (or is stopping)
            self.stop()
            raise InvocationError("Runtime.ExitError", "the function's process exited") from None
        if not self._conn.poll(self.spec.timeout_s + 5):
            self.stop()  # Lambda kills a timed-out container; the next call starts anew
            raise InvocationError("Sandbox.Timedout", f"timed out after {self.spec.timeout_s} s")
        try:
            outcome, payload = self._conn.recv()
        except EOFError:
            self.stop()  # the process died: a crash at import or in the handler
            raise InvocationError("Runtime.ExitError", "the function's process exited") from None
        if outcome == "error":
            raise InvocationError(payload["errorType"], payload["errorMessage"])
        return payload


class _Context:
    """The Lambda context object, as handlers see it."""

    function_version = "$LATEST"

    def __init__(self, spec: FunctionSpec, request_id: str, deadline: float) -> None:
        self.function_name = spec.name
        self.memory_limit_in_mb = spec.memory_mb
        self.invoked_function_arn = spec.arn
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{spec.name}"
        self.log_stream_name = f"local/{os.getpid()}"
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


def _log_json(spec: FunctionSpec, request_id: str, level: str, message: str, detail: str) -> None:
    """One JSON line, like the functions' own Powertools lines, so the log stays parsable."""
    line = {
        "level": level,
        "location": "local runtime",
        "message": message,
        "function_name": spec.name,
        "function_request_id": request_id,
        "detail": detail,
    }
    print(json.dumps(line), flush=True)


def _warning_as_json(spec: FunctionSpec) -> Any:
    def show(message: Any, category: Any, filename: str, lineno: int, *_: Any) -> None:
        text = f"{category.__name__}: {message} ({filename}:{lineno})"
        _log_json(spec, "", "WARNING", str(message), text)

    return show


def _serve(
    spec: FunctionSpec, environment: dict[str, str], conn: Connection, log: Path | None
) -> None:
    """The 'container': load the handler like the Lambda Python runtime, then serve calls."""
    # Ctrl-C reaches the whole process group; the runtime stops its containers itself, so a
    # container ignores it rather than dying mid-call with a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Python warnings (e.g. Powertools' "No application metrics to publish") as JSON lines too.
    warnings.showwarning = _warning_as_json(spec)
    os.environ.clear()
    os.environ.update(environment)
    if log is not None:
        stream = log.open("a", buffering=1)
        sys.stdout = sys.stderr = stream
    # Layers' python/ folders, like /opt/python. A layer of pip-installed packages (the
    # dependencies layer, built for Lambda's platform) is replaced by this venv's own copies of
    # the same pinned versions.
    for layer in reversed(spec.layer_dirs):
        python_dir = layer / "python"
        if python_dir.is_dir() and not any(python_dir.glob("*.dist-info")):
            sys.path.insert(0, str(python_dir))
    sys.path.insert(0, str(spec.code_dir))
    module_name, _, function_name = spec.handler.rpartition(".")
    module_path = spec.code_dir / f"{module_name.replace('.', '/')}.py"
    module_spec = importlib.util.spec_from_file_location(module_name, module_path)
    if module_spec is None or module_spec.loader is None:
        raise SystemExit(f"{spec.name}: cannot load handler module {module_path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    module_spec.loader.exec_module(module)
    handler = getattr(module, function_name)
    conn.send(("loaded", None))  # the runtime waits for this before it says it is ready
    while True:
        try:
            event, request_id, deadline = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        try:
            result = handler(event, _Context(spec, request_id, deadline))
            conn.send(("ok", result))
        except Exception as error:
            _log_json(spec, request_id, "ERROR", "handler failed", traceback.format_exc())
            conn.send(("error", {"errorType": type(error).__name__, "errorMessage": str(error)}))
