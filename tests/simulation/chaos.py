"""`make chaos`: many independent simulation runs with random faults, summed up.

moto's SQS and DynamoDB slow down as queues and tables grow, so the jobs are spread over many
small runs (each a fresh emulator), alternating a run with faults and one with races only
(where a duplicate is a violation, not a consequence of a crash), and, in turn by pairs of
seeds, the plain profile, `--movers`, `--dead-letters`, `--long`, `--move-limit`, `--tenants`
and `--holders` (PROFILES)."""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from tests.simulation.config import Config
from tests.simulation.ledger import RunResult
from tests.simulation.profiles import CLEAN, FAULTY
from tests.simulation.sim import simulate

JOBS_PER_RUN = 100
# The profiles a chaos run takes in turn (each with and without faults), by Config field.
PROFILES = (None, "movers", "dead_letters", "long_time", "move_limit", "tenants", "holders")


@dataclass
class Totals:
    runs: int = 0
    jobs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    duplicates_clean: int = 0
    duplicates_after_fault: int = 0
    cancelled_then_ran: int = 0
    early: int = 0
    cross_tenant: int = 0
    other: int = 0
    failing_seeds: list[int] = field(default_factory=list)

    def add(self, result: RunResult) -> None:
        self.runs += 1
        self.jobs += result.jobs
        self.faults.update(result.faults)
        self.lost += len(result.lost)
        self.duplicates_clean += len(result.duplicates_clean)
        self.duplicates_after_fault += result.duplicates_after_fault
        self.cancelled_then_ran += len(result.cancelled_then_ran)
        self.early += len(result.early)
        cross_tenant = sum(1 for error in result.errors if error.startswith("cross-tenant"))
        self.cross_tenant += cross_tenant
        counted = (
            len(result.lost)
            + len(result.duplicates_clean)
            + len(result.cancelled_then_ran)
            + len(result.early)
            + cross_tenant
        )
        self.other += len(result.violations) - counted  # schedules, DAGs, moves, dead letters...
        if result.violations:
            self.failing_seeds.append(result.seed)


def run_one(seed: int) -> RunResult:
    logging.disable(logging.CRITICAL)  # the code under test logs every fault it handles
    faults = CLEAN if seed % 2 else FAULTY
    profile = PROFILES[(seed // 2) % len(PROFILES)]  # each with and without faults
    config = Config(
        seed=seed,
        jobs=JOBS_PER_RUN,
        faults=faults,
        movers=profile == "movers",
        dead_letters=profile == "dead_letters",
        long_time=profile == "long_time",
        move_limit=profile == "move_limit",
        tenants=profile == "tenants",
        holders=profile == "holders",
    )
    result = simulate(config)
    result.trace = []  # only the summary crosses the process boundary
    return result


def chaos(*, total_jobs: int, first_seed: int = 1, processes: int = 2) -> int:
    runs = max(1, -(-total_jobs // JOBS_PER_RUN))
    seeds = range(first_seed, first_seed + runs)
    totals = Totals()
    started = time.monotonic()
    # A fresh process per run, as `python -m tests.simulation --seed N` replays it.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes, mp_context=spawn, max_tasks_per_child=1) as pool:
        for result in pool.map(run_one, seeds):
            totals.add(result)
            for violation in result.violations:
                print(f"seed {result.seed}: VIOLATION {violation}", flush=True)
    minutes = (time.monotonic() - started) / 60
    faults = ", ".join(f"{kind} {n}" for kind, n in sorted(totals.faults.items()))
    print(
        f"chaos: {totals.runs} runs (seeds {seeds.start}-{seeds.stop - 1}), {totals.jobs} jobs"
        f" accepted, {minutes:.1f} min\n"
        f"  faults injected: {sum(totals.faults.values())} ({faults})\n"
        f"  lost: {totals.lost}\n"
        f"  duplicates without a crash: {totals.duplicates_clean}\n"
        f"  duplicates after a crash: {totals.duplicates_after_fault}\n"
        f"  cancelled-then-ran: {totals.cancelled_then_ran}\n"
        f"  early: {totals.early}\n"
        f"  cross-tenant changes: {totals.cross_tenant}\n"
        f"  other violations (schedules, DAGs, moves, dead letters, quotas, retention, tenants,"
        f" move limit): {totals.other}"
    )
    if totals.failing_seeds:
        print(
            f"replay: python -m tests.simulation --seed N --trace   (N in {totals.failing_seeds})"
        )
        return 1
    return 0
