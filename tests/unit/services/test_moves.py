"""Changing a waiting job (PATCH /jobs/{id}): its time, priority, payload and attempt budget,
keeping its id, against moto with the injected clock driving SQS delays."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from pydantic import JsonValue, ValidationError

from sundial.clock import ManualClock
from sundial.errors import Conflict, InvalidInput, JobNotFound, Unavailable
from sundial.ids import JobKey
from sundial.model.dag import SubmitDag
from sundial.model.job import MAX_MOVES, Priority, Status
from sundial.model.schedule import CreateSchedule
from sundial.model.submission import ChangeJob, SubmitJob
from sundial.services.moves import REPEAT_WINDOW_MS
from sundial.timing import SUBMIT_IN_FLIGHT_MS
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies
from tests.harness import ALL_SHARDS, Harness
from tests.support import WriteMeter

HOUR = 3600


def _submit(deps: Dependencies, delay_s: int, payload: JsonValue = "v1", **fields: Any) -> str:
    request = SubmitJob(queue="default", delay_seconds=delay_s, payload=payload, **fields)
    return deps.jobs.submit(request).job.id


def _change(deps: Dependencies, job_id: str, **fields: Any) -> Any:
    return deps.moves.move(job_id, ChangeJob.model_validate(fields))


def _items(deps: Dependencies) -> list[dict[str, Any]]:
    """Every job-keyed item of the table (jobs and pointers)."""
    items = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("shard#") and i["sk"]["S"][0].isdigit()]


def _run_for(harness: Harness, minutes: int, *, every: int = 10) -> None:
    """Sweep (their lookahead is 14 minutes) and consume every `every` minutes (and each
    minute between, consume) for `minutes` minutes."""
    for minute in range(1, minutes + 1):
        harness.clock.advance(seconds=60)
        if minute % every == 0:
            harness.sweeper.sweep(ALL_SHARDS)
        harness.poll()


def test_a_job_moved_later_keeps_its_id_and_runs_once_at_its_new_time(
    deps: Dependencies, clock: ManualClock
) -> None:
    runs: list[tuple[str, JsonValue, int]] = []
    harness = Harness(deps, clock, lambda e: runs.append((e.id, e.payload, clock.now_ms())))
    # Given a job due in an hour
    job_id = _submit(deps, HOUR)
    start = clock.now_ms()
    # When it is moved to three hours ahead, with a new payload and priority
    moved = _change(deps, job_id, delay_seconds=3 * HOUR, payload="v2", priority="low")
    # Then it keeps its id, shows its new time and the move in its history
    assert moved.id == job_id and moved.due_ms == start + 3 * HOUR * 1000
    job = deps.jobs.get(job_id)
    assert (job.id, job.due_ms, job.status) == (job_id, start + 3 * HOUR * 1000, Status.PENDING)
    assert (job.payload_json, job.priority, job.revision) == ('"v2"', Priority.LOW, 1)
    assert [(m.from_run_at_ms, m.to_run_at_ms) for m in job.moves] == [
        (start + HOUR * 1000, start + 3 * HOUR * 1000)
    ]
    assert job.moves[0].changed == ("run_at", "priority", "payload")
    # And the table holds the job at its new key and a pointer at its old one, nothing else
    assert len(_items(deps)) == 2
    # When sweeps and the consumer run for four hours
    _run_for(harness, 4 * 60)
    # Then it ran exactly once, with the new payload, under its id, not before its new time
    assert [(i, p) for i, p, _ in runs] == [(job_id, "v2")]
    assert runs[0][2] >= start + 3 * HOUR * 1000
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_a_move_into_the_direct_window_sends_it_for_its_new_second(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    job_id = _submit(deps, 2 * HOUR)
    # When it is moved to 5 minutes from now
    moved = _change(deps, job_id, delay_seconds=300)
    # Then it is handed to SQS at once (queued), visible at its new time and not before
    assert moved.status is Status.QUEUED and deps.jobs.get(job_id).status is Status.QUEUED
    clock.advance(seconds=299)
    harness.poll()
    assert harness.calls == []
    clock.advance(seconds=1)
    harness.poll()
    assert [(e.id, e.revision) for e in harness.calls] == [(job_id, 1)]
    # And no sweep sends it again at its old time
    _run_for(harness, 3 * 60)
    assert len(harness.calls) == 1


def test_a_move_into_the_past_runs_it_now_and_run_now_is_the_same(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    first, second = _submit(deps, 6 * HOUR), _submit(deps, 6 * HOUR)
    _change(deps, first, run_at="2020-01-01T00:00:00Z")
    _change(deps, second, delay_seconds=0)
    harness.poll()
    assert sorted(e.id for e in harness.calls) == sorted([first, second])
    assert deps.jobs.get(first).due_ms == clock.now_ms()


def test_a_chain_of_moves_keeps_one_job_reachable_by_its_first_id(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    job_id = _submit(deps, HOUR)
    origin_due = JobKey.from_job_id(job_id).due_ms
    # When it is moved 5 times: later, earlier, far ahead, back to its first time, later again
    for delay in (5 * HOUR, 2 * HOUR, 48 * HOUR):
        _change(deps, job_id, delay_seconds=delay)
        assert len(_items(deps)) == 2  # the job and one pointer, whatever the chain's length
    _change(deps, job_id, run_at="2026-11-21T13:00:00Z")  # its first time: no pointer needed
    assert deps.jobs.get(job_id).due_ms == origin_due and len(_items(deps)) == 1
    job = _change(deps, job_id, delay_seconds=3 * HOUR)
    assert (job.revision, len(job.moves), len(_items(deps))) == (5, 5, 2)
    # Then pause, resume and cancel by the first id act on the job where it is now
    assert deps.jobs.pause(job_id).status is Status.PAUSED
    assert deps.jobs.get(job_id).status is Status.PAUSED
    assert deps.jobs.resume(job_id).status is Status.PENDING
    assert deps.jobs.cancel(job_id) is Status.CANCELLED
    _run_for(harness, 4 * 60)
    assert harness.calls == []


def test_a_paused_job_stays_paused_at_its_new_time(deps: Dependencies, clock: ManualClock) -> None:
    harness = Harness(deps, clock, lambda e: None)
    job_id = _submit(deps, HOUR)
    deps.jobs.pause(job_id)
    moved = _change(deps, job_id, delay_seconds=2 * HOUR)
    assert moved.status is Status.PAUSED
    _run_for(harness, 3 * 60)
    assert harness.calls == []
    # When it is resumed (overdue now), it is sent at once, under its id
    assert deps.jobs.resume(job_id).status is Status.QUEUED
    harness.poll()
    assert [e.id for e in harness.calls] == [job_id]


def test_a_queued_jobs_old_message_is_skipped_and_it_runs_once_at_its_new_time(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    job_id = _submit(deps, HOUR, payload="old")
    # Given it is sent by a sweep (visible in 10 minutes; its item left pending, shown queued)
    clock.advance(seconds=HOUR - 600)
    assert harness.sweeper.sweep(ALL_SHARDS).dispatched == 1
    sent = deps.jobs.get(job_id)
    assert sent.status is Status.PENDING
    assert deps.sweeps.as_shown(sent, now_ms=clock.now_ms()).status is Status.QUEUED
    # When it is moved an hour later with a new payload before its message becomes visible
    moved = _change(deps, job_id, delay_seconds=HOUR + 600, payload="new")
    assert moved.status is Status.PENDING and moved.revision == 1
    # Then its old message, delivered at the old time, does not run it
    clock.advance(seconds=601)
    harness.poll()
    assert harness.calls == []
    # And it runs once at its new time, with the new payload
    _run_for(harness, 2 * 60)
    assert [(e.id, e.payload) for e in harness.calls] == [(job_id, "new")]


def test_a_visible_message_taken_before_the_move_lands_cannot_run_the_job(
    deps: Dependencies, clock: ManualClock
) -> None:
    """The consumer's fence read the job (revision 0); the move lands before the attempt-taking
    write: that write is refused (revision), so the job does not run from the old message."""
    changed: list[Any] = []

    def move_during_the_fence(params: dict[str, Any], **_: Any) -> None:
        if params.get("UpdateExpression", "").startswith("SET #status = :running") and not changed:
            changed.append(_change(deps, job_id, delay_seconds=2 * HOUR))

    harness = Harness(deps, clock, lambda e: None)
    job_id = _submit(deps, HOUR)
    clock.advance(seconds=HOUR - 600)
    harness.sweeper.sweep(ALL_SHARDS)
    clock.advance(seconds=601)
    harness.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem", move_during_the_fence
    )
    harness.poll()
    assert changed and harness.calls == []
    _run_for(harness, 2 * 60 + 5)
    assert [e.id for e in harness.calls] == [job_id]


def test_a_move_racing_a_sweeps_claim_tries_again_and_one_copy_runs(
    deps: Dependencies, clock: ManualClock
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    job_id = _submit(deps, HOUR)
    clock.advance(seconds=HOUR - 600)
    swept: list[int] = []

    def sweep_first(**_: Any) -> None:
        if not swept:
            swept.append(harness.sweeper.sweep(ALL_SHARDS).dispatched)

    # The sweep claims and sends the job between the move's read and its transaction.
    client = deps.store._db
    client.meta.events.register("before-call.dynamodb.TransactWriteItems", sweep_first)
    moved = _change(deps, job_id, delay_seconds=HOUR)
    client.meta.events.unregister("before-call.dynamodb.TransactWriteItems", sweep_first)
    assert swept == [1] and moved.revision == 1 and moved.status is Status.PENDING
    _run_for(harness, 75)
    assert [e.id for e in harness.calls] == [job_id]


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("running", "its attempt has started"),
        ("succeeded", "has finished"),
        ("cancelled", "has finished"),
        ("failed", "first attempt has run"),
    ],
)
def test_only_a_job_waiting_for_its_first_attempt_can_change(
    deps: Dependencies, clock: ManualClock, setup: str, reason: str
) -> None:
    def function(envelope: Envelope) -> None:
        if setup == "running":
            with pytest.raises(Conflict, match=reason):
                _change(deps, envelope.id, delay_seconds=HOUR)
        if setup == "failed":
            raise RuntimeError("flaky")

    harness = Harness(deps, clock, function)
    job_id = _submit(deps, 60)
    if setup == "cancelled":
        deps.jobs.cancel(job_id)
    else:
        clock.advance(seconds=60)
        harness.poll()
    before = _items(deps)
    if setup != "running":
        with pytest.raises(Conflict, match=reason):
            _change(deps, job_id, delay_seconds=HOUR)
    assert _items(deps) == before


def test_dag_nodes_and_schedule_occurrences_are_refused(
    deps: Dependencies, clock: ManualClock
) -> None:
    dag = deps.dags.submit(
        SubmitDag.model_validate(
            {"name": "d", "delay_seconds": HOUR, "nodes": {"a": {"queue": "default"}}}
        )
    )
    with pytest.raises(Conflict, match="DAG"):
        _change(deps, dag.nodes[0].id, delay_seconds=2 * HOUR)
    created = deps.schedules.create(
        CreateSchedule(queue="default", cron="0 * * * *", start_at="2026-11-21T14:30:00Z")
    )
    (head,) = [i for i in _items(deps) if i.get("schedule_id", {}).get("S") == created.schedule.id]
    occurrence = JobKey.from_item_keys(head["pk"]["S"], head["sk"]["S"]).job_id
    with pytest.raises(Conflict, match="PATCH /schedules"):
        _change(deps, occurrence, delay_seconds=2 * HOUR)


def test_a_direct_job_whose_sender_died_is_taken_over_after_the_in_flight_time(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    # Given a submit that wrote a due-soon job and died before sending it
    with monkeypatch.context() as patched:
        patched.setattr(deps.jobs, "dispatch_direct", lambda jobs, **_: [])
        job_id = _submit(deps, 60)
    assert deps.jobs.get(job_id).direct
    with pytest.raises(Conflict, match="being handed to SQS"):
        _change(deps, job_id, delay_seconds=120)
    clock.advance(seconds=SUBMIT_IN_FLIGHT_MS // 1000)
    assert _change(deps, job_id, delay_seconds=120).status is Status.QUEUED
    _run_for(harness, 5)
    assert [e.id for e in harness.calls] == [job_id]


def _fail_sends(monkeypatch: pytest.MonkeyPatch, deps: Dependencies) -> None:
    """SQS refuses every send of a move (a 503): the job is left pending and direct."""
    monkeypatch.setattr(deps.moves._direct, "send", lambda jobs, **_: list(jobs))


def test_a_repeat_of_the_last_allowed_move_finishes_its_send(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    # Given a job changed 99 times, then a 100th time (the last allowed) to run in a minute,
    # whose send failed (SQS answered 503, or the Lambda died before it): pending, direct
    job_id = _submit(deps, 2 * HOUR)
    for n in range(MAX_MOVES - 1):
        _change(deps, job_id, delay_seconds=HOUR + n)
    with monkeypatch.context() as patched:
        _fail_sends(patched, deps)
        with pytest.raises(Unavailable):
            _change(deps, job_id, delay_seconds=60)
    job = deps.jobs.get(job_id)
    assert (job.status, job.direct, len(job.moves)) == (Status.PENDING, True, MAX_MOVES)
    # When the client repeats the request, as the 503 asks, once the first call is over
    clock.advance(seconds=SUBMIT_IN_FLIGHT_MS // 1000)
    repeated = _change(deps, job_id, delay_seconds=60)
    # Then the repeat finishes the change that landed (found by a review: every repeat
    # answered "409 changed 100 times already" and nothing ever sent the job)
    assert (repeated.status, len(repeated.moves), repeated.revision) == (
        Status.QUEUED,
        MAX_MOVES,
        MAX_MOVES,
    )
    _run_for(harness, 3)
    assert [e.id for e in harness.calls] == [job_id]


def test_a_new_change_past_the_limit_is_refused_but_sends_a_stranded_job(
    deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = Harness(deps, clock, lambda e: None)
    # Given the last allowed change's send failed and its client gave up
    job_id = _submit(deps, 2 * HOUR)
    for n in range(MAX_MOVES - 1):
        _change(deps, job_id, delay_seconds=HOUR + n)
    with monkeypatch.context() as patched:
        _fail_sends(patched, deps)
        with pytest.raises(Unavailable):
            _change(deps, job_id, delay_seconds=60)
    # When someone asks for another change after the in-flight time
    clock.advance(seconds=SUBMIT_IN_FLIGHT_MS // 1000)
    with pytest.raises(Conflict, match=f"{MAX_MOVES} times already"):
        _change(deps, job_id, priority="high")
    # Then that change is refused, but the job is not stranded: it was sent, and runs once
    assert deps.jobs.get(job_id).status is Status.QUEUED
    _run_for(harness, 3)
    assert [e.id for e in harness.calls] == [job_id]


def test_a_repeated_change_is_made_once(deps: Dependencies, clock: ManualClock) -> None:
    # Given a job changed to run in 20 minutes
    job_id = _submit(deps, HOUR)
    first = _change(deps, job_id, delay_seconds=1200, priority="high")
    # When the client repeats the same request a few seconds later (its answer was lost)
    clock.advance(seconds=5)
    again = _change(deps, job_id, delay_seconds=1200, priority="high")
    # Then it is that change, not another: one move, the first change's time
    assert (again.revision, len(again.moves), again.due_ms) == (1, 1, first.due_ms)
    # And after the repeat window the same body is a new change
    clock.advance(ms=REPEAT_WINDOW_MS)
    later = _change(deps, job_id, delay_seconds=1200, priority="high")
    assert (later.revision, len(later.moves)) == (2, 2)


def test_bad_changes_are_400_and_change_nothing(deps: Dependencies) -> None:
    job_id = _submit(deps, HOUR)
    for body in (
        {},
        {"run_at": "2026-11-22T09:00:00Z", "delay_seconds": 5},
        {"priority": None},
        {"delay_seconds": -1},
        {"queue": "other"},
    ):
        with pytest.raises(ValidationError):
            ChangeJob.model_validate(body)
    before = _items(deps)
    with pytest.raises(InvalidInput, match="366 days"):
        _change(deps, job_id, run_at="2028-01-01T00:00:00Z")
    with pytest.raises(InvalidInput):
        _change(deps, "garbage", delay_seconds=5)
    unknown = JobKey(shard=1, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2")
    with pytest.raises(JobNotFound):
        _change(deps, unknown.job_id, delay_seconds=5)
    assert _items(deps) == before
    # A payload of null is a change (to null), not "keep it"
    assert _change(deps, job_id, payload=None).payload_json == "null"


def test_write_units_per_move(deps: Dependencies, clock: ManualClock) -> None:
    """What a change costs in job-item write units (transactional writes count twice)."""
    session = boto3.Session()
    meter = WriteMeter(session)
    wired = Dependencies(settings=deps.settings, clock=clock, session=session)
    job_id = _submit(deps, HOUR)
    costs: list[int] = []
    for fields in (
        {"delay_seconds": 2 * HOUR},  # first move: the job's new item + the pointer
        {"delay_seconds": 3 * HOUR},  # later moves: new item + delete + pointer
        {"priority": "high"},  # no new time: one conditional put in place
    ):
        start = _write_units(meter)
        wired.moves.move(job_id, ChangeJob.model_validate(fields))
        costs.append(_write_units(meter) - start)
    assert costs == [4, 6, 1]


def _write_units(meter: WriteMeter) -> int:
    """Job-item write units so far, for items under 1 KB: 1 per plain write, 2 per item of a
    transaction."""
    plain = meter.job_writes() - meter.requests["transaction"]
    return plain + 2 * meter.transaction_items
