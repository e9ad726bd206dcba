"""Recurring schedules against moto: the occurrence chain through the sweeper, crashes and
races, DST, misfires after an outage, pause and resume, validation, and write costs."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

import sundial.services.schedules as schedule_service
from sundial.clock import ManualClock, to_rfc3339
from sundial.dispatch.sweeper import Sweeper
from sundial.errors import Conflict, InvalidInput, ScheduleNotFound
from sundial.model.job import Priority, Status
from sundial.model.schedule import (
    CreateSchedule,
    Misfire,
    RunOutcome,
    Schedule,
    ScheduleState,
    legacy_schedule_id,
    schedule_id_for,
)
from sundial.model.submission import parse_rfc3339
from sundial.services.chain import OccurrenceChain, occurrences_at_once
from sundial.store.jobs import JobStore
from sundial.store.queue_states import QueueStateStore
from sundial.store.schedules import ScheduleStore
from sundial.store.sweeps import SweepStore
from sundial.timing import SWEEP_LEASE_MS
from sundial.transport.sender import QueueSender
from sundial.wiring import Dependencies
from tests.harness import Harness
from tests.support import receive_all

MINUTE = 60_000


def _create(deps: Dependencies, **fields: Any) -> Schedule:
    request = CreateSchedule.model_validate({"queue": "default", **fields})
    return deps.schedules.create(request).schedule


def _sweeper(deps: Dependencies, clock: ManualClock, session: Any = None) -> Sweeper:
    """A sweeper with clients of its own, so a test can hook (or meter) its AWS calls."""
    session = session or boto3.Session()
    dynamodb, sqs = session.client("dynamodb"), session.client("sqs")
    table = deps.settings.table_name
    store = JobStore(dynamodb, table)
    return Sweeper(
        store=store,
        sweeps=SweepStore(dynamodb, table),
        sender=QueueSender(sqs, deps.settings.queue_urls),
        clock=clock,
        chain=OccurrenceChain(
            schedules=ScheduleStore(dynamodb, table),
            store=store,
            clock=clock,
            retention_days=30,
        ),
        queue_states=QueueStateStore(dynamodb, table),
    )


class Arrivals:
    """Reads the default queue: every envelope, with the time it became visible."""

    def __init__(self, deps: Dependencies, clock: ManualClock) -> None:
        self._sqs = boto3.client("sqs")
        self._url = deps.settings.queue_urls["default"]
        self._clock = clock
        self.run_at: Counter[str] = Counter()
        self.visible_at: dict[str, int] = {}

    def read(self) -> list[dict[str, Any]]:
        envelopes = receive_all(self._sqs, self._url)
        for envelope in envelopes:
            self.run_at[envelope["run_at"]] += 1
            self.visible_at.setdefault(envelope["run_at"], self._clock.now_ms())
        return envelopes


def _minutes(first_ms: int, count: int) -> list[str]:
    return [to_rfc3339(first_ms + i * MINUTE) for i in range(count)]


def _drive(
    sweeper: Sweeper, shards: list[int], clock: ManualClock, arrivals: Arrivals, *, minutes: int
) -> None:
    for _ in range(minutes):
        clock.advance(seconds=60)
        sweeper.sweep(shards)
        arrivals.read()


def test_every_minute_for_1000_occurrences_across_sweeper_crashes(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an every-minute schedule (its first occurrence is now: sent by the create call)
    schedule = _create(deps, cron="* * * * *", payload={"report": "minutely"})
    shards = [schedule.shard]
    arrivals = Arrivals(deps, clock)
    healthy = _sweeper(deps, clock)
    # When sweeps run every 5 minutes for 1000 minutes, while at three points a sweeper dies:
    # after deciding an occurrence (its run record) but before writing its successor; after
    # writing the successor but before reading the occurrence's item for its send (holding the
    # shard's lease); before sending.
    crashes = {
        60: ("dynamodb.PutItem", lambda p: "schedule_id" in p["Item"]),
        100: ("dynamodb.BatchGetItem", lambda p: "cursor" not in str(p["RequestItems"])),
        140: ("sqs.SendMessageBatch", lambda p: True),
    }
    for tick in range(200):
        clock.advance(seconds=300)
        if tick in crashes:
            operation, matches = crashes[tick]
            session = boto3.Session()

            def die(params: dict[str, Any], matches: Any = matches, **_: Any) -> None:
                if matches(params):
                    raise SystemExit("sweeper Lambda killed")

            session.events.register(f"provide-client-params.{operation}", die)
            with pytest.raises(SystemExit):
                _sweeper(deps, clock, session).sweep(shards)
        else:
            healthy.sweep(shards)
        arrivals.read()
    clock.advance(ms=SWEEP_LEASE_MS)
    healthy.sweep(shards)
    clock.advance(seconds=900)
    arrivals.read()
    # Then occurrences 12:00, 12:01, ... arrived once each, at their minute: no gap, no duplicate
    expected = _minutes(schedule.first_at_ms, 1000)
    got = sorted(t for t in arrivals.run_at if t <= expected[-1])
    assert got == expected
    assert {arrivals.run_at[t] for t in expected} == {1}
    # (each arrival is observed at a tick, every 5 minutes: none later than one tick; a dead
    # sweeper's lease has run out by the next tick)
    late = [t for t in expected if arrivals.visible_at[t] - parse_rfc3339(t) > 5 * MINUTE]
    assert not late
    # And the runs list agrees, newest first
    runs, _ = deps.schedules.runs(schedule.id, limit=3)
    assert [r.run.outcome for r in runs] == [RunOutcome.FIRED] * 3
    assert runs[0].run.at_ms > runs[1].run.at_ms > runs[2].run.at_ms


def test_two_sweepers_racing_on_a_schedule_create_each_occurrence_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, rate="30 seconds", start_at="2026-11-21T12:20:00Z")
    session = boto3.Session()
    second = _sweeper(deps, clock)
    ran: list[bool] = []

    def run_second(params: dict[str, Any], **_: Any) -> None:
        if not ran and params["ExpressionAttributeValues"][":pk"]["S"].startswith("shard#"):
            ran.append(True)
            second.sweep([schedule.shard])

    # The second sweeper runs whole in the middle of the first one's work: after its read of
    # the due range, before it claims anything
    session.events.register("provide-client-params.dynamodb.Query", run_second)
    first = _sweeper(deps, clock, session)
    arrivals = Arrivals(deps, clock)
    clock.advance(seconds=600)
    first.sweep([schedule.shard])
    _drive(second, [schedule.shard], clock, arrivals, minutes=30)
    assert ran
    expected = [to_rfc3339(schedule.first_at_ms + i * 30_000) for i in range(40)]
    assert sorted(arrivals.run_at)[:40] == expected
    assert set(arrivals.run_at.values()) == {1}


def test_a_near_first_occurrence_is_sent_by_the_create_call(
    deps: Dependencies, clock: ManualClock
) -> None:
    # A schedule whose first occurrence is in 5 minutes: no sweep needed to send it
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T12:05:00Z")
    arrivals = Arrivals(deps, clock)
    clock.advance(seconds=300)
    arrivals.read()
    assert arrivals.run_at == Counter({"2026-11-21T12:05:00.000Z": 1})
    assert deps.schedules.get(schedule.id).next_run_at_ms == schedule.first_at_ms + 3_600_000
    assert deps.schedules.get(schedule.id).last_run is not None


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _schedule(cron: str, zone: str) -> Schedule:
    return Schedule(
        id="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2",
        queue="default",
        payload_json="null",
        priority=Priority.NORMAL,
        timezone=zone,
        misfire=Misfire.FIRE_ONCE,
        shard=0,
        created_at_ms=0,
        anchor_ms=0,
        first_at_ms=0,
        cron=cron,
    )


def _utc(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%MZ")


@pytest.mark.parametrize(
    ("zone", "cron", "after", "expected"),
    [
        # New York springs forward on 2027-03-14 at 02:00 EST -> 03:00 EDT: 02:30 does not
        # exist that day, so it fires at the first instant after the gap, 03:00 EDT (07:00Z);
        # the next day 02:30 EDT again (06:30Z).
        (
            "America/New_York",
            "30 2 * * *",
            "2027-03-13T12:00Z",
            ["2027-03-14T07:00Z", "2027-03-15T06:30Z"],
        ),
        # New York falls back on 2027-11-07 at 02:00 EDT -> 01:00 EST: 01:30 happens twice and
        # fires once, on its first pass (01:30 EDT = 05:30Z), not again at 01:30 EST (06:30Z).
        (
            "America/New_York",
            "30 1 * * *",
            "2027-11-06T12:00Z",
            ["2027-11-07T05:30Z", "2027-11-08T06:30Z"],
        ),
        # London springs forward on 2027-03-28 at 01:00 GMT -> 02:00 BST: 01:30 -> 02:00 BST.
        (
            "Europe/London",
            "30 1 * * *",
            "2027-03-27T12:00Z",
            ["2027-03-28T01:00Z", "2027-03-29T00:30Z"],
        ),
        # London falls back on 2027-10-31 at 02:00 BST -> 01:00 GMT: 01:30 fires once (BST).
        (
            "Europe/London",
            "30 1 * * *",
            "2027-10-30T12:00Z",
            ["2027-10-31T00:30Z", "2027-11-01T01:30Z"],
        ),
    ],
)
def test_dst_skipped_and_repeated_wall_times(
    zone: str, cron: str, after: str, expected: list[str]
) -> None:
    schedule = _schedule(cron, zone)
    at = _ms(after.replace("Z", ":00+00:00"))
    got = []
    for _ in expected:
        next_at = schedule.next_after(at)
        assert next_at is not None
        got.append(_utc(next_at))
        at = next_at
    assert got == expected


@pytest.mark.parametrize(
    ("zone", "start", "expected"),
    [
        # Every 30 minutes through New York's spring-forward night: 02:00 and 02:30 do not
        # exist; they and 03:00 fire once, together, at 03:00 EDT (07:00Z).
        (
            "America/New_York",
            "2027-03-14T05:05:00+00:00",  # 00:05 EST
            ["05:30", "06:00", "06:30", "07:00", "07:30", "08:00"],
        ),
        # Every 30 minutes through London's fall-back night: 01:00 and 01:30 happen twice and
        # fire on the first pass only (00:00Z and 00:30Z, BST), then 02:00 GMT (02:00Z).
        (
            "Europe/London",
            "2027-10-30T23:05:00+00:00",  # 00:05 BST
            ["23:30", "00:00", "00:30", "02:00", "02:30", "03:00"],
        ),
    ],
)
def test_dst_through_the_sweeper(
    deps: Dependencies, clock: ManualClock, zone: str, start: str, expected: list[str]
) -> None:
    # Given an every-30-minutes schedule created just before a DST change
    clock.set(_ms(start))
    schedule = _create(deps, cron="*/30 * * * *", timezone=zone, start_at=start)
    arrivals = Arrivals(deps, clock)
    # When the sweeper runs every 10 minutes through the change
    sweeper = _sweeper(deps, clock)
    for _ in range(24):
        clock.advance(seconds=600)
        sweeper.sweep([schedule.shard])
        arrivals.read()
    # Then each occurrence arrived once, at the instants the DST rules give (UTC shown)
    got = [t[11:16] for t in sorted(arrivals.run_at)][: len(expected)]
    assert got == expected
    assert set(arrivals.run_at.values()) == {1}


@pytest.mark.parametrize("misfire", [Misfire.FIRE_ONCE, Misfire.SKIP])
def test_misfire_after_a_three_hour_outage(
    deps: Dependencies, clock: ManualClock, misfire: Misfire
) -> None:
    # Given an every-5-minutes schedule running normally for half an hour
    schedule = _create(deps, cron="*/5 * * * *", misfire=str(misfire))
    arrivals = Arrivals(deps, clock)
    sweeper = _sweeper(deps, clock)
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=30)
    before = set(arrivals.run_at)
    # When no sweeper runs for 3 hours (what was queued before still arrives)
    clock.advance(seconds=3 * 3600)
    arrivals.read()
    outage_end = clock.now_ms()
    queued_before = set(arrivals.run_at) - before
    # And then sweeps resume
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=30)
    after = sorted(set(arrivals.run_at) - before - queued_before)
    # Then after the outage come: with fire_once, one catch-up (the first missed occurrence,
    # run now), with skip none; then the normal cadence from the next occurrence after now
    cadence = [t for t in after if parse_rfc3339(t) > outage_end]
    catch_up = [t for t in after if parse_rfc3339(t) <= outage_end]
    assert len(catch_up) == (1 if misfire is Misfire.FIRE_ONCE else 0)
    first_after = schedule.next_after(outage_end + MINUTE)  # the first sweep after the outage
    assert first_after is not None
    assert cadence[0] == to_rfc3339(first_after)
    assert [parse_rfc3339(b) - parse_rfc3339(a) for a, b in itertools.pairwise(cadence)] == [
        300_000
    ] * (len(cadence) - 1)
    if catch_up:
        assert arrivals.visible_at[catch_up[0]] - outage_end <= 60_000  # it ran at once
    # And the runs list shows the missed head as fired late or skipped
    runs, _ = deps.schedules.runs(schedule.id, limit=50)
    missed = [r for r in runs if r.run.decided_at_ms - r.run.at_ms > 60_000]
    assert len(missed) == 1
    expected = RunOutcome.FIRED if misfire is Misfire.FIRE_ONCE else RunOutcome.SKIPPED
    assert missed[0].run.outcome is expected
    assert set(arrivals.run_at.values()) == {1}


def test_pause_stops_every_occurrence_and_resume_applies_fire_once(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an every-minute schedule whose next 14 minutes are already in SQS
    schedule = _create(deps, cron="* * * * *")
    arrivals = Arrivals(deps, clock)
    sweeper = _sweeper(deps, clock)
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=5)
    # When it is paused for two hours while sweeps go on
    paused = deps.schedules.pause(schedule.id)
    assert paused.state is ScheduleState.PAUSED
    pause_at = clock.now_ms()
    in_sqs = [
        r.job for r in deps.schedules.runs(schedule.id, limit=20)[0] if r.run.at_ms > pause_at
    ]
    assert in_sqs and {j.status for j in in_sqs if j} == {Status.PAUSED}
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=120)
    # Then the messages sent before the pause still arrive, but their jobs are paused, so the
    # consumer skips them; and no new occurrence was sent at all
    during = [t for t in arrivals.run_at if parse_rfc3339(t) > pause_at]
    assert {deps.jobs.get(j.id).status for j in in_sqs if j} == {Status.PAUSED}
    assert len(during) == len(in_sqs)
    # When it is resumed
    resumed_at = clock.now_ms()
    assert deps.schedules.resume(schedule.id).state is ScheduleState.ACTIVE
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=20)
    # Then one missed occurrence runs at once (fire_once), then the cadence from now
    runs, _ = deps.schedules.runs(schedule.id, limit=100)
    ran_after = [
        r
        for r in runs
        if r.job is not None and r.job.status is Status.QUEUED and r.run.at_ms > pause_at
    ]
    catch_ups = [r for r in ran_after if r.run.at_ms < resumed_at]
    assert len(catch_ups) == 1
    cadence = sorted(r.run.at_ms for r in ran_after if r.run.at_ms >= resumed_at)
    assert cadence[0] - resumed_at <= MINUTE
    assert all(b - a == MINUTE for a, b in itertools.pairwise(cadence))


def test_resume_with_skip_runs_nothing_missed(deps: Dependencies, clock: ManualClock) -> None:
    schedule = _create(deps, cron="*/10 * * * *", misfire="skip")
    arrivals = Arrivals(deps, clock)
    sweeper = _sweeper(deps, clock)
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=3)
    deps.schedules.pause(schedule.id)
    pause_at = clock.now_ms()
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=90)
    resumed_at = clock.now_ms()
    deps.schedules.resume(schedule.id)
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=40)
    runs, _ = deps.schedules.runs(schedule.id, limit=100)
    queued = sorted(
        r.run.at_ms
        for r in runs
        if r.job is not None and r.job.status is Status.QUEUED and r.run.at_ms > pause_at
    )
    assert queued and queued[0] >= resumed_at  # nothing missed ran
    assert all(b - a == 10 * MINUTE for a, b in itertools.pairwise(queued))


def test_a_short_pause_sends_the_paused_occurrences_again_for_their_time(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an every-minute schedule paused at 12:02 and resumed at 12:07:30, while the
    # occurrences up to 12:16 were already in SQS
    schedule = _create(deps, cron="* * * * *")
    arrivals = Arrivals(deps, clock)
    sweeper = _sweeper(deps, clock)
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=2)
    deps.schedules.pause(schedule.id)
    clock.advance(seconds=330)
    deps.schedules.resume(schedule.id)
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=30)
    runs, _ = deps.schedules.runs(schedule.id, limit=60)
    now = clock.now_ms()
    # (each job as GET shows it: a sent job is pending until taken, shown queued)
    status = {
        to_rfc3339(r.run.at_ms)[11:16]: deps.sweeps.as_shown(r.job, now_ms=now).status
        if r.job
        else None
        for r in runs
    }
    # Then of 12:03 to 12:06, missed while paused, one runs (fire_once: the latest), the
    # others are cancelled; 12:07 (30 s late, within the grace) and every later one run
    assert [status[f"12:0{m}"] for m in range(3, 7)] == [Status.CANCELLED] * 3 + [Status.QUEUED]
    later = [s for t, s in status.items() if t >= "12:07"]
    assert len(later) > 20 and set(later) == {Status.QUEUED}


def test_delete_cancels_what_is_queued_and_nothing_more_is_created(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, cron="* * * * *")
    sweeper = _sweeper(deps, clock)
    arrivals = Arrivals(deps, clock)
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=3)
    deps.schedules.delete(schedule.id)
    with pytest.raises(ScheduleNotFound):
        deps.schedules.get(schedule.id)
    deps.schedules.delete(schedule.id)  # again: harmless
    deleted_at = clock.now_ms()
    _drive(sweeper, [schedule.shard], clock, arrivals, minutes=60)
    # Then every occurrence not yet due was cancelled, and none was created after it
    items = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]
    occurrences = {int(i["sk"]["S"][:13]): i["status"]["S"] for i in items if "schedule_id" in i}
    assert {s for at, s in occurrences.items() if at > deleted_at} == {"cancelled"}
    assert max(occurrences) <= deleted_at + 15 * MINUTE


def test_cancelling_one_occurrence_skips_it_and_the_schedule_goes_on(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T13:00:00Z")
    head = schedule.occurrence_key(schedule.first_at_ms).job_id  # waiting in the table
    deps.jobs.cancel(head)
    arrivals = Arrivals(deps, clock)
    _drive(_sweeper(deps, clock), [schedule.shard], clock, arrivals, minutes=150)
    assert sorted(arrivals.run_at) == ["2026-11-21T14:00:00.000Z"]
    runs, _ = deps.schedules.runs(schedule.id, limit=5)
    assert [r.run.outcome for r in runs] == [RunOutcome.FIRED, RunOutcome.CANCELLED]


def test_a_cancelled_occurrence_retried_runs_now_and_the_schedule_goes_on(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given an hourly schedule whose waiting occurrence (13:00) is cancelled, then retried
    # (POST /jobs/{id}/retry) before any sweep reached it
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T13:00:00Z")
    head = schedule.occurrence_key(schedule.first_at_ms).job_id
    deps.jobs.cancel(head)
    retried = deps.jobs.retry(head)
    # Then the retried occurrence is sent at once (a retry runs now, at 12:00)
    assert retried.status is Status.QUEUED
    arrivals = Arrivals(deps, clock)
    [envelope] = arrivals.read()
    assert (envelope["id"], envelope["run_at"]) == (head, "2026-11-21T12:00:00.000Z")
    # And the schedule is not stalled: the next occurrences run at 14:00 and 15:00, each once
    _drive(_sweeper(deps, clock), [schedule.shard], clock, arrivals, minutes=185)
    assert arrivals.run_at == Counter(
        {
            "2026-11-21T12:00:00.000Z": 1,
            "2026-11-21T14:00:00.000Z": 1,
            "2026-11-21T15:00:00.000Z": 1,
        }
    )
    runs, _ = deps.schedules.runs(schedule.id, limit=5)
    assert [r.run.at_ms for r in runs] == [
        schedule.first_at_ms + 2 * 3_600_000,
        schedule.first_at_ms + 3_600_000,
        schedule.first_at_ms,
    ]
    # And 13:00's run record says it was cancelled, while its job shows it ran again
    assert runs[-1].run.outcome is RunOutcome.CANCELLED
    assert runs[-1].job is not None and runs[-1].job.status is Status.QUEUED


def test_an_occurrence_cannot_be_paused_as_a_job(deps: Dependencies) -> None:
    schedule = _create(deps, rate="1 hour", start_at="2026-11-21T15:00:00Z")
    head = schedule.occurrence_key(schedule.first_at_ms).job_id  # waiting in the table
    with pytest.raises(Conflict, match="pause the schedule"):
        deps.jobs.pause(head)


def test_start_and_end_bound_the_occurrences(deps: Dependencies, clock: ManualClock) -> None:
    schedule = _create(
        deps, rate="10 minutes", start_at="2026-11-21T12:30:00Z", end_at="2026-11-21T13:00:00Z"
    )
    arrivals = Arrivals(deps, clock)
    _drive(_sweeper(deps, clock), [schedule.shard], clock, arrivals, minutes=120)
    assert sorted(arrivals.run_at) == [
        "2026-11-21T12:30:00.000Z",
        "2026-11-21T12:40:00.000Z",
        "2026-11-21T12:50:00.000Z",
        "2026-11-21T13:00:00.000Z",
    ]
    assert deps.schedules.get(schedule.id).next_run_at_ms is None


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"cron": "61 * * * *"}, "cron", "not a valid cron expression"),
        ({"cron": "* * *"}, "cron", "has 3 fields"),
        ({"cron": "* * * * * *"}, "cron", "every second"),
        ({"cron": "0 0 30 2 *"}, "cron", "no occurrence"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus_Mons"}, "timezone", "unknown time zone"),
        ({"rate": "5 fortnights"}, "rate", "not a rate"),
        ({"rate": "5 seconds"}, "rate", "between 10 seconds and 365 days"),
        (
            {
                "rate": "1 hour",
                "start_at": "2026-12-01T00:00:00Z",
                "end_at": "2026-11-30T00:00:00Z",
            },
            "end_at",
            "after start_at",
        ),
        ({"rate": "1 hour", "end_at": "2026-11-21T11:00:00Z"}, "end_at", "no occurrence"),
        ({"rate": "1 hour", "queue": "nope"}, "queue", "unknown queue"),
    ],
)
def test_invalid_schedules_name_the_field_and_write_nothing(
    deps: Dependencies, fields: dict[str, Any], field: str, reason: str
) -> None:
    from pydantic import ValidationError  # noqa: PLC0415

    from sundial.api.app import field_errors  # noqa: PLC0415

    try:
        _create(deps, **fields)
    except InvalidInput as error:
        assert (error.field, reason in error.reason) == (field, True)
    except ValidationError as error:
        [problem] = field_errors(list(error.errors()))  # type: ignore[arg-type]
        assert problem.field == field and reason in problem.reason, problem
    else:
        pytest.fail("accepted")
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0


def test_idempotent_create(deps: Dependencies) -> None:
    body = {"queue": "default", "rate": "1 hour", "idempotency_key": "nightly"}
    first = deps.schedules.create(CreateSchedule.model_validate(body))
    again = deps.schedules.create(CreateSchedule.model_validate(body))
    assert first.created and not again.created
    assert again.schedule.id == first.schedule.id
    with pytest.raises(Conflict):
        deps.schedules.create(CreateSchedule.model_validate({**body, "rate": "2 hours"}))


def _template(now: int, **fields: Any) -> Schedule:
    return Schedule(
        id="01KAGQ0000000000000000TEST",
        queue="email",
        payload_json="null",
        priority=Priority.NORMAL,
        timezone="UTC",
        misfire=Misfire.FIRE_ONCE,
        shard=0,
        created_at_ms=now,
        anchor_ms=now,
        first_at_ms=now,
        **fields,
    )


def test_a_call_starting_a_chain_writes_the_occurrences_of_15_minutes_and_the_next() -> None:
    now = parse_rfc3339("2026-11-21T12:00:00Z")
    minute = 60_000
    every_10_s = _template(now, rate="10 seconds")
    # A create now: 91 occurrences sent (now, +10 s, ..., +900 s) and the next written
    assert occurrences_at_once(every_10_s, now, now_ms=now) == 92
    # One starting 15 minutes or more ahead: just that one, for the sweepers
    assert occurrences_at_once(every_10_s, now + 20 * minute, now_ms=now) == 1
    # An every-minute cron: 12:00 to 12:15 sent, 12:16 written
    assert occurrences_at_once(_template(now, cron="* * * * *"), now, now_ms=now) == 17
    # A head missed by two hours (a resume): it, then the chain from now on, as decided then
    assert occurrences_at_once(every_10_s, now - 120 * minute, now_ms=now) == 1 + 91
    # One ending within the window: only its occurrences
    ending = _template(now, rate="10 seconds", end_at_ms=now + 25_000)
    assert occurrences_at_once(ending, now, now_ms=now) == 3


def test_an_idempotency_key_is_per_queue(deps: Dependencies) -> None:
    # Given a schedule on `default` with the key "nightly"
    body = {"rate": "1 hour", "idempotency_key": "nightly"}
    theirs = deps.schedules.create(CreateSchedule.model_validate({**body, "queue": "default"}))
    # When `email` uses the same key, with other settings (its queue, for one)
    ours = deps.schedules.create(CreateSchedule.model_validate({**body, "queue": "email"}))
    # Then that is another schedule, not a conflict; the id is derived from queue and key
    assert ours.created and ours.schedule.id != theirs.schedule.id
    assert ours.schedule.id == schedule_id_for("email", "nightly")
    assert theirs.schedule.id == schedule_id_for("default", "nightly")


def test_a_schedule_created_before_keys_were_per_queue_keeps_its_id_and_its_key(
    deps: Dependencies, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule on `default` created when its id was derived from its key alone
    body = {"queue": "default", "rate": "1 hour", "idempotency_key": "nightly"}
    with monkeypatch.context() as patch:
        patch.setattr(schedule_service, "schedule_id_for", lambda _, key: legacy_schedule_id(key))
        old = deps.schedules.create(CreateSchedule.model_validate(body)).schedule
    assert old.id == legacy_schedule_id("nightly") != schedule_id_for("default", "nightly")
    # Then its id still addresses it
    assert deps.schedules.get(old.id).schedule.queue == "default"
    # And a repeat create on its queue finds it (no second schedule), a changed one conflicts
    again = deps.schedules.create(CreateSchedule.model_validate(body))
    assert (again.created, again.schedule.id) == (False, old.id)
    with pytest.raises(Conflict):
        deps.schedules.create(CreateSchedule.model_validate({**body, "rate": "2 hours"}))
    # And another queue's create with that key makes its own schedule, as if there were none
    other = deps.schedules.create(CreateSchedule.model_validate({**body, "queue": "email"}))
    assert other.created and other.schedule.id == schedule_id_for("email", "nightly")
    assert deps.schedules.get(old.id).schedule.state is ScheduleState.ACTIVE


def test_write_units_per_occurrence(deps: Dependencies, clock: ManualClock) -> None:
    # Given an every-minute schedule, and a sweeper and a consumer on one metered session
    schedule = _create(deps, cron="* * * * *", start_at="2026-11-21T12:30:00Z")
    harness = Harness(deps, clock, lambda job: {"ok": True}, visibility_timeout_s=None)
    # When about 100 occurrences are swept, sent and run (then the sweeps stop and the
    # consumer drains what was already sent)
    for _ in range(100):
        clock.advance(seconds=60)
        harness.sweeper.sweep([schedule.shard])
        harness.poll()
    for _ in range(20):
        clock.advance(seconds=60)
        harness.poll()
    # Then each occurrence cost 4 writes: its run record and its successor's item (2 puts; the
    # first occurrence was written by the create), its attempt taken (running) and its
    # success; a sweep writes no job item. The sweep cursor is a per-shard cost, counted apart
    # (a lease and its release per sweep that saw anything).
    runs, _ = deps.schedules.runs(schedule.id, limit=200)
    done = [r for r in runs if r.job and r.job.status is Status.SUCCEEDED]
    n = len(done)
    assert n == len(harness.calls) == len(runs) >= 80
    assert {k: v for k, v in harness.meter.requests.items() if k != "cursor"} == {
        "put": 2 * n,
        "other": 2 * n,
    }
    assert harness.meter.job_writes() / n == 4
