"""What the benchmarks ran on, for the report."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.config import ROOT


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def describe() -> dict[str, Any]:
    return {
        "date": datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": round(_memory_gb(), 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "moto": version("moto"),
        "boto3": version("boto3"),
        "botocore": version("botocore"),
        "powertools": version("aws-lambda-powertools"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "commit": _git_commit(),
    }
