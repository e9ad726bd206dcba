"""Where the local runtime's own log lines go while the live table is drawn: to the log file,
as one JSON object per line like the functions' own lines (so the file stays parsable), never to
the terminal, where a traceback used to land in the middle of the table. ErrorTally counts the
errors so the live table can say that there are some and where to read them."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path


class JsonLines(logging.Formatter):
    """One JSON object per record, in the shape of sundial.local.functions' own lines."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "level": record.levelname,
            "location": "local runtime",
            "logger": record.name,
            "message": record.getMessage(),
            "timestamp": self.formatTime(record),
        }
        if record.exc_info:
            line["detail"] = self.formatException(record.exc_info)
        return json.dumps(line)


class ErrorTally(logging.Handler):
    """Counts records at ERROR or above, and keeps the last one's first line."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self._lock_tally = threading.Lock()
        self.count = 0
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock_tally:
            self.count += 1
            self.last = record.getMessage().splitlines()[0] if record.getMessage() else None


def log_to_file(path: Path) -> ErrorTally:
    """Send every log record of this process to `path` (appended, JSON lines), none to the
    terminal; returns the tally of errors among them."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(JsonLines())
    tally = ErrorTally()
    root.addHandler(to_file)
    root.addHandler(tally)
    threading.excepthook = _log_thread_death
    return tally


def _log_thread_death(args: threading.ExceptHookArgs) -> None:
    """A thread's uncaught exception, to the log (Python would print it on the terminal)."""
    if args.exc_value is None:
        return
    logging.getLogger("sundial.local").error(
        "thread %s ended with an error",
        args.thread.name if args.thread else "?",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )
