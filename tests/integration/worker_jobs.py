"""Job functions the worker subprocess in test_local_runtime.py runs (imported by name)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sundial.transport.envelope import Envelope


def _log(line: str) -> None:
    with Path(os.environ["SUNDIAL_TEST_LOG"]).open("a") as log:
        log.write(f"{line}\n")


def slow(job: Envelope) -> dict[str, str]:
    """Stands for real work that takes a few seconds."""
    _log(f"start {job.id}")
    assert isinstance(job.payload, dict)
    seconds = job.payload["seconds"]
    assert isinstance(seconds, int | float)
    time.sleep(seconds)
    _log(f"done {job.id}")
    return {"pid": str(os.getpid())}
