"""The Sundial API in-process: a client transport that turns each request into the API Gateway
HTTP API event of its route and calls that route's real Lambda handler (under moto), as API
Gateway would. The client and CLI tests run on it, so they exercise the real API, not mocks.

Routes go to functions as stacks/api.py wires them; `ROUTES` must cover every operation in
openapi.json (tests/handlers/test_client.py checks it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3

from sundial.client import LeasedJobView, SundialClient
from sundial.client.transport import CALLER_HEADER, ApiRequest, ApiResponse
from sundial.wiring import Dependencies
from tests.support import DEFAULT_CALLER, FakeLambdaContext, http_api_event, load_handler, sqs_event

# (method, route template) -> the function (lambdas/<name>) behind it, as in stacks/api.py.
ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/jobs"): "submit",
    ("POST", "/jobs/batch"): "submit",
    ("GET", "/jobs/{job_id}"): "jobs",
    ("DELETE", "/jobs/{job_id}"): "jobs",
    ("POST", "/jobs/{job_id}/retry"): "jobs",
    ("POST", "/jobs/{job_id}/pause"): "jobs",
    ("POST", "/jobs/{job_id}/resume"): "jobs",
    ("PATCH", "/jobs/{job_id}"): "jobs",
    ("POST", "/jobs/{job_id}/run-now"): "jobs",
    ("GET", "/queues/{queue}/dead"): "jobs",
    ("DELETE", "/queues/{queue}/dead"): "jobs",
    ("POST", "/queues/{queue}/dead/replay"): "jobs",
    ("POST", "/queues/{queue}/lease"): "workers",
    ("POST", "/jobs/{job_id}/heartbeat"): "workers",
    ("POST", "/jobs/{job_id}/ack"): "workers",
    ("POST", "/jobs/{job_id}/nack"): "workers",
    ("POST", "/dags"): "dags",
    ("GET", "/dags"): "dags",
    ("GET", "/dags/{dag_id}"): "dags",
    ("DELETE", "/dags/{dag_id}"): "dags",
    ("POST", "/dags/{dag_id}/pause"): "dags",
    ("POST", "/dags/{dag_id}/resume"): "dags",
    ("POST", "/schedules"): "schedules",
    ("GET", "/schedules"): "schedules",
    ("GET", "/schedules/{schedule_id}"): "schedules",
    ("DELETE", "/schedules/{schedule_id}"): "schedules",
    ("PATCH", "/schedules/{schedule_id}"): "schedules",
    ("GET", "/schedules/{schedule_id}/runs"): "schedules",
    ("POST", "/schedules/{schedule_id}/pause"): "schedules",
    ("POST", "/schedules/{schedule_id}/resume"): "schedules",
    ("GET", "/queues"): "queues",
    ("GET", "/queues/{queue}"): "queues",
    ("GET", "/queues/{queue}/jobs"): "queues",
    ("POST", "/queues/{queue}/pause"): "queues",
    ("POST", "/queues/{queue}/resume"): "queues",
}


def _pattern(route: str) -> re.Pattern[str]:
    # A path parameter is one segment, as API Gateway matches {name}.
    return re.compile("^" + re.sub(r"\{[a-z_]+\}", "[^/]+", route) + "$")


_MATCHERS = [(method, route, _pattern(route), name) for (method, route), name in ROUTES.items()]
_HANDLERS: dict[str, Any] = {}


def _handler(name: str) -> Any:
    if name not in _HANDLERS:
        _HANDLERS[name] = load_handler(name)
    return _HANDLERS[name]


class InProcessApi:
    """A transport for SundialClient. Requests carry the caller the local runtime reads from
    `X-Sundial-Caller` (default: the platform user every handler test signs as). `requests`
    records (method, route) of each call, for tests that count them."""

    def __init__(self, caller: str = DEFAULT_CALLER) -> None:
        self.caller = caller
        self.requests: list[tuple[str, str]] = []

    def __call__(self, request: ApiRequest) -> ApiResponse:
        match = next(
            (
                (route, name)
                for method, route, pattern, name in _MATCHERS
                if method == request.method and pattern.match(request.path)
            ),
            None,
        )
        if match is None:  # API Gateway's own answer to a route it does not have
            return ApiResponse(404, {}, json.dumps({"message": "Not Found"}).encode())
        route, name = match
        self.requests.append((request.method, route))
        caller = next(
            (v for k, v in request.headers.items() if k.lower() == CALLER_HEADER.lower()),
            self.caller,
        )
        event = http_api_event(
            request.method,
            request.path,
            body=request.body.decode() if request.body is not None else None,
            route=route,
            query=dict(request.query) or None,
            caller=caller,
        )
        response = _handler(name).handler(event, FakeLambdaContext())
        body = response.get("body") or ""
        return ApiResponse(response["statusCode"], response.get("headers") or {}, body.encode())


class FailingFirst:
    """Wraps a transport: the first `failures` calls answer what `fail` makes (a 503, a 429
    with Retry-After, or raising TransportFailure) without reaching the API."""

    def __init__(
        self, inner: Callable[[ApiRequest], ApiResponse], fail: Callable[[], ApiResponse], n: int
    ) -> None:
        self.inner = inner
        self.fail = fail
        self.remaining = n
        self.calls = 0

    def __call__(self, request: ApiRequest) -> ApiResponse:
        self.calls += 1
        if self.remaining > 0:
            self.remaining -= 1
            return self.fail()
        return self.inner(request)


def kill_through_a_worker(
    sundial: SundialClient,
    deps: Dependencies,
    count: int,
    *,
    error_type: str | None = None,
    message: str | None = None,
) -> list[str]:
    """`count` jobs, each leased and nacked as non-retryable by a worker (so dead), their
    letters drained from the DLQ into the table by the indexer Lambda."""
    ids = [sundial.submit("default", {"n": n}, max_attempts=1).id for n in range(count)]
    leased: list[LeasedJobView] = []
    while len(leased) < count:
        leased += sundial.lease("default", wait=0, max_jobs=10, lease_seconds=60).jobs
    for held in leased:
        assert sundial.heartbeat(held.job.id, held.lease).status == "running"
        failed = sundial.nack(
            held.job.id, held.lease, retryable=False, error_type=error_type, message=message
        )
        assert failed.status == "dead"
    sqs = boto3.client("sqs")
    url = deps.settings.dead_letter_urls["default"]
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        event = sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:default-dlq")
        assert (
            _handler("dead_letters").handler(event, FakeLambdaContext())["batchItemFailures"] == []
        )
        for received in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])
    return ids


OPENAPI = Path(__file__).resolve().parent.parent / "openapi.json"
