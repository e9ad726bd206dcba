"""What a person sees while `make run` runs, sized for an 80x24 terminal (issue 26):

- a banner printed once: the URLs, then the commands to try, one per line, never boxed or cut,
  so a long command soft-wraps and copies whole; every command carries the SUNDIAL_* settings
  this runtime was started with (its ports), so it reaches this runtime and no other;
- a live part (`render(gather(...))`): jobs per queue and status (only the statuses some job
  is in, so the columns fit), SQS, the newest DAGs, the history reader's health, how many errors
  went to the log, and the URLs again, so they stay on screen however far the banner scrolled.
"""

from __future__ import annotations

import json
import shlex
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from sundial.local.logs import ErrorTally
from sundial.local.runtime import LocalConfig, LocalRuntime
from sundial.local.tally import Counts, Dag
from sundial.model.dag import dag_status
from sundial.model.job import Status

# The settings every local tool reads (make run, make demo, make report, the CLI, sundial ui),
# with the defaults they share (sundial.local.__main__.config_from_env).
DEFAULTS = {
    "SUNDIAL_HOST": "127.0.0.1",
    "SUNDIAL_API_PORT": "8000",
    "SUNDIAL_EMULATOR_PORT": "5000",
    "SUNDIAL_CDK_OUT": "cdk.out",
}
STATUSES = tuple(str(s) for s in (
    Status.BLOCKED, Status.PENDING, Status.PAUSED, Status.QUEUED, Status.RUNNING,
    Status.SUCCEEDED, Status.FAILED, Status.DEAD, Status.CANCELLED,
))  # fmt: skip
DAGS_SHOWN = 3


def tool_settings(config: LocalConfig) -> str:
    """`VAR=value ...` for the settings that differ from the defaults ('' when none do), to
    put before a command so it talks to this runtime."""
    values = {
        "SUNDIAL_HOST": config.host,
        "SUNDIAL_API_PORT": str(config.api_port),
        "SUNDIAL_EMULATOR_PORT": str(config.emulator_port),
        "SUNDIAL_CDK_OUT": str(config.assembly_dir),
    }
    changed = [f"{k}={shlex.quote(v)}" for k, v in values.items() if v != DEFAULTS[k]]
    return " ".join(changed)


def banner_lines(config: LocalConfig, queues: Collection[str], log_hint: str | None) -> list[str]:
    """What is running and how to use it, one command per line (copy-paste safe)."""
    api = config.api_url
    example_queue = "demo" if "demo" in queues else sorted(queues)[0]
    example = {"queue": example_queue, "delay_seconds": 10, "payload": {"hello": "world"}}
    settings = tool_settings(config)
    prefix = f"{settings} " if settings else ""
    lines = [
        f"API       {api}",
        f"Admin UI  {api}/ui/",
        f"Emulator  {config.emulator_url}   (moto: state in memory, gone on exit)",
        f"Queues    {', '.join(sorted(queues))}",
    ]
    if log_hint:
        lines.append(f"Logs      {log_hint}")
    lines += [
        "From another terminal:",
        f"  {prefix}make demo",
        f"  {prefix}.venv/bin/sundial queues ls",
        f"  curl -s -X POST {api}/jobs -H 'content-type: application/json' "
        f"-d '{json.dumps(example)}'",
        f"  {prefix}make report",
    ]
    return lines


def banner(
    config: LocalConfig, queues: Collection[str], log_hint: str | None, startup_s: float
) -> list[Text]:
    """The banner for a terminal: the same lines, the headings in bold; print each with
    soft_wrap=True (a long command wraps where the terminal wraps it, and copies whole)."""
    title = Text(f"Sundial is running locally (started in {startup_s:.0f} s)", style="bold")
    texts = [title]
    for line in banner_lines(config, queues, log_hint):
        text = Text(line)
        text.highlight_regex(r"^(API|Admin UI|Emulator|Queues|Logs)\b|^[A-Z][^\n]*:$", "bold")
        texts.append(text)
    return texts


@dataclass
class QueueSqs:
    ready: int = 0
    delayed: int = 0
    in_flight: int = 0
    consumed: int | None = None  # None: no consumer function reads the queue


@dataclass
class LiveState:
    """Everything the live part shows, gathered once per refresh."""

    api_url: str
    counts: Counts
    queues: dict[str, QueueSqs]  # by Sundial queue name (its priority queue folded in)
    history: list[tuple[str, str | None]]  # (reader, its problem or None)
    history_read: int
    errors: int = 0
    last_error: str | None = None
    dags: list[tuple[str, Dag]] = field(default_factory=list)


def gather(runtime: LocalRuntime, sqs: Any, errors: ErrorTally | None = None) -> LiveState:
    """Read what the live part shows: counts kept from the stream, and SQS's own numbers."""
    queues: dict[str, QueueSqs] = {}
    urls = [(name, url) for name, url in runtime.job_queue_urls().items()]
    urls += [(name, url) for name, url in runtime.priority_queue_urls().items()]
    for name, url in urls:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        row = queues.setdefault(name, QueueSqs())
        row.ready += int(attributes.get("ApproximateNumberOfMessages", 0))
        row.delayed += int(attributes.get("ApproximateNumberOfMessagesDelayed", 0))
        row.in_flight += int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))
    for name, row in queues.items():
        consumed = [f"{name}:done", f"{name} (priority):done"]
        if name in runtime.consumed_queues:
            row.consumed = sum(runtime.counts.get(key, 0) for key in consumed)
    now = time.monotonic()
    counts = runtime.tally.counts()
    return LiveState(
        api_url=runtime.config.api_url,
        counts=counts,
        queues=queues,
        history=[(reader.name, reader.health.problem(now)) for reader in runtime.stream_readers],
        history_read=sum(reader.health.read for reader in runtime.stream_readers),
        errors=errors.count if errors else 0,
        last_error=errors.last if errors else None,
        dags=list(counts.dags.items())[-DAGS_SHOWN:][::-1],
    )


def render(state: LiveState) -> Group:
    parts: list[Any] = [_jobs_table(state), _sqs_line(state)]
    if state.counts.dags:
        parts.append(_dags_text(state))
    parts.append(_history_line(state))
    if state.errors:
        parts.append(
            Text(
                f"{state.errors} error(s) logged; see the log file. Last: {state.last_error}",
                style="bold red",
                overflow="ellipsis",
                no_wrap=True,
            )
        )
    parts.append(
        Text(f"API {state.api_url}  ·  UI {state.api_url}/ui/  ·  Ctrl-C stops", style="dim")
    )
    return Group(*parts)


def _jobs_table(state: LiveState) -> Table | Text:
    jobs = state.counts.jobs
    shown = [s for s in STATUSES if any(jobs.get(q, Counter())[s] for q in jobs)]
    if not shown:
        return Text("jobs: none yet (make demo, or POST /jobs)", style="bold")
    table = Table(box=box.SIMPLE_HEAD, padding=0, pad_edge=False, show_edge=False)
    table.add_column("queue", no_wrap=True)
    for status in shown:
        table.add_column(status, justify="right", no_wrap=True, min_width=len(status))
    for queue in sorted(set(state.queues) | set(jobs)):
        by_status = jobs.get(queue, Counter())
        table.add_row(queue, *(str(by_status[s]) for s in shown))
    return table


def _sqs_line(state: LiveState) -> Text:
    parts = []
    for name, row in sorted(state.queues.items()):
        figures = [
            f"{n} {what}"
            for n, what in (
                (row.ready, "ready"),
                (row.delayed, "delayed"),
                (row.in_flight, "in flight"),
            )
            if n
        ] or ["empty"]
        if row.consumed is not None:
            figures.append(f"{row.consumed} consumed")
        parts.append(f"{name} {', '.join(figures)}")
    return Text.assemble(("SQS  ", "bold"), " · ".join(parts))


def _dags_text(state: LiveState) -> Text:
    total = len(state.counts.dags)
    shown = f" ({total} in all; the {len(state.dags)} newest)" if total > len(state.dags) else ""
    lines = Text.assemble(("DAGs", "bold"), shown)
    for _, dag in state.dags:
        statuses = [Status(s) for s in dag.nodes.elements()]
        nodes = ", ".join(f"{n} {s}" for s, n in sorted(dag.nodes.items()))
        lines.append(f"\n  {dag.name}: {dag_status(statuses)} ({nodes})")
    return lines


def _history_line(state: LiveState) -> Text:
    problems = [(name, problem) for name, problem in state.history if problem]
    if not problems:
        return Text.assemble(
            ("history  ", "bold"), f"ok: {state.history_read:,} stream records read"
        )
    text = Text()
    for name, problem in problems:
        text.append(f"history  {name}: {problem}", style="bold red")
    return text
