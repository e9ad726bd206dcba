"""Issue 16, fair dispatch in the whole-system simulation: `default` floods (FLOOD jobs due at
the same second, capped at 2 a second over 8 shards, so the flood is spread over minutes of
sweeps; deferral past SQS's 15 minutes is covered by tests/unit/dispatch/test_fair_dispatch.py,
and `--flood 2000` exercises it here, at several minutes a seed) while the run goes on; the
flooding queue is paused and resumed by the racing clients. The oracle's usual checks (no
loss, no duplicate without a crash, none early, a cancel that answered 200 never runs,
schedules and DAGs) hold, and the quiet queue `email` stays within its bound
(sim.Flood.bound_ms: its due second without faults; with them, at most a claim's lease and two
sweeps more). Each seed runs in a fresh process with fixed string hashing, as
`python -m tests.simulation --seed N --flood FLOOD` replays it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Kept small enough for make test (about a minute a seed); see the docstring for more.
FLOOD = 400
JOBS = 40


@pytest.mark.parametrize(("seed", "clean"), [(1, True), (2, False)])
def test_a_capped_flood_keeps_every_promise_and_the_quiet_queue_on_time(
    seed: int, clean: bool
) -> None:
    command = [sys.executable, "-m", "tests.simulation", "--seed", str(seed)]
    command += ["--jobs", str(JOBS), "--flood", str(FLOOD), *(["--clean"] if clean else [])]
    run = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        timeout=1800,
        check=False,
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr[-3000:]}"
    assert f"flood of {FLOOD} on default" in run.stdout
