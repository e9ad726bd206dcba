"""The bounded simulation profile that runs in `make test`: a few seeds of the whole system
with races only (a duplicate is then a violation) and with faults. Each seed runs in a fresh
process with fixed string hashing, exactly as `python -m tests.simulation --seed N` replays it;
a failing seed prints the run's last steps, its violations and the replay command."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

JOBS = 40


@pytest.mark.parametrize(
    ("seed", "clean", "extra"),
    [
        (1, True, "--movers"),
        (2, False, "--movers"),
        (3, True, "--dead-letters"),
        (4, False, "--dead-letters"),
        (5, False, None),
        (43, False, "--long"),
        (42, False, "--long"),
        (11, True, "--move-limit"),
        (22, False, "--tenants"),
        (31, True, "--holders"),
        (61, False, "--dag-controls"),
        (62, True, "--dag-controls"),
    ],
)
def test_the_promises_hold_in_a_simulated_run(seed: int, clean: bool, extra: str | None) -> None:
    """`--movers`: a client moves jobs (PATCH /jobs/{id}) nearly every tick (issue 18).
    `--dead-letters`: some jobs die; DLQ indexing, replays and retries by id race the rest.
    `--long`: jumps of days, with DynamoDB's TTL, the payload lifecycle and the history Lambda
    acting, then a retention (issue 25). `--move-limit`: jobs pushed to a lowered move limit,
    crashes around the last move's send (issue 25). `--tenants`: a second tenant, every write
    checked against its tenant, a hostile message (issue 25). `--holders`: second messages of
    one attempt and runs longer than the visibility timeout and a lease (issue 31).
    `--dag-controls`: DAG pause, resume, cancel, node cancel and node retry racing submits and
    the nodes' progress, with runs that last (issue 32)."""
    command = [sys.executable, "-m", "tests.simulation", "--seed", str(seed), "--jobs", str(JOBS)]
    command += [extra] if extra else []
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    # A guard against a hang, not a speed check: a long-profile run takes 1-2 minutes on an idle
    # core and over 5 on a shared machine running the rest of `make test` beside it.
    run = subprocess.run(
        [*command, *(["--clean"] if clean else [])],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        check=False,
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr[-3000:]}"
    assert f"seed {seed}: " in run.stdout
