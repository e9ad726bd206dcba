"""The external worker's HTTP is the client's (sundial.client): one SigV4 signer, one set of typed
errors and one retry policy, which repeats a call only when repeating it is safe. No API here:
urllib3, or the client's transport, answers as each test says. (The worker against the real
workers Lambda: tests/handlers/test_workers.py.)"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import urllib3

from sundial.client import ApiRequest, ApiResponse, NotFound, SundialClient
from sundial.clock import ManualClock
from sundial.model.job import Priority
from sundial.model.payloads import PayloadRef
from sundial.transport.envelope import Envelope, PayloadRefView
from sundial.worker import Worker, fetch_payload

CREDENTIAL_SCOPE = re.compile(r"Credential=testing/\d{8}/([a-z0-9-]+)/([a-z-]+)/aws4_request")
NO_JOBS = json.dumps({"jobs": []}).encode()
START_MS = 1_795_262_400_000  # 2026-11-21T09:00:00Z


def _never_called(job: Envelope) -> None:
    raise AssertionError(f"no job was leased, yet {job.id} ran")


class ScriptedApi:
    """A client transport answering each request with `answer(request)`; records them all."""

    def __init__(self, answer: Callable[[ApiRequest], ApiResponse]) -> None:
        self.answer = answer
        self.requests: list[ApiRequest] = []

    def __call__(self, request: ApiRequest) -> ApiResponse:
        self.requests.append(request)
        return self.answer(request)

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]


def _run(worker: Worker, clock: ManualClock) -> None:
    """Run the worker to its end in a thread, moving the clock on meanwhile (the worker waits a
    second on its clock after a failed lease)."""
    runner = threading.Thread(target=worker.run)
    runner.start()
    for _ in range(200):
        runner.join(timeout=0.02)
        if not runner.is_alive():
            return
        clock.advance(seconds=1)
    worker.stop()
    runner.join(timeout=10)
    raise AssertionError("the worker did not finish")


def test_a_worker_pointed_at_a_custom_domain_signs_its_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an API behind a custom domain (HTTPS, a host that is not *.amazonaws.com), and
    # what would go over the wire recorded (found by a review: the worker signed only
    # amazonaws.com hosts, so IAM auth refused every lease through a custom domain)
    sent: list[dict[str, str]] = []

    def request(_: Any, method: str, url: str, **kwargs: Any) -> Any:
        sent.append(dict(kwargs.get("headers") or {}))
        return urllib3.HTTPResponse(body=NO_JOBS, status=200, preload_content=True)

    monkeypatch.setattr(urllib3.PoolManager, "request", request)
    # When a burst worker leases from it
    worker = Worker(
        _never_called, queue="email", api_url="https://jobs.example.com", burst=True,
        wait_seconds=0,
    )  # fmt: skip
    worker.run()
    # Then its lease was SigV4-signed for execute-api, in the environment's region
    [headers] = sent
    scope = CREDENTIAL_SCOPE.search(headers["Authorization"])
    assert scope is not None and scope.groups() == ("us-east-1", "execute-api")


def test_a_lease_answered_503_is_not_sent_again(clock: ManualClock) -> None:
    # Given an API whose lease fails with a 503 (the receive may have happened: a repeat could
    # leave its jobs waiting out a lease nobody holds)
    api = ScriptedApi(lambda _: ApiResponse(503, {}, b'{"message": "unavailable"}'))
    client = SundialClient(transport=api, sleep=lambda _: None)
    worker = Worker(_never_called, queue="email", client=client, wait_seconds=0, clock=clock)
    # When the worker leases once, and is stopped meanwhile
    answer = api.answer

    def stop_after(request: ApiRequest) -> ApiResponse:
        worker.stop()
        return answer(request)

    api.answer = stop_after
    _run(worker, clock)
    # Then the lease was sent once: the client does not repeat a call that is not idempotent
    # after a 5xx, and the worker paused instead of leasing again at once
    assert api.paths() == ["/queues/email/lease"]


def test_a_rate_limited_worker_keeps_leasing_instead_of_stopping(clock: ManualClock) -> None:
    # Given an API that answers the lease 429 six times (more than the client repeats one
    # request: it then raises RateLimited), then with no job (found by a review: the worker
    # took any 4xx for a misconfiguration, so a 429 stopped it; and a burst worker took a
    # failed lease for an empty queue, and ended)
    def answer(request: ApiRequest) -> ApiResponse:
        if len(api.requests) <= 6:
            return ApiResponse(429, {"Retry-After": "0"}, b'{"message": "slow down"}')
        return ApiResponse(200, {}, NO_JOBS)

    api = ScriptedApi(answer)
    client = SundialClient(transport=api, sleep=lambda _: None)
    worker = Worker(
        _never_called, queue="email", client=client, wait_seconds=0, burst=True, clock=clock
    )
    # When a burst worker runs
    _run(worker, clock)
    # Then it waited and leased again until the API let it, and ended as the queue is empty
    assert api.paths() == ["/queues/email/lease"] * 7


def test_a_worker_for_an_unknown_queue_stops_with_the_apis_error(clock: ManualClock) -> None:
    # Given an API that does not know the worker's queue
    api = ScriptedApi(lambda _: ApiResponse(404, {}, b'{"message": "unknown queue: emial"}'))
    worker = Worker(_never_called, queue="emial", client=SundialClient(transport=api), clock=clock)
    # When it runs, it stops at once with the client's typed error, naming the queue
    with pytest.raises(NotFound, match="emial"):
        worker.run()
    assert len(api.requests) == 1


def test_a_stored_payloads_get_answered_503_is_repeated_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a job whose payload is stored in S3, and S3 answering its presigned GET with a 503
    # SlowDown once (found by a review: the worker's own fetch failed the attempt at once, so
    # the job waited out a retry's backoff for a throttle of a second)
    payload_json = '{"to":"ada@example.com"}'
    ref = PayloadRef.of("email", "01KAM3AAAAAAAAAAAAAAAAAAAA", payload_json)
    answers = [
        urllib3.HTTPResponse(body=b"<Error>SlowDown</Error>", status=503, preload_content=True),
        urllib3.HTTPResponse(body=payload_json.encode(), status=200, preload_content=True),
    ]
    urls: list[str] = []

    def request(_: Any, method: str, url: str, **kwargs: Any) -> Any:
        urls.append(url)
        return answers.pop(0)

    monkeypatch.setattr(urllib3.PoolManager, "request", request)
    monkeypatch.setattr(time, "sleep", lambda _: None)  # the backoff's pause, not waited
    envelope = Envelope(
        id="AQ", queue="email", payload=None, payload_ref=PayloadRefView(**ref.as_json()),
        run_at="2026-11-21T12:00:00.000Z", attempt=1, max_attempts=3, priority=Priority.NORMAL,
        created_at="2026-11-21T12:00:00.000Z",
    )  # fmt: skip
    # When the worker fetches it for the job, it is repeated (a GET is safe) and the job gets it
    presigned = "https://bucket.s3.amazonaws.com/payloads/x?X-Amz-Signature=abc"
    assert fetch_payload(envelope, presigned).payload == {"to": "ada@example.com"}
    assert urls == [presigned, presigned]


def test_a_worker_needs_an_api_url_or_a_client() -> None:
    with pytest.raises(ValueError, match="api_url"):
        Worker(_never_called, queue="email")
