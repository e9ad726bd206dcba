"""`sundial jobs`: submit, get, cancel, retry, pause, resume, run-now, ls and change, with
their arguments."""

from __future__ import annotations

import argparse
import typing
from typing import Any

from sundial.client.cli.commands import show_all
from sundial.client.cli.options import (
    Leaves,
    UsageError,
    job_options,
    listing_options,
    parse_duration,
    read_json,
)
from sundial.client.client import SundialClient
from sundial.client.models import ListedJob, Status
from sundial.client.output import Output, format_time


def _jobs_submit(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    if args.at is not None and args.delay is not None:
        raise UsageError("give --in or --at, not both")
    job = client.submit(
        args.queue,
        read_json(args.payload, "--payload") if args.payload is not None else None,
        run_at=args.at,
        delay_seconds=parse_duration(args.delay) if args.delay is not None else None,
        priority=args.priority,
        max_attempts=args.max_attempts,
        idempotency_key=args.idempotency_key,
        payload_storage=args.payload_storage,
    )
    out.item(job, "job submitted")


def _jobs_change(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    if args.at is not None and args.delay is not None:
        raise UsageError("give --in or --at, not both")
    changes: dict[str, Any] = {
        "run_at": args.at,
        "delay_seconds": parse_duration(args.delay) if args.delay is not None else None,
        "priority": args.priority,
        "max_attempts": args.max_attempts,
    }
    if args.payload is not None:
        changes["payload"] = read_json(args.payload, "--payload")
        changes["payload_storage"] = args.payload_storage
    elif args.payload_storage is not None:
        raise UsageError("--payload-storage applies to a new payload: give --payload too")
    if all(value is None for name, value in changes.items() if name != "payload") and (
        "payload" not in changes
    ):
        raise UsageError("give at least one of --in, --at, --priority, --payload, --max-attempts")
    out.item(client.change_job(args.id, **changes), f"job {args.id} changed")


def _jobs_ls(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    dead = args.status == "dead"
    columns = ["id", "dead at", "attempt", "error type"] if dead else ["id", "run at", "priority"]

    def row(job: ListedJob) -> list[str]:
        attempt = "" if job.attempts is None else str(job.attempts)
        if dead:
            return [job.id, format_time(job.dead_at), attempt, job.error_type or ""]
        return [job.id, format_time(job.run_at), job.priority or ""]

    jobs = client.queue_jobs(args.queue, args.status, since=args.since, until=args.until)
    title = f"{args.status} jobs of {args.queue}"
    show_all(out, jobs, args.limit, title=title, columns=columns, row=row)


def _submit_options(parser: argparse.ArgumentParser) -> None:
    job_options(parser)
    parser.add_argument("--in", dest="delay", help="run after this delay: 90s, 10m, 1h30m, 2d")
    parser.add_argument("--at", help="run at this time, RFC 3339: 2026-11-22T09:00:00Z")
    _payload_storage_option(parser)


def _payload_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--payload-storage",
        choices=["auto", "s3"],
        help="where the payload is kept: auto (inline up to 64 KiB, S3 beyond; the default) "
        "or s3 (in S3 whatever its size); a payload may be up to 5 MiB",
    )


def _change_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="job id")
    parser.add_argument("--in", dest="delay", help="run after this delay from now: 0s, 10m, 1h")
    parser.add_argument("--at", help="run at this time, RFC 3339: 2026-11-22T10:00:00Z")
    parser.add_argument("--payload", help="the new payload: JSON, @file.json, or @- for stdin")
    parser.add_argument("--priority", choices=["critical", "high", "normal", "low"])
    parser.add_argument("--max-attempts", type=int, help="1-100")
    _payload_storage_option(parser)


def _jobs_ls_options(parser: argparse.ArgumentParser) -> None:
    listing_options(parser)
    parser.add_argument("--status", required=True, choices=typing.get_args(Status))
    parser.add_argument("--since", help="RFC 3339: due at or after (dead: died at or after)")
    parser.add_argument("--until", help="RFC 3339: due before (at most 7 days after --since)")


def add_jobs(groups: Any, leaves: Leaves) -> None:
    """Adds `sundial jobs` and its commands to the parser's `groups`."""
    jobs = groups.add_parser("jobs", help="submit and control jobs").add_subparsers(
        dest="action", required=True
    )
    _submit_options(
        leaves.leaf(
            jobs, "submit", _jobs_submit, "submit a job (now, --in a delay, or --at a time)"
        )
    )
    leaves.with_id(
        jobs,
        "job",
        {
            "get": ("get_job", "show a job: status, attempts, times, result, errors"),
            "cancel": ("cancel_job", "cancel a job; once it answers, the job never runs"),
            "retry": ("retry_job", "re-queue a dead, failed or cancelled job to run now"),
            "pause": ("pause_job", "hold a pending job until resumed"),
            "resume": ("resume_job", "resume a paused job"),
            "run-now": ("run_job_now", "hand a waiting job to SQS now; it keeps its id"),
        },
    )
    _jobs_ls_options(
        leaves.leaf(
            jobs,
            "ls",
            _jobs_ls,
            "a queue's jobs of one status, in due order (a day either side of now by default; "
            "each page reads every job due in the window: keep it narrow)",
        )
    )
    _change_options(
        leaves.leaf(
            jobs,
            "change",
            _jobs_change,
            "change a waiting job's time, priority, payload or attempts; it keeps its id",
        )
    )
