"""End to end, in-process on moto: the real Lambda handlers (submit over API Gateway events,
cancel, fan-out, sweeper) driven through two hours of an injected clock."""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.model.placement import due_soon
from sundial.wiring import Dependencies, configure
from tests.support import (
    FakeLambdaContext,
    WriteMeter,
    http_api_event,
    load_handler,
    receive_all,
)

JOBS, CANCELS = 300, 30
HORIZON_S = 2 * 3600


@pytest.fixture
def system(environ: dict[str, str], clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SUNDIAL_SHARD_COUNT", "16")
    sweeper = load_handler("sweeper")

    def launch(shards: Sequence[int]) -> None:  # what Lambda's async invoke would deliver
        sweeper.handler({"shards": list(shards)}, FakeLambdaContext(remaining_ms=60_000))

    session = boto3.Session()
    meter = WriteMeter(session)
    deps = configure(clock=clock, environ=dict(os.environ), session=session, launch=launch)
    return deps, meter


def _http(handler: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    route = "/jobs/{job_id}" if method != "POST" else None
    event = http_api_event(method, path, body=json.dumps(body) if body else None, route=route)
    response = handler.handler(event, FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"])


def test_300_jobs_over_two_hours_arrive_once_at_their_due_second(
    system: tuple[Dependencies, WriteMeter], clock: ManualClock
) -> None:
    deps, meter = system
    rng = random.Random(20261121)
    submit, jobs_api, fanout = load_handler("submit"), load_handler("jobs"), load_handler("fanout")
    sqs = boto3.client("sqs")

    # Given 300 jobs with random delays from 0 s to 2 h on two queues, submitted over HTTP
    due: dict[str, int] = {}
    submitted_at = clock.now_ms()
    for n in range(JOBS):
        queue = rng.choice(["default", "email"])
        body = {"queue": queue, "delay_seconds": rng.randint(0, HORIZON_S), "payload": {"n": n}}
        status, created = _http(submit, "POST", "/jobs", body)
        assert status == 201
        due[created["id"]] = JobKey.from_job_id(created["id"]).due_ms
    assert len({JobKey.from_job_id(i).shard for i in due}) == 16  # spread across every shard

    # And 30 of them cancelled: some still pending, some already handed to SQS
    cancelled = rng.sample(sorted(due), CANCELS)
    cancelled_while = {}
    for job_id in cancelled:
        status_before = deps.jobs.get(job_id).status
        assert _http(jobs_api, "DELETE", f"/jobs/{job_id}")[0] == 200
        cancelled_while[job_id] = status_before
    assert {"pending", "queued"} <= set(cancelled_while.values())

    # When the clock runs for 2 h 20 min: the EventBridge rule fires the fan-out every
    # minute, and a consumer polls both queues every second
    arrivals: dict[str, list[int]] = defaultdict(list)
    for second in range(HORIZON_S + 20 * 60):
        if second % 60 == 0:
            fanout.handler(
                {"source": "aws.events", "detail-type": "Scheduled Event"}, FakeLambdaContext()
            )
        for url in deps.settings.queue_urls.values():
            for envelope in receive_all(sqs, url):
                arrivals[envelope["id"]].append(clock.now_ms())
        clock.advance(seconds=1)

    # Then every job not cancelled arrived exactly once, never before its due time, and in
    # its due second or the next (DelaySeconds is whole seconds, rounded up)
    expected = set(due) - {j for j, s in cancelled_while.items() if s == "pending"}
    assert set(arrivals) >= expected
    for job_id in expected:
        [arrived] = arrivals[job_id]
        assert 0 <= arrived - due[job_id] < 2000, (job_id, arrived - due[job_id])
    # And no job cancelled while pending arrived; one cancelled after it was queued may
    # arrive, but its status reads cancelled so the consumer's fence skips it
    for job_id, was in cancelled_while.items():
        if was == "pending":
            assert job_id not in arrivals
        assert _http(jobs_api, "GET", f"/jobs/{job_id}")[1]["status"] == "cancelled"
    late_cancels = [j for j, s in cancelled_while.items() if s == "queued"]
    assert all(len(arrivals[j]) == 1 for j in late_cancels)

    # And the DynamoDB writes stay at one put per job, and one claim per job the submit sent
    # itself (due within the direct window); a sweep writes no job item, it sends under its
    # shard's lease (every item here is under 1 KB, so a write request is one write unit).
    # Sweep cursors are a per-shard cost, not a per-job one: at most two writes per shard per
    # sweep that found work (the lease and its release).
    dispatched = len(set(arrivals))
    sweeps = (HORIZON_S + 20 * 60) // 60 * deps.settings.shard_count
    print(
        f"\nwrite requests: {dict(meter.requests)} for {JOBS} jobs ({dispatched} dispatched); "
        f"per job: put {meter.requests['put'] / JOBS:.2f}, "
        f"claim {meter.requests['claim'] / dispatched:.2f} per dispatched job; "
        f"cursor writes {meter.requests['cursor']} in {sweeps} shard-sweeps; "
        f"moto-reported capacity {meter.reported_units:.1f} units in all"
    )
    assert meter.requests["put"] == JOBS
    sent_by_submit = sum(1 for due_ms in due.values() if due_soon(due_ms, submitted_at))
    assert 0 < sent_by_submit < dispatched
    assert meter.requests["claim"] == sent_by_submit
    assert meter.requests["cancel"] == CANCELS
    assert meter.requests["other"] == 0
    assert meter.requests["shards"] == 1  # the fan-out records the shard count once
    assert meter.requests["cursor"] <= sweeps
