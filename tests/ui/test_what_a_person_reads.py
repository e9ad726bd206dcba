"""The admin UI as a newcomer meets it (issue 26): what each page reads, at 1280 and 800 px;
slow actions; auto-refresh; running or changing a waiting job; the favicon. Each test asserts
the text a person reads, and the API's state after the clicks."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, ViewportSize, expect
from pydantic import JsonValue

from sundial.client import Conflict, InvalidRequest, SundialClient
from sundial.client.ui.server import UiServer
from sundial.clock import ManualClock, to_rfc3339
from sundial.wiring import Dependencies
from tests.inprocess_api import kill_through_a_worker
from tests.ui.conftest import (
    OneAtATime,
    assert_reads_well,
    no_horizontal_overflow,
    open_page,
    screenshot,
)

NARROW: ViewportSize = {"width": 800, "height": 600}
# A traceback as a worker reports it: many frames, and a last line far wider than a window.
TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "".join(f'  File "/var/task/handler.py", line {n}, in step_{n}\n' for n in range(12))
    + "ValueError: "
    + "a-very-long-token-" * 20
)


def _run_once(sundial: SundialClient, queue: str) -> tuple[str, str]:
    """Lease the queue's one queued job and start its attempt: (job id, lease)."""
    [held] = sundial.lease(queue, wait=0, max_jobs=1, lease_seconds=60).jobs
    assert sundial.heartbeat(held.job.id, held.lease).status == "running"
    return held.job.id, held.lease


def _failed_with_a_long_traceback(sundial: SundialClient) -> str:
    sundial.submit("email", {"to": "ada@example.com"}, max_attempts=1)
    job_id, lease = _run_once(sundial, "email")
    sundial.nack(
        job_id, lease, retryable=False, error_type="ValueError", message="bad", traceback=TRACEBACK
    )
    return job_id


def test_a_succeeded_jobs_page_shows_its_result(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # Given a job a worker ran and acknowledged with a result
    job = sundial.submit("email", {"to": "ada@example.com"})
    job_id, lease = _run_once(sundial, "email")
    result: JsonValue = {"message_id": "0100018c-aa", "accepted": ["ada@example.com"], "retries": 0}
    sundial.ack(job_id, lease, result=result)
    # When its page is opened
    text = open_page(page, ui_server, f"/jobs/{job.id}")
    # Then the result reads as the JSON the worker returned, under its heading
    expect(page.locator("h1 + .badge")).to_have_text("succeeded")
    expect(page.get_by_role("heading", name="Result")).to_be_visible()
    assert page.locator("#result pre.json").inner_text() == json.dumps(result, indent=2)
    assert page.locator("#payload pre.json").inner_text() == json.dumps(
        {"to": "ada@example.com"}, indent=2
    )
    expect(page.locator("#no-attempt-errors")).to_have_text("No attempt failed.")
    assert "0100018c-aa" in text
    screenshot(page, "job")


def test_a_job_without_payload_or_result_says_so_in_words(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    job = sundial.submit("email", None, delay_seconds=60)
    open_page(page, ui_server, f"/jobs/{job.id}")
    expect(page.locator("#payload")).to_have_text("No payload.")
    expect(page.locator("#result")).to_have_count(0)


def test_a_long_traceback_wraps_and_scrolls_in_its_box(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # Given a job whose attempt failed with a long, wide traceback, in an 800 px window
    job_id = _failed_with_a_long_traceback(sundial)
    page.set_viewport_size(NARROW)
    open_page(page, ui_server, f"/jobs/{job_id}")
    box = page.locator("table.attempt-errors pre.traceback")
    # Then all of it is there, wrapped: nothing is wider than the window
    expect(box).to_contain_text("Traceback (most recent call last):")
    expect(box).to_contain_text("a-very-long-token-a-very-long-token-")
    assert no_horizontal_overflow(page)
    # And it scrolls in a box of bounded height rather than stretching the page
    bounds = box.bounding_box()
    assert bounds is not None and bounds["height"] <= 300 and bounds["x"] + bounds["width"] <= 800
    assert box.evaluate("e => e.scrollHeight > e.clientHeight")


def test_no_page_is_wider_than_an_800_px_window(
    page: Page,
    ui_server: UiServer,
    sundial: SundialClient,
    deps: Dependencies,
) -> None:
    # Given one of everything: dead letters with long messages, a failed job's traceback, a
    # schedule, and a DAG six nodes deep (wider than the window when drawn)
    long = "550 5.1.1 " + "the-mailbox-of-the-recipient-is-unavailable-" * 6
    [dead] = kill_through_a_worker(sundial, deps, 1, error_type="SmtpRefused", message=long)
    failed = _failed_with_a_long_traceback(sundial)
    schedule = sundial.create_schedule("email", rate="1 hour", name="hourly")
    chain = {f"step_{n}": {"queue": "email", "depends_on": [f"step_{n - 1}"]} for n in range(1, 6)}
    dag = sundial.submit_dag("six_steps", {"step_0": {"queue": "email"}, **chain})
    page.set_viewport_size(NARROW)
    for hash_path in [
        "/queues",
        "/dead/default",
        f"/jobs/{dead}",
        f"/jobs/{failed}",
        f"/schedules/{schedule.id}",
        f"/dags/{dag.id}",
        "/queue-jobs/email?status=pending",
        "/queue-schedules/email",
        "/queue-dags/email",
    ]:
        # When each page is opened at 800 px, Then nothing overflows the window sideways
        open_page(page, ui_server, hash_path)
        if hash_path == "/dead/default":
            page.get_by_role("button", name="Inspect").click()
            expect(page.locator("#letter-detail")).to_be_visible()
        assert no_horizontal_overflow(page), hash_path
        if hash_path.startswith("/dags/"):
            # And the DAG, wider than the window, scrolls inside its own box
            expect(page.locator("#dag-graph a[data-node]")).to_have_count(6)
            graph = page.locator(".scroll.graph")
            bounds = graph.bounding_box()
            assert bounds is not None and bounds["x"] + bounds["width"] <= 800
            assert graph.evaluate("e => e.scrollWidth > e.clientWidth")


def test_a_schedule_shows_upcoming_occurrences_apart_from_past_runs(
    page: Page,
    ui_server: UiServer,
    sundial: SundialClient,
    deps: Dependencies,
    clock: ManualClock,
) -> None:
    # Given a schedule every minute, three minutes old, swept: its occurrences of the next 15
    # minutes are decided and sent ahead of their time
    schedule = sundial.create_schedule("default", rate="1 minute", name="every minute")
    clock.advance(seconds=180)
    deps.sweeper.sweep(list(range(8)))
    past = sundial.schedule_runs(schedule.id, when="past").runs
    upcoming = sundial.schedule_runs(schedule.id, when="upcoming", limit=100).runs
    assert len(past) == 4 and len(upcoming) >= 10
    # When its page is opened
    open_page(page, ui_server, f"/schedules/{schedule.id}")
    # Then past runs are those whose time has come, newest first
    past_rows = page.locator("#runs tbody tr")
    expect(past_rows).to_have_count(4)
    expect(past_rows.first).to_contain_text("2026-11-21 12:03:00 UTC")
    expect(past_rows.last).to_contain_text("2026-11-21 12:00:00 UTC")
    # And the upcoming ones are listed apart, soonest first, as sent ahead (not as run)
    ahead_rows = page.locator("#upcoming-runs tbody tr")
    expect(ahead_rows).to_have_count(len(upcoming))
    expect(ahead_rows.first).to_contain_text("2026-11-21 12:04:00 UTCsent ahead, due then")
    for run in upcoming:
        expect(page.locator(f"#runs tr[data-job='{run.job_id}']")).to_have_count(0)
    # And the last run is the newest past one; the next run the soonest upcoming one
    expect(page.locator("[data-field='last run']")).to_have_text("2026-11-21 12:03:00 UTC (fired)")
    expect(page.locator("[data-field='next run']")).to_have_text("2026-11-21 12:04:00 UTC")
    screenshot(page, "schedule")


def test_a_slow_action_shows_its_progress_and_its_result_stays_with_its_page(
    page: Page,
    ui_server: UiServer,
    sundial: SundialClient,
    upstream: OneAtATime,
    deps: Dependencies,
) -> None:
    # Given a schedule's page, and its pause held up in the API
    schedule = sundial.create_schedule("default", rate="1 hour", name="hourly")
    path = f"/schedules/{schedule.id}"
    open_page(page, ui_server, path)
    gate = upstream.hold("POST", f"{path}/pause")
    # When Pause is clicked, Then the button is busy and a line says what is going on
    button = page.locator("button[data-action=pause]")
    button.click()
    expect(button).to_have_attribute("aria-busy", "true")
    expect(page.locator("#progress")).to_contain_text("Pause schedule hourly: working…")
    # When it finishes on its page, Then the page shows the result and names it
    gate.set()
    expect(page.locator("#notice")).to_have_text("Schedule hourly paused")
    expect(page.locator("#schedule-state")).to_have_text("paused")
    expect(page.locator("#progress")).to_be_hidden()
    # When a slow resume is left for another page before it ends
    gate = upstream.hold("POST", f"{path}/resume")
    page.locator("button[data-action=resume]").click()
    expect(page.locator("#progress")).to_contain_text("Resume schedule hourly: working…")
    page.locator("header nav a[data-nav=queues]").click()
    expect(page.locator("body")).to_have_attribute("data-ready", "#/queues")
    gate.set()
    # Then its result is a toast naming the schedule, not a notice on the queues page
    expect(page.locator("#toasts .toast-text")).to_have_text("Schedule hourly resumed")
    expect(page.locator("#notice")).to_be_hidden()
    expect(page.locator("#queues tbody tr")).to_have_count(2)
    assert sundial.get_schedule(schedule.id).state == "active"
    # And a refusal that lands after its page was left is a toast in the API's words
    [dead] = kill_through_a_worker(sundial, deps, 1)
    open_page(page, ui_server, f"/jobs/{dead}")
    gate = upstream.hold("POST", f"/jobs/{dead}/retry")
    page.locator("button[data-action=retry]").click()
    expect(page.locator("#progress")).to_contain_text(f"Retry job {dead}: working…")
    open_page(page, ui_server, "/queues")
    elsewhere = SundialClient(transport=upstream.inner)  # not held: the job is retried first
    elsewhere.retry_job(dead)
    with pytest.raises(Conflict) as refused:
        elsewhere.retry_job(dead)
    gate.set()
    expect(page.locator("#toasts .toast.failed .toast-text")).to_have_text(
        f"Retry job {dead} failed: Error (409): {refused.value.message}"
    )
    expect(page.locator("#error")).to_be_hidden()
    assert_reads_well(page)


def test_auto_refresh_is_a_remembered_toggle_that_spares_what_a_person_is_doing(
    page: Page, ui_server: UiServer, sundial: SundialClient, deps: Dependencies
) -> None:
    # Given the queues page: auto-refresh is off
    open_page(page, ui_server, "/queues")
    toggle = page.get_by_label("Auto-refresh")
    every = page.get_by_label("refresh every")
    expect(toggle).not_to_be_checked()
    expect(every).to_be_disabled()
    # When it is turned on, every 2 seconds
    toggle.check()
    every.select_option("2")
    # Then a change made elsewhere shows without a click
    sundial.pause_queue("email")
    state = page.locator("#queues tr[data-queue=email] .state")
    expect(state).to_have_text("paused", timeout=15_000)
    # And it is remembered on the next page and after a reload
    open_page(page, ui_server, "/dead/default")
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "#/dead/default")
    expect(page.get_by_label("Auto-refresh")).to_be_checked()
    expect(page.get_by_label("refresh every")).to_have_value("2")
    # And what is typed into a field is not lost: refreshes wait while the page is in use
    field = page.get_by_label("older than")
    field.fill("2020-01-01T00:00:00Z")
    page.locator("main h1").click()  # the field loses focus, but keeps what was typed
    body = page.locator("body")
    skipped = body.get_attribute("data-refresh-skipped")
    expect(body).not_to_have_attribute("data-refresh-skipped", skipped or "", timeout=15_000)
    expect(field).to_have_value("2020-01-01T00:00:00Z")
    # And a refresh keeps the scroll position of a page taller than the window
    [dead] = kill_through_a_worker(sundial, deps, 1, message="no answer in 30 s")
    page.set_viewport_size({"width": 1280, "height": 300})
    open_page(page, ui_server, f"/jobs/{dead}")
    page.evaluate("window.scrollTo(0, 200)")
    done = body.get_attribute("data-refreshes")
    expect(body).not_to_have_attribute("data-refreshes", done or "", timeout=15_000)
    assert page.evaluate("window.scrollY") == 200
    assert_reads_well(page)


def test_a_waiting_job_is_run_now_or_changed_and_refusals_read_as_the_api_words_them(
    page: Page, ui_server: UiServer, sundial: SundialClient, clock: ManualClock
) -> None:
    # Given a job due in an hour, on its page
    job = sundial.submit("email", {"to": "ada@example.com"}, delay_seconds=3600)
    open_page(page, ui_server, f"/jobs/{job.id}")
    # When its time, priority and payload are changed
    later = to_rfc3339(clock.now_ms() + 7_200_000)
    page.locator("#change-job summary").click()
    page.get_by_label("run at").fill(later)
    page.get_by_label("priority").select_option("high")
    page.get_by_label("payload").fill('{"to": "grace@example.com"}')
    page.locator("button[data-action=change]").click()
    # Then the page says so and shows them, as the API has them
    expect(page.locator("#notice")).to_have_text(f"Job {job.id} changed")
    expect(page.locator("[data-field='priority']")).to_have_text("high")
    expect(page.locator("[data-field='run at']")).to_have_text(
        later.replace("T", " ").replace(".000Z", " UTC")
    )
    changed = sundial.get_job(job.id)
    assert (changed.priority, changed.payload) == ("high", {"to": "grace@example.com"})
    assert to_rfc3339(int(changed.run_at.timestamp() * 1000)) == later
    # When a time that is not RFC 3339 is given, Then the API's 400 reads as the API words it
    with pytest.raises(InvalidRequest) as bad_time:
        sundial.change_job(job.id, run_at="soon")
    page.locator("#change-job summary").click()
    page.get_by_label("run at").fill("soon")
    page.locator("button[data-action=change]").click()
    expect(page.locator("#error")).to_have_text(f"Error (400): {bad_time.value.message}")
    # And saving with nothing changed is the API's own refusal
    with pytest.raises(InvalidRequest) as nothing:
        sundial.change_job(job.id)
    page.get_by_label("run at").fill(later)
    page.locator("button[data-action=change]").click()
    expect(page.locator("#error")).to_have_text(f"Error (400): {nothing.value.message}")
    # And a payload that is not JSON is refused before anything is sent
    page.get_by_label("payload").fill("{oops")
    page.locator("button[data-action=change]").click()
    expect(page.locator("#error")).to_contain_text("Error: payload: not JSON (")
    assert sundial.get_job(job.id).payload == {"to": "grace@example.com"}
    # When it is run now, Then it is handed to its queue at once
    page.locator("button[data-action=run-now]").click()
    expect(page.locator("#notice")).to_have_text(f"Job {job.id} handed to its queue: it runs now")
    expect(page.locator("h1 + .badge")).to_have_text("queued")
    assert sundial.get_job(job.id).status == "queued"
    assert_reads_well(page)


def test_a_schedules_occurrence_cannot_be_run_now_and_the_page_says_why_in_the_apis_words(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # Given a schedule's next occurrence, waiting for its time
    schedule = sundial.create_schedule("email", rate="1 hour")
    [head] = [j for j in sundial.queue_jobs("email", "pending")]
    with pytest.raises(Conflict) as refused:
        sundial.run_job_now(head.id)
    # When Run now is clicked on its page, Then the API's 409 is shown as it words it
    open_page(page, ui_server, f"/jobs/{head.id}")
    expect(page.locator("[data-field='schedule']")).to_have_text(schedule.id)
    page.locator("button[data-action=run-now]").click()
    expect(page.locator("#error")).to_have_text(f"Error (409): {refused.value.message}")
    assert sundial.get_job(head.id).status == "pending"


def test_the_favicon_is_served(page: Page, ui_server: UiServer) -> None:
    # The page names its icon, the UI's server has it, and loading the page asks for nothing
    # it lacks (the page fixture fails a test on any missing file)
    open_page(page, ui_server, "/queues")
    href = page.locator("link[rel=icon]").get_attribute("href")
    assert href == "favicon.svg"
    answer = page.request.get(f"{ui_server.url}{href}")
    assert answer.status == 200 and answer.headers["content-type"] == "image/svg+xml"
    assert answer.text().lstrip().startswith("<svg")
