"""The consumer SDK against moto, with the injected clock driving SQS delays and retries."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import boto3
import pytest

from sundial.api.models import JobDetail
from sundial.clock import ManualClock
from sundial.consumer import NonRetryableError
from sundial.errors import Conflict
from sundial.model.job import Status, retry_timer
from sundial.model.submission import SubmitJob
from sundial.transport.envelope import Envelope, envelope_body
from sundial.wiring import Dependencies, configure
from tests.harness import ALL_SHARDS, Harness, delayed_job
from tests.support import FakeLambdaContext, sqs_event


def test_a_delayed_job_succeeds_with_its_result(deps: Dependencies, clock: ManualClock) -> None:
    harness = Harness(deps, clock, lambda job: {"sent_to": job.payload})
    # Given a delayed job
    job_id = deps.jobs.submit(
        SubmitJob(queue="default", delay_seconds=3600, payload="a@b.c")
    ).job.id
    clock.advance(seconds=3000)
    assert harness.sweeper.sweep(ALL_SHARDS).dispatched == 1
    clock.advance(seconds=601)
    # When the consumer runs it
    assert harness.poll() == []
    # Then it succeeded once, with its result and timestamps
    job = deps.jobs.get(job_id)
    assert [c.id for c in harness.calls] == [job_id]
    assert job.status is Status.SUCCEEDED and job.attempts == 1
    assert json.loads(job.result_json or "null") == {"sent_to": "a@b.c"}
    assert job.started_at_ms is not None and job.finished_at_ms is not None
    assert job.expires_at_s is not None


def test_write_units_per_path(deps: Dependencies, clock: ManualClock) -> None:
    """Write units per path. The BRIEF's target is 2; it is 3: the put, the consumer's take
    (-> running, before calling the function, so a cancel that answered 200 never runs: issue
    12) and the end. The sweep's per-job claim is gone: it sends under its shard's lease
    (issue 27; store.sweeps)."""
    outcomes = iter([RuntimeError("flaky"), None])

    def sometimes_fails(job: Envelope) -> None:
        error = next(outcomes)
        if error:
            raise error

    harness = Harness(deps, clock, sometimes_fails)
    deps = _with_session(deps, clock, harness.session)
    # Success first time: put + running + succeeded
    start = _job_writes(harness)
    ok = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job.id
    clock.advance(seconds=3000)
    harness.sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=601)
    harness.calls.clear()
    outcomes = iter([None])
    harness.poll()
    success_writes = _job_writes(harness) - start
    # One retry: put + (running + failed) + (running + succeeded); the retry travels
    # as an SQS message
    outcomes = iter([RuntimeError("flaky"), None])
    start = _job_writes(harness)
    retried = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job.id
    clock.advance(seconds=3000)
    harness.sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=601)
    harness.poll()
    clock.advance(seconds=60)  # the first retry waits at most 10 s
    harness.poll()
    retry_writes = _job_writes(harness) - start
    # Cancelled while pending: put + cancel
    start = _job_writes(harness)
    cancelled = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job.id
    deps.jobs.cancel(cancelled)
    cancel_writes = _job_writes(harness) - start
    print(
        f"\nwrite requests per job: success {success_writes}, one retry {retry_writes},"
        f" cancel {cancel_writes}"
    )
    assert deps.jobs.get(ok).status is Status.SUCCEEDED
    assert deps.jobs.get(retried).status is Status.SUCCEEDED
    assert (success_writes, retry_writes, cancel_writes) == (3, 5, 2)


def _job_writes(harness: Harness) -> int:
    return harness.meter.job_writes()


def _with_session(deps: Dependencies, clock: ManualClock, session: boto3.Session) -> Dependencies:
    return configure(clock=clock, environ=dict(os.environ), session=session)


def test_a_job_that_always_fails_retries_with_jittered_backoff_then_dies(
    deps: Dependencies, clock: ManualClock
) -> None:
    def broken(job: Envelope) -> None:
        raise ConnectionError("smtp down")

    harness = Harness(deps, clock, broken)
    job_id = delayed_job(deps, clock, harness, max_attempts=4)
    # When every attempt fails
    for attempt in range(1, 5):
        failed_at = clock.now_ms()
        assert harness.poll() == []
        job = deps.jobs.get(job_id)
        assert job.attempts == attempt
        if attempt < 4:
            # Then each retry waits a full-jitter delay: within [0, 10 s * 2^(attempt-1)]
            assert job.status is Status.FAILED
            assert job.next_attempt_at_ms is not None
            wait_ms = job.next_attempt_at_ms - failed_at
            assert 0 <= wait_ms <= 10_000 * 2 ** (attempt - 1)
            clock.advance(ms=wait_ms - 1)
            assert harness.poll() == [] and len(harness.calls) == attempt  # not yet
            clock.advance(ms=1001)
    # And after the last attempt it is dead, with its history, and in the DLQ
    job = deps.jobs.get(job_id)
    assert job.status is Status.DEAD
    assert [e.attempt for e in job.history] == [1, 2, 3, 4]
    assert {e.error_type for e in job.history} == {"ConnectionError"}
    assert "smtp down" in job.history[-1].message
    assert "ConnectionError" in job.history[-1].traceback_head
    [dead] = harness.dead_letters()
    assert dead["id"] == job_id and dead["attempt"] == 4
    assert len(harness.calls) == 4


def test_a_non_retryable_error_goes_straight_to_dead(
    deps: Dependencies, clock: ManualClock
) -> None:
    class BadAddress(Exception):
        pass

    def reject(job: Envelope) -> None:
        raise BadAddress("no such mailbox")

    harness = Harness(deps, clock, reject, non_retryable=(BadAddress,))
    job_id = delayed_job(deps, clock, harness)
    harness.poll()
    job = deps.jobs.get(job_id)
    assert (job.status, job.attempts) == (Status.DEAD, 1)
    assert [d["id"] for d in harness.dead_letters()] == [job_id]


def test_raising_non_retryable_error_is_the_same(deps: Dependencies, clock: ManualClock) -> None:
    def reject(job: Envelope) -> None:
        raise NonRetryableError("invalid payload")

    harness = Harness(deps, clock, reject)
    job_id = delayed_job(deps, clock, harness)
    harness.poll()
    assert deps.jobs.get(job_id).status is Status.DEAD


def test_a_duplicate_delivery_runs_the_function_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda job: "done")
    job_id = delayed_job(deps, clock, harness)
    url = deps.settings.queue_urls["default"]
    [message] = harness.sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    event = sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:default")
    # When SQS delivers the same message twice (at-least-once), the second after success
    harness.consumer.lambda_handler(event, FakeLambdaContext())
    harness.consumer.lambda_handler(event, FakeLambdaContext())
    # Then the function ran once
    assert [c.id for c in harness.calls] == [job_id]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_a_crash_before_the_ack_is_redelivered_and_succeeds(
    deps: Dependencies, clock: ManualClock
) -> None:
    crashes = [True]

    def dies_once(job: Envelope) -> str:
        if crashes.pop() if crashes else False:
            raise SystemExit("Lambda runtime killed mid-job")  # not an Exception: a crash
        return "ok"

    harness = Harness(deps, clock, dies_once)
    job_id = delayed_job(deps, clock, harness)
    with pytest.raises(SystemExit):
        harness.poll()
    # The attempt was taken (running) and never ended; the message was not deleted
    assert deps.jobs.get(job_id).status is Status.RUNNING
    clock.advance(seconds=121)  # the queue's visibility timeout: the redelivery takes it over
    assert harness.poll() == []
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED
    assert len(harness.calls) == 2


def test_a_job_cancelled_while_queued_never_runs(deps: Dependencies, clock: ManualClock) -> None:
    harness = Harness(deps, clock, lambda job: "ran")
    job_id = delayed_job(deps, clock, harness)
    assert deps.jobs.cancel(job_id) is Status.CANCELLED
    assert harness.poll() == []
    assert harness.calls == []
    assert deps.jobs.get(job_id).status is Status.CANCELLED


def test_a_retry_beyond_15_minutes_goes_through_the_table(
    deps: Dependencies, clock: ManualClock
) -> None:
    outcomes = [None, RuntimeError("later")]

    def fails_first(job: Envelope) -> str:
        error = outcomes.pop()
        if error:
            raise error
        return "second time lucky"

    harness = Harness(deps, clock, fails_first)
    policy = {"initial_delay_seconds": 7200, "factor": 1.0, "max_delay_seconds": 7200}
    job_id = delayed_job(deps, clock, harness, retry=policy)
    harness.poll()
    job = deps.jobs.get(job_id)
    assert job.status is Status.FAILED and job.next_attempt_at_ms is not None
    wait_ms = job.next_attempt_at_ms - clock.now_ms()
    assert 900_000 < wait_ms <= 7_200_000  # seed 42 gives a wait beyond SQS's 15 minutes
    # When the sweeps run up to the retry time
    while clock.now_ms() < job.next_attempt_at_ms:
        harness.sweeper.sweep(ALL_SHARDS)
        harness.poll()
        clock.advance(seconds=60)
    harness.poll()
    # Then attempt 2 ran at its time and succeeded
    assert [c.attempt for c in harness.calls] == [1, 2]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_a_body_that_is_not_an_envelope_fails_only_its_record(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda job: "ok")
    url = deps.settings.queue_urls["default"]
    harness.sqs.send_message(QueueUrl=url, MessageBody='{"not": "an envelope"}')
    failed = harness.poll()
    assert len(failed) == 1


def test_get_shows_the_attempt_history_of_a_dead_job(
    deps: Dependencies, clock: ManualClock
) -> None:
    def reject(job: Envelope) -> None:
        raise NonRetryableError("payload has no recipient")

    harness = Harness(deps, clock, reject)
    job_id = delayed_job(deps, clock, harness)
    harness.poll()
    detail = JobDetail.of(deps.jobs.get(job_id)).model_dump()
    assert detail["status"] == "dead"
    assert detail["last_error"]["error_type"] == "NonRetryableError"
    assert detail["last_error"]["message"] == "payload has no recipient"
    assert [h["attempt"] for h in detail["history"]] == [1]
    assert detail["started_at"] and detail["finished_at"]


def test_retrying_a_dead_job_runs_it_again_once(deps: Dependencies, clock: ManualClock) -> None:
    outcomes = [None, NonRetryableError("bad day")]

    def flaky(job: Envelope) -> str:
        error = outcomes.pop()
        if error:
            raise error
        return "fixed"

    harness = Harness(deps, clock, flaky)
    job_id = delayed_job(deps, clock, harness)
    harness.poll()
    assert deps.jobs.get(job_id).status is Status.DEAD
    # When an operator retries it, twice over
    requeued = deps.jobs.retry(job_id)
    assert requeued.status is Status.QUEUED
    with pytest.raises(Conflict):
        deps.jobs.retry(job_id)
    # Then it runs once more, as attempt 2, and succeeds
    harness.poll()
    job = deps.jobs.get(job_id)
    assert [c.attempt for c in harness.calls] == [1, 2]
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 2)
    assert job.max_attempts == 1 + 3  # the queue's budget again
    with pytest.raises(Conflict):
        deps.jobs.retry(job_id)  # succeeded: nothing to retry


def test_retrying_a_cancelled_job_runs_it(deps: Dependencies, clock: ManualClock) -> None:
    harness = Harness(deps, clock, lambda job: "ran")
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job.id
    deps.jobs.cancel(job_id)
    deps.jobs.retry(job_id)
    harness.poll()
    assert [c.attempt for c in harness.calls] == [1]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_retrying_a_pending_job_is_a_conflict(deps: Dependencies, clock: ManualClock) -> None:
    job_id = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job.id
    with pytest.raises(Conflict) as raised:
        deps.jobs.retry(job_id)
    assert raised.value.status is Status.PENDING


def test_the_heartbeat_keeps_a_long_job_from_being_delivered_again(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a 10-minute job on a queue whose visibility timeout is 2 minutes
    url = deps.settings.queue_urls["default"]
    seen_again: list[Any] = []

    def ten_minutes(job: Envelope) -> str:
        heartbeat = harness.consumer.current_heartbeat
        assert heartbeat is not None
        for minute in range(1, 11):
            clock.advance(seconds=60)
            assert heartbeat.wait_for_beats(minute, timeout_s=10)  # a beat per 40 s of clock
            seen_again.extend(harness.sqs.receive_message(QueueUrl=url).get("Messages", []))
        return "done"

    harness = Harness(deps, clock, ten_minutes, visibility_timeout_s=120)
    job_id = delayed_job(deps, clock, harness)
    # When it runs, the message is never visible to anyone else meanwhile
    assert harness.poll() == []
    assert seen_again == []
    assert len(harness.calls) == 1
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_without_a_heartbeat_a_long_job_is_delivered_again(
    deps: Dependencies, clock: ManualClock
) -> None:
    url = deps.settings.queue_urls["default"]
    seen_again: list[Any] = []

    def ten_minutes(job: Envelope) -> str:
        clock.advance(seconds=600)
        seen_again.extend(harness.sqs.receive_message(QueueUrl=url).get("Messages", []))
        return "done"

    harness = Harness(deps, clock, ten_minutes, visibility_timeout_s=None)
    delayed_job(deps, clock, harness)
    harness.poll()
    assert len(seen_again) == 1  # what the heartbeat prevents


LAMBDA_15_MINUTES = FakeLambdaContext(remaining_ms=900_000)


def _deliver(harness: Harness, queue: str = "default") -> list[str]:
    """One receive of the queue into the consumer, as a Lambda invocation with 15 minutes
    left; deletes what it acked. Returns the message ids it failed."""
    url = harness.deps.settings.queue_urls[queue]
    messages = harness.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", [])
    if not messages:
        return []
    event = sqs_event(messages, f"arn:aws:sqs:us-east-1:123456789012:{queue}")
    failed = {
        f["itemIdentifier"]
        for f in harness.consumer.lambda_handler(event, LAMBDA_15_MINUTES)["batchItemFailures"]
    }
    for message in messages:
        if message["MessageId"] not in failed:
            harness.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return sorted(failed)


def test_a_redelivery_never_takes_an_attempt_from_a_live_lambda(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a 10-minute job on a queue whose visibility timeout is 2 minutes, run without a
    # heartbeat, so its message is delivered again while it runs (receive count 2, 3, ...)
    again: list[list[str]] = []

    def ten_minutes(job: Envelope) -> str:
        if len(harness.calls) == 1:
            for _ in range(4):
                clock.advance(seconds=150)
                again.append(_deliver(other))
        return "done"

    harness = Harness(deps, clock, ten_minutes, visibility_timeout_s=None)
    other = Harness(deps, clock, ten_minutes, visibility_timeout_s=None)
    job_id = delayed_job(deps, clock, harness)
    # When it runs (in a Lambda with 15 minutes left) and the redeliveries meet it
    assert _deliver(harness) == []
    # Then each redelivery was turned away as busy (found by a review: a receive count above
    # 1 took the attempt over from the live runner, and the job ran twice), and it ran once
    assert [len(failed) for failed in again] == [1, 1, 1, 1]
    assert [c.id for c in harness.calls + other.calls] == [job_id]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_an_operators_retry_over_a_scheduled_retry_runs_the_attempt_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a job whose first attempt failed with its retry scheduled 10 minutes out (a
    # delayed message of attempt 2), then retried by an operator at once
    outcomes: list[str] = []

    def fails_then_takes_twelve_minutes(job: Envelope) -> str:
        outcomes.append(f"attempt {job.attempt} revision {job.revision}")
        if job.attempt == 1:
            raise RuntimeError("flaky")
        if len(outcomes) == 2:  # the operator's attempt 2: the scheduled one arrives meanwhile
            clock.advance(seconds=601)
            busy.append(_deliver(other))
            clock.advance(seconds=121)
            busy.append(_deliver(other))
        return "done"

    busy: list[list[str]] = []
    harness = Harness(deps, clock, fails_then_takes_twelve_minutes)
    other = Harness(deps, clock, fails_then_takes_twelve_minutes)
    policy = {"initial_delay_seconds": 600, "factor": 1.0, "max_delay_seconds": 600}
    job_id = delayed_job(deps, clock, harness, retry=policy)
    assert _deliver(harness) == []
    assert deps.jobs.get(job_id).status is Status.FAILED
    assert deps.jobs.retry(job_id).revision == 1
    # When the operator's attempt 2 runs, and the scheduled retry's message arrives during it
    assert _deliver(harness) == []
    # Then the scheduled message is stale (older revision) and dropped, never run (found by a
    # review: it was turned away, then took the attempt over as a redelivery); the running
    # attempt's own message, visible again meanwhile, was turned away as busy
    assert outcomes == ["attempt 1 revision 0", "attempt 2 revision 1"]
    assert other.calls == [] and len(busy) == 2
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def _send(deps: Dependencies, queue: str, body: dict[str, Any]) -> None:
    """A message put on `queue` by someone allowed to send to it (not by Sundial)."""
    boto3.client("sqs").send_message(
        QueueUrl=deps.settings.queue_urls[queue], MessageBody=json.dumps(body)
    )


def test_the_function_runs_the_job_items_payload_not_the_messages(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda job: job.payload)
    # Given a job queued on default (its message visible in a minute), and a message for its
    # first attempt that carries another payload, visible now (sent by whoever may send to
    # the queue: a consumer granted it for DAG children)
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=60, payload={"to": "a"}))
    stored = deps.store.get(job.job.key)
    assert stored is not None and stored.status is Status.QUEUED
    forged = json.loads(envelope_body(stored, attempt=1)) | {"payload": {"to": "attacker"}}
    _send(deps, "default", forged)
    # When the consumer takes the forged message, then the real one
    harness.poll()
    clock.advance(seconds=61)
    harness.poll()
    # Then the job ran once, with the payload it was submitted with
    assert [call.payload for call in harness.calls] == [{"to": "a"}]
    assert json.loads(deps.jobs.get(job.job.id).result_json or "null") == {"to": "a"}


def test_a_message_naming_a_retry_timer_or_another_queues_job_runs_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    def fail(job: Envelope) -> None:
        raise RuntimeError("fails on email")

    harness = Harness(deps, clock, lambda job: None)  # default's consumer
    # Given a job of email whose first attempt failed (a retry is due)
    own = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=0, max_attempts=3)).job
    Harness(deps, clock, fail).poll("email")  # email's consumer
    failed = deps.store.get(own.key)
    assert failed is not None and failed.status is Status.FAILED and failed.attempts == 1
    # And an item put by email's consumer (its role may put retry timers on any shard): queued,
    # naming default's queue and a payload of its choosing
    planted = retry_timer(
        dataclasses.replace(failed, queue="default", payload_json='{"planted":true}'),
        attempt=2,
        at_ms=clock.now_ms() + 3_600_000,
    )
    planted = dataclasses.replace(planted, status=Status.QUEUED)
    deps.store.put_if_absent(planted, now_ms=clock.now_ms())
    # When messages reach default naming the planted item as a job (attempt 1), and email's
    # job as if it were default's (attempt 2, its retry)
    envelope = json.loads(envelope_body(planted, attempt=1))
    _send(deps, "default", envelope | {"id": planted.id})
    _send(deps, "default", envelope | {"attempt": 2})
    harness.poll()
    # Then default's consumer ran nothing, and neither item changed
    assert harness.calls == []
    assert deps.store.get(planted.key) == planted
    assert deps.store.get(own.key) == failed
