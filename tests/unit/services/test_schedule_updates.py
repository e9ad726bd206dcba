"""Updating a schedule (PATCH /schedules/{id}) against moto: each field, the head replaced or
already decided, the direct window, a sweep or a second update racing the transaction, a crash
after it, paused and deleted schedules, bad input."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.errors import Conflict, InvalidInput, ScheduleNotFound
from sundial.model.job import Priority, Status
from sundial.model.schedule import CreateSchedule, RunOutcome, Schedule, UpdateSchedule
from sundial.model.submission import parse_rfc3339
from sundial.services.schedules import UpdatedSchedule
from sundial.timing import SUBMIT_IN_FLIGHT_MS
from sundial.wiring import Dependencies, configure
from tests.support import receive_all
from tests.unit.services.test_schedules import _sweeper

MINUTE = 60_000


def _create(deps: Dependencies, **fields: Any) -> Schedule:
    request = CreateSchedule.model_validate({"queue": "default", **fields})
    return deps.schedules.create(request).schedule


def _update(deps: Dependencies, schedule_id: str, **fields: Any) -> UpdatedSchedule:
    return deps.schedules.update(schedule_id, UpdateSchedule.model_validate(fields))


class Sent:
    """The default queue's envelopes, by occurrence time."""

    def __init__(self, deps: Dependencies) -> None:
        self._sqs = boto3.client("sqs")
        self._url = deps.settings.queue_urls["default"]
        self.by_time: dict[str, list[dict[str, Any]]] = {}

    def read(self) -> None:
        for envelope in receive_all(self._sqs, self._url):
            self.by_time.setdefault(envelope["run_at"], []).append(envelope)

    def payloads(self) -> dict[str, Any]:
        """Each occurrence time's payload; an occurrence sent twice fails the test."""
        assert all(len(sent) == 1 for sent in self.by_time.values()), self.by_time
        return {at: sent[0]["payload"] for at, sent in sorted(self.by_time.items())}


def _drive(deps: Dependencies, clock: ManualClock, sent: Sent, shard: int, minutes: int) -> None:
    sweeper = _sweeper(deps, clock)
    for _ in range(minutes):
        clock.advance(seconds=60)
        sweeper.sweep([shard])
        sent.read()


def _t(text: str) -> int:
    return parse_rfc3339(f"2026-11-21T{text}:00Z")


def test_payload_priority_and_attempts_apply_from_the_waiting_occurrence(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an hourly schedule whose first occurrence (13:00) waits in the table
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T13:00:00Z", payload={"v": 1})
    old_head = schedule.occurrence_key(_t("13:00"))
    # When its payload, priority and attempts change at 12:00
    updated = _update(deps, schedule.id, payload={"v": 2}, priority="high", max_attempts=7)
    # Then the waiting occurrence is replaced by one at the same time, with the new settings
    assert updated.applies_from_ms == _t("13:00")
    assert updated.replaced == old_head.job_id
    assert updated.schedule.revision == 1
    old = deps.store.get(old_head)
    assert old is not None and old.status is Status.CANCELLED and old.chained
    new = deps.store.get(updated.schedule.occurrence_key(_t("13:00")))
    assert new is not None and new.status is Status.PENDING
    assert (new.payload_json, new.priority, new.max_attempts) == ('{"v":2}', Priority.HIGH, 7)
    # And every occurrence from then on runs once, with the new payload, on the old cadence
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=200)
    assert sent.payloads() == {
        "2026-11-21T13:00:00.000Z": {"v": 2},
        "2026-11-21T14:00:00.000Z": {"v": 2},
        "2026-11-21T15:00:00.000Z": {"v": 2},
    }
    assert {e[0]["priority"] for e in sent.by_time.values()} == {"high"}
    # And the runs list shows the replaced occurrence beside the new one at 13:00
    runs, _ = deps.schedules.runs(schedule.id, limit=10)
    at_13 = [(r.run.outcome, r.run.job_id) for r in runs if r.run.at_ms == _t("13:00")]
    assert sorted(at_13) == sorted(
        [(RunOutcome.FIRED, new.id), (RunOutcome.REPLACED, old_head.job_id)]
    )


def test_a_new_cron_applies_from_its_first_time_after_now(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a daily 09:00 schedule (its next occurrence tomorrow 09:00)
    schedule = _create(deps, cron="0 9 * * *", timezone="Europe/London", payload="daily")
    clock.advance(seconds=60)
    # When it becomes every 30 minutes in UTC, with a new payload, at 12:01
    updated = _update(deps, schedule.id, cron="*/30 * * * *", timezone="UTC", payload="often")
    # Then it applies from 12:30, the first new time from now, and tomorrow's 09:00 never runs
    assert updated.applies_from_ms == _t("12:30")
    view = deps.schedules.get(schedule.id)
    assert (view.schedule.cron, view.schedule.timezone) == ("*/30 * * * *", "UTC")
    assert view.next_run_at_ms == _t("12:30")
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=100)
    assert sent.payloads() == {
        "2026-11-21T12:30:00.000Z": "often",
        "2026-11-21T13:00:00.000Z": "often",
        "2026-11-21T13:30:00.000Z": "often",
    }


def test_switching_a_cron_schedule_to_a_rate_counts_from_the_last_run(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an every-10-minutes cron schedule that has run at 12:00 and 12:10
    schedule = _create(deps, cron="*/10 * * * *")
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=11)
    assert "2026-11-21T12:10:00.000Z" in sent.by_time
    # When it becomes a 25-minute rate at 12:11
    updated = _update(deps, schedule.id, rate="25 minutes")
    # Then the cron's waiting occurrences not yet decided give way; the rate counts from the
    # newest decided run (12:20 was decided ahead by a sweep: it runs as it was)
    runs, _ = deps.schedules.runs(schedule.id, limit=10)
    last_decided = next(r for r in runs if r.run.outcome is RunOutcome.FIRED).run.at_ms
    assert updated.applies_from_ms == last_decided + 25 * MINUTE
    assert updated.schedule.cron is None and updated.schedule.rate == "25 minutes"
    _drive(deps, clock, sent, schedule.shard, minutes=90)
    times = sorted(parse_rfc3339(at) for at in sent.payloads())
    after = [at for at in times if at > last_decided]
    assert after == [last_decided + k * 25 * MINUTE for k in range(1, len(after) + 1)]
    assert len(after) >= 3


def test_get_names_the_next_run_that_will_happen_after_an_update(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an every-10-minutes schedule at 12:11: 12:00 and 12:10 ran, 12:20 is decided
    # (a sweep sent it ahead, delayed to its time)
    schedule = _create(deps, cron="*/10 * * * *")
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=11)
    runs, _ = deps.schedules.runs(schedule.id, limit=10)
    assert (runs[0].run.at_ms, runs[0].run.outcome) == (_t("12:20"), RunOutcome.FIRED)
    # When it becomes every 3 minutes: the new cron applies after 12:20, from 12:21
    updated = _update(deps, schedule.id, cron="*/3 * * * *")
    assert updated.applies_from_ms == _t("12:21")
    # Then GET names 12:20 as the next run (the new cron's first time from now, 12:12, never
    # runs), and once 12:20 has passed it names 12:21
    assert deps.schedules.get(schedule.id).next_run_at_ms == _t("12:20")
    _drive(deps, clock, sent, schedule.shard, minutes=9)
    clock.advance(seconds=30)
    assert deps.schedules.get(schedule.id).next_run_at_ms == _t("12:21")


def test_an_occurrence_already_sent_keeps_its_payload(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a 10-minute rate from 12:05: the create sends 12:05 and 12:15 (due within 15
    # minutes), so both are decided
    schedule = _create(deps, rate="10 minutes", start_at="2026-11-21T12:05:00Z", payload="old")
    # When the payload changes at 12:00
    updated = _update(deps, schedule.id, payload="new")
    # Then 12:05 and 12:15 (handed to SQS) run as they were; 12:25 on runs with the new payload
    assert updated.applies_from_ms == _t("12:25")
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=40)
    assert sent.payloads() == {
        "2026-11-21T12:05:00.000Z": "old",
        "2026-11-21T12:15:00.000Z": "old",
        "2026-11-21T12:25:00.000Z": "new",
        "2026-11-21T12:35:00.000Z": "new",
    }


def test_a_new_head_due_within_the_direct_window_is_sent_by_the_update(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an hourly schedule that ran at 12:00 (sent by its create) and waits for 13:00
    schedule = _create(deps, rate="1 hour", payload="hourly")
    clock.advance(seconds=120)
    # When it becomes every 5 minutes at 12:02 (a sweep may already be past 12:05)
    updated = _update(deps, schedule.id, cron="*/5 * * * *", payload="soon")
    # Then 12:05 to 12:15 (due within 15 minutes) were sent by the update itself
    assert updated.applies_from_ms == _t("12:05")
    sent = Sent(deps)
    clock.advance(seconds=900)
    sent.read()
    assert sent.payloads() == {
        "2026-11-21T12:00:00.000Z": "hourly",
        "2026-11-21T12:05:00.000Z": "soon",
        "2026-11-21T12:10:00.000Z": "soon",
        "2026-11-21T12:15:00.000Z": "soon",
    }
    # And the sweeper carries on from there, each occurrence once
    _drive(deps, clock, sent, schedule.shard, minutes=20)
    assert sorted(sent.payloads())[-1] == "2026-11-21T12:35:00.000Z"


def test_a_sweep_deciding_the_head_during_the_update_moves_the_update_to_its_successor(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a 10-minute rate whose 12:20 and 12:30 occurrences wait; at 12:17 a sweep takes both
    schedule = _create(deps, rate="10 minutes", start_at="2026-11-21T12:20:00Z", payload="old")
    clock.advance(seconds=17 * 60)
    sweeper = _sweeper(deps, clock)
    sent = Sent(deps)
    swept: list[int] = []

    def sweep_first(**_: Any) -> None:
        if not swept:  # the sweep claims 12:30 between the update's reads and its write
            swept.append(sweeper.sweep([schedule.shard]).dispatched)

    events = deps.schedule_store._db.meta.events
    events.register("before-call.dynamodb.TransactWriteItems", sweep_first)
    try:
        updated = _update(deps, schedule.id, payload="new")
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems", sweep_first)
    # Then 12:20 and 12:30, decided by the sweep, keep the old payload; 12:40 was replaced
    assert swept == [2]
    assert updated.applies_from_ms == _t("12:40")
    _drive(deps, clock, sent, schedule.shard, minutes=40)
    payloads = sent.payloads()
    assert payloads["2026-11-21T12:20:00.000Z"] == payloads["2026-11-21T12:30:00.000Z"] == "old"
    assert {payloads[f"2026-11-21T12:{m}:00.000Z"] for m in (40, 50)} == {"new"}


def test_two_updates_racing_both_apply_one_after_the_other(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T13:00:00Z", payload="v0")
    other: list[UpdatedSchedule] = []
    raced: list[bool] = []

    def second_update_first(**_: Any) -> None:
        if not raced:  # another client's update commits between this one's read and write
            raced.append(True)
            other.append(_update(deps, schedule.id, payload="v1", priority="low"))

    events = deps.schedule_store._db.meta.events
    events.register("before-call.dynamodb.TransactWriteItems", second_update_first)
    try:
        updated = _update(deps, schedule.id, payload="v2")
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems", second_update_first)
    # Then the second committed first (revision 1); the first read again and applied its
    # field over it (revision 2): the payload is v2, the priority stays low
    assert other[0].schedule.revision == 1 and updated.schedule.revision == 2
    view = deps.schedules.get(schedule.id)
    assert (view.schedule.payload_json, view.schedule.priority) == ('"v2"', Priority.LOW)
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=130)
    assert sent.payloads() == {
        "2026-11-21T13:00:00.000Z": "v2",
        "2026-11-21T14:00:00.000Z": "v2",
    }
    runs, _ = deps.schedules.runs(schedule.id, limit=10)
    assert Counter(r.run.outcome for r in runs) == Counter(
        {RunOutcome.REPLACED: 2, RunOutcome.FIRED: 2}
    )


def test_an_update_that_died_before_its_send_is_finished_by_its_repeat(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, rate="1 hour")  # ran at 12:00; waits for 13:00
    clock.advance(seconds=60)
    session = boto3.Session()  # the API Lambda that dies: its own clients, hooked

    def die(**_: Any) -> None:
        raise SystemExit("API Lambda killed after the transaction")

    session.events.register("before-call.sqs.SendMessageBatch", die)
    session.events.register("before-call.sqs.SendMessage", die)
    dying = configure(clock=clock, environ=dict(os.environ), session=session)
    # When the update (to every 5 minutes: 12:05 is due within the window) dies before sending
    with pytest.raises(SystemExit):
        _update(dying, schedule.id, cron="*/5 * * * *")
    # Then a repeat at once is told to come back (the first may still be sending)
    with pytest.raises(Conflict, match="in progress"):
        _update(deps, schedule.id, cron="*/5 * * * *")
    # And a repeat after the in-flight window changes nothing more and sends it, once
    clock.advance(ms=SUBMIT_IN_FLIGHT_MS + 1000)
    repeated = _update(deps, schedule.id, cron="*/5 * * * *")
    assert repeated.replaced is None and repeated.schedule.revision == 1
    assert repeated.applies_from_ms == _t("12:05")
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=20)
    assert sorted(sent.payloads()) == [f"2026-11-21T12:{m:02d}:00.000Z" for m in (0, 5, 10, 15, 20)]


def test_a_paused_schedule_takes_the_update_and_stays_paused(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T12:30:00Z", payload="old")
    deps.schedules.pause(schedule.id)
    updated = _update(deps, schedule.id, payload="new", rate="30 minutes")
    assert updated.schedule.state.value == "paused"
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=40)
    assert sent.by_time == {}  # nothing runs while paused
    deps.schedules.resume(schedule.id)  # 12:40: the missed 12:30 fires once now (fire_once)
    _drive(deps, clock, sent, schedule.shard, minutes=40)
    assert set(sent.payloads().values()) == {"new"}
    assert len(sent.by_time) >= 2


def test_delete_after_an_update_cancels_the_new_head(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T13:00:00Z")
    updated = _update(deps, schedule.id, rate="2 hours")
    deps.schedules.delete(schedule.id)
    head = deps.store.get(updated.schedule.occurrence_key(updated.applies_from_ms))
    assert head is not None and head.status is Status.CANCELLED
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=200)
    assert sent.by_time == {}
    with pytest.raises(ScheduleNotFound):
        deps.schedules.get(schedule.id)
    with pytest.raises(Conflict, match="deleted"):
        _update(deps, schedule.id, payload=1)


def test_refusals_change_nothing(deps: Dependencies, clock: ManualClock) -> None:
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T13:00:00Z")
    with pytest.raises(ScheduleNotFound):
        _update(deps, "01ARZ3NDEKTSV4RRFFQ69G5FAV", payload=1)
    with pytest.raises(InvalidInput):
        _update(deps, "not-an-id", payload=1)
    ending = _create(deps, rate="1 hour", end_at="2026-11-21T12:30:00Z")  # ran at 12:00: ended
    with pytest.raises(Conflict, match="ended"):
        _update(deps, ending.id, payload=1)
    with pytest.raises(InvalidInput, match="no occurrence"):
        _update(
            deps, _create(deps, rate="1 hour", end_at="2026-11-21T13:30:00Z").id, rate="2 hours"
        )
    # And the schedule refused nothing is unchanged
    assert deps.schedules.get(schedule.id).schedule.revision == 0
    with pytest.raises(ValueError, match="at least one"):
        UpdateSchedule.model_validate({})


def test_runs_pages_keep_records_that_share_a_time(deps: Dependencies, clock: ManualClock) -> None:
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T13:00:00Z")
    _update(deps, schedule.id, payload="x")  # 13:00 replaced by 13:00 of revision 1
    sent = Sent(deps)
    _drive(deps, clock, sent, schedule.shard, minutes=70)
    seen, before = [], None
    while True:
        page, before = deps.schedules.runs(schedule.id, limit=1, before_ms=before)
        seen += [(r.run.at_ms, r.run.outcome) for r in page]
        if before is None:
            break
    assert sorted(seen) == sorted(
        [(_t("13:00"), RunOutcome.REPLACED), (_t("13:00"), RunOutcome.FIRED)]
    )
