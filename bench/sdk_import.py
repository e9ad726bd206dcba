"""What `import sundial.consumer` costs a consumer Lambda's cold start: the package modules it
loads and the time, in fresh interpreters, for this tree and, side by side in the same run,
for the flat package the rooms replaced (git revision BEFORE_ROOMS, when the clone has it).
And the import plus the first job handled end to end on a moto server
(tests/consumer_footprint.py), for this tree and for the package before the consumer built its
own collaborators (BEFORE_OWN_COLLABORATORS), whose first record loaded the composition root."""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from bench.config import ROOT

PACKAGE_ROOT = Path("layers/sundial/python")
# main just before the package was arranged in rooms (issue 13).
BEFORE_ROOMS = "99883cc"
# main just before the consumer built its own collaborators (issue 28).
BEFORE_OWN_COLLABORATORS = "b7373bd"
PROBE = """
import json, sys, time
started = time.perf_counter()
import sundial.consumer
elapsed_ms = (time.perf_counter() - started) * 1000
ours = sorted(m for m, mod in sys.modules.items()
              if m.startswith("sundial") and getattr(mod, "__file__", None)
              and not mod.__file__.endswith("__init__.py"))
lines = sum(len(open(sys.modules[m].__file__).read().splitlines()) for m in ours)
print(json.dumps({"ms": elapsed_ms, "modules": ours, "lines": lines, "all": len(sys.modules)}))
"""


def run_sdk_import(repeats: int, workdir: Path) -> dict[str, Any]:
    trees = {"now": ROOT / PACKAGE_ROOT}
    before = _checkout(BEFORE_ROOMS, workdir / "sdk-before")
    if before is not None:
        trees["before"] = before
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(repeats):
        for name, path in trees.items():  # alternate, so both see the same machine load
            samples[name].append(_probe(path))
    return {
        "repeats": repeats,
        "before_revision": BEFORE_ROOMS if before is not None else None,
        "trees": {name: _summary(runs) for name, runs in samples.items()},
        "first_record": _first_record(repeats, workdir),
    }


def _first_record(repeats: int, workdir: Path) -> dict[str, Any]:
    """Import plus one job handled, in fresh interpreters, alternating the trees."""
    from tests.consumer_footprint import emulator, prepared_record  # noqa: PLC0415 - moto

    trees = {"now": ROOT / PACKAGE_ROOT}
    before = _checkout(BEFORE_OWN_COLLABORATORS, workdir / "sdk-before-own-collaborators")
    if before is not None:
        trees["before"] = before
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with emulator() as url, prepared_record(url) as record:
        for _ in range(repeats):
            for name, path in trees.items():
                probe = record.probe(path)
                if probe["response"] != {"batchItemFailures": []} or probe["status"] != "succeeded":
                    raise RuntimeError(f"the {name} tree did not run the job: {probe}")
                samples[name].append(probe)
    return {
        "before_revision": BEFORE_OWN_COLLABORATORS if before is not None else None,
        "trees": {
            name: {
                "modules": len(runs[0]["modules"]),
                "entries": len(runs[0]["loaded"]),
                "module_names": runs[0]["modules"],
                "all_modules": runs[0]["all_modules"],
                **{
                    f"{figure}_median": round(statistics.median(r[figure] for r in runs), 1)
                    for figure in (
                        "import_ms",
                        "first_record_ms",
                        "total_ms",
                        "process_wall_ms",
                        "process_cpu_ms",
                    )
                },
                "total_ms_min": round(min(r["total_ms"] for r in runs), 1),
                "process_wall_ms_min": round(min(r["process_wall_ms"] for r in runs), 1),
            }
            for name, runs in samples.items()
        },
    }


def _checkout(revision: str, into: Path) -> Path | None:
    """The package as it was at `revision`, or None when this clone does not have it."""
    archive = subprocess.run(
        ["git", "archive", revision, str(PACKAGE_ROOT)],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        return None
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / PACKAGE_ROOT


def _probe(package_root: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(package_root), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    first = runs[0]
    return {
        "modules": len(first["modules"]),
        "module_names": first["modules"],
        "lines": first["lines"],
        "all_modules": first["all"],
        "import_ms_median": round(statistics.median(r["ms"] for r in runs), 1),
        "import_ms_min": round(min(r["ms"] for r in runs), 1),
    }
