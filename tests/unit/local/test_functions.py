"""The local runtime says it is ready only once every function's process has loaded its
handler (issue 26's newcomer waited 20-25 s on the first call after the banner, on a busy
machine, while the processes were still importing; a client giving up at 10 s failed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sundial.local.functions import FunctionHost, HostOptions, InvocationError
from sundial.local.template import FunctionSpec

HANDLER = """
import time
from pathlib import Path

time.sleep(0.5)  # a slow import, as boto3 and Powertools are on a busy machine
Path({marker!r}).write_text("loaded")


def handler(event, context):
    return {{"echo": event}}
"""


def _host(tmp_path: Path, source: str) -> FunctionHost:
    code = tmp_path / "code"
    code.mkdir()
    (code / "handler.py").write_text(source)
    spec = FunctionSpec(
        logical_id="Echo", name="echo", arn="arn:aws:lambda:us-east-1:1:function:echo",
        handler="handler.handler", code_dir=code, layer_dirs=(), environment={},
        timeout_s=10, memory_mb=128,
    )  # fmt: skip
    return FunctionHost(spec, HostOptions("http://127.0.0.1:1", "http://127.0.0.1:1", None))


def test_a_function_is_loaded_before_the_runtime_says_it_is_ready(tmp_path: Path) -> None:
    marker = tmp_path / "loaded"
    host = _host(tmp_path, HANDLER.format(marker=str(marker)))
    host.start()
    try:
        # When start-up waits for it, Then its handler's module has been imported
        assert host.wait_loaded(time.monotonic() + 120)
        assert marker.read_text() == "loaded"
        # And calls are answered as before
        assert host.invoke({"n": 1}) == {"echo": {"n": 1}}
        assert host.invoke({"n": 2}) == {"echo": {"n": 2}}
    finally:
        host.stop()


def test_a_function_that_cannot_load_is_reported_not_waited_for(tmp_path: Path) -> None:
    host = _host(tmp_path, "raise ImportError('no such module: nothing')\n")
    host.start()
    try:
        assert not host.wait_loaded(time.monotonic() + 120)
        with pytest.raises(InvocationError, match="did not start"):
            host.invoke({})
    finally:
        host.stop()
