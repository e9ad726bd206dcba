"""What a person reads while `make run` runs, at 80 columns (issue 26: headers were cut to two
letters, `default` and `demo` both read `de…`, the banner's 38 lines pushed the URLs off a
24-line screen, and its curl examples wrapped inside a box, so a copy broke them)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from rich.console import Console

from sundial.local.runtime import LocalConfig
from sundial.local.tally import Counts, Dag
from sundial.local.view import LiveState, QueueSqs, banner, banner_lines, render

QUEUES = ["default", "demo", "email"]


def _screen(renderable: object, *, soft_wrap: bool = False) -> list[str]:
    console = Console(width=80, record=True, color_system=None, force_terminal=True)
    console.print(renderable, soft_wrap=soft_wrap)
    return console.export_text().splitlines()


def _busy_state(**changes: object) -> LiveState:
    """A runtime a few demos old: every status in use on some queue."""
    jobs = {
        "default": Counter(pending=3, succeeded=120, cancelled=1),
        "demo": Counter(blocked=2, paused=4, queued=1, running=2, succeeded=1234, failed=1, dead=3),
        "email": Counter(pending=7, succeeded=40),
    }
    dags = {
        f"dag{i}": Dag(
            name, Counter(succeeded=5) if name == "daily_report" else Counter(dead=1, cancelled=2)
        )
        for i, name in enumerate(["daily_report", "nightly_import"] * 3)
    }
    state = LiveState(
        api_url="http://127.0.0.1:8123",
        counts=Counts(jobs=jobs, dags=dags, records=1826),
        queues={
            "default": QueueSqs(delayed=3),
            "demo": QueueSqs(ready=1, in_flight=2, consumed=1240),
            "email": QueueSqs(),
        },
        history=[("stream:Sundial-History", None)],
        history_read=1826,
        dags=list(dags.items())[-3:][::-1],
    )
    for name, value in changes.items():
        setattr(state, name, value)
    return state


def test_the_live_table_reads_whole_at_80_columns() -> None:
    screen = _screen(render(_busy_state()))
    text = "\n".join(screen)
    assert all(len(line) <= 80 for line in screen), text
    assert "…" not in text
    # Every status in use is a whole word over its column, every queue a whole name
    header = next(line for line in screen if line.startswith("queue"))
    assert header.split() == [
        "queue", "blocked", "pending", "paused", "queued", "running", "succeeded", "failed",
        "dead", "cancelled",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split()[1:] for line in screen if line.split()[:1] == ["demo"]}
    assert rows["demo"] == ["2", "0", "4", "1", "2", "1234", "1", "3", "0"]
    assert any(line.startswith("default ") for line in screen)
    assert any(line.startswith("email ") for line in screen)
    assert "SQS  default 3 delayed · demo 1 ready, 2 in flight, 1240 consumed · email empty" in text
    assert "DAGs (6 in all; the 3 newest)\n  nightly_import: failed (2 cancelled, 1 dead)" in text
    assert "history  ok: 1,826 stream records read" in text
    # And the URLs are on the last line, whatever scrolled away above
    assert (
        screen[-1] == "API http://127.0.0.1:8123  ·  UI http://127.0.0.1:8123/ui/  ·  Ctrl-C stops"
    )
    # And with the 11-line banner above it, it fits a 24-line terminal
    assert len(screen) <= 24 - 11


def test_a_quiet_runtime_shows_only_the_statuses_in_use() -> None:
    state = _busy_state(
        counts=Counts(jobs={"demo": Counter(pending=1)}, dags={}, records=1), dags=[]
    )
    screen = _screen(render(state))
    assert next(line for line in screen if line.startswith("queue")).split() == [
        "queue",
        "pending",
    ]


def test_a_stopped_history_reader_and_logged_errors_are_on_screen() -> None:
    state = _busy_state(
        history=[("stream:Sundial-History", "STOPPED (SystemExit: killed): nothing is read")],
        errors=2,
        last_error="stream event source mapping stream:Sundial-History stopped",
    )
    text = "\n".join(_screen(render(state)))
    assert "history  stream:Sundial-History: STOPPED (SystemExit: killed)" in text
    assert "2 error(s) logged; see the log file. Last: stream event source" in text


def _config(**ports: int) -> LocalConfig:
    return LocalConfig(assembly_dir=Path("cdk.out"), **ports)  # type: ignore[arg-type]


def test_the_banner_is_short_and_its_commands_carry_the_ports() -> None:
    config = _config(api_port=8123, emulator_port=5123)
    lines = banner_lines(config, QUEUES, "tail -f .sundial/local.log")
    assert len(lines) <= 10
    commands = [line.strip() for line in lines if line.startswith("  ")]
    settings = "SUNDIAL_API_PORT=8123 SUNDIAL_EMULATOR_PORT=5123"
    for tool in ("make demo", ".venv/bin/sundial queues ls", "make report"):
        assert f"{settings} {tool}" in commands
    assert any("curl -s -X POST http://127.0.0.1:8123/jobs" in c for c in commands)


def test_the_banner_at_the_default_ports_needs_no_settings() -> None:
    lines = banner_lines(_config(), QUEUES, None)
    assert "  make demo" in lines and "  make report" in lines
    assert not any("SUNDIAL_" in line for line in lines)


def test_a_long_command_is_printed_whole_on_one_line_for_the_terminal_to_wrap() -> None:
    config = _config(api_port=8123, emulator_port=5123)
    screen: list[str] = []
    for text in banner(config, QUEUES, None, startup_s=83.2):
        screen += _screen(text, soft_wrap=True)
    assert screen[0] == "Sundial is running locally (started in 83 s)"
    [curl] = [line for line in screen if "curl" in line]
    assert len(curl) > 80 and curl.rstrip().endswith("}'")  # one line: the terminal wraps it
    assert not re.search(r"[╭╮╰╯│]", "\n".join(screen))
    assert len(screen) <= 11
