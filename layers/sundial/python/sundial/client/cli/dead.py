"""`sundial dead`: a queue's dead letters (ls, replay, purge), with their arguments."""

from __future__ import annotations

import argparse
from typing import Any

from sundial.client.cli.commands import show_all
from sundial.client.cli.options import Leaves
from sundial.client.client import SundialClient
from sundial.client.dead_letters import ReplayProgress
from sundial.client.errors import NotFound
from sundial.client.models import DeadLetterView, PurgeResult
from sundial.client.output import Output, format_time


def _dead_ls(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    letters = client.dead_letters(
        args.queue, since=args.since, until=args.until, error_type=args.error_type
    )
    columns = ["dead at", "job id", "attempt", "error type", "message"]
    title = f"dead letters of {args.queue}"
    show_all(out, letters, args.limit, title=title, columns=columns, row=_letter_row)


def _letter_row(letter: DeadLetterView) -> list[str]:
    attempt = str(letter.attempt) if letter.attempt is not None else ""
    return [
        format_time(letter.dead_at),
        letter.job_id or "",
        attempt,
        letter.error_type,
        letter.message[:80],
    ]


def _dead_replay(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    on_terminal = out.stderr.isatty()

    def show(progress: ReplayProgress) -> None:
        if out.as_json and progress.answer is not None:
            out.line(progress.answer.api_json())  # each answer as the API gave it
        if args.quiet:
            return
        text = (
            f"replayed {progress.replayed:,}  skipped {progress.skipped:,}  "
            f"unreplayable {progress.unreplayable:,}  ({progress.requests} requests)"
        )
        if on_terminal:  # one line, rewritten in place
            print(f"\r{text}", end="" if progress.more else "\n", file=out.stderr, flush=True)
        else:
            print(text, file=out.stderr, flush=True)

    total = client.replay_dead_letters(
        args.queue,
        since=args.since,
        until=args.until,
        error_type=args.error_type,
        job_id=args.job_id,
        limit=args.batch,
        on_progress=show,
    )
    if args.job_id is not None and not (total.replayed or total.skipped or total.in_flight):
        raise NotFound(f"no dead letter of job {args.job_id} among {args.queue}'s")
    if out.as_json:
        return
    if args.job_id is not None:
        out.line(_one_replayed(args.job_id, total))
        return
    out.line(
        f"{total.replayed:,} jobs re-queued from {args.queue}'s dead letters "
        f"({total.skipped:,} already replayed, {total.unreplayable:,} not Sundial envelopes)"
    )
    if total.in_flight:
        out.line(
            f"{total.in_flight:,} letters kept: another call is retrying their jobs; "
            "replay again in 30 seconds to finish them"
        )


def _one_replayed(job_id: str, total: ReplayProgress) -> str:
    if total.replayed:
        return f"job {job_id} re-queued"
    if total.in_flight:
        return f"job {job_id}: another call is retrying it; its letter is kept"
    return f"job {job_id} was no longer dead: its letter was removed"


def _dead_purge(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    def each(answer: PurgeResult) -> None:
        out.line(answer.api_json())

    result = client.purge_dead_letters(
        args.queue, args.older_than, on_answer=each if out.as_json else None
    )
    if not out.as_json:
        out.line(f"{result.purged:,} dead letters of {args.queue} purged")


def _replay_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job-id", help="only this job's letter (as the admin UI's Replay)")
    parser.add_argument("--batch", type=int, help="letters per request (1-500, default 500)")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")


def add_dead(groups: Any, leaves: Leaves) -> None:
    """Adds `sundial dead` and its commands to the parser's `groups`."""
    dead = groups.add_parser("dead", help="a queue's dead letters").add_subparsers(
        dest="action", required=True
    )
    listing = leaves.leaf(dead, "ls", _dead_ls, "list dead letters, oldest first (every page)")
    replay = leaves.leaf(dead, "replay", _dead_replay, "re-queue the dead jobs, until none is left")
    for command_parser in (listing, replay):
        command_parser.add_argument("queue")
        command_parser.add_argument("--since", help="RFC 3339: letters dead at or after")
        command_parser.add_argument("--until", help="RFC 3339: letters dead before")
        command_parser.add_argument("--error-type", help="only this error type")
    listing.add_argument("--limit", type=int, help="show at most this many")
    _replay_options(replay)
    purge = leaves.leaf(dead, "purge", _dead_purge, "delete letters older than a time (jobs stay)")
    purge.add_argument("queue")
    purge.add_argument("--older-than", required=True, help="RFC 3339")
