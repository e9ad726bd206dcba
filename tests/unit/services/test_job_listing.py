"""GET /queues/{queue}/jobs underneath: a queue's jobs of one status merged in due order from
every shard's due-time range (no index), paged, bounded; dead ones from the dead-letter index."""

from __future__ import annotations

import random

import pytest

from sundial.clock import ManualClock
from sundial.errors import InvalidInput, QueueNotFound
from sundial.model.job import Job, Status
from sundial.model.submission import SubmitJob
from sundial.services import job_listing
from sundial.services.job_listing import HOUR_MS, JobsPage
from sundial.store.dead_letters import DeadLetter
from sundial.wiring import Dependencies


def _submit(deps: Dependencies, queue: str, delay_s: int) -> Job:
    request = SubmitJob.model_validate({"queue": queue, "delay_seconds": delay_s})
    return deps.jobs.submit(request).job


def _all_pages(deps: Dependencies, status: Status, limit: int, **window: int) -> list[JobsPage]:
    pages, cursor = [], None
    while True:
        page = deps.job_listing.page(
            "default",
            status,
            from_ms=window.get("from_ms"),
            to_ms=window.get("to_ms"),
            limit=limit,
            cursor=cursor,
        )
        pages.append(page)
        cursor = page.next_cursor
        if cursor is None:
            return pages


@pytest.fixture
def mixed(deps: Dependencies) -> dict[Status, list[Job]]:
    """40 jobs over every shard, 20 min to 20 h ahead: on two queues, some paused, some
    cancelled; by status, for `default`, in the listing's order (sort key, then shard)."""
    rng = random.Random(7)
    jobs = [
        _submit(deps, rng.choice(["default", "email"]), rng.randrange(1_200, 72_000))
        for _ in range(40)
    ]
    for job in jobs[::3]:
        deps.jobs.pause(job.id)
    for job in jobs[1::5]:
        deps.jobs.cancel(job.id)
    expected: dict[Status, list[Job]] = {}
    for job in sorted(jobs, key=lambda j: (j.key.sk, j.key.shard)):
        current = deps.jobs.get(job.id)
        if current.queue == "default":
            expected.setdefault(current.status, []).append(current)
    assert all(len(expected[s]) > 1 for s in (Status.PENDING, Status.PAUSED, Status.CANCELLED))
    return expected


@pytest.mark.parametrize("limit", [1, 3, 100])
def test_each_status_is_listed_once_in_due_order_across_pages(
    deps: Dependencies, mixed: dict[Status, list[Job]], limit: int
) -> None:
    for status in (Status.PENDING, Status.PAUSED, Status.CANCELLED, Status.SUCCEEDED):
        pages = _all_pages(deps, status, limit)
        listed = [job.id for page in pages for job in page.jobs]
        assert listed == [job.id for job in mixed.get(status, [])], status
        assert all(len(page.jobs) <= limit for page in pages)


def test_a_small_read_budget_gives_short_pages_and_still_every_job_once(
    deps: Dependencies, mixed: dict[Status, list[Job]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a call may read only a few items (beyond one small read per shard)
    monkeypatch.setattr(job_listing, "READ_CHUNK", 2)
    monkeypatch.setattr(job_listing, "READ_BUDGET", 3)
    # When pending jobs are listed ten at a time
    pages = _all_pages(deps, Status.PENDING, 10)
    # Then pages come back short (some empty) before the end, and together hold each once
    assert len(pages) > 2 and any(len(page.jobs) < 10 for page in pages[:-1])
    assert [job.id for page in pages for job in page.jobs] == [
        job.id for job in mixed[Status.PENDING]
    ]
    # And no call read more than one chunk per shard plus its budget (plus one last chunk)
    assert max(page.scanned for page in pages) <= deps.settings.shard_count * 2 + 3 + 2


def test_the_window_bounds_what_is_read_and_listed(
    deps: Dependencies, clock: ManualClock, mixed: dict[Status, list[Job]]
) -> None:
    now = clock.now_ms()
    # A window of the next 10 hours lists only the jobs due in it
    pages = _all_pages(deps, Status.PENDING, 100, from_ms=now, to_ms=now + 10 * HOUR_MS)
    listed = [job.id for page in pages for job in page.jobs]
    assert listed == [j.id for j in mixed[Status.PENDING] if j.due_ms < now + 10 * HOUR_MS]
    assert 0 < len(listed) < len(mixed[Status.PENDING])
    # The default window is a day either side of now
    window = deps.job_listing.window(None, None)
    assert (window.from_ms, window.to_ms) == (now - 24 * HOUR_MS, now + 24 * HOUR_MS)
    # Only `from` a week ago: until a week after it (within 7 days); only `to`: a day before it
    window = deps.job_listing.window(now - 7 * 24 * HOUR_MS, None)
    assert window.to_ms == now
    window = deps.job_listing.window(None, now + 2 * HOUR_MS)
    assert window.from_ms == now - 22 * HOUR_MS
    # A window over 7 days, or ending before it starts, is refused (400, naming `to`)
    for to_ms in (now + 8 * 24 * HOUR_MS, now):
        with pytest.raises(InvalidInput) as refused:
            deps.job_listing.window(now, to_ms)
        assert refused.value.field == "to"


def test_dead_jobs_come_from_the_dead_letter_index(deps: Dependencies, clock: ManualClock) -> None:
    # Given three dead letters of `default` and one of `email`
    now = clock.now_ms()
    for i, queue in enumerate(["default", "default", "email", "default"]):
        letter = DeadLetter(queue, now - i * 1000, f"ref{i}", None, 3, "Boom", "boom", "{}")
        deps.dead_letter_store.put(letter, expires_at_s=now // 1000 + 86_400)
    # When `default`'s dead jobs are listed two at a time
    pages = _all_pages(deps, Status.DEAD, 2)
    # Then they come in order of death, with the cost of what they return
    assert [letter.ref for page in pages for letter in page.dead] == ["ref3", "ref1", "ref0"]
    assert all(page.jobs == [] for page in pages)


def test_a_foreign_or_forged_cursor_and_an_unknown_queue_are_refused(
    deps: Dependencies, mixed: dict[Status, list[Job]]
) -> None:
    page = deps.job_listing.page(
        "default", Status.PENDING, from_ms=None, to_ms=None, limit=1, cursor=None
    )
    assert page.next_cursor is not None
    with pytest.raises(InvalidInput):  # another status's listing
        deps.job_listing.page(
            "default", Status.PAUSED, from_ms=None, to_ms=None, limit=1, cursor=page.next_cursor
        )
    with pytest.raises(InvalidInput):  # another queue's
        deps.job_listing.page(
            "email", Status.PENDING, from_ms=None, to_ms=None, limit=1, cursor=page.next_cursor
        )
    with pytest.raises(QueueNotFound):
        deps.job_listing.page(
            "nope", Status.PENDING, from_ms=None, to_ms=None, limit=1, cursor=None
        )
