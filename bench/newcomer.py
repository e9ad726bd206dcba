"""The local runtime as a newcomer meets it (issue 26), now and before that issue's changes,
one after the other in the same run: `make run` on a terminal (a pseudo-terminal, 80x24, so the
live table is drawn), `make demo` once, then idle (the demo's schedule firing every 15 s), then
the pause of the densest schedule allowed (every 10 s: about 85 occurrences decided ahead), and
Ctrl-C.

Measured for the whole process tree (the runtime and its functions' processes), from /proc:
memory (RSS, and PSS, which counts a page shared by N processes as 1/N each) at the end of the
idle time, the CPU it used while idle (percent of one core), the pause's wall time over HTTP,
and the time from SIGINT until every process has exited.

"Before" is the local runtime's package at BEFORE_ISSUE_26 (git archive), run from a copy of
the same cloud assembly whose `sundial` layer is that revision's, so its functions (the pause
among them) run the code of that time too.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tarfile
import termios
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.config import ROOT
from bench.localrun import READY_TIMEOUT_S, free_port

# main just before issue 26's changes.
BEFORE_ISSUE_26 = "d1fd5ca"
PACKAGE_ROOT = Path("layers/sundial/python")
SAMPLE_EVERY_S = 15.0
STOP_LIMIT_S = 120.0
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass
class TreeSample:
    at_s: float
    processes: int
    rss_mb: float
    pss_mb: float
    runtime_rss_mb: float  # the runtime's own process (emulator, API, triggers, live table)
    cpu_s: float  # user + system, all processes alive now, since each started


def run_newcomer(
    cdk_out: Path, workdir: Path, *, idle_minutes: float, pauses: int
) -> dict[str, Any]:
    variants: dict[str, tuple[Path | None, Path]] = {"now": (None, cdk_out)}
    before = _before(cdk_out, workdir / "newcomer-before-code")
    if before is not None:
        variants["before"] = before
    results = {}
    for name, (package, assembly) in variants.items():
        results[name] = _measure(
            package, assembly, workdir / f"newcomer-{name}", idle_minutes, pauses
        )
    return {
        "idle_minutes": idle_minutes,
        "pauses": pauses,
        "before_revision": BEFORE_ISSUE_26 if before is not None else None,
        "variants": results,
    }


def _before(cdk_out: Path, into: Path) -> tuple[Path, Path] | None:
    """(the package at BEFORE_ISSUE_26, a copy of the assembly whose sundial layer is it)."""
    archive = subprocess.run(
        ["git", "archive", BEFORE_ISSUE_26, str(PACKAGE_ROOT)],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        return None
    shutil.rmtree(into, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into / "tree", filter="data")
    package = into / "tree" / PACKAGE_ROOT
    assembly = into / "cdk.out"
    shutil.copytree(cdk_out, assembly, symlinks=True)
    for layer in assembly.glob("asset.*/python/sundial"):
        shutil.rmtree(layer)
        shutil.copytree(package / "sundial", layer)
    return package, assembly


def _measure(
    package: Path | None, assembly: Path, workdir: Path, idle_minutes: float, pauses: int
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    api_port, emulator_port = free_port(), free_port()
    settings = {"SUNDIAL_API_PORT": str(api_port), "SUNDIAL_EMULATOR_PORT": str(emulator_port)}
    env = {
        **os.environ,
        **settings,
        "SUNDIAL_CDK_OUT": str(assembly),
        "SUNDIAL_LOG": str(workdir / "local.log"),
        "TERM": "xterm-256color",
        "COLUMNS": "80",
        "LINES": "24",
    }
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(package), env.get("PYTHONPATH", "")])
    api = f"http://127.0.0.1:{api_port}"
    started = time.monotonic()
    process, screen = _start_on_a_terminal(env)
    result: dict[str, Any] = {}
    try:
        result["startup_s"] = _until_ready(api, process, started)
        demo = _demo(settings, workdir)
        result["demo"] = demo
        result["idle"] = _idle(process.pid, idle_minutes)
        result["pause"] = _pauses(api, pauses)
    finally:
        result["stop"] = _stop(process)
        screen.stop()
    return result


class _Screen(threading.Thread):
    """Reads the pseudo-terminal so the runtime never blocks writing its live table."""

    def __init__(self, master: int) -> None:
        super().__init__(daemon=True)
        self._master = master
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            try:
                if not os.read(self._master, 65536):
                    return
            except OSError:
                return

    def stop(self) -> None:
        self._done.set()
        os.close(self._master)


def _start_on_a_terminal(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], _Screen]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "sundial.local"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(slave)
    screen = _Screen(master)
    screen.start()
    return process, screen


def _http(method: str, url: str, body: Any = None, timeout: float = 120) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _until_ready(api: str, process: subprocess.Popen[bytes], started: float) -> float:
    deadline = started + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the local runtime exited with {process.returncode}")
        try:
            if _http("GET", f"{api}/queues", timeout=60)[0] == 200:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.5)  # waiting for a process to start, not for a due time
    raise TimeoutError("the local runtime did not become ready")


def _demo(settings: dict[str, str], workdir: Path) -> dict[str, Any]:
    started = time.monotonic()
    with (workdir / "demo.log").open("w") as log:
        completed = subprocess.run(
            [sys.executable, "scripts/demo.py"],
            env={**os.environ, **settings},
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=900,
            check=False,
        )
    text = (workdir / "demo.log").read_text()
    return {
        "exit": completed.returncode,
        "seconds": time.monotonic() - started,
        "tracebacks": text.count("Traceback"),
    }


def _idle(pid: int, minutes: float) -> dict[str, Any]:
    samples = [_sample(pid, 0.0)]
    started = time.monotonic()
    while time.monotonic() - started < minutes * 60:
        time.sleep(min(SAMPLE_EVERY_S, max(0.0, minutes * 60 - (time.monotonic() - started))))
        samples.append(_sample(pid, time.monotonic() - started))
    first, last = samples[0], samples[-1]
    # CPU over the second half: past the demo's after-effects, what an idle runtime costs.
    middle = samples[len(samples) // 2]
    window_s = max(1e-9, last.at_s - middle.at_s)
    return {
        "samples": [asdict(s) for s in samples],
        "cpu_percent_of_a_core": 100 * (last.cpu_s - middle.cpu_s) / window_s,
        "cpu_window_s": window_s,
        "rss_mb": last.rss_mb,
        "pss_mb": last.pss_mb,
        "runtime_rss_mb": last.runtime_rss_mb,
        "rss_growth_mb": last.rss_mb - first.rss_mb,
        "processes": last.processes,
    }


def _pauses(api: str, count: int) -> dict[str, Any]:
    """The densest schedule, given a minute so the sweeps decide its next 14 minutes; then
    paused and resumed `count` times, each pause timed."""
    status, schedule = _http(
        "POST", f"{api}/schedules", {"queue": "default", "rate": "10 seconds"}, timeout=300
    )
    if status != 201:
        return {"error": f"create answered {status}: {schedule}"}
    time.sleep(75)  # a dispatch tick (every minute) sends the next 14 minutes
    seconds, answers, parked = [], [], []
    for _ in range(count):
        started = time.monotonic()
        try:
            status, _ = _http("POST", f"{api}/schedules/{schedule['id']}/pause", timeout=300)
        except TimeoutError:
            status = 0
        seconds.append(time.monotonic() - started)
        answers.append(status)
        runs = _http("GET", f"{api}/schedules/{schedule['id']}/runs?limit=100")[1]
        parked.append(sum(1 for run in runs.get("runs", []) if run.get("status") == "paused"))
        _http("POST", f"{api}/schedules/{schedule['id']}/resume", timeout=300)
        time.sleep(5)
    _http("DELETE", f"{api}/schedules/{schedule['id']}", timeout=300)
    return {
        "seconds": seconds,
        "median_s": statistics.median(seconds),
        "max_s": max(seconds),
        "answers": answers,
        "parked": parked,
    }


def _stop(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    tree = _tree(process.pid)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=STOP_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    while any(_alive(pid) for pid in tree) and time.monotonic() - started < STOP_LIMIT_S:
        time.sleep(0.05)
    return {
        "seconds": time.monotonic() - started,
        "exit": process.returncode,  # negative: killed, after STOP_LIMIT_S
        "limit_s": STOP_LIMIT_S,
        "left_behind": sum(1 for pid in tree if _alive(pid)),
    }


# -- /proc ------------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _tree(pid: int) -> list[int]:
    children, tree, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sample(pid: int, at_s: float) -> TreeSample:
    rss_kb = pss_kb = runtime_kb = 0
    cpu_ticks = processes = 0
    for member in _tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            rollup = Path(f"/proc/{member}/smaps_rollup").read_text()
        except OSError:
            continue
        processes += 1
        cpu_ticks += int(fields[11]) + int(fields[12])
        rss = int(fields[21]) * PAGE_KB
        rss_kb += rss
        runtime_kb += rss if member == pid else 0
        pss_kb += next(
            (int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0
        )
    return TreeSample(
        at_s=at_s,
        processes=processes,
        rss_mb=rss_kb / 1024,
        pss_mb=pss_kb / 1024,
        runtime_rss_mb=runtime_kb / 1024,
        cpu_s=cpu_ticks / TICK,
    )


if __name__ == "__main__":  # python -m bench.newcomer [IDLE_MINUTES] [PAUSES]: the JSON
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    out = run_newcomer(ROOT / "cdk.out", ROOT / "build", idle_minutes=minutes, pauses=repeats)
    print(json.dumps(out, indent=1))
