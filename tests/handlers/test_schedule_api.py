"""/schedules and /queues through their functions, with HTTP API v2 events."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock, to_rfc3339
from sundial.wiring import Dependencies
from tests.support import call_api, load_handler

schedules_lambda = load_handler("schedules")
queues_lambda = load_handler("queues")


def _schedules(method: str, path: str, body: Any = None) -> tuple[int, Any]:
    parts = path.partition("?")[0].strip("/").split("/")
    route = "/schedules"
    if len(parts) >= 2:
        route += "/{schedule_id}" + "".join(f"/{p}" for p in parts[2:])
    return call_api(schedules_lambda, method, path, route=route, body=body)


def _queues(method: str, path: str) -> tuple[int, Any]:
    parts = path.strip("/").split("/")
    route = "/queues/{queue}" + "".join(f"/{p}" for p in parts[2:])
    return call_api(queues_lambda, method, path, route=route)


def _item_count(deps: Dependencies) -> int:
    return boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"]


def test_create_get_runs_pause_resume_delete(deps: Dependencies, clock: ManualClock) -> None:
    # When a schedule is created
    status, created = _schedules(
        "POST",
        "/schedules",
        {
            "name": "nightly report",
            "cron": "0 6 * * *",
            "timezone": "Europe/London",
            "queue": "default",
            "payload": {"report": "daily"},
            "priority": "high",
            "misfire": "skip",
        },
    )
    # Then it is 201 with the schedule and its first occurrence
    assert status == 201, created
    assert created["state"] == "active"
    assert created["next_run_at"] == "2026-11-22T06:00:00.000Z"
    assert created["timezone"] == "Europe/London" and created["misfire"] == "skip"
    schedule_id = created["id"]
    # And GET returns the same
    assert _schedules("GET", f"/schedules/{schedule_id}") == (200, created)
    # And its runs are empty until one fires
    assert _schedules("GET", f"/schedules/{schedule_id}/runs") == (
        200,
        {"runs": [], "next_before": None},
    )
    # When it is paused, then resumed
    status, paused = _schedules("POST", f"/schedules/{schedule_id}/pause")
    assert (status, paused["state"]) == (200, "paused") and paused["paused_at"]
    status, resumed = _schedules("POST", f"/schedules/{schedule_id}/resume")
    assert (status, resumed["state"]) == (200, "active")
    status, error = _schedules("POST", f"/schedules/{schedule_id}/resume")
    assert status == 409 and "active" in error["message"]
    # When it is deleted, it is gone
    assert _schedules("DELETE", f"/schedules/{schedule_id}") == (
        200,
        {"id": schedule_id, "state": "deleted"},
    )
    assert _schedules("GET", f"/schedules/{schedule_id}")[0] == 404
    assert _schedules("DELETE", f"/schedules/{schedule_id}")[0] == 200


def test_runs_are_paginated_newest_first(deps: Dependencies, clock: ManualClock) -> None:
    # Given a schedule that has fired every 10 seconds for a while
    _, created = _schedules("POST", "/schedules", {"rate": "10 seconds", "queue": "default"})
    for _ in range(3):
        clock.advance(seconds=60)
        deps.sweeper.sweep(list(range(8)))
    # When its runs are read two at a time
    status, page = _schedules("GET", f"/schedules/{created['id']}/runs?limit=2")
    assert status == 200
    first, second = page["runs"]
    assert first["scheduled_for"] > second["scheduled_for"]
    assert {first["outcome"], first["status"]} == {"fired", "queued"}
    _, older = _schedules(
        "GET", f"/schedules/{created['id']}/runs?limit=2&before={page['next_before']}"
    )
    assert older["runs"][0]["scheduled_for"] < second["scheduled_for"]
    # And a bad page argument is a 400 naming it
    status, error = _schedules("GET", f"/schedules/{created['id']}/runs?before=yesterday")
    assert status == 400 and error["errors"][0]["field"] == "before"
    status, error = _schedules("GET", f"/schedules/{created['id']}/runs?limit=1000")
    assert status == 400 and error["errors"][0]["field"] == "limit"


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"cron": "61 * * * *"}, "cron", "not a valid cron expression"),
        ({"cron": "0 9 * * *", "timezone": "Europe/Lndon"}, "timezone", "unknown time zone"),
        (
            {
                "rate": "1 hour",
                "start_at": "2026-12-02T00:00:00Z",
                "end_at": "2026-12-01T00:00:00Z",
            },
            "end_at",
            "after start_at",
        ),
        ({"rate": "1 hour", "cron": "0 * * * *"}, "cron", "exactly one of cron or rate"),
        ({}, "cron", "exactly one of cron or rate"),
        ({"rate": "every now and then"}, "rate", "not a rate"),
        ({"rate": "1 hour", "misfire": "sometimes"}, "misfire", "fire_once"),
        ({"rate": "1 hour", "queue": "nope"}, "queue", "unknown queue"),
        ({"rate": "1 hour", "start_at": "tomorrow"}, "start_at", "RFC 3339"),
    ],
)
def test_bad_schedules_are_400_naming_the_field_and_change_nothing(
    deps: Dependencies, body: dict[str, Any], field: str, reason: str
) -> None:
    status, error = _schedules("POST", "/schedules", {"queue": "default", **body})
    assert status == 400, error
    assert [e["field"] for e in error["errors"]] == [field], error
    assert reason in error["errors"][0]["reason"], error
    assert _item_count(deps) == 0


def test_unknown_and_malformed_schedule_ids(deps: Dependencies) -> None:
    unknown = "01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"
    for method, suffix in [("GET", ""), ("GET", "/runs"), ("POST", "/pause"), ("DELETE", "")]:
        assert _schedules(method, f"/schedules/{unknown}{suffix}")[0] == 404
        status, error = _schedules(method, f"/schedules/not-an-id{suffix}")
        assert status == 400 and error["errors"][0]["field"] == "schedule_id"
    assert _item_count(deps) == 0


def test_queue_pause_and_resume_over_http(deps: Dependencies) -> None:
    assert _queues("GET", "/queues/default") == (
        200,
        {
            "queue": "default",
            "paused": False,
            "paused_at": None,
            "catching_up": False,
            "dispatched": None,
        },
    )
    status, paused = _queues("POST", "/queues/default/pause")
    assert (status, paused["paused"], paused["paused_at"]) == (
        200,
        True,
        "2026-11-21T12:00:00.000Z",
    )
    status, resumed = _queues("POST", "/queues/default/resume")
    assert (status, resumed["paused"], resumed["dispatched"]) == (200, False, 0)
    status, error = _queues("POST", "/queues/nope/pause")
    assert status == 404 and "nope" in error["message"]


def _snapshot(deps: Dependencies) -> list[dict[str, Any]]:
    items = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"cron": "15 * * * *"}, {"cron": "15 * * * *", "rate": None}),
        ({"rate": "2 hours"}, {"rate": "2 hours", "cron": None}),
        ({"timezone": "Asia/Tokyo"}, {"timezone": "Asia/Tokyo"}),
        ({"payload": {"report": "weekly"}}, {"payload": {"report": "weekly"}}),
        ({"payload": None}, {"payload": None}),
        ({"priority": "critical"}, {"priority": "critical"}),
        ({"max_attempts": 9}, {"max_attempts": 9}),
        ({"max_attempts": None}, {"max_attempts": None}),
        ({"retry": {"initial_delay_seconds": 5}}, {"retry": {"initial_delay_seconds": 5}}),
        ({"name": "renamed"}, {"name": "renamed"}),
    ],
)
def test_each_field_is_updated_from_the_next_undecided_occurrence(
    deps: Dependencies, change: dict[str, Any], shown: dict[str, Any]
) -> None:
    # Given a schedule waiting for 13:00 (its first occurrence)
    _, created = _schedules(
        "POST",
        "/schedules",
        {
            "queue": "default",
            "cron": "0 * * * *",
            "payload": {"report": "daily"},
            "max_attempts": 4,
        },
    )
    schedule_id = created["id"]
    clock_now = "2026-11-21T12:00:00.000Z"
    assert created["last_run"]["scheduled_for"] == clock_now  # 12:00 ran at creation
    # When one field changes
    status, updated = _schedules("PATCH", f"/schedules/{schedule_id}", change)
    # Then it is 200 with the field, the revision, and where the change applies from
    assert status == 200, updated
    for name, value in shown.items():
        if isinstance(value, dict) and name == "retry":
            assert updated[name]["initial_delay_seconds"] == value["initial_delay_seconds"]
        else:
            assert updated[name] == value, name
    assert updated["revision"] == 1 and updated["queue"] == "default"
    assert updated["replaced_job_id"] is not None
    assert updated["applies_from"] > clock_now
    # And GET agrees; the replaced occurrence is in the runs, as `replaced`
    status, got = _schedules("GET", f"/schedules/{schedule_id}")
    assert got["revision"] == 1 and all(got[k] == updated[k] for k in shown if k != "retry")
    _, runs = _schedules("GET", f"/schedules/{schedule_id}/runs")
    replaced = [r["job_id"] for r in runs["runs"] if r["outcome"] == "replaced"]
    assert replaced == [updated["replaced_job_id"]]
    # And the same request again changes nothing
    before = _snapshot(deps)
    status, again = _schedules("PATCH", f"/schedules/{schedule_id}", change)
    assert (status, again["revision"], again["replaced_job_id"]) == (200, 1, None)
    assert again["applies_from"] == updated["applies_from"]
    assert _snapshot(deps) == before


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({}, "body", "at least one of"),
        ({"cron": "61 * * * *"}, "cron", "not a valid cron expression"),
        ({"cron": "0 * * * *", "rate": "1 hour"}, "cron", "at most one of cron or rate"),
        ({"cron": None}, "cron", "may not be null"),
        ({"timezone": "Europe/Lndon"}, "timezone", "unknown time zone"),
        ({"rate": "every now and then"}, "rate", "not a rate"),
        ({"priority": "urgent"}, "priority", "critical"),
        ({"max_attempts": 0}, "max_attempts", "greater than or equal to 1"),
        ({"queue": "email"}, "queue", "Extra inputs"),
        ({"start_at": "2026-12-01T00:00:00Z"}, "start_at", "Extra inputs"),
    ],
)
def test_bad_updates_are_400_naming_the_field_and_change_nothing(
    deps: Dependencies, body: dict[str, Any], field: str, reason: str
) -> None:
    _, created = _schedules("POST", "/schedules", {"queue": "default", "cron": "0 * * * *"})
    before = _snapshot(deps)
    status, error = _schedules("PATCH", f"/schedules/{created['id']}", body)
    assert status == 400, error
    assert [e["field"] for e in error["errors"]] == [field], error
    assert reason in error["errors"][0]["reason"], error
    assert _snapshot(deps) == before


def test_updating_unknown_malformed_or_deleted_schedules(deps: Dependencies) -> None:
    unknown = "01KAKZ9Q2X8Q9JZ8W7M5N4P3R2"
    assert _schedules("PATCH", f"/schedules/{unknown}", {"payload": 1})[0] == 404
    status, error = _schedules("PATCH", "/schedules/not-an-id", {"payload": 1})
    assert status == 400 and error["errors"][0]["field"] == "schedule_id"
    _, created = _schedules("POST", "/schedules", {"queue": "default", "cron": "0 * * * *"})
    _schedules("DELETE", f"/schedules/{created['id']}")
    before = _snapshot(deps)
    status, error = _schedules("PATCH", f"/schedules/{created['id']}", {"payload": 1})
    assert status == 409 and "deleted" in error["message"]
    assert _snapshot(deps) == before


def test_a_queues_schedules_are_listed_a_page_at_a_time(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given three schedules on `default` (one deleted) and one on `email`
    ids = []
    for queue in ("default", "default", "default", "email"):
        clock.advance(seconds=1)
        status, created = _schedules("POST", "/schedules", {"queue": queue, "rate": "1 hour"})
        assert status == 201, created
        ids.append(created["id"])
    assert _schedules("DELETE", f"/schedules/{ids[1]}")[0] == 200
    # When `default` is listed one at a time, following next_cursor
    listed: list[dict[str, Any]] = []
    cursor: str | None = ""
    while cursor is not None:
        status, page = _schedules("GET", f"/schedules?queue=default&limit=1{cursor}")
        assert status == 200, page
        listed += page["items"]
        cursor = f"&cursor={page['next_cursor']}" if page["next_cursor"] else None
    # Then the live ones come, oldest first, each as a summary
    assert [item["id"] for item in listed] == [ids[0], ids[2]]
    assert listed[0] == {
        "id": ids[0],
        "name": None,
        "cron": None,
        "rate": "1 hour",
        "timezone": "UTC",
        "queue": "default",
        "priority": "normal",
        "state": "active",
        "created_at": "2026-11-21T12:00:01.000Z",
        "paused_at": None,
        "revision": 0,
    }


def test_listing_schedules_needs_a_known_queue_and_a_valid_cursor(deps: Dependencies) -> None:
    assert _schedules("GET", "/schedules")[0] == 400  # no queue
    status, error = _schedules("GET", "/schedules?queue=nope")
    assert status == 404, error
    status, error = _schedules("GET", "/schedules?queue=default&cursor=bogus")
    assert status == 400 and "cursor" in str(error), error
    assert _schedules("GET", "/schedules?queue=default&limit=0")[0] == 400


def _swept_fifteen_second_schedule(deps: Dependencies, clock: ManualClock) -> str:
    """A 15-second schedule a minute old, swept: its occurrences due within the next 15
    minutes are decided and sent ahead (with SQS delays), so most of its runs are upcoming."""
    _, created = _schedules("POST", "/schedules", {"rate": "15 seconds", "queue": "default"})
    clock.advance(seconds=60)
    deps.sweeper.sweep(list(range(8)))
    return str(created["id"])


def test_last_run_is_never_a_future_time(deps: Dependencies, clock: ManualClock) -> None:
    # Given a schedule whose next 15 minutes of occurrences were sent ahead
    schedule_id = _swept_fifteen_second_schedule(deps, clock)
    now = to_rfc3339(clock.now_ms())
    # When it is read, Then its last run is the newest occurrence whose time has come (now:
    # one falls on every 15th second), never one sent ahead for later
    status, schedule = _schedules("GET", f"/schedules/{schedule_id}")
    assert status == 200
    assert schedule["last_run"]["scheduled_for"] == now
    assert schedule["next_run_at"] == to_rfc3339(clock.now_ms() + 15_000)
    # And a moment later the last run is still that one; at the next occurrence, that one
    clock.advance(seconds=14)
    assert _schedules("GET", f"/schedules/{schedule_id}")[1]["last_run"]["scheduled_for"] == now
    clock.advance(seconds=1)
    last = _schedules("GET", f"/schedules/{schedule_id}")[1]["last_run"]
    assert last["scheduled_for"] == to_rfc3339(clock.now_ms())


def test_runs_say_which_are_upcoming_and_list_past_or_upcoming_alone(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given a schedule with five past runs (12:00:00 to 12:01:00) and many sent ahead
    schedule_id = _swept_fifteen_second_schedule(deps, clock)
    now = to_rfc3339(clock.now_ms())
    # When all its runs are read, Then each says whether its time is still ahead
    status, page = _schedules("GET", f"/schedules/{schedule_id}/runs?limit=100")
    assert status == 200
    past = [r for r in page["runs"] if not r["upcoming"]]
    ahead = [r for r in page["runs"] if r["upcoming"]]
    assert [r["scheduled_for"] for r in past] == [
        f"2026-11-21T12:0{m}:{s:02d}.000Z" for m, s in [(1, 0), (0, 45), (0, 30), (0, 15), (0, 0)]
    ]
    assert ahead and all(r["scheduled_for"] > now for r in ahead)
    assert all(r["outcome"] == "fired" for r in ahead)  # decided (sent ahead), not yet run
    # And when=past lists only the past ones, when=upcoming only the others, newest first
    _, only_past = _schedules("GET", f"/schedules/{schedule_id}/runs?when=past&limit=100")
    assert only_past == {"runs": past, "next_before": None}
    _, only_ahead = _schedules("GET", f"/schedules/{schedule_id}/runs?when=upcoming&limit=100")
    assert only_ahead == {"runs": ahead, "next_before": None}
    # And they page like the whole listing: the upcoming ones two at a time
    _, first = _schedules("GET", f"/schedules/{schedule_id}/runs?when=upcoming&limit=2")
    assert first["runs"] == ahead[:2] and first["next_before"] == ahead[1]["scheduled_for"]
    before = first["next_before"]
    _, second = _schedules(
        "GET", f"/schedules/{schedule_id}/runs?when=upcoming&limit=2&before={before}"
    )
    assert second["runs"] == ahead[2:4]
    # And past runs before a time still ahead are the past ones (the bound is now)
    _, bounded = _schedules(
        "GET", f"/schedules/{schedule_id}/runs?when=past&before={ahead[0]['scheduled_for']}"
    )
    assert bounded["runs"] == past
    # And an unknown `when` is a 400 naming it
    status, error = _schedules("GET", f"/schedules/{schedule_id}/runs?when=later")
    assert status == 400 and error["errors"][0]["field"] == "when"
