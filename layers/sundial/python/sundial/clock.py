"""The one clock. Everything in Sundial reads time through a `Clock`, so tests and the local
runtime can drive time instead of sleeping for it."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, UTC."""
        ...

    def wait_until(self, epoch_ms: int, stop: threading.Event) -> bool:
        """Block until the clock reads `epoch_ms` or `stop` is set. True if the time came."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def wait_until(self, epoch_ms: int, stop: threading.Event) -> bool:
        return not stop.wait(max(0.0, (epoch_ms - self.now_ms()) / 1000))


class ManualClock:
    """A clock that moves only when told to. Thread-safe, so a test can share it with moto."""

    def __init__(self, start_ms: int) -> None:
        self._now_ms = start_ms
        self._lock = threading.Condition()

    @classmethod
    def at(cls, moment: datetime) -> ManualClock:
        if moment.tzinfo is None:
            raise ValueError("ManualClock.at needs a timezone-aware datetime")
        return cls(int(moment.timestamp() * 1000))

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def advance(self, *, seconds: float = 0, ms: int = 0) -> int:
        with self._lock:
            self._now_ms += ms + round(seconds * 1000)
            self._lock.notify_all()
            return self._now_ms

    def set(self, now_ms: int) -> None:
        with self._lock:
            if now_ms < self._now_ms:
                raise ValueError("ManualClock never goes backwards")
            self._now_ms = now_ms
            self._lock.notify_all()

    def wait_until(self, epoch_ms: int, stop: threading.Event) -> bool:
        """Wakes when a test moves the clock to `epoch_ms` (or `stop` is set), not in real time."""
        with self._lock:
            while self._now_ms < epoch_ms:
                if stop.is_set():
                    return False
                self._lock.wait(timeout=0.05)  # rechecks `stop`, which cannot notify this lock
            return not stop.is_set()


def to_datetime(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def to_rfc3339(epoch_ms: int) -> str:
    """RFC 3339 in UTC with millisecond precision, e.g. 2026-11-21T09:00:00.000Z."""
    return to_datetime(epoch_ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
