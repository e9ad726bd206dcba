"""The `sundial` CLI's main flows against the real API (the handlers in-process, under moto):
output for people and for scripts, and the exit codes."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from sundial.client import SundialClient
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
from sundial.client.transport import ApiRequest, ApiResponse
from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.wiring import Dependencies
from tests.inprocess_api import FailingFirst, InProcessApi, kill_through_a_worker
from tests.support import DAILY_REPORT

UNKNOWN_JOB = JobKey(shard=2, due_ms=1_800_000_000_000, ulid="01KAKZ9Q2X8Q9JZ8W7M5N4P3R2").job_id


@pytest.fixture
def api(deps: Dependencies, monkeypatch: pytest.MonkeyPatch) -> InProcessApi:
    # A wide terminal whatever runs the tests ($COLUMNS sets the tables' width); a test of a
    # narrow one sets its own
    monkeypatch.setenv("COLUMNS", "200")
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


# -- what a person reads (issue 26) -----------------------------------------------------------

API_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ANY_TIME = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^\s│",]*')


def test_dead_replay_job_id_re_queues_that_letter_alone(
    api: InProcessApi, deps: Dependencies
) -> None:
    # Given three dead jobs
    client = SundialClient(transport=api)
    first, *others = kill_through_a_worker(client, deps, 3)
    # When one is replayed by its id, Then it alone is queued again, and the CLI says so
    code, out, _ = sundial(api, "dead", "replay", "default", "--job-id", first, "--quiet")
    assert (code, out) == (EXIT_OK, f"job {first} re-queued\n")
    assert client.get_job(first).status == "queued"
    assert [client.get_job(i).status for i in others] == ["dead", "dead"]
    assert sorted(x.job_id or "" for x in client.dead_letters("default")) == sorted(others)
    # When it is replayed again, Then there is no letter of it left: not found, exit 4
    code, out, err = sundial(api, "dead", "replay", "default", "--job-id", first, "--quiet")
    assert code == EXIT_NOT_FOUND and out == ""
    assert err == f"error: no dead letter of job {first} among default's\n"
    # And with --json the API's answer is printed as it came
    code, out, _ = sundial(api, "dead", "replay", "default", "--job-id", others[0], "--json")
    assert code == EXIT_OK
    assert json.loads(out) == {
        "replayed": [others[0]],
        "skipped": 0,
        "unreplayable": 0,
        "more": False,
        "in_flight": 0,
    }


def _times_in(text: str) -> list[str]:
    return ANY_TIME.findall(text)


def test_every_time_is_printed_as_the_api_writes_it(api: InProcessApi, deps: Dependencies) -> None:
    # Given a job due at a time with milliseconds, a dead job, a schedule and a DAG
    _, out, _ = sundial(
        api, "jobs", "submit", "--queue", "email", "--at", "2026-11-21T13:00:00.730Z", "--json"
    )
    job_id = json.loads(out)["id"]
    kill_through_a_worker(SundialClient(transport=api), deps, 1)
    _, out, _ = sundial(api, "schedules", "create", "--queue", "email", "--rate", "1 hour")
    schedule_id = next(line.split()[3] for line in out.splitlines() if "│ id " in line)
    sundial(api, "dags", "submit", json.dumps({"name": "etl", "nodes": {"a": {"queue": "email"}}}))
    # When every view with times is printed as a table
    printed = "".join(
        sundial(api, *argv)[1]
        for argv in [
            ("jobs", "get", job_id),
            ("jobs", "ls", "--queue", "email", "--status", "pending"),
            ("jobs", "ls", "--queue", "default", "--status", "dead"),
            ("dead", "ls", "default"),
            ("schedules", "get", schedule_id),
            ("schedules", "ls", "--queue", "email"),
            ("schedules", "runs", schedule_id),
            ("dags", "ls", "--queue", "email"),
        ]
    )
    # Then each time reads as the API writes it: RFC 3339, UTC, milliseconds, Z
    times = _times_in(printed)
    assert len(times) > 10 and "2026-11-21T13:00:00.730Z" in times
    assert [t for t in times if not API_TIME.match(t)] == []


class Rewriting:
    """The API, with a field it might add in a later version put in every object answered:
    what --json prints must be the answer as it came, that field included."""

    def __init__(self, inner: InProcessApi) -> None:
        self.inner = inner
        self.bodies: list[bytes] = []

    def __call__(self, request: ApiRequest) -> ApiResponse:
        answer = self.inner(request)
        if 200 <= answer.status < 300:
            value = json.loads(answer.body)
            body = json.dumps({**value, "added_later": {"x": 1.5}}, indent=1).encode()
            answer = ApiResponse(answer.status, answer.headers, body)
            self.bodies.append(body)
        return answer


def test_json_prints_the_api_answer_as_it_came(api: InProcessApi, deps: Dependencies) -> None:
    rewriting = Rewriting(api)

    def as_json(*argv: str) -> str:
        code, out, err = sundial(rewriting, *argv, "--json")  # type: ignore[arg-type]
        assert code == EXIT_OK, err
        return out

    # One answer: its body, byte for byte (indentation, the unknown field)
    out = as_json("jobs", "submit", "--queue", "email", "--in", "1h", "--payload", '{"a": 1}')
    assert out == rewriting.bodies[-1].decode() + "\n"
    job_id = json.loads(out)["id"]
    for argv in [
        ("jobs", "get", job_id),
        ("jobs", "change", job_id, "--priority", "high"),
        ("queues", "get", "email"),
        ("schedules", "create", "--queue", "email", "--rate", "1 hour"),
        ("dags", "submit", json.dumps({"name": "etl", "nodes": {"a": {"queue": "email"}}})),
    ]:
        assert as_json(*argv) == rewriting.bodies[-1].decode() + "\n", argv
    schedule_id = json.loads(as_json("schedules", "ls", "--queue", "email"))["id"]
    assert as_json("schedules", "runs", schedule_id) == rewriting.bodies[-1].decode() + "\n"
    # A listing: each item as the API wrote it, one a line (the unknown field kept)
    out = as_json("jobs", "ls", "--queue", "email", "--status", "pending")
    items = json.loads(rewriting.bodies[-1])["items"]
    assert [json.loads(line) for line in out.splitlines()] == items and len(items) == 2
    out = as_json("queues", "ls")
    queues = json.loads(rewriting.bodies[-1])["queues"]
    assert [json.loads(line) for line in out.splitlines()] == queues
    # A command that may make several requests (a purge, a replay): each answer as it came
    kill_through_a_worker(SundialClient(transport=api), deps, 2)
    out = as_json("dead", "purge", "default", "--older-than", "2030-01-01T00:00:00Z")
    assert out == rewriting.bodies[-1].decode() + "\n"
    assert json.loads(out) == {"purged": 2, "more": False, "added_later": {"x": 1.5}}


def test_an_error_is_printed_once(api: InProcessApi) -> None:
    # A refused field: the API's message names it; its field error says the same: once
    code, _, err = sundial(api, "jobs", "get", "not-a-job-id")
    assert code == EXIT_INVALID
    assert err == "error (400): job_id: malformed job id (expected 36 characters)\n"
    code, _, err = sundial(api, "jobs", "submit", "--queue", "nope")
    assert err.count("unknown queue 'nope'") == 1 and len(err.splitlines()) == 1


def test_ids_are_never_wrapped_or_cut_in_a_narrow_terminal(
    api: InProcessApi, deps: Dependencies, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given dead jobs with long messages, and an 80-column terminal
    long = "550 5.1.1 the mailbox of the recipient is unavailable: " + "x" * 60
    ids = kill_through_a_worker(
        SundialClient(transport=api), deps, 2, error_type="SmtpMailboxUnavailable", message=long
    )
    monkeypatch.setenv("COLUMNS", "80")
    dag = SundialClient(transport=api).submit_dag("daily_report", DAILY_REPORT["nodes"])
    for argv, expected in [
        (("dead", "ls", "default"), ids),
        (("jobs", "ls", "--queue", "default", "--status", "dead"), ids),
        (("jobs", "get", ids[0]), ids[:1]),
        (("dags", "get", dag.id), [node.id for node in dag.nodes.values()]),
    ]:
        code, out, _ = sundial(api, *argv)
        assert code == EXIT_OK
        # Then every line of a table fits, and each id is whole on one line (other columns
        # give way; a detail view's nested values follow the table in full)
        table = [line for line in out.splitlines() if line[:1] in set("┏┃┡│└")]
        assert table and max(len(line) for line in table) <= 80, out
        for job_id in expected:
            assert any(job_id in line for line in table), (argv, job_id, out)
    code, out, _ = sundial(api, "dead", "ls", "default")
    assert "…" in out and long not in out  # the message is cut, not the ids


def test_nested_json_is_one_line_in_a_table_and_whole_below_it(api: InProcessApi) -> None:
    # Given a job with a large nested payload
    payload = {"to": ["ada@example.com", "grace@example.com"], "template": {"id": 7, "vars": {}}}
    payload["body"] = {"lines": [f"line {n}" for n in range(20)]}
    _, out, _ = sundial(
        api, "jobs", "submit", "--queue", "email", "--in", "1h", "--payload", json.dumps(payload)
    )
    job_id = next(line.split()[3] for line in out.splitlines() if "│ id " in line)
    # When it is shown, Then the table holds one short line for it
    _, out, _ = sundial(api, "jobs", "get", job_id)
    [row] = [line for line in out.splitlines() if line.startswith("│ payload ")]
    assert "{…} 3 keys: to, template, body" in row
    # And the whole value follows the table, as indented JSON
    below = out.split("\npayload:\n", 1)[1]
    assert json.loads(below) == payload
    # And a short value stays in the table as it is
    _, out, _ = sundial(
        api, "jobs", "submit", "--queue", "email", "--in", "1h", "--payload", '{"n": 1}', "--json"
    )
    _, out, _ = sundial(api, "jobs", "get", json.loads(out)["id"])
    [row] = [line for line in out.splitlines() if line.startswith("│ payload ")]
    assert row.split("│")[2].strip() == '{"n": 1}' and "\npayload:\n" not in out


def test_schedule_runs_tell_past_from_upcoming(
    api: InProcessApi, deps: Dependencies, clock: ManualClock
) -> None:
    # Given a schedule every minute, three minutes old, whose next 15 minutes were sent ahead
    schedule = SundialClient(transport=api).create_schedule("email", rate="1 minute")
    clock.advance(seconds=180)
    deps.sweeper.sweep(list(range(8)))

    def rows(*options: str) -> list[list[str]]:
        code, out, _ = sundial(api, "schedules", "runs", schedule.id, "--limit", "100", *options)
        assert code == EXIT_OK
        cells = [line.split("│")[1:-1] for line in out.splitlines() if line.startswith("│")]
        return [[cell.strip() for cell in row] for row in cells]

    # Then each run says whether its time has come
    everything = rows()
    past = [row for row in everything if row[1] == "past"]
    assert [row[0] for row in past] == [f"2026-11-21T12:0{m}:00.000Z" for m in (3, 2, 1, 0)]
    assert all(row[0] > "2026-11-21T12:03:00.000Z" for row in everything if row[1] == "upcoming")
    # And --when lists either alone
    assert rows("--when", "past") == past
    upcoming = rows("--when", "upcoming")
    assert len(upcoming) == len(everything) - 4 and {row[1] for row in upcoming} == {"upcoming"}
