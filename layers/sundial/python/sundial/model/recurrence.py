"""When a schedule fires: cron expressions on the wall clock of an IANA time zone, or a fixed
rate in elapsed time. Pure time arithmetic, no AWS.

Cron (croniter): 5 fields `minute hour day-of-month month day-of-week`, or 6 with a seconds
field last (croniter's convention): `*/15 * * * * 30` fires at second 30 of every 15th minute.
Occurrences are wall-clock times in the schedule's zone, so "0 9 * * *" stays at 09:00 local
across DST changes. Two DST rules, the same in every zone:
- a wall time that does not exist (the hour skipped when clocks go forward) fires once, at the
  first valid instant after the gap: 02:30 on a spring-forward night in New York fires at 03:00
  EDT. Several wall times inside one gap fire once together, at that instant;
- a wall time that happens twice (the hour repeated when clocks go back) fires once, on its
  first pass: 01:30 on a fall-back night in London fires at 01:30 BST, not again at 01:30 GMT.

Rate: `N unit` with unit second(s) | minute(s) | hour(s) | day(s), e.g. "5 minutes": fixed
steps of elapsed time from an anchor, unaffected by DST ("1 day" is always 24 hours).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from itertools import pairwise
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, CroniterError, croniter

from sundial.errors import InvalidInput

# A schedule may fire at most this often: an API call that starts a schedule sends every
# occurrence due within the 15-minute direct window itself, so this bounds its work (90).
MIN_INTERVAL_S = 10
MAX_RATE_S = 365 * 86_400
_SECONDS_PER = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}
_RATE = re.compile(r"^(\d{1,9}) (second|minute|hour|day)s?$")


class Recurrence(Protocol):
    def next_after(self, after_ms: int) -> int | None:
        """The first occurrence strictly after `after_ms` (epoch ms), or None if there is none."""
        ...


@cache
def known_zones() -> frozenset[str]:
    """Every IANA zone name this process can load (the system's and the tzdata package's)."""
    return frozenset(available_timezones())


def zone(name: str, *, field: str = "timezone") -> ZoneInfo:
    """An IANA zone, e.g. Europe/London. Raises InvalidInput naming `field` otherwise.

    The name must be a zone key, checked against the list before ZoneInfo opens a file: a
    folder of the zone database ("America", "Etc") is a path ZoneInfo tries to read as a zone
    and fails on with IsADirectoryError, not a ZoneInfoNotFoundError."""
    if name not in known_zones():
        raise InvalidInput(field, f"unknown time zone '{name}' (use an IANA name)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(field, f"unknown time zone '{name}' (use an IANA name)") from None


def parse_rate(text: str, *, field: str = "rate") -> int:
    """ "5 minutes" -> 300 (seconds). Raises InvalidInput naming `field`."""
    match = _RATE.match(" ".join(text.strip().lower().split()))
    if not match:
        raise InvalidInput(
            field, f"'{text}' is not a rate: use 'N unit', unit second|minute|hour|day"
        )
    seconds = int(match.group(1)) * _SECONDS_PER[match.group(2)]
    if not MIN_INTERVAL_S <= seconds <= MAX_RATE_S:
        raise InvalidInput(field, f"must be between {MIN_INTERVAL_S} seconds and 365 days")
    return seconds


@dataclass(frozen=True, slots=True)
class RateRecurrence:
    """Occurrences at anchor, anchor + period, anchor + 2 period, ..."""

    period_ms: int
    anchor_ms: int

    def next_after(self, after_ms: int) -> int:
        if after_ms < self.anchor_ms:
            return self.anchor_ms
        steps = (after_ms - self.anchor_ms) // self.period_ms + 1
        return self.anchor_ms + steps * self.period_ms


_CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week", "second")


def _cron_problem(expression: str, fields: list[str]) -> str:
    """Which field croniter refuses, named (its own message only repeats the expression)."""
    for index, part in enumerate(fields):
        alone = ["*"] * len(fields)
        alone[index] = part
        try:
            croniter(" ".join(alone))
        except (CroniterError, ValueError):
            return (
                f"'{expression}' is not a valid cron expression: the {_CRON_FIELDS[index]} "
                f"field '{part}' is not a value, range, list or step that field allows"
            )
    return f"'{expression}' is not a valid cron expression (its fields do not go together)"


@dataclass(frozen=True, slots=True)
class CronRecurrence:
    expression: str
    tz: ZoneInfo

    @classmethod
    def parse(cls, expression: str, tz: ZoneInfo, *, field: str = "cron") -> CronRecurrence:
        """Validate: 5 or 6 fields that croniter accepts, firing at most every 10 seconds."""
        fields = expression.split()
        if len(fields) not in (5, 6):
            raise InvalidInput(
                field,
                f"'{expression}' has {len(fields)} fields; use 5 (minute hour day-of-month "
                "month day-of-week) or 6 (the same, then seconds)",
            )
        if len(fields) == 6 and "?" in (fields[2], fields[4]):
            five = " ".join(part.replace("?", "*") for part in fields[:5])
            raise InvalidInput(
                field,
                f"'{expression}' looks like an EventBridge cron (with a year and '?'); Sundial "
                f"reads standard cron, 5 fields: write '{five}'",
            )
        try:
            expanded = croniter(" ".join(fields)).expanded
        except (CroniterError, ValueError):
            raise InvalidInput(field, _cron_problem(expression, fields)) from None
        if len(fields) == 6:
            _check_seconds(expanded[5], field)
        return cls(" ".join(fields), tz)

    def next_after(self, after_ms: int) -> int | None:
        after = datetime.fromtimestamp(after_ms / 1000, tz=self.tz)
        wall = after.replace(tzinfo=None)
        matches = croniter(self.expression, wall)
        # A wall time already passed in the first pass of a repeated hour maps to an instant
        # before `after`: skip it. A handful of steps at most.
        for _ in range(10_000):
            try:
                candidate: datetime = matches.get_next(datetime)
            except CroniterBadDateError:
                return None  # e.g. "0 0 30 2 *": never
            instant = resolve_wall_time(candidate, self.tz)
            if instant > after_ms:
                return instant
        return None


def _check_seconds(seconds: Sequence[int | str], field: str) -> None:
    if list(seconds) == ["*"]:
        raise InvalidInput(field, f"fires every second; at most once every {MIN_INTERVAL_S} s")
    values = sorted(int(s) for s in seconds)
    # The gap that wraps into the next minute counts too (the minute field may allow it).
    gaps = [b - a for a, b in pairwise(values)] + [60 - values[-1] + values[0]]
    if min(gaps) < MIN_INTERVAL_S:
        raise InvalidInput(
            field, f"fires {min(gaps)} s apart; at most once every {MIN_INTERVAL_S} s"
        )


def resolve_wall_time(wall: datetime, tz: ZoneInfo) -> int:
    """The instant (epoch ms) a naive wall time in `tz` fires at, by the two DST rules above."""
    first = wall.replace(tzinfo=tz, fold=0)
    if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall:
        return round(first.timestamp() * 1000)  # exists; if repeated, fold=0 is its first pass
    # In a gap, fold=1 reads the wall time with the offset after the change (the earlier
    # instant) and fold=0 with the offset before (the later one); the change lies between.
    low = int(wall.replace(tzinfo=tz, fold=1).timestamp())
    high = int(first.timestamp())
    after_change = _offset(high, tz)
    while low < high:  # the first second that has the new offset
        middle = (low + high) // 2
        if _offset(middle, tz) == after_change:
            high = middle
        else:
            low = middle + 1
    return high * 1000


def _offset(epoch_s: int, tz: ZoneInfo) -> object:
    return datetime.fromtimestamp(epoch_s, tz=tz).utcoffset()
