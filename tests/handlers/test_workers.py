"""Workers outside Lambda: the workers Lambda's lease/heartbeat/ack/nack over real HTTP API
event shapes on moto, and the Worker class driving it (SQS visibility follows the clock)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import boto3
import pytest

from sundial.client import ApiRequest, ApiResponse, SundialClient
from sundial.clock import ManualClock
from sundial.model.job import Priority, Status
from sundial.model.submission import SubmitJob
from sundial.runs.leases import Lease
from sundial.timing import CLOCK_SKEW_MS
from sundial.transport.envelope import Envelope
from sundial.transport.sender import Outgoing
from sundial.wiring import Dependencies
from sundial.worker import Worker
from tests.inprocess_api import InProcessApi
from tests.support import FakeLambdaContext, http_api_event, load_handler, receive_all

workers_lambda = load_handler("workers")


def _call(method: str, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
    route = "/queues/{queue}/lease" if path.startswith("/queues/") else None
    if route is None:
        route = "/jobs/{job_id}/" + path.rsplit("/", 1)[1]
    event = http_api_event(method, path, body=json.dumps(body), route=route)
    response = workers_lambda.handler(event, FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"])


def _lease(**body: Any) -> list[dict[str, Any]]:
    status, result = _call("POST", "/queues/email/lease", {"wait": 0, "max": 10} | body)
    assert status == 200, result
    jobs: list[dict[str, Any]] = result["jobs"]
    return jobs


def _submit(deps: Dependencies, payload: Any = None) -> str:
    return deps.jobs.submit(SubmitJob(queue="email", delay_seconds=0, payload=payload)).job.id


def test_lease_then_ack_succeeds_with_the_result(deps: Dependencies, clock: ManualClock) -> None:
    # Given a job that is due now
    job_id = _submit(deps, {"to": "a@b.c"})
    # When a worker leases it
    [leased] = _lease()
    # Then it gets the envelope and a lease, and the job is running its first attempt
    assert leased["job"]["id"] == job_id and leased["job"]["attempt"] == 1
    assert leased["job"]["payload"] == {"to": "a@b.c"}
    assert deps.jobs.get(job_id).status is Status.RUNNING
    # When it acks with a result
    status, job = _call("POST", f"/jobs/{job_id}/ack", {"lease": leased["lease"], "result": 7})
    # Then the job succeeded with it, and its message is gone for good
    assert status == 200 and job["status"] == "succeeded" and job["result"] == 7
    clock.advance(seconds=3600)
    assert _lease() == []


def test_nack_with_a_delay_retries_at_that_time(deps: Dependencies, clock: ManualClock) -> None:
    job_id = _submit(deps)
    [leased] = _lease()
    # When the worker nacks, asking to retry in 2 minutes
    status, job = _call(
        "POST",
        f"/jobs/{job_id}/nack",
        {"lease": leased["lease"], "error_type": "Throttled", "retry_after_seconds": 120},
    )
    # Then the attempt is recorded as failed, with the retry 2 minutes out
    assert status == 200 and job["status"] == "failed"
    assert job["last_error"]["error_type"] == "Throttled"
    assert job["next_attempt_at"] == "2026-11-21T12:02:00.000Z"
    # And the retry is not leasable before then, and is at that time, as attempt 2
    clock.advance(seconds=119)
    assert _lease() == []
    clock.advance(seconds=1)
    [retry] = _lease()
    assert retry["job"]["attempt"] == 2


def test_a_non_retryable_nack_makes_the_job_dead(deps: Dependencies) -> None:
    job_id = _submit(deps)
    [leased] = _lease()
    status, job = _call(
        "POST", f"/jobs/{job_id}/nack", {"lease": leased["lease"], "retryable": False}
    )
    assert status == 200 and job["status"] == "dead"
    dead = receive_all(boto3.client("sqs"), deps.settings.dead_letter_urls["email"])
    assert [d["id"] for d in dead] == [job_id]


def test_heartbeats_keep_the_lease_and_silence_loses_it(
    deps: Dependencies, clock: ManualClock
) -> None:
    job_id = _submit(deps)
    [leased] = _lease(lease_seconds=30)
    # While the worker heartbeats, no one else can lease the job
    for _ in range(3):
        clock.advance(seconds=20)
        status, job = _call(
            "POST", f"/jobs/{job_id}/heartbeat", {"lease": leased["lease"], "lease_seconds": 30}
        )
        assert status == 200 and job["status"] == "running"
        assert _lease() == []
    # When it goes silent past its lease (and the clocks' skew bound), another worker gets the
    # job and takes the attempt over
    clock.advance(seconds=31)
    assert _lease() == []  # its lease is not provably over yet: the attempt is still held
    clock.advance(ms=CLOCK_SKEW_MS + 1000)
    [taken] = _lease()
    assert taken["job"]["attempt"] == 1
    assert _call("POST", f"/jobs/{job_id}/ack", {"lease": taken["lease"]})[1]["status"] == (
        "succeeded"
    )
    # And the silent worker's late ack is refused
    status, error = _call("POST", f"/jobs/{job_id}/ack", {"lease": leased["lease"]})
    assert status == 409, error


def test_a_worker_whose_lease_ran_out_cannot_end_the_attempt_another_took_over(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given worker A's lease lapsed (a late heartbeat) and worker B took the attempt over
    job_id = _submit(deps)
    [a] = _lease(lease_seconds=30)
    clock.advance(seconds=30 + CLOCK_SKEW_MS // 1000 + 1)
    [b] = _lease(lease_seconds=300)
    # When A nacks as non-retryable, and heartbeats (found by a review: the job went dead and
    # B's success was refused)
    status, error = _call("POST", f"/jobs/{job_id}/nack", {"lease": a["lease"], "retryable": False})
    beat, _ = _call("POST", f"/jobs/{job_id}/heartbeat", {"lease": a["lease"]})
    # Then both are refused: the attempt is B's, still running
    assert (status, beat) == (409, 409), error
    assert deps.jobs.get(job_id).status is Status.RUNNING
    # And B's ack ends it
    status, job = _call("POST", f"/jobs/{job_id}/ack", {"lease": b["lease"], "result": "b"})
    assert (status, job["status"], job["result"]) == (200, "succeeded", "b")


def test_a_second_message_of_a_held_attempt_never_takes_it_from_a_live_worker(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a job whose attempt a worker holds for 10 minutes, heartbeating
    job_id = _submit(deps)
    [held] = _lease(lease_seconds=600)
    # And a second message of the same attempt (a schedule resumed after an early send, an
    # operator's retry over a scheduled one: no fault is needed to make one)
    job = deps.jobs.get(job_id)
    deps.sender.send([Outgoing(job, attempt=1)], now_ms=clock.now_ms())
    # When other workers lease it again and again (its receive count passes 1: it was turned
    # away as busy; found by a review: a count above 1 took the attempt over)
    for _ in range(3):
        assert _lease(lease_seconds=60) == []
        clock.advance(seconds=120)
        beat, _ = _call(
            "POST", f"/jobs/{job_id}/heartbeat", {"lease": held["lease"], "lease_seconds": 600}
        )
        assert beat == 200
    # Then the attempt is still the first worker's, whose ack ends it; the second message is
    # then dropped as finished
    status, done = _call("POST", f"/jobs/{job_id}/ack", {"lease": held["lease"]})
    assert (status, done["status"]) == (200, "succeeded")
    clock.advance(seconds=600)
    assert _lease() == []


def test_a_made_up_lease_token_ends_nothing(deps: Dependencies) -> None:
    # Given a job queued on email, and one running under a real lease
    queued_id = _submit(deps, "queued")
    [running] = [j for j in _lease(max=1)]
    running_id = running["job"]["id"]
    other = queued_id if running_id != queued_id else _submit(deps)
    # When a worker forges tokens: for a job it never leased, and for the running attempt
    # with a guessed holder (found by a review: tokens were unsigned JSON, and such an ack
    # made the job succeeded without running)
    for job_id in (other, running_id):
        forged = Lease(job_id, "email", 1, "receipt", "a-guess").token()
        ack, _ = _call("POST", f"/jobs/{job_id}/ack", {"lease": forged})
        nack, _ = _call("POST", f"/jobs/{job_id}/nack", {"lease": forged, "retryable": False})
        assert (ack, nack) == (409, 409)
    # Then nothing changed
    assert deps.jobs.get(running_id).status is Status.RUNNING
    assert deps.jobs.get(other).status is Status.QUEUED


def test_a_lease_token_must_name_its_jobs_queue(deps: Dependencies) -> None:
    # Given a running email job's real lease, rewritten to name the default queue
    job_id = _submit(deps)
    [leased] = _lease()
    real = Lease.parse(leased["lease"], job_id)
    moved = Lease(job_id, "default", real.attempt, real.receipt_handle, real.runner).token()
    # When it is used, it is refused naming the field, and nothing changed
    status, error = _call("POST", f"/jobs/{job_id}/ack", {"lease": moved})
    assert status == 400 and "another queue" in json.dumps(error)
    assert deps.jobs.get(job_id).status is Status.RUNNING


def test_a_retry_timer_written_late_is_sent_all_the_same(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a leased job whose worker nacks it with a retry in 1000 s (beyond SQS's 15-minute
    # delay: a timer item), and a timer write that takes over three minutes to land (botocore
    # retrying under throttling): the sweeps' lookahead may have passed its time by then
    job_id = _submit(deps)
    [leased] = _lease()

    def slow(params: dict[str, Any], **_: Any) -> None:
        if "retry_of" in params["Item"]:
            clock.advance(seconds=200)

    deps.store._db.meta.events.register("provide-client-params.dynamodb.PutItem", slow)
    status, job = _call(
        "POST", f"/jobs/{job_id}/nack", {"lease": leased["lease"], "retry_after_seconds": 1000}
    )
    deps.store._db.meta.events.unregister("provide-client-params.dynamodb.PutItem", slow)
    assert status == 200 and job["status"] == "failed"
    # Then the retry was also sent at once, for its time (found by a review: the timer landed
    # below a sweep's cursor and the retry never ran; placement was checked against the job's
    # first submit), and it runs once, as attempt 2, not before its time
    clock.advance(seconds=1000 - 200 - 1)
    assert _lease() == []
    clock.advance(seconds=1)
    [retry] = _lease()
    assert retry["job"]["attempt"] == 2
    _call("POST", f"/jobs/{job_id}/ack", {"lease": retry["lease"]})
    deps.sweeper.sweep(list(range(deps.settings.shard_count)))  # the timer's own message
    clock.advance(seconds=60)
    assert _lease() == [] and deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_a_cancelled_job_is_never_leased(deps: Dependencies, clock: ManualClock) -> None:
    job_id = _submit(deps)
    deps.jobs.cancel(job_id)
    assert _lease() == []
    # And its message was removed, not left to come back
    clock.advance(seconds=3600)
    assert _lease() == []


def test_lease_returns_at_most_max(deps: Dependencies) -> None:
    for _ in range(5):
        _submit(deps)
    assert len(_lease(max=3)) == 3
    assert len(_lease(max=10)) == 2


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/queues/email/lease", {"wait": 21}, 400, "wait"),
        ("/queues/email/lease", {"max": 0}, 400, "max"),
        ("/queues/email/lease", {"max": 11}, 400, "max"),
        ("/queues/email/lease", {"lease_seconds": 0}, 400, "lease_seconds"),
        ("/queues/email/lease", {"wait": "5"}, 400, "wait"),
        ("/queues/nope/lease", {}, 404, None),
        ("/jobs/not-a-job-id/ack", {"lease": "x"}, 400, None),
        ("/jobs/{job}/ack", {"lease": "garbage"}, 400, "lease"),
        ("/jobs/{job}/ack", {}, 400, "lease"),
        ("/jobs/{job}/nack", {"lease": "x", "retry_after_seconds": -1}, 400, None),
        ("/jobs/{job}/heartbeat", {"lease": "x", "lease_seconds": 50_000}, 400, None),
    ],
)
def test_bad_requests_are_4xx_naming_the_field(
    deps: Dependencies, path: str, body: dict[str, Any], status: int, field: str | None
) -> None:
    job_id = _submit(deps)
    got, error = _call("POST", path.replace("{job}", job_id), body)
    assert got == status, error
    if field is not None:
        assert field in {e["field"] for e in error["errors"]}, error
    # And nothing changed
    assert deps.jobs.get(job_id).status is Status.QUEUED


def test_a_lease_for_another_job_is_refused(deps: Dependencies) -> None:
    first, second = _submit(deps), _submit(deps)
    leases = {job["job"]["id"]: job["lease"] for job in _lease()}
    status, error = _call("POST", f"/jobs/{second}/ack", {"lease": leases[first]})
    assert status == 400 and error["errors"][0]["field"] == "lease"


# -- the Worker class ------------------------------------------------------------------------


def _in_process() -> SundialClient:
    """The Worker's client, whose requests reach the workers Lambda in-process instead of over
    HTTP."""
    return SundialClient(transport=InProcessApi())


def double(job: Envelope) -> int:
    if job.payload == "fail":
        raise ValueError("asked to fail")
    assert isinstance(job.payload, int)
    return job.payload * 2


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_burst_worker_runs_every_job_and_acks_or_nacks_it(
    deps: Dependencies, clock: ManualClock, pool: Any
) -> None:
    # Given five jobs, one of which fails
    ids = {n: _submit(deps, n) for n in range(4)}
    failing = _submit(deps, "fail")
    # When a burst worker with two slots runs until the queue is empty
    worker = Worker(
        double, queue="email", client=_in_process(), concurrency=2, pool=pool,
        wait_seconds=0, burst=True, clock=clock,
    )  # fmt: skip
    worker.run()
    # Then every job ran once: the good ones succeeded with their results
    assert worker.completed == 5
    for n, job_id in ids.items():
        job = deps.jobs.get(job_id)
        assert job.status is Status.SUCCEEDED and job.result_json == str(n * 2)
    # And the failing one failed with its error, its retry scheduled
    job = deps.jobs.get(failing)
    assert job.status is Status.FAILED
    assert job.last_error is not None and job.last_error.error_type == "ValueError"


def test_an_ack_answered_503_is_sent_again_and_the_job_runs_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a job, and an API whose first ack answers 503 (found by a review: the worker logged
    # the failure and left the attempt running, so its lease ran out, the job was delivered
    # again and ran a second time)
    job_id = _submit(deps, 3)
    api = InProcessApi()
    refused: list[str] = []

    def first_ack_fails(request: ApiRequest) -> ApiResponse:
        if request.path.endswith("/ack") and not refused:
            refused.append("ack")
            return ApiResponse(503, {}, b'{"message": "Service Unavailable"}')
        return api(request)

    client = SundialClient(transport=first_ack_fails, sleep=lambda _: None)
    ran: list[str] = []

    def run(job: Envelope) -> None:
        ran.append(job.id)

    # When a burst worker runs it
    Worker(run, queue="email", client=client, burst=True, wait_seconds=0, clock=clock).run()
    # Then the ack was sent again (safe: a conditional write on the attempt's holder), and the
    # job succeeded
    assert refused == ["ack"]
    assert [route for _, route in api.requests].count("/jobs/{job_id}/ack") == 1
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED
    # And once its lease is long over, nothing is delivered again: it ran once
    clock.advance(seconds=3600)
    Worker(run, queue="email", client=client, burst=True, wait_seconds=0, clock=clock).run()
    assert ran == [job_id]


def test_stop_drains_the_held_jobs_and_leases_no_more(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a worker with two slots, running two jobs that wait for a signal, and a third job
    release = threading.Event()
    started = threading.Semaphore(0)

    def blocking(job: Envelope) -> str:
        started.release()
        release.wait(timeout=30)
        return "done"

    ids = [_submit(deps) for _ in range(3)]
    worker = Worker(
        blocking, queue="email", client=_in_process(), concurrency=2, wait_seconds=0, clock=clock
    )
    runner = threading.Thread(target=worker.run)
    runner.start()
    assert started.acquire(timeout=30) and started.acquire(timeout=30)
    # When it is told to stop while holding them
    worker.stop()
    release.set()
    runner.join(timeout=30)
    # Then it finished and acked both, and never leased the third
    assert not runner.is_alive()
    statuses = sorted(str(deps.jobs.get(job_id).status) for job_id in ids)
    assert statuses == ["queued", "succeeded", "succeeded"]


def test_a_worker_leases_critical_jobs_from_the_priority_queue_first(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a normal job and then a critical one on `email`, which has a priority queue
    normal = _submit(deps)
    critical = deps.jobs.submit(
        SubmitJob(queue="email", delay_seconds=0, priority=Priority.CRITICAL)
    ).job.id
    # When a worker leases one job at a time, the critical one comes first
    [first] = _lease(max=1)
    assert first["job"]["id"] == critical
    # And its lease works on the queue it came from: heartbeat, then ack
    status, _ = _call("POST", f"/jobs/{critical}/heartbeat", {"lease": first["lease"]})
    assert status == 200
    status, job = _call("POST", f"/jobs/{critical}/ack", {"lease": first["lease"]})
    assert (status, job["status"]) == (200, "succeeded")
    [second] = _lease(max=1)
    assert second["job"]["id"] == normal
    clock.advance(seconds=3600)
    assert [leased["job"]["id"] for leased in _lease()] == [normal]  # not acked: back again
