"""Run the simulation from the command line.

python -m tests.simulation --seed 7 --trace        # one run, printing every step
python -m tests.simulation --chaos --jobs 10000     # many runs with faults (make chaos)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from tests.simulation.chaos import chaos
from tests.simulation.config import Config, Flood
from tests.simulation.profiles import CLEAN, FAULTY
from tests.simulation.sim import simulate

TRACES = Path("build/simulation")


def _with_fixed_hashing() -> None:
    """Set iteration order depends on string hashing, which Python randomizes per process:
    start again with it fixed, so a seed replays exactly."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        os.execve(sys.executable, [sys.executable, "-m", "tests.simulation", *sys.argv[1:]], env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__)
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (or the first one)")
    parser.add_argument("--trace", action="store_true", help="print every step of the run")
    parser.add_argument("--jobs", type=int, default=60, help="jobs per run, or in all (--chaos)")
    parser.add_argument("--clean", action="store_true", help="no faults, only races")
    parser.add_argument("--chaos", action="store_true", help="many runs with faults; a summary")
    parser.add_argument("--processes", type=int, default=2, help="with --chaos")
    parser.add_argument(
        "--flood",
        type=int,
        metavar="JOBS",
        help="fair dispatch: this many jobs of `default` due at once, capped (issue 16)",
    )
    parser.add_argument(
        "--movers", action="store_true", help="a client moving jobs every tick (issue 18)"
    )
    parser.add_argument(
        "--dead-letters",
        action="store_true",
        help="some jobs die: DLQ indexing, replays and retries by id race everything",
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help="jumps of days: DynamoDB's TTL, the payload lifecycle and the history Lambda act",
    )
    parser.add_argument(
        "--move-limit",
        action="store_true",
        help="jobs pushed to the move limit (lowered), with crashes around the last move's send",
    )
    parser.add_argument(
        "--tenants",
        action="store_true",
        help="a second tenant (queue billing) and a hostile message; every write checked",
    )
    parser.add_argument(
        "--holders",
        action="store_true",
        help="second messages of one attempt, runs longer than the visibility and a lease",
    )
    args = parser.parse_args(argv)
    # The code under test logs every injected fault it handles; the trace says it better.
    logging.disable(logging.CRITICAL)
    if args.chaos:
        return chaos(total_jobs=args.jobs, first_seed=args.seed, processes=args.processes)
    faults = CLEAN if args.clean else FAULTY
    flood = Flood(jobs=args.flood) if args.flood else None
    config = Config(
        seed=args.seed,
        jobs=args.jobs,
        trace=args.trace,
        faults=faults,
        flood=flood,
        movers=args.movers,
        dead_letters=args.dead_letters,
        long_time=args.long,
        move_limit=args.move_limit,
        tenants=args.tenants,
        holders=args.holders,
    )
    result = simulate(config)
    injected = dict(sorted(result.faults.items()))
    print(
        f"seed {result.seed}: {result.jobs} jobs, faults {injected},"
        f" duplicates after a fault {result.duplicates_after_fault},"
        f" quota refusals {dict(sorted(result.refusals.items()))},"
        f" moves answered {result.moves_answered} (jobs moved and run {result.moved_and_ran}),"
        f" died and came back {result.died_and_came_back}"
    )
    if result.counts:
        print("  " + ", ".join(f"{what} {n}" for what, n in sorted(result.counts.items())))
    if flood is not None:
        lateness = sorted(result.quiet_lateness_ms) or [0]
        print(
            f"flood of {flood.jobs} on {flood.queue} at {flood.per_second}/s:"
            f" {flood.quiet} lateness over {len(result.quiet_lateness_ms)} jobs:"
            f" p50 {lateness[len(lateness) // 2]} ms, max {lateness[-1]} ms"
            f" (bound {flood.bound_ms(faults)} ms)"
        )
    if not result.violations:
        return 0
    trace = TRACES / f"seed-{result.seed}{'-clean' if args.clean else ''}.trace"
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.write_text("\n".join(result.trace) + "\n")
    if not args.trace:
        print("... the run's last steps:\n" + "\n".join(result.trace[-40:]))
    for violation in result.violations:
        print(f"VIOLATION {violation}")
    flags = (" --clean" if args.clean else "") + (f" --flood {args.flood}" if args.flood else "")
    flags += config.profile_flags
    print(
        f"the whole trace: {trace}\nreplay: python -m tests.simulation --seed {result.seed}"
        f" --jobs {args.jobs}{flags} --trace"
    )
    return 1


if __name__ == "__main__":
    _with_fixed_hashing()
    sys.exit(main())
