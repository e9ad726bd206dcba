"""`sundial ui`: the admin web UI on 127.0.0.1, its API calls passed on to the Sundial API.

The browser never talks to the API itself: this server signs each call it passes on with the
user's AWS credentials (SigV4, through sundial.client's transport), so the UI works against a
deployed stack without opening the API to browsers (no CORS, no credentials in the page).

Why the standard library's ThreadingHTTPServer rather than a web framework: it serves one
local user a handful of static files and a thin pass-through, needs no dependency beyond what
`pip install .` already brings, and the local runtime's gateway is built on it too. A thread
per request keeps a slow API call from holding the page's other requests.

What it refuses, so that it is no more than the UI needs:
- it binds to the loopback interface only (no host option), and answers only requests whose
  Host is its own loopback address (a DNS-rebinding page gets 403);
- API calls must carry the `X-Sundial-UI` header (a cross-origin page cannot send it without
  a preflight, which is refused) and, when the browser sends an Origin, come from this origin;
- only GET, POST, DELETE and PATCH; only the API routes the UI uses (`PROXIED_ROUTES`); a body
  of at most 1 MiB.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from sundial.client.transport import ApiRequest, Transport, TransportFailure
from sundial.client.ui import API_PREFIX, SECURITY_HEADERS, UI_HEADER, UI_PREFIX, asset

DEFAULT_PORT = 8766  # beside the local runtime's API (8000) and emulator (5000)
LOOPBACK = "127.0.0.1"
MAX_BODY_BYTES = 1024 * 1024
ALLOWED_METHODS = ("GET", "POST", "DELETE", "PATCH")

_SEGMENT = "[^/]+"
# The API routes the UI calls (a subset of openapi.json; a test keeps them in it).
PROXIED_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/queues"),
    ("POST", "/queues/{queue}/pause"),
    ("POST", "/queues/{queue}/resume"),
    ("GET", "/queues/{queue}/dead"),
    ("DELETE", "/queues/{queue}/dead"),
    ("POST", "/queues/{queue}/dead/replay"),
    ("GET", "/queues/{queue}/jobs"),
    ("GET", "/schedules"),
    ("GET", "/dags"),
    ("GET", "/jobs/{job_id}"),
    ("PATCH", "/jobs/{job_id}"),
    ("DELETE", "/jobs/{job_id}"),
    ("POST", "/jobs/{job_id}/run-now"),
    ("POST", "/jobs/{job_id}/retry"),
    ("POST", "/jobs/{job_id}/pause"),
    ("POST", "/jobs/{job_id}/resume"),
    ("GET", "/schedules/{schedule_id}"),
    ("GET", "/schedules/{schedule_id}/runs"),
    ("POST", "/schedules/{schedule_id}/pause"),
    ("POST", "/schedules/{schedule_id}/resume"),
    ("GET", "/dags/{dag_id}"),
    ("DELETE", "/dags/{dag_id}"),
    ("POST", "/dags/{dag_id}/pause"),
    ("POST", "/dags/{dag_id}/resume"),
)
_PROXIED = [
    (method, re.compile("^" + re.sub(r"\{[a-z_]+\}", _SEGMENT, route) + "$"))
    for method, route in PROXIED_ROUTES
]

log = logging.getLogger("sundial.ui")


def is_proxied(method: str, path: str) -> bool:
    """Whether `method path` (the API's path, without /api) is one of the UI's routes."""
    return any(method == m and pattern.match(path) for m, pattern in _PROXIED)


def error_body(message: str) -> bytes:
    """The API's error shape, so the page shows the server's refusals as it shows the API's."""
    return json.dumps({"message": message, "errors": []}).encode()


class UiServer:
    """The UI's HTTP server on 127.0.0.1:`port` (0: any free port), passing /api/ calls to
    `transport` (an HttpTransport for a real API; tests pass the handlers in-process)."""

    def __init__(self, transport: Transport, *, port: int = DEFAULT_PORT) -> None:
        self.transport = transport
        self.httpd = ThreadingHTTPServer((LOOPBACK, port), _handler_for(self))
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}{UI_PREFIX}"

    def allowed_hosts(self) -> set[str]:
        return {f"{LOOPBACK}:{self.port}", f"localhost:{self.port}"}

    def start(self) -> None:
        """Serve in a background thread (tests); `serve_forever` serves in this one."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="sundial-ui")
        self._thread.daemon = True
        self._thread.start()

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    # -- one request --------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        split = urlsplit(request.path)
        if request.headers.get("Host") not in self.allowed_hosts():
            _send(request, HTTPStatus.FORBIDDEN, error_body("unexpected Host: use " + self.url))
            return
        if split.path.startswith(API_PREFIX + "/"):
            self._proxy(request, split.path.removeprefix(API_PREFIX), split.query)
        elif request.command != "GET":
            _send(request, HTTPStatus.METHOD_NOT_ALLOWED, error_body("the UI's files are GET"))
        elif split.path in ("/", UI_PREFIX.rstrip("/")):
            _send(request, HTTPStatus.FOUND, b"", {"Location": UI_PREFIX})
        elif split.path.startswith(UI_PREFIX) and (found := asset(split.path)) is not None:
            _send(request, HTTPStatus.OK, found.body, {"Content-Type": found.content_type})
        else:
            _send(request, HTTPStatus.NOT_FOUND, error_body(f"no such page: {split.path}"))

    def _proxy(self, request: BaseHTTPRequestHandler, path: str, query: str) -> None:
        origin = request.headers.get("Origin")
        if request.headers.get(UI_HEADER) != "1" or (
            origin is not None and origin not in {f"http://{h}" for h in self.allowed_hosts()}
        ):
            _send(request, HTTPStatus.FORBIDDEN, error_body("only the Sundial UI's own page"))
            return
        if not is_proxied(request.command, path):
            message = f"{request.command} {path} is not an API route the UI uses"
            _send(request, HTTPStatus.NOT_FOUND, error_body(message))
            return
        length = int(request.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            _send(request, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, error_body("body over 1 MiB"))
            return
        body = request.rfile.read(length) if length else None
        api_request = ApiRequest(
            method=request.command, path=path, query=dict(parse_qsl(query)), body=body
        )
        try:
            answer = self.transport(api_request)
        except TransportFailure as failure:
            _send(request, HTTPStatus.BAD_GATEWAY, error_body(f"the API did not answer: {failure}"))
            return
        headers = {"Content-Type": "application/json"}
        retry_after = _header(answer.headers, "Retry-After")
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        _send(request, answer.status, answer.body, headers)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


def _send(
    request: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
) -> None:
    request.send_response(status)
    all_headers = {**SECURITY_HEADERS, "Content-Type": "application/json", **(headers or {})}
    for name, value in all_headers.items():
        request.send_header(name, value)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    if request.command != "HEAD":  # a HEAD answer has headers only
        request.wfile.write(body)


def _handler_for(server: UiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "sundial-ui"

        def do_GET(self) -> None:
            server.handle(self)

        do_POST = do_DELETE = do_PATCH = do_GET  # noqa: N815 - http.server's naming

        def refuse(self) -> None:
            allow = {"Allow": ", ".join(ALLOWED_METHODS)}
            message = f"{self.command} is not allowed; the UI uses {', '.join(ALLOWED_METHODS)}"
            _send(self, HTTPStatus.METHOD_NOT_ALLOWED, error_body(message), allow)

        # Every other method http.server would dispatch: refused (an unknown one gets 501).
        do_PUT = do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = refuse  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return Handler
