"""Issue 12, the schedules' scenarios (4, 9, 10) and the pause/resume overlap: each
interleaving is replayed on moto with the manual clock by hooking the AWS calls of one
operation and running the other at that point; then the sweepers run for two hours and every
occurrence due in that time must have been sent exactly once."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.errors import Conflict
from sundial.ids import JobKey
from sundial.model.job import Status
from sundial.model.schedule import CreateSchedule, Schedule, ScheduleState, UpdateSchedule
from sundial.wiring import Dependencies, configure
from tests.support import receive_all

ALL_SHARDS = list(range(8))
HOURLY_AT_HALF_PAST = "30 * * * *"  # START is 12:00: the first occurrence is at 12:30


def _hooked(clock: ManualClock) -> tuple[Dependencies, boto3.Session]:
    """A second wiring of the same system, on a session of its own: hooks on that session's
    events see only its calls."""
    session = boto3.Session()
    return configure(clock=clock, environ=dict(os.environ), session=session), session


def _once(action: Callable[[], object]) -> Callable[..., None]:
    fired: list[bool] = []

    def handler(**_: Any) -> None:
        if not fired:
            fired.append(True)
            action()

    return handler


def _create(deps: Dependencies, cron: str = HOURLY_AT_HALF_PAST) -> Schedule:
    return deps.schedules.create(CreateSchedule(queue="default", cron=cron)).schedule


def _fired(deps: Dependencies, clock: ManualClock, *, minutes: int) -> Counter[str]:
    """Sweep every minute for `minutes`; count the occurrences sent, by their run_at."""
    sqs, seen = boto3.client("sqs"), Counter[str]()
    for _ in range(minutes):
        clock.advance(seconds=60)
        deps.sweeper.sweep(ALL_SHARDS)
        seen.update(e["run_at"] for e in receive_all(sqs, deps.settings.queue_urls["default"]))
    return seen


def _occurrences(status: Status) -> list[str]:
    """The ids of the occurrences in `status` (a scan: the test table is tiny)."""
    items = boto3.client("dynamodb").scan(
        TableName="sundial-jobs",
        FilterExpression="attribute_exists(schedule_id) AND #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": str(status)}},
    )["Items"]
    return [JobKey.from_item_keys(item["pk"]["S"], item["sk"]["S"]).job_id for item in items]


def test_scenario_04_a_sweep_during_schedule_creation_kills_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    # When a sweep runs right after the create's first write (the first occurrence is at
    # 12:10, inside the sweep's range)
    creator, session = _hooked(clock)
    sweep = _once(lambda: deps.sweeper.sweep(ALL_SHARDS))
    for write in ("PutItem", "TransactWriteItems"):
        session.events.register(f"after-call.dynamodb.{write}", sweep)
    schedule = _create(creator, cron="10 * * * *")
    # Then the schedule fires at 12:10 and 13:10, once each
    assert deps.schedules.get(schedule.id).schedule.state is ScheduleState.ACTIVE
    fired = _fired(deps, clock, minutes=75)
    assert fired == Counter({"2026-11-21T12:10:00.000Z": 1, "2026-11-21T13:10:00.000Z": 1})


def test_scenario_04_a_create_that_dies_after_its_first_write_is_finished_by_its_retry(
    deps: Dependencies, clock: ManualClock
) -> None:
    creator, session = _hooked(clock)

    def crash(**_: Any) -> None:
        raise ConnectionError("the Lambda died")

    session.events.register("after-call.dynamodb.TransactWriteItems", crash)
    request = CreateSchedule(queue="default", cron="10 * * * *", idempotency_key="nightly")
    try:
        creator.schedules.create(request)
    except ConnectionError:
        clock.advance(seconds=31)  # the client retries after the in-flight window
        deps.schedules.create(request)
    fired = _fired(deps, clock, minutes=75)
    assert fired == Counter({"2026-11-21T12:10:00.000Z": 1, "2026-11-21T13:10:00.000Z": 1})


def test_scenario_09_skipping_one_run_of_a_paused_schedule_does_not_stop_it(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a paused schedule whose parked occurrence (12:30) the sweeps have passed
    schedule = _create(deps)
    deps.schedules.pause(schedule.id)
    assert _fired(deps, clock, minutes=35) == Counter()
    [parked] = _occurrences(Status.PAUSED)
    # When the client skips that run (DELETE /jobs/{id}, as docs/schedules.md offers), then resumes
    assert deps.jobs.cancel(parked) is Status.CANCELLED
    deps.schedules.resume(schedule.id)
    # Then the schedule goes on: 13:30 and 14:30 fire, once each
    fired = _fired(deps, clock, minutes=120)
    assert fired == Counter({"2026-11-21T13:30:00.000Z": 1, "2026-11-21T14:30:00.000Z": 1})


def test_scenario_10_a_sweep_parking_an_occurrence_races_the_schedules_resume(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a schedule whose pause died after its first write (paused, occurrence pending)
    schedule = _create(deps)
    deps.schedule_store.set_state(
        schedule.id, to=ScheduleState.PAUSED, when=[ScheduleState.ACTIVE], now_ms=clock.now_ms()
    )
    clock.advance(seconds=19 * 60)
    # When a sweep decides to park the 12:30 occurrence, and the schedule's resume lands
    # between that decision and the park's write
    sweeper, session = _hooked(clock)
    resume = _once(lambda: deps.schedules.resume(schedule.id))
    for write in ("UpdateItem", "TransactWriteItems"):
        session.events.register(f"before-call.dynamodb.{write}", resume)
    sweeper.sweeper.sweep(ALL_SHARDS)
    # Then the schedule is active and its occurrences fire once each
    assert deps.schedules.get(schedule.id).schedule.state is ScheduleState.ACTIVE
    fired = _fired(deps, clock, minutes=75)
    assert fired == Counter({"2026-11-21T12:30:00.000Z": 1, "2026-11-21T13:30:00.000Z": 1})


def test_extra_overlapping_schedule_pause_and_resume(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an active schedule; a pause whose state write lands, then a whole resume runs
    # before the pause parks the waiting occurrence
    schedule = _create(deps)
    pauser, session = _hooked(clock)
    resume = _once(lambda: deps.schedules.resume(schedule.id))
    session.events.register("after-call.dynamodb.UpdateItem", resume)
    try:
        pauser.schedules.pause(schedule.id)
        paused_answered = True
    except Conflict:
        paused_answered = False
    state = deps.schedules.get(schedule.id).schedule.state
    fired = _fired(deps, clock, minutes=95)
    # Then the state is the one the last answered call promised, and the occurrences follow it
    if paused_answered:
        assert state is ScheduleState.PAUSED
        assert fired == Counter()
    else:
        assert state is ScheduleState.ACTIVE
        assert fired == Counter({"2026-11-21T12:30:00.000Z": 1, "2026-11-21T13:30:00.000Z": 1})


def test_found_on_the_way_a_resumed_schedule_carries_no_expiry(
    deps: Dependencies, clock: ManualClock
) -> None:
    """Moving a schedule to `resuming` used to write deleted_at and expires_at = 0 on its item;
    expires_at is the table's TTL attribute, so DynamoDB would have deleted the schedule."""
    schedule = _create(deps)
    deps.schedules.pause(schedule.id)
    deps.schedules.resume(schedule.id)
    item = boto3.client("dynamodb").get_item(
        TableName="sundial-jobs", Key={"pk": {"S": f"sched#{schedule.id}"}, "sk": {"S": "schedule"}}
    )["Item"]
    assert "expires_at" not in item and "deleted_at" not in item
    assert item["state"]["S"] == "active"


def _payloads(deps: Dependencies, clock: ManualClock, *, minutes: int) -> dict[str, list[Any]]:
    """Sweep every minute for `minutes`; the payloads sent, by run_at."""
    sqs, seen = boto3.client("sqs"), dict[str, list[Any]]()
    for _ in range(minutes):
        clock.advance(seconds=60)
        deps.sweeper.sweep(ALL_SHARDS)
        for envelope in receive_all(sqs, deps.settings.queue_urls["default"]):
            seen.setdefault(envelope["run_at"], []).append(envelope["payload"])
    return seen


def test_extra_an_update_lands_between_a_sweeps_read_of_the_head_and_its_decision(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an hourly schedule whose 12:30 occurrence waits; at 12:20 a sweep reads it (pending)
    schedule = _create(deps)
    clock.advance(seconds=20 * 60)
    sweeper, session = _hooked(clock)
    update = UpdateSchedule(cron="*/20 * * * *", payload="new")
    answered: list[Any] = []
    # When an update commits after the sweep's read, before the sweep decides 12:30 (its first
    # read of the schedule)
    session.events.register(
        "before-call.dynamodb.GetItem",
        _once(lambda: answered.append(deps.schedules.update(schedule.id, update))),
    )
    sweeper.sweeper.sweep(ALL_SHARDS)
    # Then the sweep finds 12:30 replaced: it never runs; 12:20 (now: sent by the update) and
    # every 20 minutes after run once, with the new payload
    assert answered[0].applies_from_ms == answered[0].schedule.first_at_ms
    sent = _payloads(deps, clock, minutes=60)
    assert "2026-11-21T12:30:00.000Z" not in sent
    assert sent == {
        f"2026-11-21T{at}:00.000Z": ["new"] for at in ("12:20", "12:40", "13:00", "13:20")
    }


def test_extra_an_update_racing_a_pause_leaves_nothing_running_until_the_resume(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an hourly schedule waiting for 12:30; a pause lands between an update's reads and
    # its transaction (the pause parks 12:30; the update replaces the parked occurrence)
    schedule = _create(deps)
    updater, session = _hooked(clock)
    session.events.register(
        "before-call.dynamodb.TransactWriteItems",
        _once(lambda: deps.schedules.pause(schedule.id)),
    )
    updated = updater.schedules.update(schedule.id, UpdateSchedule(cron="45 * * * *"))
    assert updated.applies_from_ms == updated.schedule.first_at_ms
    # Then nothing runs while paused; after the resume the new cron runs, each time once
    assert _payloads(deps, clock, minutes=60) == {}
    deps.schedules.resume(schedule.id)  # 13:00: 12:45 was missed; fire_once runs it now
    sent = _payloads(deps, clock, minutes=60)
    assert all(len(payloads) == 1 for payloads in sent.values()), sent
    assert sorted(sent)[-1] == "2026-11-21T13:45:00.000Z"
    assert "2026-11-21T12:30:00.000Z" not in sent and "2026-11-21T13:30:00.000Z" not in sent
