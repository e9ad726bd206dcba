"""Pausing a schedule (issue 26): every occurrence it has decided and not yet run is parked in
as few transactions as DynamoDB allows, each still conditional on the schedule being paused
(sundial.services.chain, "Parking a paused schedule's occurrence")."""

from __future__ import annotations

import os
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.errors import Conflict
from sundial.model.job import Status
from sundial.model.schedule import ScheduleState
from sundial.model.submission import SubmitJob
from sundial.store.jobs import JobStore
from sundial.store.schedules import PARKS_PER_TRANSACTION, Parked, ScheduleStore
from sundial.wiring import Dependencies, configure
from tests.support import WriteMeter
from tests.unit.services.test_schedules import Arrivals, _create, _drive, _sweeper


def _metered(clock: ManualClock) -> tuple[Dependencies, WriteMeter]:
    """A second set of dependencies on a session of its own, whose writes are counted."""
    session = boto3.Session()
    meter = WriteMeter(session)
    return configure(clock=clock, environ=dict(os.environ), session=session), meter


def _ahead(deps: Dependencies, schedule_id: str, now_ms: int) -> list[Any]:
    runs, _ = deps.schedules.runs(schedule_id, limit=100)
    return [r.job for r in runs if r.job is not None and r.run.at_ms > now_ms]


def test_pausing_the_densest_schedule_parks_its_occurrences_in_one_transaction(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a schedule every 10 s (the densest allowed) whose next 14 minutes are in SQS
    schedule = _create(deps, rate="10 seconds")
    _drive(_sweeper(deps, clock), [schedule.shard], clock, Arrivals(deps, clock), minutes=2)
    ahead = _ahead(deps, schedule.id, clock.now_ms())
    assert len(ahead) > 80
    # When it is paused
    metered, meter = _metered(clock)
    assert metered.schedules.pause(schedule.id).state is ScheduleState.PAUSED
    # Then every one of them is parked, in one transaction (one per occurrence before: about
    # 90, which took 11 to 22 s on the local runtime and ran the demo's client out of time)
    assert {j.status for j in _ahead(deps, schedule.id, clock.now_ms())} == {Status.PAUSED}
    assert meter.requests["transaction"] == 1
    assert meter.transaction_items == len(ahead) + 2  # the check, and the waiting head


def _pending_jobs(deps: Dependencies, count: int) -> list[Any]:
    """Pending jobs an hour out: park_write's condition admits them like occurrences."""
    return [
        deps.jobs.submit(SubmitJob.model_validate({"queue": "default", "delay_seconds": 3600})).job
        for _ in range(count)
    ]


def _store(deps: Dependencies, hook: Any = None) -> tuple[ScheduleStore, JobStore, WriteMeter]:
    """Stores on a session of their own, metered, with `hook` after each transaction (hooks
    are registered before any client is made: a client copies the session's hooks)."""
    session = boto3.Session()
    meter = WriteMeter(session)
    if hook is not None:
        session.events.register("after-call.dynamodb.TransactWriteItems", hook)
    dynamodb = session.client("dynamodb")
    table = deps.settings.table_name
    return ScheduleStore(dynamodb, table), JobStore(dynamodb, table), meter


def test_an_occurrence_that_ran_meanwhile_is_skipped_and_the_others_parked(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, cron="0 9 * * *")
    deps.schedules.pause(schedule.id)
    jobs = _pending_jobs(deps, 5)
    schedules, store, meter = _store(deps)
    writes = [store.park_write(job.key, now_ms=clock.now_ms()) for job in jobs]
    # Given one of them taken by a consumer after the pause read it
    deps.jobs.cancel(jobs[2].id)
    # When they are parked
    assert schedules.park_all(schedule.id, writes) is Parked.PARKED
    # Then the others are paused, the taken one is left as it is: two transactions
    statuses = [deps.jobs.get(job.id).status for job in jobs]
    assert statuses == [Status.PAUSED] * 2 + [Status.CANCELLED] + [Status.PAUSED] * 2
    assert meter.requests["transaction"] == 2


def test_a_resume_between_two_transactions_stops_the_parking_there(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given more occurrences than one transaction takes, and a resume that lands after the
    # first transaction of the pause
    schedule = _create(deps, cron="0 9 * * *")
    deps.schedules.pause(schedule.id)
    jobs = _pending_jobs(deps, PARKS_PER_TRANSACTION + 5)
    transactions: list[int] = []

    def resume_after_the_first(**_: Any) -> None:
        transactions.append(1)
        if len(transactions) == 1:
            deps.schedules.resume(schedule.id)  # on the fixture's own clients: not hooked

    schedules, store, _ = _store(deps, resume_after_the_first)
    writes = [store.park_write(job.key, now_ms=clock.now_ms()) for job in jobs]
    # When they are parked
    assert schedules.park_all(schedule.id, writes) is Parked.NOT_PAUSED
    # Then the first transaction's occurrences are parked (the resume, reading after its own
    # write, is what releases such occurrences), and not one of the rest
    statuses = [deps.jobs.get(job.id).status for job in jobs]
    assert statuses == [Status.PAUSED] * PARKS_PER_TRANSACTION + [Status.PENDING] * 5


def test_a_resume_landing_before_the_parks_makes_the_pause_a_409_and_parks_nothing(
    deps: Dependencies, clock: ManualClock
) -> None:
    schedule = _create(deps, rate="10 seconds")
    _drive(_sweeper(deps, clock), [schedule.shard], clock, Arrivals(deps, clock), minutes=1)
    session = boto3.Session()

    def resume_first(**_: Any) -> None:
        deps.schedules.resume(schedule.id)  # on the fixture's own clients: not hooked

    session.events.register("before-call.dynamodb.TransactWriteItems", resume_first)
    metered = configure(clock=clock, environ=dict(os.environ), session=session)
    with pytest.raises(Conflict, match="resumed while this pause ran"):
        metered.schedules.pause(schedule.id)
    assert deps.schedules.get(schedule.id).schedule.state is ScheduleState.ACTIVE
    assert Status.PAUSED not in {j.status for j in _ahead(deps, schedule.id, clock.now_ms())}
