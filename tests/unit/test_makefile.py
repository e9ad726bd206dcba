"""What a newcomer sees of the Makefile (issue 26): `make help` in one aligned column, and
`make run` refusing a busy port before it spends a minute synthesizing."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_make_help_lines_up_every_description() -> None:
    shown = _make("help")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert {"backfill-index", "ui-screenshots", "run", "demo"} <= {
        line.split()[0] for line in lines
    }
    # Each description starts in the same column, two spaces after the longest target name
    starts = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines}
    assert len(starts) == 1, shown.stdout
    longest = max(len(line.split()[0]) for line in lines)
    assert starts == {2 + longest + 2}


def test_make_run_refuses_a_busy_port_before_it_synthesizes() -> None:
    with socket.socket() as busy, socket.socket() as free:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        free.bind(("127.0.0.1", 0))
        ports = {
            "SUNDIAL_API_PORT": str(busy.getsockname()[1]),
            "SUNDIAL_EMULATOR_PORT": str(free.getsockname()[1]),
        }
        free.close()
        run = _make("run", env=ports)
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert f"port {ports['SUNDIAL_API_PORT']} is already in use: set SUNDIAL_API_PORT" in output
    assert "synth" not in output
