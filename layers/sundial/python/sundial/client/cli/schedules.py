"""`sundial schedules`: create, update, runs, ls, get, pause, resume and delete, with their
arguments."""

from __future__ import annotations

import argparse
from typing import Any

from sundial.client.cli.commands import show_all
from sundial.client.cli.options import Leaves, job_options, listing_options, read_json
from sundial.client.client import SundialClient
from sundial.client.models import RunsPage, ScheduleSummary
from sundial.client.output import Output, format_time


def _schedules_create(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    schedule = client.create_schedule(
        args.queue,
        cron=args.cron,
        rate=args.rate,
        timezone=args.timezone,
        payload=read_json(args.payload, "--payload") if args.payload is not None else None,
        name=args.name,
        priority=args.priority,
        max_attempts=args.max_attempts,
        start_at=args.start_at,
        end_at=args.end_at,
        misfire=args.misfire,
        idempotency_key=args.idempotency_key,
    )
    out.item(schedule, "schedule created")


def _schedules_update(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    nullable: dict[str, Any] = {}
    if args.payload is not None:
        nullable["payload"] = read_json(args.payload, "--payload")
    if args.max_attempts is not None:
        nullable["max_attempts"] = args.max_attempts
    schedule = client.update_schedule(
        args.id,
        cron=args.cron,
        rate=args.rate,
        timezone=args.timezone,
        priority=args.priority,
        name=args.name,
        **nullable,
    )
    out.item(schedule, f"schedule {args.id} updated")


def _schedules_runs(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    page: RunsPage = client.schedule_runs(
        args.id, limit=args.limit, before=args.before, when=args.when
    )
    if out.as_json:
        out.line(page.api_json())
        return
    rows = [
        [
            format_time(run.scheduled_for),
            "upcoming" if run.upcoming else "past",
            run.outcome,
            run.status or "",
            str(run.attempts or 0),
            run.job_id,
        ]
        for run in page.runs
    ]
    columns = ["scheduled for", "when", "outcome", "status", "attempts", "job"]
    out.table(f"runs of {args.id}", columns, rows)
    if page.next_before is not None:
        out.line(f"older runs: --before {format_time(page.next_before)}")


def _schedules_ls(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    columns = ["id", "name", "every", "state", "created", "revision"]

    def row(schedule: ScheduleSummary) -> list[str]:
        every = schedule.cron or schedule.rate or ""
        return [
            schedule.id,
            schedule.name or "",
            every if schedule.timezone == "UTC" else f"{every} ({schedule.timezone})",
            schedule.state,
            format_time(schedule.created_at),
            str(schedule.revision),
        ]

    schedules = client.schedules(args.queue)
    title = f"schedules of {args.queue}"
    show_all(out, schedules, args.limit, title=title, columns=columns, row=row)


def _schedule_runs_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="schedule id")
    parser.add_argument("--limit", type=int, help="runs per page (default 20)")
    parser.add_argument("--before", help="runs before this time (the next_before shown)")
    parser.add_argument(
        "--when",
        choices=["past", "upcoming"],
        help="past: runs whose time has come; upcoming: those sent ahead of their time",
    )


def _schedule_update_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="schedule id")
    recurrence = parser.add_mutually_exclusive_group()
    recurrence.add_argument("--cron", help="a new cron (switches a rate schedule to cron)")
    recurrence.add_argument("--rate", help="a new rate (switches a cron schedule to rate)")
    parser.add_argument("--timezone", help="IANA name the cron is read in")
    parser.add_argument("--payload", help="JSON, or @file.json, or @- for standard input")
    parser.add_argument("--priority", choices=["critical", "high", "normal", "low"])
    parser.add_argument("--max-attempts", type=int, help="1-100")
    parser.add_argument("--name")


def _create_options(create: argparse.ArgumentParser) -> None:
    job_options(create)
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="'0 6 * * 1-5' (5 fields; 6 with seconds last)")
    when.add_argument("--rate", help="'5 minutes', '1 day' (10 seconds to 365 days)")
    create.add_argument("--timezone", help="IANA name the cron is read in (default UTC)")
    create.add_argument("--name")
    create.add_argument("--start-at", help="RFC 3339: no occurrence before")
    create.add_argument("--end-at", help="RFC 3339: no occurrence after")
    create.add_argument("--misfire", choices=["fire_once", "skip"])


def add_schedules(groups: Any, leaves: Leaves) -> None:
    """Adds `sundial schedules` and its commands to the parser's `groups`."""
    schedules = groups.add_parser("schedules", help="recurring schedules").add_subparsers(
        dest="action", required=True
    )
    _create_options(
        leaves.leaf(schedules, "create", _schedules_create, "create a recurring schedule")
    )
    _schedule_update_options(
        leaves.leaf(
            schedules,
            "update",
            _schedules_update,
            "change a schedule from its next undecided occurrence on",
        )
    )
    _schedule_runs_options(
        leaves.leaf(schedules, "runs", _schedules_runs, "a schedule's runs, newest first")
    )
    listing_options(
        leaves.leaf(schedules, "ls", _schedules_ls, "a queue's schedules, oldest first")
    )
    leaves.with_id(
        schedules,
        "schedule",
        {
            "get": ("get_schedule", "show a schedule, its next run and last run"),
            "pause": ("pause_schedule", "run no occurrence until resumed"),
            "resume": ("resume_schedule", "resume; missed runs follow the misfire policy"),
            "delete": ("delete_schedule", "delete; occurrences not yet due are cancelled"),
        },
    )
