"""The newcomer section's own parts (bench/newcomer.py, bench/newcomer_report.py, and the
suite's --only merge); the section itself runs two local runtimes for minutes (`python -m
bench --only newcomer`), so the smoke profile leaves it out."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.newcomer import _sample, _stop, _tree
from bench.newcomer_report import render
from bench.suite import _merged


def test_a_process_tree_is_sampled_and_stopped_whole() -> None:
    # Given a process with a child (a shell running a sleep, ending it on SIGINT)
    script = 'sleep 30 & trap "kill $!; exit 0" INT; wait'
    process = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(_tree(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # waiting for the shell to start its child
    # When it is sampled, Then both processes count, with their memory
    sample = _sample(process.pid, 0.0)
    assert sample.processes == 2 and sample.rss_mb > 0 and sample.pss_mb > 0
    # And a stop (SIGINT) is timed until no process of the tree is left
    stopped = _stop(process)
    assert stopped["left_behind"] == 0 and stopped["seconds"] < 20


def _variant(pause_s: float, stop_s: float) -> dict[str, Any]:
    return {
        "startup_s": 50.0,
        "demo": {"exit": 0, "seconds": 44.0, "tracebacks": 0},
        "idle": {
            "cpu_percent_of_a_core": 9.0, "rss_mb": 1339.0, "pss_mb": 1090.0,
            "runtime_rss_mb": 162.0, "rss_growth_mb": 0.3, "processes": 17,
        },
        "pause": {"median_s": pause_s, "max_s": pause_s, "answers": [200], "parked": [82]},
        "stop": {"seconds": stop_s, "exit": 0, "left_behind": 0},
    }  # fmt: skip


def test_the_section_shows_before_and_now_side_by_side() -> None:
    result: dict[str, Any] = {
        "idle_minutes": 10.0,
        "pauses": 1,
        "before_revision": "d1fd5ca",
        "variants": {"now": _variant(1.5, 5.7), "before": _variant(59.2, 122.0)},
    }
    result["variants"]["before"]["stop"]["exit"] = -9  # killed past the bench's limit
    summary: list[tuple[str, str, str, str]] = []
    text = render(result, summary)
    assert "| | before (`d1fd5ca`) | now |" in text
    assert "| Ctrl-C until every process has exited | not within 120 s: killed" in text
    assert "| 5.7 s (exit 0, 0 left behind) |" in text
    assert "1.5 s median" in text and "82 occurrences parked" in text
    assert summary[0][1] == "1.5 s (was 59 s); 6 s (was over 120 s)"


def test_a_section_run_alone_keeps_the_others(tmp_path: Path) -> None:
    previous = {
        "profile": {"name": "full"},
        "command": "make bench",
        "sections": {"ledger": {"result": 1}, "newcomer": {"result": "old"}},
    }
    (tmp_path / "results.json").write_text(json.dumps(previous))
    rerun = {
        "profile": {"name": "full"},
        "command": "python -m bench --only newcomer",
        "machine": {"commit": "abc"},
        "load_after": [1, 1, 1],
        "total_s": 60,
        "sections": {"newcomer": {"result": "new"}},
    }
    merged = _merged(tmp_path / "results.json", rerun)
    assert merged["sections"] == {"ledger": {"result": 1}, "newcomer": {"result": "new"}}
    assert merged["command"] == "make bench"
    assert merged["reruns"][0]["command"] == "python -m bench --only newcomer"
