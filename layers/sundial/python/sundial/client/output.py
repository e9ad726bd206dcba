"""What the `sundial` command prints: tables for people, the API's own JSON for scripts.

The rules every command follows (so each command only says what its rows are):
- `--json` prints the API's answer exactly as it came (ApiModel.api_json); a listing prints
  each item as the API wrote it, one a line.
- every time is written as the API writes it (models.format_rfc3339);
- an id is never wrapped or cut, so it can be copied from the table: the other columns give
  way (cut with `…`) when the terminal is narrow;
- nested JSON is one short line in a table, and in full below a detail view;
- an error is printed once: the API's message, and the field errors it does not already say.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from sundial.client.errors import SundialError
from sundial.client.models import ApiModel, format_rfc3339

ID_LENGTH = 36  # a job id; schedule and DAG ids are shorter
# Columns whose cells are ids: never wrapped nor cut.
ID_COLUMNS = frozenset({"id", "job id", "job"})
# Columns whose cells are times: cut only once every other column has given way.
TIME_COLUMNS = frozenset({"dead at", "run at", "scheduled for", "created", "at"})
SHORT_JSON = 48  # nested JSON this long or shorter is shown as it is, in one line
WIDTH_WHEN_NOT_A_TERMINAL = 160
# Each column takes its padding (one space either side) and a border: n columns, 3n + 1.
_BORDER_PER_COLUMN = 3


def format_time(value: datetime | None) -> str:
    return format_rfc3339(value) if value is not None else ""


def summary(value: Any) -> str:
    """A JSON value in one short line: itself when short, else its shape (`{…} 3 keys: a, b,
    c`, `[…] 12 items`)."""
    if isinstance(value, str):
        return value
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= SHORT_JSON or not isinstance(value, dict | list):
        return text
    if isinstance(value, list):
        return f"[…] {len(value)} item{'' if len(value) == 1 else 's'}"
    text = f"{{…}} {len(value)} key{'' if len(value) == 1 else 's'}: {', '.join(value)}"
    return _cut(text, SHORT_JSON)


@dataclass(frozen=True, slots=True)
class Column:
    title: str
    # An id column keeps its whole width; a wrapping one folds long text over lines (a
    # detail view's values); any other is cut with … to fit.
    is_id: bool = False
    is_time: bool = False
    wraps: bool = False
    floor: int = 3  # the narrowest it becomes (an id column: never narrower than its text)

    @classmethod
    def named(cls, title: str) -> Column:
        return cls(title, is_id=title in ID_COLUMNS, is_time=title in TIME_COLUMNS)


def fit_widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Each column's width for a table `width` characters wide: as wide as its text when it
    all fits; otherwise the widest column that may shrink gives way first, down to its floor:
    other columns before time columns. Id columns never shrink (the table is then wider than
    `width` if it must be)."""
    natural = [
        max(len(c.title), *(len(r[i]) for r in rows)) if rows else len(c.title)
        for i, c in enumerate(columns)
    ]
    widths = list(natural)
    available = width - _BORDER_PER_COLUMN * len(columns) - 1
    floors = [n if c.is_id else min(n, c.floor) for c, n in zip(columns, natural, strict=True)]
    for times in (False, True):
        while sum(widths) > available:
            shrinkable = [
                i for i, c in enumerate(columns) if c.is_time == times and widths[i] > floors[i]
            ]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
    return widths


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else f"{text[: max(0, width - 1)]}…"


def _terminal_width(stream: IO[str]) -> int:
    """$COLUMNS, else the terminal's width, else (a pipe, a file) a wide page."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (OSError, ValueError, AttributeError):
        return 0


class Output:
    """Tables for people (rich if installed, plain columns otherwise), or JSON for scripts."""

    def __init__(self, *, as_json: bool, stdout: IO[str], stderr: IO[str]) -> None:
        self.as_json = as_json
        self.stdout = stdout
        self.stderr = stderr

    @property
    def width(self) -> int:
        return _terminal_width(self.stdout) or WIDTH_WHEN_NOT_A_TERMINAL

    def item(self, model: ApiModel, title: str) -> None:
        """One answer: its JSON as the API sent it, or a field/value table whose nested values
        are one-line summaries, each summarized one then shown in full below the table."""
        if self.as_json:
            self.line(model.api_json())
            return
        fields = json.loads(model.api_json())
        shown = {k: v for k, v in fields.items() if v is not None and v not in ([], {})}
        rows = [[key, summary(value)] for key, value in shown.items()]
        value_floor = min(ID_LENGTH, max((len(v) for _, v in rows), default=0))
        layout = [Column("field"), Column("value", wraps=True, floor=value_floor)]
        self.table(title, layout, rows)
        for key, value in shown.items():
            if isinstance(value, dict | list) and summary(value) != json.dumps(
                value, ensure_ascii=False
            ):
                self.line(f"{key}:")
                self.line(json.dumps(value, indent=2, ensure_ascii=False))

    def json_lines(self, models: Sequence[ApiModel]) -> None:
        for model in models:
            self.line(model.api_json())

    def line(self, text: str) -> None:
        print(text, file=self.stdout, flush=True)

    def table(
        self,
        title: str,
        columns: Sequence[str] | Sequence[Column],
        rows: Sequence[Sequence[str]],
    ) -> None:
        layout = [c if isinstance(c, Column) else Column.named(c) for c in columns]
        rows = [[cell.replace("\n", " ") for cell in row] for row in rows]
        widths = fit_widths(layout, rows, self.width)
        try:
            from rich.console import Console  # noqa: PLC0415 - optional: plain text without it
            from rich.table import Table  # noqa: PLC0415
        except ImportError:
            self._plain_table(title, layout, rows, widths)
            return
        table = Table(title=title, title_justify="left")
        for column, width in zip(layout, widths, strict=True):
            if column.wraps and not column.is_id:
                table.add_column(column.title, width=width, overflow="fold")
            else:
                table.add_column(column.title, width=width, no_wrap=True, overflow="ellipsis")
        for row in rows:
            table.add_row(*row)
        needed = sum(widths) + _BORDER_PER_COLUMN * len(layout) + 1
        Console(file=self.stdout, width=max(self.width, needed)).print(table)

    def _plain_table(
        self,
        title: str,
        columns: Sequence[Column],
        rows: Sequence[Sequence[str]],
        widths: Sequence[int],
    ) -> None:
        self.line(title)
        for row in [[c.title for c in columns], *rows]:
            cells = [_cut(cell, width) for cell, width in zip(row, widths, strict=True)]
            self.line("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())

    def error(self, error: SundialError) -> None:
        """The API's message once; then only the field errors it does not already say (the
        API's message for a refused request lists each `field: reason` itself)."""
        if self.as_json:
            body = {
                "status": error.status,
                "message": error.message,
                "errors": [e.model_dump() for e in error.errors],
            }
            print(json.dumps(body), file=self.stderr)
            return
        status = f" ({error.status})" if error.status is not None else ""
        print(f"error{status}: {error.message}", file=self.stderr)
        for field_error in error.errors:
            said = f"{field_error.field}: {field_error.reason}"
            if said not in error.message:
                print(f"  {said}", file=self.stderr)
