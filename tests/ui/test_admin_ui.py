"""The admin UI's flows, clicked through in headless Chromium (tests/ui/conftest.py); each
test checks the API's state after the clicks, not only what the page shows."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from sundial.client import InvalidRequest, NotFound, SundialClient
from sundial.client.ui.server import UiServer
from sundial.clock import ManualClock, to_rfc3339
from sundial.ids import JobKey
from sundial.wiring import Dependencies
from tests.inprocess_api import kill_through_a_worker
from tests.support import DAILY_REPORT
from tests.ui.conftest import assert_reads_well, click, open_page, screenshot


def test_the_queues_page_shows_depths_and_pauses_and_resumes_a_queue(
    page: Page, ui_server: UiServer, sundial: SundialClient, deps: Dependencies
) -> None:
    # Given a dead job on default and three jobs waiting in email's SQS queue
    kill_through_a_worker(sundial, deps, 1, error_type="Timeout", message="no answer in 30 s")
    for n in range(3):
        sundial.submit("email", {"n": n})
    # When the queues page is opened, Then it shows each queue's counts as the API has them
    open_page(page, ui_server, "/queues")
    expect(page.locator("#queues tbody tr")).to_have_count(len(sundial.list_queues()))
    email = page.locator("#queues tr[data-queue=email]")
    expect(email.locator(".state")).to_have_text("running")
    expect(email.locator(".visible")).to_have_text("3")
    expect(page.locator("#queues tr[data-queue=default] .dead")).to_have_text("1")
    # When Pause is clicked, Then the row says paused and the API has the queue paused
    email.get_by_role("button", name="Pause").click()
    expect(email.locator(".state")).to_have_text("paused")
    expect(page.locator("#notice")).to_have_text("Queue email paused")
    assert_reads_well(page)
    screenshot(page, "queues")
    assert sundial.get_queue("email").paused is True
    assert sundial.get_queue("default").paused is False
    # When Resume is clicked, Then it runs again
    email.get_by_role("button", name="Resume").click()
    expect(email.locator(".state")).to_have_text("running")
    assert sundial.get_queue("email").paused is False


def test_dead_letters_page_inspect_and_replay_one_then_all(
    page: Page, ui_server: UiServer, sundial: SundialClient, deps: Dependencies
) -> None:
    # Given three dead jobs, listed two per page
    ids = kill_through_a_worker(
        sundial, deps, 3, error_type="SmtpRefused", message="550 5.1.1 mailbox unavailable"
    )
    open_page(page, ui_server, "/dead/default?limit=2")
    rows = page.locator("#dead-letters tbody tr")
    expect(rows).to_have_count(2)
    page.locator("button[data-action=next]").click()
    expect(rows).to_have_count(1)
    page.get_by_role("button", name="Previous").click()
    expect(rows).to_have_count(2)
    # When one is inspected, Then its envelope and its job's attempt errors are shown
    chosen = rows.first.get_attribute("data-job") or ""
    others = [i for i in ids if i != chosen]
    target = rows.filter(has_text=chosen)
    target.get_by_role("button", name="Inspect").click()
    detail = page.locator("#letter-detail")
    expect(detail.locator("pre.json")).to_contain_text(f'"id": "{chosen}"')
    [attempt_error] = sundial.get_job(chosen).history
    errors_shown = detail.locator("table.attempt-errors tbody tr")
    expect(errors_shown).to_have_count(1)
    expect(errors_shown).to_contain_text(f"{attempt_error.error_type}{attempt_error.message}")
    expect(detail.locator("h2").first).to_have_text(f"Letter of {chosen}")
    expect(detail.locator("[data-field='message']")).to_have_text("550 5.1.1 mailbox unavailable")
    expect(page.locator(".pager")).to_have_text("page 1")
    assert_reads_well(page)
    screenshot(page, "dead-letters")
    # When it is replayed, Then it leaves the list and only its job is queued again
    target.get_by_role("button", name="Replay").click()
    expect(page.locator("#notice")).to_have_text(f"Job {chosen} re-queued")
    expect(page.locator(f"#dead-letters tr[data-job='{chosen}']")).to_have_count(0)
    assert sundial.get_job(chosen).status == "queued"
    assert [sundial.get_job(i).status for i in others] == ["dead", "dead"]
    assert sorted(x.job_id or "" for x in sundial.dead_letters("default")) == sorted(others)
    # When the rest are replayed all at once (confirmed), Then none is left
    page.get_by_role("button", name="Replay all").click()
    expect(page.locator("#dead-letters-empty")).to_be_visible()
    expect(page.locator("#notice")).to_have_text(
        "2 jobs re-queued from default (0 were no longer dead, 0 not Sundial jobs)"
    )
    assert_reads_well(page)
    assert all(sundial.get_job(i).status == "queued" for i in ids)
    assert list(sundial.dead_letters("default")) == []


def test_purge_deletes_the_letters_and_keeps_the_jobs(
    page: Page,
    ui_server: UiServer,
    sundial: SundialClient,
    deps: Dependencies,
    clock: ManualClock,
) -> None:
    [job_id] = kill_through_a_worker(sundial, deps, 1)
    clock.advance(seconds=60)
    open_page(page, ui_server, "/dead/default")
    expect(page.locator("#dead-letters tbody tr")).to_have_count(1)
    # The cutoff field holds a time after the letter's (the browser's now, or this one)
    page.get_by_label("older than").fill(to_rfc3339(clock.now_ms()))
    page.get_by_role("button", name="Purge older than").click()
    expect(page.locator("#notice")).to_have_text("1 dead letters of default purged")
    expect(page.locator("#dead-letters-empty")).to_be_visible()
    assert list(sundial.dead_letters("default")) == []
    assert sundial.get_job(job_id).status == "dead"


def test_job_lookup_shows_the_job_then_cancel_and_retry_it(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # Given a job due in an hour, looked up by id from the header
    job = sundial.submit("email", {"to": "ada@example.com"}, delay_seconds=3600)
    open_page(page, ui_server, "/queues")
    page.get_by_label("kind").select_option("jobs")
    page.get_by_label("id").fill(job.id)
    page.get_by_role("button", name="Open").click()
    expect(page.locator("h1")).to_contain_text(job.id)
    expect(page.locator("h1 + .badge")).to_have_text("pending")
    expect(page.locator("[data-field='run at']")).to_contain_text(
        job.run_at.strftime("%Y-%m-%d %H:%M:%S")
    )
    expect(page.locator("pre.json")).to_contain_text("ada@example.com")
    # When it is cancelled (confirmed), Then the API has it cancelled
    click(page, "cancel", page.locator("h1 + .badge"), "cancelled")
    assert sundial.get_job(job.id).status == "cancelled"
    # When it is retried, Then it is queued to run now
    click(page, "retry", page.locator("h1 + .badge"), "queued")
    assert sundial.get_job(job.id).status == "queued"


def test_api_refusals_are_shown_with_their_message_and_field_errors(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # A malformed id: 400, the API's message once (it names the field and the reason, so its
    # field error is not listed a second time)
    with pytest.raises(InvalidRequest) as invalid:
        sundial.get_job("not-a-job-id")
    assert invalid.value.message == "job_id: malformed job id (expected 36 characters)"
    open_page(page, ui_server, "/jobs/not-a-job-id")
    expect(page.locator("#error")).to_have_text(f"Error (400): {invalid.value.message}")
    expect(page.locator("#error li")).to_have_count(0)
    # An unknown one: 404, in the API's words
    unknown = JobKey(shard=2, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id
    with pytest.raises(NotFound) as missing:
        sundial.get_job(unknown)
    open_page(page, ui_server, f"/jobs/{unknown}")
    expect(page.locator("#error")).to_have_text(f"Error (404): {missing.value.message}")
    # An unknown queue's listing: the banner reads the API's message and nothing after it
    with pytest.raises(NotFound) as no_queue:
        sundial.queue_jobs_page("x", "pending")
    assert no_queue.value.message == "queue 'x' not found"
    for listing in ("/queue-jobs/x?status=pending", "/queue-schedules/x", "/dead/x"):
        open_page(page, ui_server, listing)
        expect(page.locator("#error")).to_have_text("Error (404): queue 'x' not found")
        expect(page.locator("main")).to_have_text("")
    # A field error the message does not say is listed under it, once
    page.evaluate(
        "showError(new ApiError(400, {message: 'invalid request', "
        "errors: [{field: 'run_at', reason: 'not RFC 3339'}]}))"
    )
    expect(page.locator("#error")).to_have_text("Error (400): invalid requestrun_at: not RFC 3339")
    expect(page.locator("#error li")).to_have_text("run_at: not RFC 3339")


def test_api_data_is_shown_as_text_never_as_html(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    markup = "<img src=x onerror=\"document.body.dataset.pwned='1'\"><b>bold</b>"
    job = sundial.submit("email", {"note": markup}, delay_seconds=60)
    open_page(page, ui_server, f"/jobs/{job.id}")
    expect(page.locator("pre.json")).to_contain_text(markup.replace('"', '\\"'))
    assert page.locator("main img, main b").count() == 0
    assert page.evaluate("document.body.dataset.pwned") is None


def test_schedule_page_shows_runs_and_pauses_and_resumes(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # Given an hourly schedule whose first run has fired
    schedule = sundial.create_schedule("default", rate="1 hour", name="hourly", payload={"r": 1})
    runs = sundial.schedule_runs(schedule.id).runs
    open_page(page, ui_server, f"/schedules/{schedule.id}")
    expect(page.locator("#schedule-state")).to_have_text("active")
    expect(page.locator("#runs tbody tr")).to_have_count(len(runs))
    expect(page.locator("#runs tbody tr").first).to_contain_text(runs[0].job_id)
    assert schedule.next_run_at is not None
    expect(page.locator("[data-field='next run']")).to_contain_text(
        schedule.next_run_at.strftime("%Y-%m-%d %H:%M:%S")
    )
    # When paused, Then the API has it paused; when resumed, active again
    click(page, "pause", page.locator("#schedule-state"), "paused")
    assert sundial.get_schedule(schedule.id).state == "paused"
    click(page, "resume", page.locator("#schedule-state"), "active")
    assert sundial.get_schedule(schedule.id).state == "active"


def test_dag_page_draws_every_node_by_depth_with_its_status(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # Given a DAG whose roots are queued and whose other nodes wait on them
    dag = sundial.submit_dag("daily_report", DAILY_REPORT["nodes"])
    open_page(page, ui_server, f"/dags/{dag.id}")
    nodes = page.locator("#dag-graph a[data-node]")
    expect(nodes).to_have_count(len(dag.nodes))
    screenshot(page, "dag")
    # Then each node is drawn with the API's status, in its status's colour class
    for name, node in sundial.get_dag(dag.id).nodes.items():
        drawn = page.locator(f"#dag-graph a[data-node='{name}']")
        expect(drawn).to_have_attribute("data-status", node.status)
        expect(drawn.locator("rect")).to_have_class(f"node s-{node.status}")
    # And each child is drawn to the right of its parents (layered by depth)
    for name, node in dag.nodes.items():
        x = float(page.locator(f"a[data-node='{name}'] rect").get_attribute("x") or "nan")
        for parent in node.depends_on:
            parent_x = page.locator(f"a[data-node='{parent}'] rect").get_attribute("x")
            assert float(parent_x or "nan") < x, (parent, name)
    # When it is paused from the page, Then the API has it paused
    click(page, "pause", page.locator("h1 + .badge"), "paused")
    assert sundial.get_dag(dag.id).status == "paused"


def test_a_queues_schedules_dags_and_jobs_by_status_are_listed_and_linked(
    page: Page, ui_server: UiServer, sundial: SundialClient, clock: ManualClock
) -> None:
    # Given two schedules and a DAG on `email`, and a job of `email` paused
    schedules = []
    for name in ("first", "second"):
        clock.advance(seconds=1)
        schedules.append(sundial.create_schedule("email", rate="1 hour", name=name))
    dag = sundial.submit_dag("etl", {"a": {"queue": "email"}}, delay_seconds=3600)
    job = sundial.submit("email", delay_seconds=7200)
    sundial.pause_job(job.id)
    # When email's schedules are opened from the queues page
    open_page(page, ui_server, "/queues")
    page.locator("#queues tr[data-queue=email] .listings").get_by_role(
        "link", name="schedules"
    ).click()
    rows = page.locator("#listing tbody tr")
    # Then both are listed, oldest first, each linking to its schedule's page
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("first")
    expect(rows.first.locator("[data-state]")).to_have_text("active")
    assert_reads_well(page)
    rows.first.get_by_role("link").click()
    expect(page.locator("#schedule-state")).to_have_text("active")
    assert page.url.endswith(f"#/schedules/{schedules[0].id}")
    # And email's DAGs list the DAG with its status, linking to its page
    open_page(page, ui_server, "/queue-dags/email")
    expect(page.locator(f"#listing tr[data-dag='{dag.id}'] [data-status]")).to_have_text("running")
    # And email's paused jobs list the paused job (chosen with the status picker)
    open_page(page, ui_server, "/queue-jobs/email?status=pending")
    page.locator("#job-status").select_option("paused")
    expect(page.locator("#listing tbody tr")).to_have_count(1)
    expect(page.locator(f"#listing tr[data-job='{job.id}']")).to_be_visible()
    assert [j.id for j in sundial.queue_jobs("email", "paused")] == [job.id]


def test_a_job_whose_payload_is_in_s3_shows_its_reference(
    page: Page, ui_server: UiServer, sundial: SundialClient
) -> None:
    # Given a job whose payload is stored in S3 (issue 17, item 5)
    job = sundial.submit("email", {"to": "ada@example.com"}, payload_storage="s3")
    detail = sundial.get_job(job.id)
    assert detail.payload is None and detail.payload_ref is not None
    # When its page is opened, Then it shows the reference (the payload is not fetched)
    open_page(page, ui_server, f"/jobs/{job.id}")
    expect(page.get_by_role("heading", name="Payload (stored in S3)")).to_be_visible()
    expect(page.locator("pre.json").first).to_contain_text(detail.payload_ref.sha256)
