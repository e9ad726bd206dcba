"""GET /schedules?queue= underneath: the per-queue listing index of schedules, written and
removed in the transactions that create and delete a schedule, paged by an opaque cursor, and
backfilled for schedules created before it existed."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sundial.backfill import backfill_schedules, main
from sundial.clock import ManualClock
from sundial.errors import InvalidInput, QueueNotFound
from sundial.model.dag import SubmitDag
from sundial.model.schedule import CreateSchedule, Schedule, ScheduleState, UpdateSchedule
from sundial.services.cursors import encode_cursor
from sundial.store.schedules import Indexed, listing_pk
from sundial.wiring import Dependencies
from tests.support import TABLE


def _create(deps: Dependencies, clock: ManualClock, **fields: Any) -> Schedule:
    clock.advance(seconds=1)  # created one second apart: the listing's order is creation's
    request = CreateSchedule.model_validate({"queue": "default", "rate": "1 hour", **fields})
    return deps.schedules.create(request).schedule


def _listed(deps: Dependencies, queue: str = "default", limit: int = 100) -> list[list[str]]:
    """Every page of the queue's listing, as ids."""
    pages, cursor = [], None
    while True:
        page, cursor = deps.schedules.of_queue(queue, limit=limit, cursor=cursor)
        pages.append([schedule.id for schedule in page])
        if cursor is None:
            return pages


def _listing_items(queue: str) -> list[dict[str, Any]]:
    response = boto3.client("dynamodb").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": listing_pk(queue)}},
    )
    return list(response["Items"])


def test_schedules_are_listed_per_queue_oldest_first_across_pages(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given five schedules on `default` and one on `email`
    ids = [_create(deps, clock, name=f"s{i}").id for i in range(5)]
    other = _create(deps, clock, queue="email").id
    # When `default` is listed two at a time, Then the pages hold each once, oldest first
    pages = _listed(deps, limit=2)
    assert [i for page in pages for i in page] == ids
    assert [len(page) for page in pages[:3]] == [2, 2, 1]
    # And `email` lists only its own
    assert _listed(deps, "email") == [[other]]


def test_a_listed_schedule_shows_its_current_settings_and_state(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a schedule renamed and paused after it was created
    schedule = _create(deps, clock, name="before")
    deps.schedules.update(schedule.id, UpdateSchedule.model_validate({"name": "after"}))
    deps.schedules.pause(schedule.id)
    # When listed, Then it shows what GET would (read from the schedule item, not the index)
    (listed,), _ = deps.schedules.of_queue("default", limit=10, cursor=None)
    assert (listed.name, listed.state, listed.revision) == ("after", ScheduleState.PAUSED, 1)
    # And the update and the pause wrote nothing to the index (its item holds the id only)
    (item,) = _listing_items("default")
    assert set(item) == {"pk", "sk", "schedule_id", "created_at"}


def test_a_deleted_schedule_leaves_the_listing_in_the_same_transaction(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given two schedules
    kept, deleted = _create(deps, clock), _create(deps, clock)
    # When one is deleted (twice: a repeat is harmless)
    deps.schedules.delete(deleted.id)
    deps.schedules.delete(deleted.id)
    # Then it is no longer listed, and its index item is gone; the other stays
    assert _listed(deps) == [[kept.id]]
    assert [item["schedule_id"]["S"] for item in _listing_items("default")] == [kept.id]
    stored = deps.schedule_store.get(deleted.id)
    assert stored is not None and stored.state is ScheduleState.DELETED


def test_a_repeated_create_writes_no_second_index_item(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a schedule created with an idempotency key, When the same request comes again
    first = _create(deps, clock, idempotency_key="nightly")
    again = _create(deps, clock, idempotency_key="nightly")
    # Then it is the same schedule, listed once
    assert again.id == first.id
    assert _listed(deps) == [[first.id]]
    assert len(_listing_items("default")) == 1


def test_the_listing_refuses_an_unknown_queue_and_a_foreign_cursor(
    deps: Dependencies, clock: ManualClock
) -> None:
    for _ in range(3):
        _create(deps, clock)
        _create(deps, clock, queue="email")
    with pytest.raises(QueueNotFound):
        deps.schedules.of_queue("nope", limit=10, cursor=None)
    _, cursor = deps.schedules.of_queue("default", limit=1, cursor=None)
    assert cursor is not None
    # Another queue's cursor and a made-up one are refused (400)
    for bad in (cursor, "not-a-cursor", cursor + "A"):
        with pytest.raises(InvalidInput):
            deps.schedules.of_queue("email", limit=1, cursor=bad)
    # And so is another listing's (a dead letters' cursor) on the same queue
    with pytest.raises(InvalidInput):
        deps.schedules.of_queue("default", limit=1, cursor=encode_cursor("default", "0" * 13))


def _drop_index(queue: str) -> None:
    """As a deployment from before the listing: schedules without index items."""
    client = boto3.client("dynamodb")
    for item in _listing_items(queue):
        client.delete_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})


def test_the_backfill_indexes_older_schedules_once_and_never_a_deleted_one(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given schedules from before the index (one of them deleted since), on two queues
    live = [_create(deps, clock).id, _create(deps, clock, queue="email").id]
    gone = _create(deps, clock).id
    deps.schedules.delete(gone)
    _drop_index("default")
    _drop_index("email")
    assert _listed(deps) == [[]]
    # When the backfill runs, Then every live schedule is listed, the deleted one is not
    outcomes = backfill_schedules(deps.schedule_store)
    assert outcomes == {Indexed.INDEXED: 2, Indexed.DELETED: 1}
    assert _listed(deps) == [[live[0]]] and _listed(deps, "email") == [[live[1]]]
    # And a second run adds nothing
    assert backfill_schedules(deps.schedule_store) == {Indexed.ALREADY: 2, Indexed.DELETED: 1}
    assert len(_listing_items("default")) == 1


def test_a_delete_racing_the_backfill_is_never_listed(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a schedule the backfill's scan read while it was live, deleted before its write
    schedule = _create(deps, clock)
    _drop_index("default")
    deps.schedules.delete(schedule.id)
    # When the backfill writes its index item, Then the check of the schedule refuses it
    assert deps.schedule_store.index(schedule) is Indexed.DELETED
    assert _listing_items("default") == []


def test_the_backfill_command_indexes_and_says_what_it_did(
    deps: Dependencies, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a schedule and a DAG from before the indexes
    schedule = _create(deps, clock)
    deps.dags.submit(SubmitDag.model_validate({"name": "one", "nodes": {"a": {"queue": "email"}}}))
    _drop_index("default")
    client = boto3.client("dynamodb")
    for item in client.scan(TableName=TABLE)["Items"]:
        if item["pk"]["S"].startswith("dags#"):
            client.delete_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})
    # When `python -m sundial.backfill --table ...` runs, twice
    main(["--table", TABLE])
    main(["--table", TABLE])
    # Then the first run indexed both, the second found them indexed
    assert capsys.readouterr().out.splitlines() == [
        "schedules: 1 indexed, 0 already listed, 0 deleted (not listed)",
        "DAG entries (one per DAG and queue): 1 written, 0 already there",
        "schedules: 0 indexed, 1 already listed, 0 deleted (not listed)",
        "DAG entries (one per DAG and queue): 0 written, 1 already there",
    ]
    assert _listed(deps) == [[schedule.id]]
