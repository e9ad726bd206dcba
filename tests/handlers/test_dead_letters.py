"""Dead letters end to end on moto: jobs die, the DLQ indexer Lambda drains the DLQ into the
table, and the jobs Lambda browses, replays and purges them over real HTTP API event shapes."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock, to_rfc3339
from sundial.consumer import NonRetryableError
from sundial.model.job import Status
from sundial.model.submission import ChangeJob, SubmitJob
from sundial.timing import SUBMIT_IN_FLIGHT_MS
from sundial.transport.envelope import Envelope, envelope_body
from sundial.wiring import Dependencies, configure
from tests.harness import Harness, delayed_job
from tests.support import FakeLambdaContext, http_api_event, load_handler, sqs_event

jobs_lambda = load_handler("jobs")
indexer_lambda = load_handler("dead_letters")


class BadAddressError(NonRetryableError):
    pass


class FlakyError(Exception):
    pass


def _fails_by_payload(job: Envelope) -> None:
    """Fails each job with the error its payload names."""
    assert isinstance(job.payload, dict)
    raise {"bad": BadAddressError, "flaky": FlakyError}[str(job.payload["error"])]("boom")


def _call(
    method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None
) -> tuple[int, Any]:
    route = "/queues/{queue}/dead" + ("/replay" if path.endswith("/replay") else "")
    event = http_api_event(
        method, path, body=json.dumps(body) if body is not None else None, route=route, query=query
    )
    response = jobs_lambda.handler(event, FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"])


def _drain_dead_letter_queue(deps: Dependencies, queue: str = "default") -> int:
    """Play the DLQ's event source mapping into the indexer Lambda. Returns letters indexed."""
    sqs = boto3.client("sqs")
    url = deps.settings.dead_letter_urls[queue]
    indexed = 0
    while True:
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            return indexed
        event = sqs_event(messages, f"arn:aws:sqs:us-east-1:123456789012:{queue}-dlq")
        result = indexer_lambda.handler(event, FakeLambdaContext())
        assert result["batchItemFailures"] == []
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        indexed += len(messages)


def _kill_jobs(
    deps: Dependencies, clock: ManualClock, harness: Harness, errors: list[str]
) -> list[str]:
    """One delayed job per entry, each dying of that error (bad: at once; flaky: 3 attempts)."""
    ids = []
    for error in errors:
        ids.append(delayed_job(deps, clock, harness, payload={"error": error}, max_attempts=1))
        harness.poll()
        clock.advance(seconds=60)
    _drain_dead_letter_queue(deps)
    return ids


@pytest.fixture
def harness(deps: Dependencies, clock: ManualClock) -> Harness:
    return Harness(deps, clock, _fails_by_payload)


def test_a_dead_job_is_browsable_with_its_error(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a job that died of a non-retryable error, and the DLQ drained by the indexer
    [job_id] = _kill_jobs(deps, clock, harness, ["bad"])
    # When an operator browses the queue's dead letters
    status, page = _call("GET", "/queues/default/dead")
    # Then it is there, with its error and envelope, and no next page
    assert status == 200
    [letter] = page["items"]
    assert letter["job_id"] == job_id
    assert letter["error_type"] == "BadAddressError" and letter["message"] == "boom"
    assert letter["attempt"] == 1
    assert letter["envelope"]["id"] == job_id and letter["envelope"]["payload"] == {"error": "bad"}
    finished_at = deps.jobs.get(job_id).finished_at_ms
    assert finished_at is not None and letter["dead_at"] == to_rfc3339(finished_at)
    assert page["next_cursor"] is None


def test_browsing_pages_through_every_letter_oldest_first(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given seven dead jobs
    ids = _kill_jobs(deps, clock, harness, ["bad"] * 7)
    # When browsing three at a time
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": "3"} | ({"cursor": cursor} if cursor else {})
        status, page = _call("GET", "/queues/default/dead", query=query)
        assert status == 200
        seen += [item["job_id"] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # Then every letter shows up once, in the order the jobs died
    assert seen == ids
    assert pages == 3


def test_indexing_the_same_dlq_message_twice_keeps_one_letter(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a dead job whose DLQ message the indexer sees twice (at-least-once delivery)
    job_id = delayed_job(deps, clock, harness, payload={"error": "bad"})
    harness.poll()
    sqs = boto3.client("sqs")
    url = deps.settings.dead_letter_urls["default"]
    [message] = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    event = sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:default-dlq")
    indexer_lambda.handler(event, FakeLambdaContext())
    indexer_lambda.handler(event, FakeLambdaContext())
    # Then there is one letter
    assert [i["job_id"] for i in _call("GET", "/queues/default/dead")[1]["items"]] == [job_id]


def test_replay_requeues_each_dead_job_once_even_when_repeated(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given three dead jobs
    ids = _kill_jobs(deps, clock, harness, ["bad", "bad", "bad"])
    # When an operator replays the queue's dead letters, twice
    status, first = _call("POST", "/queues/default/dead/replay", {})
    status_again, second = _call("POST", "/queues/default/dead/replay", {})
    # Then the first replay re-queued all three and the second found nothing to do
    assert status == status_again == 200
    assert sorted(first["replayed"]) == sorted(ids)
    assert first["more"] is False
    assert second == {
        "replayed": [],
        "skipped": 0,
        "unreplayable": 0,
        "more": False,
        "in_flight": 0,
    }
    assert all(deps.jobs.get(job_id).status is Status.QUEUED for job_id in ids)
    assert _call("GET", "/queues/default/dead")[1]["items"] == []
    # And each job is delivered exactly once more
    harness.calls.clear()
    harness.poll()
    assert sorted(call.id for call in harness.calls) == sorted(ids)


def test_a_replay_interrupted_before_removing_its_letter_does_not_run_the_job_twice(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a dead job that was retried by hand after it was indexed (its letter remains)
    [job_id] = _kill_jobs(deps, clock, harness, ["bad"])
    deps.jobs.retry(job_id)
    # When the dead letters are replayed
    status, result = _call("POST", "/queues/default/dead/replay", {})
    # Then the job is not re-queued again: skipped, and its letter removed
    assert status == 200
    assert result["replayed"] == [] and result["skipped"] == 1
    assert _call("GET", "/queues/default/dead")[1]["items"] == []


def test_a_replay_that_died_before_its_send_is_finished_by_a_later_replay(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a dead job whose replay died between its requeue and its send (the requeue is
    # the replay's own first write, made here as that replay made it): pending, direct, unsent
    [job_id] = _kill_jobs(deps, clock, harness, ["bad"])
    job = deps.jobs.get(job_id)
    requeued, _ = deps.attempt_store.requeue(
        job.key,
        extra_attempts=1,
        now_ms=clock.now_ms(),
        stale_before_ms=clock.now_ms() - SUBMIT_IN_FLIGHT_MS,
        only_dead=True,
    )
    assert requeued
    # When the operator's client repeats the replay at once (found by the simulation: it
    # deleted the letter, and the job was stranded)
    status, result = _call("POST", "/queues/default/dead/replay", {})
    # Then the letter is kept, reported in flight, and nothing is sent
    assert status == 200 and result["in_flight"] == 1 and result["replayed"] == []
    assert [i["job_id"] for i in _call("GET", "/queues/default/dead")[1]["items"]] == [job_id]
    harness.calls.clear()
    harness.poll()
    assert harness.calls == []
    # And a replay after the in-flight window takes the job over: it runs once
    clock.advance(ms=SUBMIT_IN_FLIGHT_MS + 1000)
    _, result = _call("POST", "/queues/default/dead/replay", {})
    assert result["replayed"] == [job_id] and result["in_flight"] == 0
    harness.poll()
    assert [call.id for call in harness.calls] == [job_id]


def test_letters_kept_do_not_count_toward_a_replays_limit(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given two letters that are not envelopes (kept by every replay), then a dead job
    sqs = boto3.client("sqs")
    for _ in range(2):
        sqs.send_message(QueueUrl=deps.settings.dead_letter_urls["default"], MessageBody="junk")
    _drain_dead_letter_queue(deps)
    clock.advance(seconds=5)
    [job_id] = _kill_jobs(deps, clock, harness, ["bad"])
    # When a replay of one letter per request is repeated while it says there is more
    results: list[dict[str, Any]] = []
    while not results or results[-1]["more"]:
        results.append(_call("POST", "/queues/default/dead/replay", {"limit": 1})[1])
        assert len(results) < 5, results
    # Then the job was replayed (the kept letters did not use the limit up, request after
    # request), and the last request counts the kept letters
    assert [r["replayed"] for r in results if r["replayed"]] == [[job_id]]
    assert results[-1]["unreplayable"] == 2


def test_replay_by_error_type_and_time_range(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given dead jobs of two error types, dying over time
    ids = _kill_jobs(deps, clock, harness, ["bad", "flaky", "bad", "flaky"])
    first_death = deps.jobs.get(ids[0]).finished_at_ms
    third_death = deps.jobs.get(ids[2]).finished_at_ms
    assert first_death is not None and third_death is not None
    # When only the flaky ones are replayed
    _, flaky = _call("POST", "/queues/default/dead/replay", {"error_type": "FlakyError"})
    # Then only they are re-queued
    assert sorted(flaky["replayed"]) == sorted([ids[1], ids[3]])
    # And a time range replays only the letters that died in it
    window = {"since": to_rfc3339(first_death), "until": to_rfc3339(third_death)}
    _, ranged = _call("POST", "/queues/default/dead/replay", window)
    assert ranged["replayed"] == [ids[0]]
    assert [i["job_id"] for i in _call("GET", "/queues/default/dead")[1]["items"]] == [ids[2]]


def test_replay_of_one_job_requeues_that_job_alone(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given three dead jobs
    ids = _kill_jobs(deps, clock, harness, ["bad"] * 3)
    # When the middle one's letter alone is replayed (with limit 1, which the others'
    # letters must not use up)
    _, one = _call("POST", "/queues/default/dead/replay", {"job_id": ids[1], "limit": 1})
    # Then only that job is re-queued and its letter leaves the list
    assert one == {
        "replayed": [ids[1]],
        "skipped": 0,
        "unreplayable": 0,
        "more": False,
        "in_flight": 0,
    }
    assert [deps.jobs.get(i).status for i in ids] == [Status.DEAD, Status.QUEUED, Status.DEAD]
    assert [i["job_id"] for i in _call("GET", "/queues/default/dead")[1]["items"]] == [
        ids[0],
        ids[2],
    ]
    # And a repeat finds nothing of it to do
    assert _call("POST", "/queues/default/dead/replay", {"job_id": ids[1]})[1]["replayed"] == []


def test_replay_stops_at_its_limit_and_says_there_is_more(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    ids = _kill_jobs(deps, clock, harness, ["bad"] * 3)
    _, first = _call("POST", "/queues/default/dead/replay", {"limit": 2})
    assert first["replayed"] == ids[:2] and first["more"] is True
    _, rest = _call("POST", "/queues/default/dead/replay", {"limit": 2})
    assert rest["replayed"] == ids[2:] and rest["more"] is False


def test_a_replay_goes_at_its_queues_submission_limit(
    deps: Dependencies, clock: ManualClock, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given five dead jobs on `default`, which admits 2 submissions a second
    ids = _kill_jobs(deps, clock, harness, ["bad"] * 5)
    monkeypatch.setenv("SUNDIAL_QUOTAS", json.dumps({"default": {"max_submissions_per_second": 2}}))
    configure(clock=clock, environ=dict(os.environ))
    # When the operator replays them: each re-queued job is one submission on the queue
    status, first = _call("POST", "/queues/default/dead/replay", {})
    # Then a request re-queues what the second admits and says there is more
    assert status == 200 and len(first["replayed"]) == 2 and first["more"] is True
    # And a request in the same second re-queues nothing: a 429 naming the queue and the
    # limit, with nothing written (no letter removed)
    letters = _call("GET", "/queues/default/dead")[1]["items"]
    status, refused = _call("POST", "/queues/default/dead/replay", {})
    assert status == 429 and "queue 'default' accepts at most 2" in refused["message"]
    assert _call("GET", "/queues/default/dead")[1]["items"] == letters
    # And a second later, and another, the rest are re-queued
    replayed = first["replayed"]
    for expected_more in (True, False):
        clock.advance(seconds=1)
        status, page = _call("POST", "/queues/default/dead/replay", {})
        assert status == 200 and page["more"] is expected_more, page
        replayed += page["replayed"]
    assert sorted(replayed) == sorted(ids)


def test_purge_removes_only_letters_older_than_the_cutoff(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given three dead jobs, a minute apart
    ids = _kill_jobs(deps, clock, harness, ["bad"] * 3)
    cutoff = deps.jobs.get(ids[2]).finished_at_ms
    assert cutoff is not None
    # When letters older than the third death are purged
    status, result = _call(
        "DELETE", "/queues/default/dead", query={"older_than": to_rfc3339(cutoff)}
    )
    # Then the first two are gone, the third stays, and the jobs themselves are untouched
    assert status == 200 and result == {"purged": 2, "more": False}
    assert [i["job_id"] for i in _call("GET", "/queues/default/dead")[1]["items"]] == [ids[2]]
    assert deps.jobs.get(ids[0]).status is Status.DEAD


def test_a_message_redriven_by_sqs_marks_its_job_dead_and_is_replayable(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a queued job whose consumer crashes on every delivery without ending the attempt
    job_id = delayed_job(deps, clock, harness, payload={"error": "bad"})
    sqs = boto3.client("sqs")
    url = deps.settings.queue_urls["default"]
    for _ in range(5):  # the queue's maxReceiveCount in tests/support.py
        assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=30).get("Messages")
        clock.advance(seconds=31)
    # When SQS redrives it to the DLQ and the indexer drains it
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    assert _drain_dead_letter_queue(deps) == 1
    # Then the job is dead, with why in its history
    job = deps.jobs.get(job_id)
    assert job.status is Status.DEAD
    assert job.last_error is not None and job.last_error.error_type == "DeliveryLimitExceeded"
    # And its letter can be browsed and replayed
    [letter] = _call("GET", "/queues/default/dead")[1]["items"]
    assert letter["error_type"] == "DeliveryLimitExceeded"
    assert _call("POST", "/queues/default/dead/replay", {})[1]["replayed"] == [job_id]


def test_a_letter_read_after_its_job_was_retried_leaves_the_retried_attempt_alone(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a job that died (its letter waiting in the DLQ, not yet indexed), then retried by
    # id before the indexer got to the letter: its second attempt is queued
    job_id = delayed_job(deps, clock, harness, payload={"error": "bad"})
    harness.poll()
    assert deps.jobs.get(job_id).status is Status.DEAD
    assert deps.jobs.retry(job_id).status is Status.QUEUED
    # When the indexer reads the first attempt's letter (found by the simulation's
    # dead-letter profile, seed 3: it marked the retried job dead as "redriven")
    assert _drain_dead_letter_queue(deps) == 1
    # Then the retried job is still queued, with no redrive in its history, and no letter is
    # listed for it (it is not dead)
    job = deps.jobs.get(job_id)
    assert job.status is Status.QUEUED
    assert [e.error_type for e in job.history] == ["BadAddressError"]
    assert _call("GET", "/queues/default/dead")[1]["items"] == []


def _crash_on_every_delivery_but_the_last(url: str, clock: ManualClock) -> None:
    """Receive the queue's only visible message as a consumer that keeps crashing would, one
    delivery short of the redrive (the queue's maxReceiveCount is 5, tests/support.py)."""
    sqs = boto3.client("sqs")
    for _ in range(4):
        assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]) == 1
        clock.advance(seconds=31)


def _redrive(url: str, clock: ManualClock) -> None:
    """The last crashed delivery, then the receive that makes SQS redrive the message."""
    sqs = boto3.client("sqs")
    assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]) == 1
    clock.advance(seconds=31)
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None


def test_a_stale_letter_of_a_moved_job_leaves_the_moved_job_alone(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a job sent directly (revision 0) whose consumer keeps crashing on its message
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0, payload={})).job.id
    url = deps.settings.queue_urls["default"]
    _crash_on_every_delivery_but_the_last(url, clock)
    # And the operator moves it 10 minutes out: revision 1, sent again, queued, attempts 0
    moved = deps.moves.move(job_id, ChangeJob(delay_seconds=600))
    assert (moved.revision, moved.status, moved.attempts) == (1, Status.QUEUED, 0)
    # When SQS redrives the revision-0 message and the indexer reads its letter
    _redrive(url, clock)
    assert _drain_dead_letter_queue(deps) == 1
    # Then the moved job is untouched (it was marked dead, and its new message fenced off)
    job = deps.jobs.get(job_id)
    assert (job.status, job.revision, job.history) == (Status.QUEUED, 1, [])
    assert _call("GET", "/queues/default/dead")[1]["items"] == []
    # And it runs once, at its new time, from its new message
    clock.advance(seconds=600)
    harness_ok = Harness(deps, clock, lambda envelope: {"ran": envelope.id})
    harness_ok.poll()
    assert [(c.id, c.revision) for c in harness_ok.calls] == [(job_id, 1)]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_a_stale_letter_of_a_cancelled_and_retried_job_leaves_the_retry_alone(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a job sent directly whose consumer keeps crashing, then cancelled and retried by
    # id while its old message is still on its way to the DLQ
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0, payload={})).job.id
    url = deps.settings.queue_urls["default"]
    _crash_on_every_delivery_but_the_last(url, clock)
    assert deps.jobs.cancel(job_id) is Status.CANCELLED
    retried = deps.jobs.retry(job_id)
    assert (retried.status, retried.attempts, retried.revision) == (Status.QUEUED, 0, 1)
    # When SQS redrives the old message (the retry's own message is received beside it and
    # kept invisible, as a consumer busy with it would) and the indexer reads the letter
    sqs = boto3.client("sqs")
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert len(received["Messages"]) == 2
    clock.advance(seconds=31)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert len(received["Messages"]) == 1  # the retry's; the old one went to the DLQ
    assert _drain_dead_letter_queue(deps) == 1
    # Then the retried job is still queued, and its own message runs it once
    assert deps.jobs.get(job_id).status is Status.QUEUED
    clock.advance(seconds=31)
    harness_ok = Harness(deps, clock, lambda envelope: {"ran": envelope.id})
    harness_ok.poll()
    assert [(c.id, c.revision) for c in harness_ok.calls] == [(job_id, 1)]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_a_redriven_second_message_leaves_an_attempt_a_live_runner_holds(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a job whose attempt a live runner holds for 15 minutes (as a Lambda with 15
    # minutes left does), and a second message of that attempt that consumers keep turning
    # away as busy until SQS redrives it
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=0, payload={})).job.id
    job = deps.jobs.get(job_id)
    held = harness.consumer.attempts.start(job, 1, lease_until_ms=clock.now_ms() + 900_000)
    assert held is not None
    url = deps.settings.queue_urls["default"]
    _crash_on_every_delivery_but_the_last(url, clock)
    _redrive(url, clock)
    # When the indexer reads its letter
    assert _drain_dead_letter_queue(deps) == 1
    # Then the running attempt is left to its runner, which ends it
    assert deps.jobs.get(job_id).status is Status.RUNNING
    assert harness.consumer.attempts.succeed(deps.jobs.get(job_id), held, result="ok")
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_an_envelope_on_one_queues_dlq_naming_another_queues_job_leaves_that_job_alone(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a job of queue `email`, queued, and team default's consumer able to write to its own
    # DLQ: it sends there an envelope naming the email job
    job_id = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=0, payload={})).job.id
    job = deps.jobs.get(job_id)
    forged = envelope_body(job, attempt=1)
    boto3.client("sqs").send_message(
        QueueUrl=deps.settings.dead_letter_urls["default"], MessageBody=forged
    )
    # When the indexer drains default's DLQ
    assert _drain_dead_letter_queue(deps) == 1
    # Then the email job is not marked dead, and default keeps the letter as foreign
    assert deps.jobs.get(job_id).status is Status.QUEUED
    [letter] = _call("GET", "/queues/default/dead")[1]["items"]
    assert letter["job_id"] is None and letter["error_type"] == "ForeignEnvelope"
    assert job_id in letter["message"]
    assert _call("POST", "/queues/default/dead/replay", {})[1]["replayed"] == []


def test_a_page_cursor_used_with_another_time_window_is_a_400(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given three dead letters, and a cursor from a page of the whole index
    ids = _kill_jobs(deps, clock, harness, ["bad", "bad", "bad"])
    status, page = _call("GET", "/queues/default/dead", query={"limit": "1"})
    assert status == 200 and page["next_cursor"]
    # When that cursor is used with a window the cursor's position is outside of
    third_death = deps.jobs.get(ids[2]).finished_at_ms
    assert third_death is not None
    status, body = _call(
        "GET",
        "/queues/default/dead",
        query={"cursor": page["next_cursor"], "since": to_rfc3339(third_death)},
    )
    # Then it is refused as not this listing's cursor (real DynamoDB refuses a start key
    # outside the query's range: it was a 500 there; moto accepted it)
    assert status == 400
    assert "cursor" in json.dumps(body)


def test_a_body_that_is_not_an_envelope_is_kept_but_not_replayed(deps: Dependencies) -> None:
    # Given a poison message in the DLQ (someone sent junk to the job queue)
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=deps.settings.dead_letter_urls["default"], MessageBody="not json")
    _drain_dead_letter_queue(deps)
    # Then it is listed as InvalidEnvelope with its raw body
    [letter] = _call("GET", "/queues/default/dead")[1]["items"]
    assert letter["job_id"] is None and letter["error_type"] == "InvalidEnvelope"
    assert letter["envelope"] == "not json"
    # And a replay leaves it in place
    _, result = _call("POST", "/queues/default/dead/replay", {})
    assert result == {
        "replayed": [],
        "skipped": 0,
        "unreplayable": 1,
        "more": False,
        "in_flight": 0,
    }
    assert len(_call("GET", "/queues/default/dead")[1]["items"]) == 1


@pytest.mark.parametrize(
    ("method", "path", "body", "query", "status", "field"),
    [
        ("GET", "/queues/nope/dead", None, None, 404, None),
        ("POST", "/queues/nope/dead/replay", {}, None, 404, None),
        ("GET", "/queues/default/dead", None, {"cursor": "garbage"}, 400, "cursor"),
        ("GET", "/queues/default/dead", None, {"limit": "0"}, 400, "limit"),
        ("GET", "/queues/default/dead", None, {"since": "yesterday"}, 400, "since"),
        ("POST", "/queues/default/dead/replay", {"until": "soon"}, None, 400, "until"),
        ("POST", "/queues/default/dead/replay", {"limit": 10_000}, None, 400, "limit"),
        ("POST", "/queues/default/dead/replay", {"extra": 1}, None, 400, "extra"),
        ("DELETE", "/queues/default/dead", None, None, 400, "older_than"),
        ("DELETE", "/queues/default/dead", None, {"older_than": "x"}, 400, "older_than"),
    ],
)
def test_bad_requests_are_4xx_naming_the_field(  # noqa: PLR0917
    deps: Dependencies,
    method: str,
    path: str,
    body: Any,
    query: dict[str, str] | None,
    status: int,
    field: str | None,
) -> None:
    got, error = _call(method, path, body, query=query)
    assert got == status, error
    if field is not None:
        # Query parameters are named query.<name> by validation, <name> by the domain.
        named = {e["field"].removeprefix("query.") for e in error["errors"]}
        assert field in named, error


def test_each_dead_letter_is_counted_under_its_queue(
    deps: Dependencies, clock: ManualClock, harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two jobs of `default` that died
    _kill_jobs(deps, clock, harness, ["bad", "bad"])
    # Then the indexer wrote one DeadLetters metric per letter with the queue as a dimension,
    # which is what each queue's dead-letter alarm counts (stacks/monitoring.py)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    counted = [line for line in lines if "DeadLetters" in line]
    assert len(counted) == 2
    for line in counted:
        [definition] = line["_aws"]["CloudWatchMetrics"]
        assert definition["Dimensions"] == [["queue", "service"]]
        assert (line["queue"], line["service"], line["DeadLetters"]) == (
            "default",
            "sundial",
            [1.0],
        )
