"""The HTTP front door: API Gateway (HTTP API, payload 2.0) routes from the template, and the
Lambda Invoke API (so a function's own `lambda.invoke` call, e.g. the fan-out's async invoke
of sweepers, reaches the local function by the name the template gives it).

It also serves the admin web UI (sundial.client.ui) at /ui/, and the API a second time under
/api/ where the UI's page calls it (`sundial ui` passes the same calls on to a deployed API).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from sundial.client.ui import API_PREFIX, SECURITY_HEADERS, UI_PREFIX, asset
from sundial.local.functions import FunctionHost, InvocationError
from sundial.local.template import ACCOUNT_ID, REGION, RouteSpec

# The local runtime's stand-in for SigV4: the identity a request is signed as. API Gateway
# never passes such a header on (the functions read only requestContext.authorizer.iam).
CALLER_HEADER = "X-Sundial-Caller"
DEFAULT_CALLER = f"arn:aws:iam::{ACCOUNT_ID}:root"
_ACCOUNT = re.compile(r"^\d{12}$")
_CALLER_ARN = re.compile(
    r"^arn:aws:(?:iam|sts)::(?P<account>\d{12}):(?P<kind>role|user|root|assumed-role)"
    r"(?:/(?P<rest>.+))?$"
)

log = logging.getLogger("sundial.local")
_INVOKE_PREFIX = "/2015-03-31/functions/"
_HUNG_UP = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Server(ThreadingHTTPServer):
    """Errors in a request's thread go to the log, not to stderr (where they landed in the
    middle of the live table); a client that hung up is one line, not a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, _HUNG_UP):
            log.warning("a client at %s hung up mid-request: %s", client_address[0], error)
        else:
            log.exception("the API server failed a request from %s", client_address[0])


class Gateway:
    def __init__(
        self,
        *,
        routes: list[RouteSpec],
        hosts: dict[str, FunctionHost],  # by logical id
        async_pool: ThreadPoolExecutor,
        on_request: Callable[[str, int], None] | None = None,
        default_caller: str = DEFAULT_CALLER,
    ) -> None:
        caller_iam(default_caller)  # a bad setting fails the start, not every request
        self.default_caller = default_caller
        self.routes = routes
        self.hosts = hosts
        self.by_name = {host.spec.name: host for host in hosts.values()}
        self.async_pool = async_pool
        self.on_request = on_request

    def serve(self, host: str, port: int) -> ThreadingHTTPServer:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                gateway.handle(self)

            def do_POST(self) -> None:
                gateway.handle(self)

            def do_PUT(self) -> None:
                gateway.handle(self)

            def do_DELETE(self) -> None:
                gateway.handle(self)

            def do_PATCH(self) -> None:
                gateway.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug(format, *args)

        server = _Server((host, port), Handler)
        server.daemon_threads = True
        return server

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        started = time.monotonic()
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        split = urlsplit(request.path)
        path = split.path
        if path.startswith(_INVOKE_PREFIX) and request.command == "POST":
            status, headers, payload = self._invoke_api(request, path, body)
        elif request.command == "GET" and path in ("/", UI_PREFIX.rstrip("/")):
            status, headers, payload = 302, {"Location": UI_PREFIX}, b""
        elif request.command == "GET" and path.startswith(UI_PREFIX):
            status, headers, payload = _ui_asset(path)
        else:
            api_path = path.removeprefix(API_PREFIX) if path.startswith(API_PREFIX + "/") else path
            status, headers, payload = self._api_route(request, api_path, split.query, body)
        try:
            request.send_response(status)
            for name, value in headers.items():
                request.send_header(name, value)
            request.send_header("Content-Length", str(len(payload)))
            request.end_headers()
            request.wfile.write(payload)
        except _HUNG_UP:
            # The client gave up waiting (its own timeout): the work was done; only the
            # answer is lost. A line in the log, never a traceback on the terminal.
            log.warning(
                "%s %s: the client hung up before the answer (%d, after %.1f s)",
                request.command,
                path,
                status,
                time.monotonic() - started,
            )
            request.close_connection = True
            return
        if self.on_request is not None:
            self.on_request(f"{request.command} {path}", status)

    # -- API Gateway HTTP API ---------------------------------------------------------------

    def _api_route(
        self, request: BaseHTTPRequestHandler, path: str, query: str, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        for route in self.routes:
            match = route.pattern.match(path)
            if route.method == request.command and match:
                break
        else:
            message = f"no route {request.command} {path}"
            return 404, {"Content-Type": "application/json"}, _error(message)
        caller = request.headers.get(CALLER_HEADER) or self.default_caller
        try:
            identity = caller_iam(caller)
        except ValueError as error:
            return 403, {"Content-Type": "application/json"}, _error(str(error))
        event = _http_api_event(request, route, path, query, body, match.groupdict())
        event["requestContext"]["authorizer"] = {"iam": identity}
        try:
            result = self.hosts[route.function].invoke(event)
        except InvocationError as error:
            log.error("%s failed: %s", route.function, error)
            return 500, {"Content-Type": "application/json"}, b'{"message":"Internal Server Error"}'
        return _http_api_response(result)

    # -- Lambda Invoke API ------------------------------------------------------------------

    def _invoke_api(
        self, request: BaseHTTPRequestHandler, path: str, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        name = unquote(path.removeprefix(_INVOKE_PREFIX).split("/")[0]).split(":")[-1]
        host = self.by_name.get(name)
        if host is None:
            error = {
                "Type": "User",
                "message": f"Function not found: {_function_arn(name)}",
            }
            headers = {
                "Content-Type": "application/json",
                "x-amzn-ErrorType": "ResourceNotFoundException",
            }
            return 404, headers, json.dumps(error).encode()
        event = json.loads(body or b"{}")
        if request.headers.get("X-Amz-Invocation-Type") == "Event":
            self.async_pool.submit(_invoke_logged, host, event)
            return 202, {"Content-Type": "application/json"}, b""
        try:
            result = host.invoke(event)
        except InvocationError as error:
            payload = json.dumps({"errorType": error.error_type, "errorMessage": error.message})
            headers = {"Content-Type": "application/json", "X-Amz-Function-Error": "Unhandled"}
            return 200, headers, payload.encode()
        return 200, {"Content-Type": "application/json"}, json.dumps(result).encode()


def _ui_asset(path: str) -> tuple[int, dict[str, str], bytes]:
    found = asset(path)
    if found is None:
        return 404, {"Content-Type": "application/json"}, _error(f"no such page: {path}")
    return 200, {**SECURITY_HEADERS, "Content-Type": found.content_type}, found.body


def _function_arn(name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name}"


def _invoke_logged(host: FunctionHost, event: Any) -> None:
    try:
        host.invoke(event)
    except InvocationError as error:
        log.error("async invoke of %s failed: %s", host.spec.name, error)


def _error(text: str) -> bytes:
    """The API's error shape (sundial.api.models.ErrorBody)."""
    return json.dumps({"message": text, "errors": []}).encode()


def caller_iam(caller: str) -> dict[str, Any]:
    """The `requestContext.authorizer.iam` API Gateway would send for a request signed as
    `caller` (a role is signed as a session of it; an account id as its root)."""
    if _ACCOUNT.match(caller):
        caller = f"arn:aws:iam::{caller}:root"
    match = _CALLER_ARN.match(caller)
    if match is None:
        raise ValueError(
            f"{CALLER_HEADER} '{caller}' is not an IAM role or user ARN or an account id"
        )
    arn = caller
    if match["kind"] == "role":
        name = match["rest"].rsplit("/", 1)[-1]
        arn = f"arn:aws:sts::{match['account']}:assumed-role/{name}/local"
    return {
        "accessKey": "ASIALOCALEXAMPLE",
        "accountId": match["account"],
        "callerId": "AROALOCALEXAMPLE",
        "principalOrgId": None,
        "userArn": arn,
        "userId": "AROALOCALEXAMPLE",
    }


def _http_api_event(  # noqa: PLR0917 - one request's parts, all needed
    request: BaseHTTPRequestHandler,
    route: RouteSpec,
    path: str,
    query: str,
    body: bytes,
    path_parameters: dict[str, str],
) -> dict[str, Any]:
    """The event API Gateway HTTP API sends a Lambda proxy integration (payload format 2.0)."""
    if route.payload_version != "2.0":
        raise ValueError(f"payload format {route.payload_version} is not emulated")
    now = datetime.now(tz=UTC)
    headers = {name.lower(): value for name, value in request.headers.items()}
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    route_key = f"{route.method} {route.path}"
    return {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT_ID,
            "apiId": "local",
            "domainName": headers.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": request.command,
                "path": path,
                "protocol": request.request_version,
                "sourceIp": request.client_address[0],
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex[:16],
            "routeKey": route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(time.time() * 1000),
        },
        # API Gateway joins repeated query parameters with commas.
        "queryStringParameters": _query_parameters(query),
        "pathParameters": path_parameters or None,
        "body": text if body else None,
        "isBase64Encoded": encoded,
    }


def _query_parameters(query: str) -> dict[str, str] | None:
    joined: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        joined.setdefault(name, []).append(value)
    return {name: ",".join(values) for name, values in joined.items()} or None


def _http_api_response(result: Any) -> tuple[int, dict[str, str], bytes]:
    """Map a handler's return value to HTTP as API Gateway does for payload format 2.0."""
    if not isinstance(result, dict) or "statusCode" not in result:
        return 200, {"Content-Type": "application/json"}, json.dumps(result).encode()
    headers = {k: str(v) for k, v in (result.get("headers") or {}).items()}
    body = result.get("body") or ""
    payload = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    return int(result["statusCode"]), headers, payload
