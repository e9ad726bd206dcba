"""Compaction throughput: synthetic raw history (gzip JSON lines, as the history Lambda writes
it) -> compact_history on local Spark -> Parquet. Reports events/s, input and output bytes and
their ratio, and wall time (generation is timed apart: it is not the compaction's cost).

    python -m bench.compaction --events 1000000 [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sundial_history.jobs import run_compaction
from sundial_history.runtime import local_session
from sundial_history.synthetic import write_raw_history

# A history Lambda batch at volume (stream batch size 1000, 30 s window: full batches).
EVENTS_PER_FILE = 10_000
DAYS = 7


def _tree_bytes(root: Path, suffix: str) -> tuple[int, int]:
    files = [p for p in root.rglob(f"*{suffix}") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def run_compaction_benchmark(events: int, workdir: Path) -> dict[str, Any]:
    """Generate about `events` synthetic raw events under `workdir`, compact them with local
    Spark (all cores), and measure. Returns events, events_per_s, input_bytes, output_bytes,
    ratio (input / output), wall_s (the compaction), generate_s, files in and out."""
    raw, curated = workdir / "raw", workdir / "curated"
    for folder in (raw, curated):
        shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    stats = write_raw_history(
        raw, events, days=DAYS, events_per_file=EVENTS_PER_FILE, workers=os.cpu_count() or 1
    )
    generate_s = time.perf_counter() - started
    spark = local_session(
        "bench-compaction", shuffle_partitions=max(2, os.cpu_count() or 1), driver_memory="6g"
    )
    try:
        started = time.perf_counter()
        result = run_compaction(spark, raw_path=str(raw), curated_path=str(curated), dates="all")
        wall_s = time.perf_counter() - started
        rows = spark.read.parquet(str(curated)).count()  # from Parquet footers: not timed
    finally:
        spark.stop()
    output_bytes, output_files = _tree_bytes(curated, ".parquet")
    return {
        "events": stats.events,
        "events_out": rows,
        "duplicates_dropped": stats.events - rows,
        "events_per_s": round(stats.events / wall_s),
        "input_bytes": result.input_bytes,
        "output_bytes": output_bytes,
        "ratio": round(result.input_bytes / output_bytes, 3),
        "wall_s": round(wall_s, 2),
        "generate_s": round(generate_s, 2),
        "input_files": stats.files,
        "output_files": output_files,
        "days": len(result.dates),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sundial-bench-"))
    try:
        print(json.dumps(run_compaction_benchmark(args.events, workdir)))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
