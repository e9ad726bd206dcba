"""`sundial`: the command line of the Sundial API, on sundial.client.

sundial jobs submit --queue email --in 10m --payload @job.json
sundial jobs get JOB_ID --json | jq .status
sundial dead replay email --since 2026-11-21T00:00:00Z
sundial dead replay email --job-id JOB_ID
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import typing
import webbrowser
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

from sundial.client.client import SundialClient
from sundial.client.dead_letters import ReplayProgress
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
from sundial.client.models import (
    ApiModel,
    DagDetail,
    DagSummary,
    DeadLetterView,
    ListedJob,
    PurgeResult,
    RunsPage,
    ScheduleSummary,
    Status,
)
from sundial.client.output import Output, format_time, summary
from sundial.client.transport import LOCAL_API, Transport
from sundial.client.ui.server import DEFAULT_PORT as DEFAULT_UI_PORT
from sundial.client.ui.server import UiServer

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


# -- commands -------------------------------------------------------------------------------

Command = Callable[[SundialClient, argparse.Namespace, Output], None]


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


def _by_id(action: str, kind: str) -> Command:
    """A command that calls `client.<action>(args.id)` and shows what it returns."""

    def run(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
        result = getattr(client, action)(args.id)
        if isinstance(result, DagDetail):
            _show_dag(result, out)
        else:
            out.item(result, f"{kind} {args.id}")

    return run


def _show_dag(dag: DagDetail, out: Output) -> None:
    if out.as_json:
        out.line(dag.api_json())
        return
    fields = json.loads(dag.api_json())
    rows = [[k, summary(v)] for k, v in fields.items() if k != "nodes" and v is not None]
    out.table(f"dag {dag.id}", ["field", "value"], rows)
    rows = [
        [name, node.status, node.queue, ", ".join(node.depends_on), str(node.attempts), node.id]
        for name, node in dag.nodes.items()
    ]
    out.table("nodes", ["node", "status", "queue", "depends on", "attempts", "job id"], rows)


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


def _dags_submit(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    spec = read_json(args.spec, "DAG")
    if not isinstance(spec, dict) or "nodes" not in spec or "name" not in spec:
        raise UsageError('the DAG must be an object with "name" and "nodes" (the POST /dags body)')
    nodes = spec.pop("nodes")
    name = spec.pop("name")
    known = {"on_failure", "parent_results", "run_at", "delay_seconds"}
    if unknown := set(spec) - known:
        raise UsageError(f"the DAG has unknown fields: {', '.join(sorted(unknown))}")
    _show_dag(client.submit_dag(name, nodes, **spec), out)


def _dead_ls(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    letters = client.dead_letters(
        args.queue, since=args.since, until=args.until, error_type=args.error_type
    )
    columns = ["dead at", "job id", "attempt", "error type", "message"]
    title = f"dead letters of {args.queue}"
    _show_all(out, letters, args.limit, title=title, columns=columns, row=_letter_row)


Listed = TypeVar("Listed", bound=ApiModel)


def _show_all(
    out: Output,
    items: Iterable[Listed],
    limit: int | None,
    *,
    title: str,
    columns: Sequence[str],
    row: Callable[[Listed], list[str]],
) -> None:
    """Every item of a listing (fetched page after page), up to `limit`: a table, or each
    item's JSON as the API wrote it, one a line, with --json."""
    rows: list[list[str]] = []
    for count, item in enumerate(items, start=1):
        if out.as_json:
            out.line(item.api_json())
        else:
            rows.append(row(item))
        if limit is not None and count >= limit:
            break
    if not out.as_json:
        out.table(f"{title}: {len(rows)}", columns, rows)


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
    _show_all(out, schedules, args.limit, title=title, columns=columns, row=row)


def _dags_ls(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    columns = ["id", "name", "status", "run at", "queues", "nodes"]

    def row(dag: DagSummary) -> list[str]:
        counts = ", ".join(f"{n} {status}" for status, n in sorted(dag.counts.items()))
        return [dag.id, dag.name, dag.status, format_time(dag.run_at), " ".join(dag.queues), counts]

    title = f"DAGs of {args.queue}"
    _show_all(out, client.dags(args.queue), args.limit, title=title, columns=columns, row=row)


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
    _show_all(out, jobs, args.limit, title=title, columns=columns, row=row)


def _queues_ls(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    queues = client.list_queues()
    if out.as_json:
        out.json_lines(queues)
        return
    rows = [
        [
            queue.queue,
            "paused" if queue.paused else "running",
            str(queue.messages.visible),
            str(queue.messages.in_flight),
            str(queue.messages.delayed),
            f"{queue.dead_letters}{'+' if queue.dead_letters_capped else ''}",
        ]
        for queue in queues
    ]
    columns = ["queue", "state", "visible", "in flight", "delayed", "dead letters"]
    out.table(f"queues: {len(rows)}", columns, rows)


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


# -- the command line -----------------------------------------------------------------------


def _ui(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    try:
        server = UiServer(client.transport, port=args.port)
    except OSError as error:
        raise UsageError(
            f"cannot listen on 127.0.0.1:{args.port} ({error.strerror}): give another --port"
        ) from None
    how = "signed with your AWS credentials" if client.api_url.startswith("https:") else "unsigned"
    out.line(f"Sundial admin UI: {server.url}")
    out.line(f"API: {client.api_url} ({how}); Ctrl-C stops the UI")
    if args.open:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        out.line("stopped")
    finally:
        server.httpd.server_close()


UI_DESCRIPTION = """\
Serve the admin web UI at http://127.0.0.1:PORT/ui/ (--open opens it in your browser): queues
(depth, pause/resume), dead letters (browse, inspect, replay, purge), and jobs, schedules and
DAGs by id (cancel, retry, pause/resume; a DAG drawn with each node's status).

The page never talks to the API itself: this command passes its calls on, SigV4-signed with
your AWS credentials for an https API (as every other command), so the API stays closed to
browsers. It listens on the loopback interface only, answers only its own page (Host, Origin
and a header a foreign site cannot send), and passes on only the API routes the UI uses.
"""


def _common(*, output: bool = True) -> argparse.ArgumentParser:
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


def _job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", required=True, help="a queue declared in cdk.json")
    parser.add_argument("--payload", help="JSON, or @file.json, or @- for standard input")
    parser.add_argument("--priority", choices=["critical", "high", "normal", "low"])
    parser.add_argument("--max-attempts", type=int, help="1-100 (default: the queue's)")
    parser.add_argument(
        "--idempotency-key", help="a repeat with the same key returns the first (default: new)"
    )


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


def _submit_options(parser: argparse.ArgumentParser) -> None:
    _job_options(parser)
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


def _replay_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job-id", help="only this job's letter (as the admin UI's Replay)")
    parser.add_argument("--batch", type=int, help="letters per request (1-500, default 500)")
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")


def _jobs_ls_options(parser: argparse.ArgumentParser) -> None:
    _listing_options(parser)
    parser.add_argument("--status", required=True, choices=typing.get_args(Status))
    parser.add_argument("--since", help="RFC 3339: due at or after (dead: died at or after)")
    parser.add_argument("--until", help="RFC 3339: due before (at most 7 days after --since)")


def _listing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", required=True)
    parser.add_argument("--limit", type=int, help="show at most this many")


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="sundial",
        description="Submit and manage Sundial jobs, schedules, DAGs, queues and dead letters.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = parser.add_subparsers(
        dest="group", required=True, metavar="{jobs,schedules,dags,queues,dead,ui}"
    )

    def leaf(
        sub: Any, name: str, command: Command, help_text: str, **kwargs: Any
    ) -> argparse.ArgumentParser:
        command_parser: argparse.ArgumentParser = sub.add_parser(
            name, help=help_text, description=help_text, parents=[common], **kwargs
        )
        command_parser.set_defaults(command=command)
        return command_parser

    def with_id(sub: Any, kind: str, actions: dict[str, tuple[str, str]]) -> None:
        for name, (method, help_text) in actions.items():
            leaf(sub, name, _by_id(method, kind), help_text).add_argument("id", help=f"{kind} id")

    jobs = groups.add_parser("jobs", help="submit and control jobs").add_subparsers(
        dest="action", required=True
    )
    _submit_options(
        leaf(jobs, "submit", _jobs_submit, "submit a job (now, --in a delay, or --at a time)")
    )
    with_id(
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
        leaf(
            jobs,
            "ls",
            _jobs_ls,
            "a queue's jobs of one status, in due order (a day either side of now by default; "
            "each page reads every job due in the window: keep it narrow)",
        )
    )
    _change_options(
        leaf(
            jobs,
            "change",
            _jobs_change,
            "change a waiting job's time, priority, payload or attempts; it keeps its id",
        )
    )

    schedules = groups.add_parser("schedules", help="recurring schedules").add_subparsers(
        dest="action", required=True
    )
    create = leaf(schedules, "create", _schedules_create, "create a recurring schedule")
    _job_options(create)
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="'0 6 * * 1-5' (5 fields; 6 with seconds last)")
    when.add_argument("--rate", help="'5 minutes', '1 day' (10 seconds to 365 days)")
    create.add_argument("--timezone", help="IANA name the cron is read in (default UTC)")
    create.add_argument("--name")
    create.add_argument("--start-at", help="RFC 3339: no occurrence before")
    create.add_argument("--end-at", help="RFC 3339: no occurrence after")
    create.add_argument("--misfire", choices=["fire_once", "skip"])
    _schedule_update_options(
        leaf(
            schedules,
            "update",
            _schedules_update,
            "change a schedule from its next undecided occurrence on",
        )
    )
    _schedule_runs_options(
        leaf(schedules, "runs", _schedules_runs, "a schedule's runs, newest first")
    )
    _listing_options(leaf(schedules, "ls", _schedules_ls, "a queue's schedules, oldest first"))
    with_id(
        schedules,
        "schedule",
        {
            "get": ("get_schedule", "show a schedule, its next run and last run"),
            "pause": ("pause_schedule", "run no occurrence until resumed"),
            "resume": ("resume_schedule", "resume; missed runs follow the misfire policy"),
            "delete": ("delete_schedule", "delete; occurrences not yet due are cancelled"),
        },
    )

    dags = groups.add_parser("dags", help="DAG workflows").add_subparsers(
        dest="action", required=True
    )
    dag_submit = leaf(dags, "submit", _dags_submit, "submit a DAG (the POST /dags body)")
    _listing_options(
        leaf(dags, "ls", _dags_ls, "the DAGs with a node on a queue, oldest first, with status")
    )
    dag_submit.add_argument("spec", help='@dag.json (or inline JSON): {"name", "nodes", ...}')
    with_id(
        dags,
        "dag",
        {
            "get": ("get_dag", "show a DAG and each node's status"),
            "cancel": ("cancel_dag", "cancel every node not finished or running"),
            "pause": ("pause_dag", "release no node until resumed"),
            "resume": ("resume_dag", "release what became ready meanwhile"),
        },
    )

    queues = groups.add_parser("queues", help="queue state").add_subparsers(
        dest="action", required=True
    )
    leaf(queues, "ls", _queues_ls, "every queue you may read: state, depth, dead letters")
    for name, method, help_text in [
        ("get", "get_queue", "whether a queue is paused"),
        ("pause", "pause_queue", "hand nothing of the queue to SQS until resumed"),
        ("resume", "resume_queue", "resume; what came due meanwhile is sent at once"),
    ]:
        leaf(queues, name, _by_id(method, "queue"), help_text).add_argument("id", metavar="queue")

    dead = groups.add_parser("dead", help="a queue's dead letters").add_subparsers(
        dest="action", required=True
    )
    listing = leaf(dead, "ls", _dead_ls, "list dead letters, oldest first (every page)")
    replay = leaf(dead, "replay", _dead_replay, "re-queue the dead jobs, until none is left")
    for command_parser in (listing, replay):
        command_parser.add_argument("queue")
        command_parser.add_argument("--since", help="RFC 3339: letters dead at or after")
        command_parser.add_argument("--until", help="RFC 3339: letters dead before")
        command_parser.add_argument("--error-type", help="only this error type")
    listing.add_argument("--limit", type=int, help="show at most this many")
    _replay_options(replay)
    purge = leaf(dead, "purge", _dead_purge, "delete letters older than a time (jobs stay)")
    purge.add_argument("queue")
    purge.add_argument("--older-than", required=True, help="RFC 3339")
    _add_ui(groups)
    return parser


def _add_ui(groups: Any) -> None:
    ui = groups.add_parser(
        "ui",
        help="the admin web UI on 127.0.0.1 (it signs the API calls with your credentials)",
        description=UI_DESCRIPTION,
        epilog=f"Example: sundial ui --api https://sundial.example.com --port {DEFAULT_UI_PORT}",
        parents=[_common(output=False)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ui.add_argument(
        "--port",
        type=int,
        default=DEFAULT_UI_PORT,
        help=f"the local port (default {DEFAULT_UI_PORT}; 0 picks a free one)",
    )
    ui.add_argument("--open", action="store_true", help="open the UI in your web browser")
    ui.set_defaults(command=_ui, json=False)


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


if __name__ == "__main__":
    run()
