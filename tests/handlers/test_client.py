"""sundial.client against the real API: every call goes through the in-process transport
(tests/inprocess_api.py) into the Lambda handlers under moto, as API Gateway would send it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest

from sundial.client import (
    ApiRequest,
    ApiResponse,
    Backoff,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    RateLimited,
    ReplayProgress,
    ServerError,
    SundialClient,
)
from sundial.client.transport import TransportFailure
from sundial.clock import ManualClock, to_rfc3339
from sundial.ids import JobKey
from sundial.wiring import Dependencies, configure
from tests.inprocess_api import OPENAPI, ROUTES, FailingFirst, InProcessApi, kill_through_a_worker
from tests.support import DAILY_REPORT

UNKNOWN_JOB = JobKey(shard=2, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id


class Sleeps:
    """Records the client's backoff waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def client_of(
    transport: Callable[[ApiRequest], ApiResponse], sleeps: Sleeps | None = None
) -> SundialClient:
    return SundialClient(transport=transport, sleep=sleeps or Sleeps())


@pytest.fixture
def api(deps: Dependencies) -> InProcessApi:
    return InProcessApi()


@pytest.fixture
def sundial(api: InProcessApi) -> SundialClient:
    return client_of(api)


def test_routes_cover_every_operation_of_the_openapi_document() -> None:
    document = json.loads(OPENAPI.read_text())
    operations = {(m.upper(), path) for path, ops in document["paths"].items() for m in ops}
    assert operations == set(ROUTES)


def test_submit_get_cancel_round_trip(sundial: SundialClient) -> None:
    # Given a job submitted to run in an hour
    job = sundial.submit("email", {"to": "ada@example.com"}, delay_seconds=3600, priority="high")
    assert (job.queue, job.status, job.priority) == ("email", "pending", "high")
    # When it is read and cancelled
    detail = sundial.get_job(job.id)
    cancelled = sundial.cancel_job(job.id)
    # Then the detail is typed and the cancel sticks, and repeats harmlessly
    assert detail.payload == {"to": "ada@example.com"}
    assert detail.idempotency_key is not None  # the client generated one
    assert (detail.run_at - detail.created_at).total_seconds() == 3600
    assert cancelled.status == "cancelled"
    assert sundial.cancel_job(job.id).status == "cancelled"
    assert sundial.get_job(job.id).status == "cancelled"


def test_a_repeated_idempotency_key_returns_the_first_job(sundial: SundialClient) -> None:
    first = sundial.submit("default", {"order": 17}, delay_seconds=60, idempotency_key="o-17")
    again = sundial.submit("default", {"order": 17}, delay_seconds=60, idempotency_key="o-17")
    assert again.id == first.id
    # The same key for a different request is refused, not retried
    with pytest.raises(Conflict, match="different request"):
        sundial.submit("default", {"order": 18}, delay_seconds=60, idempotency_key="o-17")


def test_a_batch_gets_a_result_per_job_and_a_key_for_each(sundial: SundialClient) -> None:
    result = sundial.submit_batch(
        [{"queue": "default", "delay_seconds": 60}, {"queue": "email", "payload": [1, 2]}]
    )
    assert [r.status_code for r in result.results] == [201, 201]
    jobs = [r.job for r in result.results]
    assert all(job is not None for job in jobs)
    ids = [job.id for job in jobs if job is not None]
    assert all(sundial.get_job(i).idempotency_key for i in ids)


def test_pause_resume_and_retry_a_job(sundial: SundialClient) -> None:
    job = sundial.submit("default", delay_seconds=3600)
    assert sundial.pause_job(job.id).status == "paused"
    assert sundial.resume_job(job.id).status == "pending"
    sundial.cancel_job(job.id)
    assert sundial.retry_job(job.id).status == "queued"


def test_change_a_waiting_job_and_run_it_now(sundial: SundialClient) -> None:
    job = sundial.submit("default", {"v": 1}, delay_seconds=3600)
    changed = sundial.change_job(job.id, delay_seconds=7200, payload=None, priority="low")
    assert (changed.id, changed.payload, changed.priority, changed.revision) == (
        job.id,
        None,
        "low",
        1,
    )
    assert [m.changed for m in changed.moves] == [["run_at", "priority", "payload"]]
    kept = sundial.change_job(job.id, max_attempts=5)  # the payload is kept unless given
    assert (kept.payload, kept.max_attempts, kept.run_at) == (None, 5, changed.run_at)
    assert sundial.run_job_now(job.id).status == "queued"
    sundial.cancel_job(job.id)
    with pytest.raises(Conflict, match="cancelled"):
        sundial.change_job(job.id, delay_seconds=60)


def test_a_bad_request_raises_invalid_request_with_the_field_errors(
    sundial: SundialClient,
) -> None:
    with pytest.raises(InvalidRequest) as raised:
        sundial.submit("default", run_at="tomorrow morning")
    assert raised.value.status == 400
    assert [e.field for e in raised.value.errors] == ["run_at"]
    assert "RFC 3339" in raised.value.errors[0].reason
    with pytest.raises(InvalidRequest):
        sundial.get_job("not-an-id")


def test_unknown_items_raise_not_found(sundial: SundialClient) -> None:
    with pytest.raises(NotFound) as raised:
        sundial.get_job(UNKNOWN_JOB)
    assert raised.value.status == 404 and raised.value.message
    with pytest.raises(NotFound):
        sundial.get_queue("no-such-queue")


def test_a_state_conflict_raises_conflict_without_retrying(
    api: InProcessApi, sundial: SundialClient
) -> None:
    job = sundial.submit("default", delay_seconds=3600)
    sundial.cancel_job(job.id)
    before = len(api.requests)
    with pytest.raises(Conflict) as raised:
        sundial.pause_job(job.id)
    assert raised.value.status == 409
    assert len(api.requests) == before + 1  # a real conflict is not "retry shortly"


def test_a_caller_without_access_gets_forbidden(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given `email` open to its own team's role only
    team = "arn:aws:iam::123456789012:role/email-team"
    monkeypatch.setenv("SUNDIAL_ACCESS", json.dumps({"email": {"admin": [team]}}))
    configure(clock=clock, environ=dict(os.environ))
    outsider = client_of(InProcessApi(caller="arn:aws:iam::210987654321:role/other"))
    # When someone else submits to it, Then a 403 names the queue and the permission
    with pytest.raises(Forbidden) as raised:
        outsider.submit("email", delay_seconds=60)
    assert raised.value.status == 403
    assert "'submit'" in raised.value.message and "'email'" in raised.value.message
    assert client_of(InProcessApi(caller=team)).submit("email", delay_seconds=60).id


def _unavailable() -> ApiResponse:
    return ApiResponse(503, {}, b'{"message": "AWS was unavailable; retry"}')


def _throttled() -> ApiResponse:
    return ApiResponse(429, {"Retry-After": "7"}, b'{"message": "Too Many Requests"}')


def test_a_503_then_success_is_retried_with_backoff(api: InProcessApi) -> None:
    sleeps = Sleeps()
    flaky = FailingFirst(api, _unavailable, 2)
    job = client_of(flaky, sleeps).submit("default", delay_seconds=60)
    assert job.status == "queued"  # due within 15 minutes: sent by the submit itself
    assert flaky.calls == 3 and len(sleeps.waits) == 2


def test_a_429_waits_what_retry_after_asks(api: InProcessApi) -> None:
    sleeps = Sleeps()
    queue = client_of(FailingFirst(api, _throttled, 1), sleeps).get_queue("default")
    assert queue.queue == "default"
    assert sleeps.waits == [7.0]


def test_attempts_are_bounded_and_the_last_error_is_raised(api: InProcessApi) -> None:
    flaky = FailingFirst(api, _throttled, 100)
    sundial = SundialClient(transport=flaky, sleep=Sleeps(), backoff=Backoff(max_attempts=3))
    with pytest.raises(RateLimited) as raised:
        sundial.get_queue("default")
    assert raised.value.retry_after == 7.0 and flaky.calls == 3


def test_a_submit_whose_answer_was_lost_is_retried_without_a_second_job(
    api: InProcessApi,
) -> None:
    # Given a transport that delivers the first submit but loses its answer
    answers: list[ApiResponse] = []

    def losing_first_answer(request: ApiRequest) -> ApiResponse:
        answers.append(api(request))
        if len(answers) == 1:
            raise TransportFailure("read timed out", sent=True)
        return answers[-1]

    # When the client submits, Then its retry returns the job the first request made
    job = client_of(losing_first_answer).submit("default", delay_seconds=60)
    first = json.loads(answers[0].body)
    assert answers[0].status == 201 and answers[1].status == 200
    assert job.id == first["id"]


def test_a_dag_submit_is_not_repeated_after_a_5xx_or_a_lost_answer(api: InProcessApi) -> None:
    flaky = FailingFirst(api, _unavailable, 1)
    with pytest.raises(ServerError):
        client_of(flaky).submit_dag("daily_report", DAILY_REPORT["nodes"])
    assert flaky.calls == 1

    def never_connects(request: ApiRequest) -> ApiResponse:
        raise TransportFailure("connection refused", sent=False)

    # A connection never made is safe to retry even for a DAG
    refused = FailingFirst(api, lambda: never_connects(ApiRequest("POST", "/dags")), 1)
    dag = client_of(refused).submit_dag("daily_report", DAILY_REPORT["nodes"])
    assert refused.calls == 2 and dag.counts == {"queued": 1, "blocked": 4}


def test_schedules_dags_and_queues(sundial: SundialClient) -> None:
    schedule = sundial.create_schedule("default", rate="1 hour", name="hourly", payload={"r": 1})
    assert schedule.state == "active" and schedule.rate == "1 hour"
    assert sundial.get_schedule(schedule.id).name == "hourly"
    assert sundial.schedule_runs(schedule.id, limit=5).runs[0].outcome == "fired"
    updated = sundial.update_schedule(schedule.id, rate="2 hours", payload=None, max_attempts=4)
    assert (updated.rate, updated.payload, updated.max_attempts) == ("2 hours", None, 4)
    assert updated.revision == 1 and updated.replaced_job_id is not None
    assert updated.applies_from > schedule.created_at
    again = sundial.update_schedule(schedule.id, rate="2 hours", payload=None, max_attempts=4)
    assert again.replaced_job_id is None and again.revision == 1
    assert sundial.pause_schedule(schedule.id).state == "paused"
    assert sundial.resume_schedule(schedule.id).state == "active"
    assert sundial.delete_schedule(schedule.id).state == "deleted"

    dag = sundial.submit_dag("daily_report", DAILY_REPORT["nodes"])
    assert dag.nodes["extract"].status == "queued"
    assert sundial.pause_dag(dag.id).status == "paused"
    assert sundial.resume_dag(dag.id).status == "running"
    assert sundial.cancel_dag(dag.id).nodes["notify"].status == "cancelled"
    assert sundial.get_dag(dag.id).name == "daily_report"

    assert sundial.pause_queue("email").paused is True
    assert sundial.get_queue("email").paused is True
    listed = {queue.queue: queue for queue in sundial.list_queues()}
    assert sorted(listed) == ["default", "email"] and listed["email"].paused is True
    assert sundial.resume_queue("email").paused is False


def test_dead_letters_iterate_over_pages_replay_until_done_and_purge(
    api: InProcessApi, sundial: SundialClient, deps: Dependencies, clock: ManualClock
) -> None:
    # Given five jobs that died
    ids = kill_through_a_worker(sundial, deps, 5)
    # When the letters are browsed two at a time, Then every one comes, over three pages
    before = len(api.requests)
    letters = list(sundial.dead_letters("default", page_size=2))
    assert sorted(letter.job_id or "" for letter in letters) == sorted(ids)
    assert len(api.requests) - before == 3
    # When they are replayed two per request, Then progress is reported until none is left
    progress: list[ReplayProgress] = []
    total = sundial.replay_dead_letters("default", limit=2, on_progress=progress.append)
    assert total.replayed == 5 and not total.more
    assert [p.replayed for p in progress] == [2, 4, 5]
    assert all(sundial.get_job(i).status == "queued" for i in ids)
    assert list(sundial.dead_letters("default")) == []
    # And a purge of nothing is harmless
    clock.advance(seconds=60)
    assert sundial.purge_dead_letters("default", older_than=to_rfc3339(clock.now_ms())).purged == 0


def test_ack_ends_a_leased_attempt(sundial: SundialClient) -> None:
    job = sundial.submit("email", {"x": 1})
    [held] = sundial.lease("email", wait=0, max_jobs=1).jobs
    assert held.job.id == job.id and held.job.payload == {"x": 1}
    assert sundial.ack(job.id, held.lease, result={"ok": True}).result == {"ok": True}


def test_schedules_dags_and_jobs_by_status_iterate_over_pages(
    sundial: SundialClient, clock: ManualClock
) -> None:
    # Given three schedules, two DAGs and three pending jobs of `default` (one paused)
    schedules = []
    for _ in range(3):
        clock.advance(seconds=1)
        schedules.append(sundial.create_schedule("default", rate="1 hour").id)
    dags = []
    for _ in range(2):
        clock.advance(seconds=1)
        dags.append(sundial.submit_dag("one", {"a": {"queue": "default"}}, delay_seconds=3600).id)
    jobs = [sundial.submit("default", delay_seconds=600 * (i + 3)).id for i in range(3)]
    sundial.pause_job(jobs[1])
    # Then each listing, fetched two at a time, holds each in order
    assert [s.id for s in sundial.schedules("default", page_size=2)] == schedules
    assert [d.id for d in sundial.dags("default", page_size=1)] == dags
    assert [d.status for d in sundial.dags("default")] == ["running", "running"]
    # (the pending ones include the schedules' next occurrences and the DAGs' roots: jobs too)
    pending = list(sundial.queue_jobs("default", "pending", page_size=1))
    assert [j.id for j in pending if j.id in jobs] == [jobs[0], jobs[2]]
    assert len(pending) == 2 + 3 + 2
    due = [j.run_at for j in pending if j.run_at is not None]
    assert len(due) == len(pending) and due == sorted(due)
    assert [j.id for j in sundial.queue_jobs("default", "paused")] == [jobs[1]]
    until = to_rfc3339(clock.now_ms() + 2_400_000)
    page = sundial.queue_jobs_page("default", "pending", until=until)
    assert [j.id for j in page.items] == [jobs[0]] and page.next_cursor is None
