"""`python -m bench`: run the benchmark suite and write BENCHMARKS.md and bench/results/."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bench.config import ROOT
from bench.suite import PROFILES, SECTIONS, run_suite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--cdk-out", type=Path, default=ROOT / "cdk.out")
    parser.add_argument("--results", type=Path, help="where the PNG plots and results.json go")
    parser.add_argument("--report", type=Path, help="the Markdown report to write")
    parser.add_argument("--only", help=f"comma-separated sections: {', '.join(SECTIONS)}")
    parser.add_argument("--command", help="the command to quote in the report")
    args = parser.parse_args(argv)
    if args.profile == "full":
        results = args.results or ROOT / "bench" / "results"
        report = args.report or ROOT / "BENCHMARKS.md"
    else:
        results = args.results or ROOT / "build" / f"bench-{args.profile}" / "results"
        report = args.report or results.parent / "BENCHMARKS.md"
    command = args.command or shlex.join(["python", "-m", "bench", *(argv or sys.argv[1:])])
    return run_suite(
        PROFILES[args.profile],
        cdk_out=args.cdk_out,
        results_dir=results,
        report_path=report,
        command=command,
        only=tuple(args.only.split(",")) if args.only else None,
    )


if __name__ == "__main__":
    sys.exit(main())
