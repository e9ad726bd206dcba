"""`sundial`: the command line of the Sundial API, on sundial.client.

sundial jobs submit --queue email --in 10m --payload @job.json
sundial jobs get JOB_ID --json | jq .status
sundial dead replay email --since 2026-11-21T00:00:00Z
sundial dead replay email --job-id JOB_ID

One module per command group, with its commands and their arguments: `jobs`, `schedules`,
`dags`, `queues`, `dead` (a queue's dead letters) and `ui` (the admin web UI). What the groups
share is in `options` (argument parsing) and `commands` (a command's shape, showing answers);
this module builds the parser, runs a command, prints its errors once and maps them to exit
codes (`EPILOG` lists them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO, NoReturn

from sundial.client.cli.dags import add_dags
from sundial.client.cli.dead import add_dead
from sundial.client.cli.jobs import add_jobs
from sundial.client.cli.options import (
    Leaves,
    UsageError,
    common_options,
    parse_duration,
    read_json,
)
from sundial.client.cli.queues import add_queues
from sundial.client.cli.schedules import add_schedules
from sundial.client.cli.ui import add_ui
from sundial.client.client import SundialClient
from sundial.client.errors import (
    ApiUnreachable,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    SundialError,
)
from sundial.client.output import Output
from sundial.client.transport import LOCAL_API, Transport

# What the command line offers: `run` (the console script), `main`, the parser and its exit
# codes, and the readers of a duration or a JSON argument (from options.py).
__all__ = [
    "EPILOG",
    "EXIT_CONFLICT",
    "EXIT_ERROR",
    "EXIT_FORBIDDEN",
    "EXIT_INVALID",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "main",
    "parse_duration",
    "read_json",
    "run",
]

EXIT_OK = 0
EXIT_ERROR = 1  # any other refusal
EXIT_USAGE = 2  # argparse's own code for a bad command line
EXIT_INVALID = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_FORBIDDEN = 6
EXIT_UNAVAILABLE = 7

_EXIT_CODES: list[tuple[type[SundialError], int]] = [
    (InvalidRequest, EXIT_INVALID),
    (PayloadTooLarge, EXIT_INVALID),
    (NotFound, EXIT_NOT_FOUND),
    (Conflict, EXIT_CONFLICT),
    (Forbidden, EXIT_FORBIDDEN),
    (RateLimited, EXIT_UNAVAILABLE),
    (ServerError, EXIT_UNAVAILABLE),
    (ApiUnreachable, EXIT_UNAVAILABLE),
]

EPILOG = f"""\
API: --api URL, else $SUNDIAL_API, else the local runtime (`make run`) at $SUNDIAL_HOST and
$SUNDIAL_API_PORT, as `make run` reads them ({LOCAL_API} unless set).
HTTPS URLs are SigV4-signed with your AWS credentials (the standard chain); failed requests
are retried with backoff where repeating them is safe (submits carry an idempotency key).

Output: tables for people (times as the API writes them, RFC 3339 UTC with milliseconds);
--json prints the API's JSON as the API sent it: one object a line for lists, and each
answer on its own line for commands that make several requests (dead replay, dead purge).

Exit codes:
  0  ok
  1  any other error
  2  usage: a bad command line, payload or file
  3  invalid: the API refused the request (400, 413), naming each field
  4  not found (404): no such job, schedule, DAG or queue
  5  conflict (409): not in a state that allows it, e.g. cancelling a running job
  6  forbidden (403): your identity lacks the permission on the queue
  7  unavailable: throttled (429), a server error (5xx) or no answer, after the retries
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sundial",
        description="Submit and manage Sundial jobs, schedules, DAGs, queues and dead letters.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = parser.add_subparsers(
        dest="group", required=True, metavar="{jobs,schedules,dags,queues,dead,ui}"
    )
    leaves = Leaves(common_options())
    add_jobs(groups, leaves)
    add_schedules(groups, leaves)
    add_dags(groups, leaves)
    add_queues(groups, leaves)
    add_dead(groups, leaves)
    add_ui(groups)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    transport: Transport | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run the command line; returns the exit code. `transport` replaces HTTP (tests)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Output(as_json=args.json, stdout=stdout, stderr=stderr)
    try:
        client = SundialClient(
            args.api, region=args.region, caller=args.caller, transport=transport
        )
        args.command(client, args, out)
    except UsageError as error:
        print(f"sundial: {error}", file=stderr)
        return EXIT_USAGE
    except SundialError as error:
        out.error(error)
        return next((code for kind, code in _EXIT_CODES if isinstance(error, kind)), EXIT_ERROR)
    except (ValueError, RuntimeError) as error:  # a bad URL or time, no AWS credentials
        print(f"sundial: {error}", file=stderr)
        return EXIT_USAGE
    return EXIT_OK


def run() -> NoReturn:
    """The console script."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:  # `sundial dead ls q | head`: the reader left; nothing to say
        sys.stderr.close()
        sys.exit(EXIT_OK)
