"""Signing, errors and backoff of sundial.client, without an API."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from botocore.credentials import Credentials

from sundial.client import (
    ApiRequest,
    ApiResponse,
    ApiUnreachable,
    Backoff,
    Conflict,
    Forbidden,
    HttpTransport,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    SundialClient,
    SundialError,
)
from sundial.client.errors import error_for, retry_after_seconds
from sundial.client.transport import CALLER_HEADER, TransportFailure, region_of

PACKAGE_ROOT = Path(__file__).resolve().parents[3] / "layers" / "sundial" / "python"
FAKE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token")
CREDENTIAL_SCOPE = re.compile(r"Credential=AKIDEXAMPLE/\d{8}/([a-z0-9-]+)/([a-z-]+)/aws4_request")


class Recorder:
    """Stands in for urllib3: records what would have been sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    def request(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> object:
        self.sent.append((method, url, headers))
        return type("Answer", (), {"status": 200, "headers": {}, "data": b"{}"})()


def _send(transport: HttpTransport, request: ApiRequest) -> dict[str, str]:
    recorder = Recorder()
    transport._http = recorder  # type: ignore[assignment]
    transport(request)
    return recorder.sent[0][2]


def test_an_execute_api_url_is_signed_for_execute_api_in_its_region() -> None:
    transport = HttpTransport(
        "https://abc123.execute-api.eu-west-2.amazonaws.com", credentials=FAKE
    )
    headers = _send(transport, ApiRequest("POST", "/jobs", body=b'{"queue": "email"}'))
    scope = CREDENTIAL_SCOPE.search(headers["Authorization"])
    assert scope is not None and scope.groups() == ("eu-west-2", "execute-api")
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert "host" in headers["Authorization"] and "x-amz-date" in headers["Authorization"]
    assert headers["X-Amz-Security-Token"] == "session-token"


def test_a_custom_domain_is_signed_in_the_given_or_environment_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    transport = HttpTransport("https://jobs.example.com", region="ap-south-1", credentials=FAKE)
    headers = _send(transport, ApiRequest("GET", "/jobs/x", query={"a": "b"}))
    assert CREDENTIAL_SCOPE.search(headers["Authorization"]).groups() == (  # type: ignore[union-attr]
        "ap-south-1",
        "execute-api",
    )
    monkeypatch.setenv("AWS_REGION", "sa-east-1")
    assert region_of("jobs.example.com") == "sa-east-1"
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(ValueError, match="region"):
        HttpTransport("https://jobs.example.com", credentials=FAKE)


def test_plain_http_is_unsigned_and_names_the_local_caller() -> None:
    transport = HttpTransport("http://127.0.0.1:8000", caller="arn:aws:iam::1:role/x")
    headers = _send(transport, ApiRequest("GET", "/queues/email"))
    assert "Authorization" not in headers
    assert headers[CALLER_HEADER] == "arn:aws:iam::1:role/x"


def test_the_api_url_defaults_to_sundial_api_then_the_local_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SUNDIAL_API", raising=False)
    assert SundialClient().api_url == "http://127.0.0.1:8000"
    monkeypatch.setenv("SUNDIAL_API", "http://localhost:9000/")
    assert SundialClient().api_url == "http://localhost:9000"


def test_a_refused_connection_is_a_transport_failure_not_sent() -> None:
    transport = HttpTransport("http://127.0.0.1:9", timeout_s=1)  # port 9: discard, closed
    with pytest.raises(TransportFailure) as raised:
        transport(ApiRequest("GET", "/queues/email"))
    assert raised.value.sent is False


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, InvalidRequest),
        (403, Forbidden),
        (404, NotFound),
        (409, Conflict),
        (413, PayloadTooLarge),
        (429, RateLimited),
        (500, ServerError),
        (503, ServerError),
        (418, SundialError),
    ],
)
def test_each_status_has_its_error_type(status: int, kind: type[SundialError]) -> None:
    body = {"message": "run_at: bad", "errors": [{"field": "run_at", "reason": "bad"}]}
    error = error_for(status, body, {})
    assert type(error) is kind
    assert (error.status, error.message, error.errors[0].field) == (status, "run_at: bad", "run_at")


def test_an_answer_that_is_not_an_error_body_still_gets_its_type() -> None:
    error = error_for(403, "<html>Forbidden</html>", {})
    assert isinstance(error, Forbidden) and error.errors == [] and "Forbidden" in error.message


def test_retry_after_in_seconds_or_as_a_date() -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("12") == 12.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=30)), now=now) == 30.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    error = error_for(429, {"message": "slow down"}, {"Retry-After": "3"})
    assert isinstance(error, RateLimited) and error.retry_after == 3.0


def test_backoff_is_jittered_exponential_capped_and_honours_retry_after() -> None:
    backoff = Backoff(base_s=1.0, cap_s=8.0)
    rng = random.Random(7)
    for attempt in range(1, 10):
        assert 0 <= backoff.delay_s(attempt, rng=rng) <= min(8.0, 2 ** (attempt - 1))
    assert backoff.delay_s(1, retry_after_s=30.0, rng=rng) == 30.0
    assert backoff.delay_s(1, retry_after_s=3600.0, rng=rng) == backoff.max_retry_after_s


def test_no_answer_after_every_attempt_is_api_unreachable() -> None:
    calls = []

    def down(request: ApiRequest) -> ApiResponse:
        calls.append(request)
        raise TransportFailure("connection refused", sent=False)

    client = SundialClient(transport=down, sleep=lambda _: None, backoff=Backoff(max_attempts=4))
    with pytest.raises(ApiUnreachable) as raised:
        client.get_queue("email")
    assert raised.value.status is None and len(calls) == 4


def test_requests_are_json_and_path_segments_are_quoted() -> None:
    sent: list[ApiRequest] = []

    def answer(request: ApiRequest) -> ApiResponse:
        sent.append(request)
        body = {"queue": "a/b", "paused": True, "paused_at": None, "catching_up": False}
        return ApiResponse(200, {}, json.dumps(body).encode())

    SundialClient(transport=answer).pause_queue("a/b")
    assert sent[0].path == "/queues/a%2Fb/pause"


def test_the_client_imports_no_server_code_and_no_aws_sdk() -> None:
    # A fresh interpreter, as a script or CLI start: what does `import sundial.client` load?
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, sundial.client; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(PACKAGE_ROOT), "PATH": ""},
    ).stdout.split()
    ours = {m for m in loaded if m.startswith("sundial.")}
    assert all(m.startswith("sundial.client") for m in ours), sorted(ours)
    assert not [m for m in loaded if m.split(".")[0] in {"boto3", "botocore", "rich"}]
