"""Where a job goes (sundial.model.placement): the one decision, as a table of cases."""

from __future__ import annotations

import pytest

from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.model.placement import (
    Placement,
    Where,
    delay_seconds,
    due_soon,
    make_direct,
    place,
    window_end,
)
from sundial.timing import DIRECT_WINDOW_MS

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("case", "due", "flags", "expected"),
    [
        ("due now", NOW, {}, Placement(Where.SEND, 0)),
        ("overdue: sent at once", NOW - 3_600_000, {}, Placement(Where.SEND, 0)),
        ("a second ahead", NOW + 1_000, {}, Placement(Where.SEND, 1)),
        ("part of a second: rounded up", NOW + 1_001, {}, Placement(Where.SEND, 2)),
        ("exactly at the window", NOW + DIRECT_WINDOW_MS, {}, Placement(Where.SEND, 900)),
        ("just past the window", NOW + DIRECT_WINDOW_MS + 1, {}, Placement(Where.SWEEP)),
        ("a day ahead", NOW + 86_400_000, {}, Placement(Where.SWEEP)),
        ("due soon, paused queue", NOW + 5_000, {"queue_paused": True}, Placement(Where.HOLD)),
        ("overdue, paused queue", NOW - 5_000, {"queue_paused": True}, Placement(Where.HOLD)),
        (
            "far, paused queue: the sweep passes it over, the catch-up reads it",
            NOW + DIRECT_WINDOW_MS + 1,
            {"queue_paused": True},
            Placement(Where.SWEEP),
        ),
        ("paused schedule", NOW + 5_000, {"schedule_paused": True}, Placement(Where.PARK)),
        (
            "paused schedule, far: parked all the same",
            NOW + 86_400_000,
            {"schedule_paused": True},
            Placement(Where.PARK),
        ),
        (
            "paused schedule on a paused queue",
            NOW,
            {"schedule_paused": True, "queue_paused": True},
            Placement(Where.PARK),
        ),
        ("a paused job stays paused", NOW, {"job_paused": True}, Placement(Where.PAUSED)),
    ],
)
def test_place(case: str, due: int, flags: dict[str, bool], expected: Placement) -> None:
    # Given a job due at `due`, When it is placed at NOW, Then it goes where the table says.
    assert place(due, NOW, **flags) == expected, case


def test_a_paused_queue_is_read_only_for_a_job_due_soon() -> None:
    # Given the queue's state as a read, When a job far ahead is placed, Then it is not read.
    reads: list[str] = []

    def paused() -> bool:
        reads.append("read")
        return True

    assert place(NOW + DIRECT_WINDOW_MS + 1, NOW, queue_paused=paused).where is Where.SWEEP
    assert reads == []
    assert place(NOW, NOW, queue_paused=paused).where is Where.HOLD
    assert reads == ["read"]


def test_the_window_boundary_is_one_comparison() -> None:
    assert window_end(NOW) == NOW + DIRECT_WINDOW_MS
    assert due_soon(window_end(NOW), NOW)
    assert not due_soon(window_end(NOW) + 1, NOW)


def test_delay_never_makes_a_message_visible_before_its_due_time() -> None:
    for ahead in (0, 1, 999, 1_000, 1_001, 899_999, 900_000):
        assert NOW + delay_seconds(NOW + ahead, NOW) * 1000 >= NOW + ahead
    assert delay_seconds(NOW + 3_600_000, NOW) == 900  # SQS's longest DelaySeconds
    assert delay_seconds(NOW - 1, NOW) == 0


def test_make_direct() -> None:
    job = Job(
        key=JobKey(shard=0, due_ms=NOW + 60_000, ulid="01" + "0" * 24),
        queue="q",
        payload_json="null",
        priority=Priority.NORMAL,
        max_attempts=1,
        created_at_ms=NOW,
    )
    make_direct(job)
    assert (job.direct, job.expires_at_s, job.resumed_at_ms) == (True, None, None)
    make_direct(job, retention_s=100, taken_at_ms=NOW)
    assert (job.expires_at_s, job.resumed_at_ms) == ((NOW + 60_000) // 1000 + 100, NOW)
