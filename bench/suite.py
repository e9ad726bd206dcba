"""The benchmark suite: profiles (how big each run is), sections (each in its own process, so
memory, module state and logs stay apart), and the run that ties them to the report.

    python -m bench                    # full run: BENCHMARKS.md and bench/results/*.png
    python -m bench --profile quick    # a few minutes (make bench BENCH_QUICK=1)
    python -m bench --profile smoke    # seconds-scale, into build/bench-smoke (make bench-smoke)
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.config import ROOT, BenchConfig, load_config


@dataclass(frozen=True)
class Profile:
    name: str
    ledger_jobs: int
    batching_volumes: tuple[int, ...]
    cpu_jobs: dict[str, int]
    cpu_repeats: int
    precision_jobs: int
    precision_window_s: int
    precision_lead_s: int
    pickup_jobs: int
    scale_backlog: int
    scale_window: int
    compaction_events: int
    recovery_backlog: int = 100_000
    sdk_import_repeats: int = 15
    # Fair dispatch (bench/fairness.py): per sweeper group of shards, a flood of one queue
    # due at once, a quiet queue around it, the flooding queue's cap in the capped variant.
    # Each repeat runs three sweeper variants (the "before" one from git) on moto: about 2-3
    # minutes per repeat at these sizes on 2 cores, so the full profile keeps to 3,000 and 2.
    fairness_flood: int = 3_000
    fairness_quiet: int = 200
    fairness_cap: int = 1000
    fairness_repeats: int = 2
    # The local runtime as a newcomer meets it (bench/newcomer.py): minutes idle after a demo,
    # and pauses of the densest schedule timed; each for this tree and the one before issue 26.
    newcomer_idle_minutes: float = 10.0
    newcomer_pauses: int = 3
    sections: tuple[str, ...] = (
        "ledger",
        "idle",
        "log_bytes",
        "cpu",
        "pickup",
        "scale",
        "recovery",
        "precision",
        "compaction",
        "sdk_import",
        "fairness",
        "newcomer",
    )


PROFILES = {
    "full": Profile(
        name="full",
        # 5 jobs per shard per tick at 64 shards. moto's SQS walks every queued message on each
        # send and receive, so the ledger's time grows with the square of this.
        ledger_jobs=320,
        batching_volumes=(64, 320, 1280),
        cpu_jobs={
            "submit": 300,
            "submit_immediate": 200,
            "submit_batch": 1000,
            "sweeper": 2000,
            "consumer": 500,
            "botocore_update_item": 1000,
        },
        cpu_repeats=3,
        precision_jobs=1600,
        precision_window_s=240,
        precision_lead_s=25,  # each job is submitted about 20 s before it is due
        pickup_jobs=200,
        scale_backlog=100_000,
        scale_window=2_000,
        compaction_events=1_000_000,
    ),
    "quick": Profile(
        name="quick",
        ledger_jobs=100,
        batching_volumes=(64, 640),
        cpu_jobs={
            "submit": 100,
            "submit_immediate": 50,
            "submit_batch": 250,
            "sweeper": 800,
            "consumer": 100,
        },
        cpu_repeats=3,
        precision_jobs=300,
        precision_window_s=60,
        precision_lead_s=25,
        pickup_jobs=50,
        scale_backlog=20_000,
        scale_window=2_000,
        recovery_backlog=20_000,
        compaction_events=100_000,
        fairness_flood=3_000,
        fairness_quiet=100,
        fairness_repeats=1,
        newcomer_idle_minutes=3.0,
        newcomer_pauses=2,
    ),
    "smoke": Profile(
        name="smoke",
        ledger_jobs=25,
        batching_volumes=(64,),
        cpu_jobs={
            "submit": 10,
            "submit_immediate": 10,
            "submit_batch": 25,
            "sweeper": 80,
            "consumer": 10,
        },
        cpu_repeats=1,
        precision_jobs=25,
        precision_window_s=5,
        precision_lead_s=8,
        pickup_jobs=5,
        scale_backlog=1_000,
        scale_window=200,
        recovery_backlog=1_000,
        compaction_events=10_000,
        sdk_import_repeats=3,
        fairness_flood=300,
        fairness_quiet=20,
        fairness_cap=100,
        fairness_repeats=1,
        newcomer_idle_minutes=0.25,
        newcomer_pauses=1,
        # Two local runtimes and two demos take minutes whatever the size: the integration
        # tests (tests/integration) run the same code paths; `--only newcomer` runs it.
        sections=(
            "ledger",
            "idle",
            "log_bytes",
            "cpu",
            "pickup",
            "scale",
            "recovery",
            "precision",
            "compaction",
            "sdk_import",
            "fairness",
        ),
    ),
}


def _ledger(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.ledger import run_ledger  # noqa: PLC0415 - each section imports what it needs

    return run_ledger(config, profile.ledger_jobs, profile.batching_volumes)


def _idle(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.idle_bill import run_idle  # noqa: PLC0415

    return run_idle(config)


def _log_bytes(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.log_bytes import run_log_bytes  # noqa: PLC0415

    return run_log_bytes(config, profile.ledger_jobs)


def _cpu(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.cpu import run_cpu  # noqa: PLC0415

    memory = {name: config.memory_mb(name) for name in ("submit", "sweeper", "consumer")}
    return run_cpu(profile.cpu_jobs, profile.cpu_repeats, memory, workdir)


def _pickup(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.pickup import run_pickup  # noqa: PLC0415

    return run_pickup(config.cdk_out, jobs=profile.pickup_jobs, workdir=workdir)


def _precision(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.precision import run_precision  # noqa: PLC0415

    return run_precision(
        config.cdk_out,
        jobs=profile.precision_jobs,
        window_s=profile.precision_window_s,
        lead_s=profile.precision_lead_s,
        workdir=workdir,
        shards=config.shard_count,
    )


def _scale(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.scale import run_scale  # noqa: PLC0415

    return run_scale(
        backlog=profile.scale_backlog,
        window=profile.scale_window,
        shards=config.shards_per_sweeper,  # one sweeper's group (see bench.scale)
        workdir=workdir,
    )


def _recovery(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.recovery import run_recovery  # noqa: PLC0415

    return run_recovery(
        config,
        profile.recovery_backlog,
        workdir,
        cpu_jobs=profile.cpu_jobs["sweeper"],
        cpu_repeats=profile.cpu_repeats,
    )


def _compaction(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    """The history work's bench/compaction.py; until it exists the section says so."""
    if importlib.util.find_spec("bench.compaction") is None:
        return {"available": False}
    from bench import compaction  # noqa: PLC0415

    data = workdir / "compaction"
    try:
        result: dict[str, Any] = compaction.run_compaction_benchmark(
            profile.compaction_events, data
        )
    finally:
        shutil.rmtree(data, ignore_errors=True)  # the generated history: hundreds of MB
    return {"available": True, **result}


def _sdk_import(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.sdk_import import run_sdk_import  # noqa: PLC0415

    return run_sdk_import(profile.sdk_import_repeats, workdir)


def _fairness(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.cpu import run_scenario  # noqa: PLC0415
    from bench.fairness import run_fairness  # noqa: PLC0415
    from bench.latency import vcpu_share  # noqa: PLC0415

    cpu = run_scenario("sweeper", profile.cpu_jobs["sweeper"], profile.cpu_repeats, workdir)
    cpu_ms_per_job = cpu["cpu_us_per_job_median"] / 1000 / vcpu_share(config.memory_mb("sweeper"))
    params = {
        "flood_jobs": profile.fairness_flood,
        "quiet_jobs": profile.fairness_quiet,
        "cap_per_second": profile.fairness_cap,
    }
    return run_fairness(
        config, params, workdir, cpu_ms_per_job=cpu_ms_per_job, repeats=profile.fairness_repeats
    )


def _newcomer(config: BenchConfig, profile: Profile, workdir: Path) -> dict[str, Any]:
    from bench.newcomer import run_newcomer  # noqa: PLC0415

    return run_newcomer(
        config.cdk_out,
        workdir,
        idle_minutes=profile.newcomer_idle_minutes,
        pauses=profile.newcomer_pauses,
    )


def _pythonpath() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


SectionRun = Callable[[BenchConfig, Profile, Path], dict[str, Any]]
SECTIONS: dict[str, SectionRun] = {
    "ledger": _ledger,
    "idle": _idle,
    "log_bytes": _log_bytes,
    "cpu": _cpu,
    "pickup": _pickup,
    "precision": _precision,
    "scale": _scale,
    "recovery": _recovery,
    "compaction": _compaction,
    "sdk_import": _sdk_import,
    "fairness": _fairness,
    "newcomer": _newcomer,
}


@dataclass
class SectionResult:
    name: str
    seconds: float
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def run_section_process(
    name: str, profile: Profile, config: BenchConfig, workdir: Path
) -> SectionResult:
    """Run one section in a fresh Python process; its output goes to workdir/NAME.log."""
    out = workdir / f"{name}.json"
    out.unlink(missing_ok=True)
    started = time.monotonic()
    with (workdir / f"{name}.log").open("w") as log:
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.section",
                name,
                profile.name,
                json.dumps(config.as_dict()),
                str(workdir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            # The repository first; a PYTHONPATH the caller set (e.g. a worktree's package) next.
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *_pythonpath()])},
            check=False,
        )
    seconds = time.monotonic() - started
    if completed.returncode != 0 or not out.exists():
        tail = (workdir / f"{name}.log").read_text().splitlines()[-15:]
        return SectionResult(name, seconds, error="\n".join(tail) or f"exit {completed.returncode}")
    return SectionResult(name, seconds, result=json.loads(out.read_text()))


def section_main(argv: list[str]) -> None:
    """`python -m bench.section NAME PROFILE CONFIG_JSON WORKDIR`"""
    name, profile_name, config_json, workdir = argv
    config = BenchConfig.from_dict(json.loads(config_json))
    try:
        result = SECTIONS[name](config, PROFILES[profile_name], Path(workdir))
    except Exception:
        traceback.print_exc()
        raise
    (Path(workdir) / f"{name}.json").write_text(json.dumps(result))


def _merged(previous_path: Path, rerun: dict[str, Any]) -> dict[str, Any]:
    """A run of some sections only (--only) keeps the other sections of the results it finds
    (of the same profile), and is listed under `reruns` with its own command and machine."""
    if not previous_path.exists():
        return rerun
    previous: dict[str, Any] = json.loads(previous_path.read_text())
    if previous.get("profile", {}).get("name") != rerun["profile"]["name"]:
        return rerun
    note = {
        "sections": sorted(rerun["sections"]),
        "command": rerun["command"],
        "machine": rerun["machine"],
        "load_after": rerun["load_after"],
        "total_s": rerun["total_s"],
    }
    return {
        **previous,
        "profile": rerun["profile"],
        "sections": {**previous["sections"], **rerun["sections"]},
        "reruns": [*previous.get("reruns", []), note],
    }


def run_suite(
    profile: Profile,
    *,
    cdk_out: Path,
    results_dir: Path,
    report_path: Path,
    command: str,
    only: tuple[str, ...] | None = None,
    progress: Callable[[str], None] = print,
) -> int:
    """Run every section, then write the results, plots and report. Returns an exit status."""
    from bench.machine import describe  # noqa: PLC0415
    from bench.report import write_report  # noqa: PLC0415

    config = load_config(cdk_out)
    workdir = ROOT / "build" / f"bench-{profile.name}"
    workdir.mkdir(parents=True, exist_ok=True)
    results_dir.mkdir(parents=True, exist_ok=True)
    machine_before = describe()
    started = time.monotonic()
    sections: dict[str, SectionResult] = {}
    for name in profile.sections:
        if only and name not in only:
            continue
        progress(f"bench: {name} …")
        sections[name] = run_section_process(name, profile, config, workdir)
        outcome = "failed" if sections[name].error else "done"
        progress(f"bench: {name} {outcome} in {sections[name].seconds:.0f} s")
    results = {
        "profile": asdict(profile),
        "config": config.as_dict(),
        "command": command,
        "machine": machine_before,
        "load_after": describe()["load_average"],
        "total_s": time.monotonic() - started,
        "sections": {name: asdict(section) for name, section in sections.items()},
    }
    if only:
        results = _merged(results_dir / "results.json", results)
    (results_dir / "results.json").write_text(json.dumps(results, indent=1))
    write_report(results, report_path=report_path, results_dir=results_dir)
    progress(f"bench: wrote {report_path} and {results_dir}/ in {results['total_s']:.0f} s")
    failed = [name for name, section in sections.items() if section.error]
    if failed:
        progress(f"bench: FAILED sections: {', '.join(failed)} (logs in {workdir})")
        return 1
    return 0
