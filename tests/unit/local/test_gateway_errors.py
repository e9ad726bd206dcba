"""The local gateway when a client gives up: the work it asked for is done, the answer is lost,
and the runtime says so in one log line, never with a traceback on the terminal (issue 26: the
demo's client timed out on a slow pause and a BrokenPipeError traceback landed in the middle of
the live table)."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest

from sundial.local.functions import FunctionHost
from sundial.local.gateway import Gateway
from sundial.local.template import FunctionSpec, RouteSpec


class SlowFunction:
    """A function that answers after a moment (the local runtime's host, minus the process)."""

    def __init__(self) -> None:
        self.spec = FunctionSpec(
            logical_id="Slow", name="slow", arn="arn:aws:lambda:us-east-1:1:function:slow",
            handler="h.handler", code_dir=Path("."), layer_dirs=(), environment={},
            timeout_s=10, memory_mb=128,
        )  # fmt: skip
        self.done = threading.Event()

    def invoke(self, event: Any) -> Any:
        time.sleep(0.5)
        self.done.set()
        return {"statusCode": 200, "body": "x" * 100_000}


@pytest.fixture
def slow_server() -> Iterator[tuple[ThreadingHTTPServer, SlowFunction]]:
    function = SlowFunction()
    route = RouteSpec(method="POST", path="/slow", function="Slow", payload_version="2.0")
    with ThreadPoolExecutor(max_workers=1) as pool:
        gateway = Gateway(
            routes=[route], hosts={"Slow": cast("FunctionHost", function)}, async_pool=pool
        )
        httpd = gateway.serve("127.0.0.1", 0)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        yield httpd, function
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_client_that_hangs_up_gets_a_log_line_and_no_traceback(
    slow_server: tuple[ThreadingHTTPServer, SlowFunction],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    httpd, function = slow_server
    # Given a request whose client gives up before the answer (closing with a reset, as a
    # client's timeout does when the process exits)
    client = socket.create_connection(("127.0.0.1", httpd.server_address[1]))
    client.sendall(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with caplog.at_level(logging.WARNING, logger="sundial.local"):
        client.close()
        # When the function finishes and the gateway writes its answer
        assert function.done.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "hung up" not in caplog.text:
            time.sleep(0.05)  # waiting for the server's thread to write, not for a due time
    # Then one line says what happened, and nothing reaches the terminal
    assert "POST /slow: the client hung up before the answer (200" in caplog.text
    assert "Traceback" not in capfd.readouterr().err
