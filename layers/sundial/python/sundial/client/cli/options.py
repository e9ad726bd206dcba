"""The command line's shared argument parsing: the connection and output options every
command takes, the options several commands share, how a command joins its group (`Leaves`),
and the readers of a duration or a JSON argument (a bad one is a `UsageError`)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sundial.client.cli.commands import Command, by_id
from sundial.client.transport import LOCAL_API

_DURATION = re.compile(r"(\d+)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}


class UsageError(Exception):
    """A command line that parses but cannot be used (a payload that is not JSON...)."""


def parse_duration(text: str) -> int:
    """`90`, `90s`, `10m`, `1h30m`, `2d` as seconds."""
    compact = text.strip().lower()
    if not compact or _DURATION.sub("", compact):
        raise UsageError(f"--in: {text!r} is not a duration like 90s, 10m, 1h30m or 2d")
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION.findall(compact))


def read_json(value: str, what: str) -> Any:
    """JSON given inline, or `@file.json`, or `@-` for standard input."""
    if value.startswith("@"):
        name = value[1:]
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
        except OSError as error:
            raise UsageError(f"{what}: cannot read {name}: {error.strerror}") from error
    else:
        text = value
    try:
        return json.loads(text)
    except ValueError as error:
        raise UsageError(f"{what}: not JSON ({error}); give JSON or @file.json") from error


def common_options(*, output: bool = True) -> argparse.ArgumentParser:
    """The parent parser of the connection options (and of --json, with `output`)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection and output" if output else "connection")
    group.add_argument(
        "--api",
        help=f"API base URL (default: $SUNDIAL_API, else the local runtime: {LOCAL_API} "
        "or $SUNDIAL_HOST/$SUNDIAL_API_PORT)",
    )
    if output:
        group.add_argument("--json", action="store_true", help="print JSON instead of tables")
    group.add_argument("--region", help="AWS region to sign for, for a custom domain")
    group.add_argument(
        "--caller", help="local runtime only: the identity to act as (X-Sundial-Caller)"
    )
    return common


def job_options(parser: argparse.ArgumentParser) -> None:
    """What a job is made of: `jobs submit` and `schedules create` take these."""
    parser.add_argument("--queue", required=True, help="a queue declared in cdk.json")
    parser.add_argument("--payload", help="JSON, or @file.json, or @- for standard input")
    parser.add_argument("--priority", choices=["critical", "high", "normal", "low"])
    parser.add_argument("--max-attempts", type=int, help="1-100 (default: the queue's)")
    parser.add_argument(
        "--idempotency-key", help="a repeat with the same key returns the first (default: new)"
    )


def listing_options(parser: argparse.ArgumentParser) -> None:
    """A listing of one queue's items: `jobs ls`, `schedules ls` and `dags ls` take these."""
    parser.add_argument("--queue", required=True)
    parser.add_argument("--limit", type=int, help="show at most this many")


@dataclass(frozen=True, slots=True)
class Leaves:
    """Adds a command to its group: with the connection and output options (`common`, one
    parser every command shares), its help text as its description too, and its function as
    the parsed arguments' `command`."""

    common: argparse.ArgumentParser

    def leaf(
        self, sub: Any, name: str, command: Command, help_text: str, **kwargs: Any
    ) -> argparse.ArgumentParser:
        command_parser: argparse.ArgumentParser = sub.add_parser(
            name, help=help_text, description=help_text, parents=[self.common], **kwargs
        )
        command_parser.set_defaults(command=command)
        return command_parser

    def with_id(self, sub: Any, kind: str, actions: dict[str, tuple[str, str]]) -> None:
        """One command an action (`{name: (client method, help text)}`), each taking the id
        of a `kind`."""
        for name, (method, help_text) in actions.items():
            self.leaf(sub, name, by_id(method, kind), help_text).add_argument(
                "id", help=f"{kind} id"
            )
