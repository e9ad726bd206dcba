"""What the functions write to CloudWatch Logs, counted as they write it.

In Lambda every line a function prints to stdout is a log event, billed by the byte ingested
(Powertools' JSON log lines and its EMF metric lines alike). `LogMeter` stands in for stdout
while the handlers run in process: it counts the bytes of each line and notes those of
INFO/DEBUG lines apart (what `observability.log_level: WARNING` would drop), then passes the
line on. Powertools' handlers hold the stream they were built with, so the meter rebinds
every logging StreamHandler that writes to the real stdout, and puts them back after.

Lambda's own lines (START, END, REPORT) are not printed by the function: they are modelled
(LAMBDA_PLATFORM_LOG_BYTES per invocation), from their documented formats.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections import Counter
from dataclasses import dataclass
from typing import TextIO

# START RequestId: <36> Version: $LATEST (~75 B), END RequestId: <36> (~52 B), REPORT
# RequestId: <36> Duration, Billed Duration, Memory Size, Max Memory Used (~145 B): newlines
# included. A traced invocation's REPORT adds its XRAY TraceId/SegmentId (~85 B), left out.
LAMBDA_PLATFORM_LOG_BYTES = 272

_DROPPED_AT_WARNING = frozenset({"DEBUG", "INFO"})


@dataclass
class LogBytes:
    total: int = 0
    info: int = 0  # of which INFO and DEBUG lines (dropped at log level WARNING)
    lines: int = 0


class LogMeter(io.TextIOBase):
    """A stdout that counts what is written through it (see the module docstring)."""

    def __init__(self, passes_to: TextIO) -> None:
        self._passes_to = passes_to
        self._partial = ""
        self.counted = LogBytes()
        # Every EMF metric printed since the meter was made (or `metrics` was cleared), as
        # (name, dimension names): each is one custom metric CloudWatch bills by the month.
        self.metrics: set[tuple[str, tuple[str, ...]]] = set()
        # Bytes by kind of line ("EMF", or the level and message), likewise cumulative.
        self.by_kind: Counter[str] = Counter()
        self._rebound: list[logging.StreamHandler[TextIO]] = []
        self._saved_stdout: TextIO | None = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._count(line)
        self._passes_to.write(text)
        return len(text)

    def flush(self) -> None:
        self._passes_to.flush()

    def _count(self, line: str) -> None:
        size = len(line.encode()) + 1
        self.counted.total += size
        self.counted.lines += 1
        record = _record(line)
        if _level(record) in _DROPPED_AT_WARNING:
            self.counted.info += size
        self.metrics.update(emf_metrics(record))
        self.by_kind[_kind(record)] += size

    def take(self) -> LogBytes:
        """What was counted since the last take."""
        counted, self.counted = self.counted, LogBytes()
        return counted

    def install(self) -> None:
        """Stand in for sys.stdout, for print() and for every logging handler bound to it."""
        self._saved_stdout = sys.stdout
        sys.stdout = self
        loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
        for logger in loggers:
            if not isinstance(logger, logging.Logger):
                continue  # a PlaceHolder
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream in (
                    self._saved_stdout,
                    sys.__stdout__,
                ):
                    handler.setStream(self)
                    self._rebound.append(handler)

    def uninstall(self) -> None:
        for handler in self._rebound:
            handler.setStream(self._passes_to)
        self._rebound.clear()
        if self._saved_stdout is not None:
            sys.stdout = self._saved_stdout
            self._saved_stdout = None


def _record(line: str) -> dict[str, object] | None:
    """A JSON line's object (Powertools' logs and EMF metrics); None for anything else."""
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _level(record: dict[str, object] | None) -> str | None:
    """A Powertools JSON line's level; None for anything else (EMF metrics, plain prints)."""
    level = record.get("level") if record is not None else None
    return level if isinstance(level, str) else None


def _kind(record: dict[str, object] | None) -> str:
    """What a line is, for a breakdown: "EMF", "LEVEL message", or "other"."""
    if record is None:
        return "other"
    if "_aws" in record:
        return "EMF"
    return f"{record.get('level', '?')} {str(record.get('message', ''))[:60]}"


def emf_metrics(record: dict[str, object] | None) -> set[tuple[str, tuple[str, ...]]]:
    """The (metric name, dimension names) an Embedded Metric Format line publishes."""
    meta = record.get("_aws") if record is not None else None
    if not isinstance(meta, dict):
        return set()
    found: set[tuple[str, tuple[str, ...]]] = set()
    for directive in meta.get("CloudWatchMetrics", []):
        for dimensions in directive.get("Dimensions", [[]]) or [[]]:
            for metric in directive.get("Metrics", []):
                found.add((str(metric["Name"]), tuple(dimensions)))
    return found
