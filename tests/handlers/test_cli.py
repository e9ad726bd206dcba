"""The `sundial` CLI's main flows against the real API (the handlers in-process, under moto):
output for people and for scripts, and the exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sundial.client.cli import (
    EXIT_CONFLICT,
    EXIT_FORBIDDEN,
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    main,
    parse_duration,
)
from sundial.client.transport import ApiResponse
from sundial.ids import JobKey
from sundial.wiring import Dependencies
from tests.inprocess_api import FailingFirst, InProcessApi, kill_through_a_worker
from tests.support import DAILY_REPORT

UNKNOWN_JOB = JobKey(shard=2, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id


@pytest.fixture
def api(deps: Dependencies) -> InProcessApi:
    return InProcessApi()


def sundial(api: InProcessApi, *argv: str) -> tuple[int, str, str]:
    # Own streams: the handlers print their logs and metrics on the process's stdout.
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(list(argv), transport=api, stdout=stdout, stderr=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def test_change_a_job_then_run_it_now(api: InProcessApi) -> None:
    code, out, _ = sundial(api, "jobs", "submit", "--queue", "email", "--in", "1h", "--json")
    job_id = json.loads(out)["id"]
    code, out, _ = sundial(
        api, "jobs", "change", job_id, "--in", "2h", "--payload", '{"v": 2}', "--json"
    )
    assert code == EXIT_OK
    changed = json.loads(out)
    assert (changed["id"], changed["payload"], changed["revision"]) == (job_id, {"v": 2}, 1)
    code, _, err = sundial(api, "jobs", "change", job_id)
    assert code == EXIT_USAGE and "at least one of" in err
    code, out, _ = sundial(api, "jobs", "run-now", job_id)
    assert code == EXIT_OK and "queued" in out
    sundial(api, "jobs", "cancel", job_id)
    code, _, err = sundial(api, "jobs", "change", job_id, "--in", "5m")
    assert code == EXIT_CONFLICT and "cancelled" in err


def test_submit_in_ten_minutes_with_a_payload_file_then_get_and_cancel(
    api: InProcessApi, tmp_path: Path
) -> None:
    payload = tmp_path / "job.json"
    payload.write_text('{"to": "ada@example.com"}')
    code, out, _ = sundial(
        api, "jobs", "submit", "--queue", "email", "--in", "1h30m",
        "--payload", f"@{payload}", "--priority", "high", "--json",
    )  # fmt: skip
    assert code == EXIT_OK
    job = json.loads(out)
    assert (job["queue"], job["status"], job["priority"]) == ("email", "pending", "high")

    code, out, _ = sundial(api, "jobs", "get", job["id"])
    assert code == EXIT_OK
    assert job["id"] in out and "ada@example.com" in out and "pending" in out

    assert sundial(api, "jobs", "cancel", job["id"])[0] == EXIT_OK
    code, out, _ = sundial(api, "jobs", "get", job["id"], "--json")
    assert json.loads(out)["status"] == "cancelled"
    # A cancelled job cannot be paused: a conflict, with its own exit code
    code, _, err = sundial(api, "jobs", "pause", job["id"])
    assert code == EXIT_CONFLICT and "409" in err


def test_exit_codes_name_what_went_wrong(api: InProcessApi) -> None:
    code, _, err = sundial(api, "jobs", "submit", "--queue", "email", "--at", "soon")
    assert code == EXIT_INVALID and "run_at:" in err
    code, _, err = sundial(api, "jobs", "get", UNKNOWN_JOB, "--json")
    assert code == EXIT_NOT_FOUND and json.loads(err)["status"] == 404
    outsider = InProcessApi(caller="arn:aws:iam::210987654321:role/other")
    assert sundial(outsider, "queues", "pause", "email")[0] == EXIT_FORBIDDEN
    code, _, err = sundial(api, "jobs", "submit", "--queue", "q", "--payload", "{oops")
    assert code == EXIT_USAGE and "--payload: not JSON" in err
    with pytest.raises(SystemExit) as usage:
        main(["jobs", "submit"], transport=api)
    assert usage.value.code == EXIT_USAGE


def test_a_server_that_stays_unavailable_exits_unavailable(
    api: InProcessApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("time.sleep", lambda _: None)
    down = FailingFirst(api, lambda: ApiResponse(503, {}, b'{"message": "retry"}'), 100)
    code, _, err = sundial(down, "queues", "get", "email")  # type: ignore[arg-type]
    assert code == EXIT_UNAVAILABLE and down.calls == 5 and "503" in err


def test_schedules_dags_and_queues(api: InProcessApi, tmp_path: Path) -> None:
    code, out, _ = sundial(
        api, "schedules", "create", "--queue", "default", "--rate", "1 hour",
        "--name", "hourly", "--json",
    )  # fmt: skip
    schedule = json.loads(out)
    assert code == EXIT_OK and schedule["state"] == "active"
    code, out, _ = sundial(api, "schedules", "runs", schedule["id"])
    assert code == EXIT_OK and "fired" in out
    payload = tmp_path / "payload.json"
    payload.write_text('{"report": "hourly"}')
    code, out, _ = sundial(
        api, "schedules", "update", schedule["id"], "--cron", "30 * * * *",
        "--payload", f"@{payload}", "--priority", "high", "--json",
    )  # fmt: skip
    updated = json.loads(out)
    assert code == EXIT_OK and (updated["cron"], updated["rate"]) == ("30 * * * *", None)
    assert updated["payload"] == {"report": "hourly"} and updated["priority"] == "high"
    assert updated["applies_from"].startswith("2026-11-21T12:30:00") and updated["revision"] == 1
    code, _, err = sundial(api, "schedules", "update", schedule["id"], "--cron", "61 * * * *")
    assert code != EXIT_OK and "cron" in err
    assert sundial(api, "schedules", "pause", schedule["id"])[0] == EXIT_OK
    assert sundial(api, "schedules", "delete", schedule["id"])[0] == EXIT_OK

    spec = tmp_path / "dag.json"
    spec.write_text(json.dumps(DAILY_REPORT))
    code, out, _ = sundial(api, "dags", "submit", f"@{spec}")
    assert code == EXIT_OK and "load_warehouse" in out and "blocked" in out
    dag_id = next(line for line in out.splitlines() if "id" in line).split()[-2]
    code, out, _ = sundial(api, "dags", "cancel", dag_id, "--json")
    assert code == EXIT_OK and json.loads(out)["status"] == "cancelled"

    code, out, _ = sundial(api, "queues", "pause", "email", "--json")
    assert code == EXIT_OK and json.loads(out)["paused"] is True
    code, out, _ = sundial(api, "queues", "ls")
    assert code == EXIT_OK and "queues: 2" in out and "paused" in out
    code, out, _ = sundial(api, "queues", "ls", "--json")
    assert [json.loads(line)["queue"] for line in out.splitlines()] == ["default", "email"]
    assert sundial(api, "queues", "resume", "email")[0] == EXIT_OK


def test_dead_ls_replay_and_purge(api: InProcessApi, deps: Dependencies) -> None:
    from sundial.client import SundialClient  # noqa: PLC0415

    ids = kill_through_a_worker(SundialClient(transport=api), deps, 3)
    code, out, _ = sundial(api, "dead", "ls", "default", "--json")
    assert code == EXIT_OK
    assert sorted(json.loads(line)["job_id"] for line in out.splitlines()) == sorted(ids)
    code, out, _ = sundial(api, "dead", "ls", "default")
    assert "dead letters of default: 3" in out

    code, out, err = sundial(api, "dead", "replay", "default", "--batch", "2")
    assert code == EXIT_OK
    assert err.splitlines()[-1].startswith("replayed 3 ")  # progress, one line per request
    assert len(err.splitlines()) == 2
    assert "3 jobs re-queued" in out
    code, out, _ = sundial(
        api, "dead", "purge", "default", "--older-than", "2030-01-01T00:00:00Z", "--json"
    )
    assert code == EXIT_OK and json.loads(out) == {"purged": 0, "more": False}


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("2d", 172800)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


def test_schedules_dags_and_jobs_are_listed_by_queue(api: InProcessApi) -> None:
    # Given a schedule, a DAG and a pending job on `email`
    code, out, _ = sundial(
        api, "schedules", "create", "--queue", "email", "--rate", "1 hour", "--name", "hourly"
    )
    assert code == EXIT_OK, out
    sundial(api, "dags", "submit", json.dumps({"name": "etl", "nodes": {"a": {"queue": "email"}}}))
    code, out, _ = sundial(api, "jobs", "submit", "--queue", "email", "--in", "1h", "--json")
    job_id = json.loads(out)["id"]
    # Then each is listed: a table by default, a JSON object a line with --json
    code, out, _ = sundial(api, "schedules", "ls", "--queue", "email")
    assert code == EXIT_OK and "schedules of email: 1" in out and "hourly" in out, out
    code, out, _ = sundial(api, "dags", "ls", "--queue", "email", "--json")
    (dag,) = [json.loads(line) for line in out.splitlines()]
    assert code == EXIT_OK and dag["name"] == "etl" and dag["queues"] == ["email"]
    code, out, _ = sundial(api, "jobs", "ls", "--queue", "email", "--status", "pending")
    # (two: the job, and the schedule's next occurrence)
    assert code == EXIT_OK and "pending jobs of email: 2" in out, out
    code, out, _ = sundial(api, "jobs", "ls", "--queue", "email", "--status", "pending", "--json")
    listed = {job["id"]: job["status"] for job in map(json.loads, out.splitlines())}
    assert code == EXIT_OK and len(listed) == 2 and listed[job_id] == "pending"
    code, out, _ = sundial(
        api, "jobs", "ls", "--queue", "email", "--status", "pending", "--limit", "1"
    )
    assert code == EXIT_OK and "pending jobs of email: 1" in out
    code, out, _ = sundial(api, "jobs", "ls", "--queue", "email", "--status", "dead", "--json")
    assert code == EXIT_OK and out == ""
    # And a bad window is the API's 400
    code, _, err = sundial(
        api, "jobs", "ls", "--queue", "email", "--status", "pending", "--since", "yesterday"
    )
    assert code == EXIT_INVALID and "from" in err, err
