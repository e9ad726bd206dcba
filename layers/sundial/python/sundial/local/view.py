"""What a person sees while `make run` runs: the banner, and a live table of jobs per queue."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sundial.local.runtime import LocalRuntime
from sundial.model.dag import dag_status
from sundial.model.job import Status


def banner_lines(runtime: LocalRuntime, log_hint: str | None) -> list[str]:
    """What is running and how to use it, one command per line (copy-paste safe)."""
    api, emulator = runtime.config.api_url, runtime.config.emulator_url
    queues = runtime.job_queue_urls()
    example_queue = "demo" if "demo" in queues else sorted(queues)[0]
    example = {"queue": example_queue, "delay_seconds": 10, "payload": {"hello": "world"}}
    lines = [
        f"API       {api}",
        f"Emulator  {emulator}   (moto; state is in memory and gone on exit)",
        f"Queues    {', '.join(sorted(queues))}",
        f"Admin UI  {api}/ui/   (queues, dead letters, jobs, schedules, DAGs in a browser)",
        "",
        "Submit:",
        f"  curl -s -X POST {api}/jobs -H 'content-type: application/json' "
        f"-d '{json.dumps(example)}'",
        "Get (the id from the answer):",
        f"  curl -s {api}/jobs/JOB_ID",
        "Act as another caller (per-queue access):",
        f"  curl -s {api}/jobs/JOB_ID -H 'X-Sundial-Caller: arn:aws:iam::210987654321:role/x'",
        "Receive from a queue with the AWS CLI:",
        "  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_DEFAULT_REGION=us-east-1 "
        f"aws --endpoint-url {emulator} sqs receive-message --wait-time-seconds 20 "
        f"--queue-url {queues.get('default', queues[example_queue])}",
        "More, from another terminal:",
        "  .venv/bin/sundial queues ls   # the CLI (sundial --help); `pip install .` elsewhere",
        "  make demo     # a realistic mix of jobs, schedules and a DAG",
        "  make report   # the job history report (local Spark)",
    ]
    if log_hint:
        lines += ["", f"Logs      {log_hint}"]
    lines += ["", "Ctrl-C stops everything."]
    return lines


def banner(runtime: LocalRuntime, log_hint: str | None) -> Panel:
    """The banner in a box, for a terminal (long commands wrap inside it)."""
    text = Text("\n".join(banner_lines(runtime, log_hint)))
    for word in ("API", "Emulator", "Queues", "Admin UI", "Logs"):
        text.highlight_regex(rf"^{word}\b", "bold")
    text.highlight_regex(r"^[A-Z][^\n]*:$", "bold")
    return Panel(text, title="Sundial is running locally", expand=False)


class TableCounts:
    """Jobs per queue and status, and DAG nodes per DAG and status, read from the table (a
    scan: fine for a local emulator)."""

    def __init__(self, runtime: LocalRuntime, dynamodb: Any) -> None:
        self.jobs: dict[str, Counter[str]] = defaultdict(Counter)
        self.dags: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        request: dict[str, Any] = {
            "TableName": runtime.table_name(),
            "ProjectionExpression": "pk, queue, #s, dag_id, #d.#n, retry_of",
            "ExpressionAttributeNames": {"#s": "status", "#d": "dag", "#n": "name"},
        }
        for page in dynamodb.get_paginator("scan").paginate(**request):
            for item in page.get("Items", []):
                if not (item["pk"]["S"].startswith("shard#") and "queue" in item):
                    continue
                self.jobs[item["queue"]["S"]][item["status"]["S"]] += 1
                if "dag_id" in item and "retry_of" not in item:  # a node, not a retry timer
                    name = item["dag"]["M"]["name"]["S"]
                    self.dags[(name, item["dag_id"]["S"])][item["status"]["S"]] += 1


def dag_table(counts: TableCounts) -> Table:
    table = Table(title="DAGs", title_justify="left")
    for column in ("name", "id", "status", "nodes"):
        table.add_column(column)
    for (name, dag_id), by_status in sorted(counts.dags.items()):
        status = dag_status([Status(s) for s in by_status])
        nodes = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
        table.add_row(name, dag_id, str(status), nodes)
    return table


def status_table(runtime: LocalRuntime, table_counts: TableCounts, sqs: Any) -> Table:
    counts = table_counts.jobs
    table = Table(title="jobs by queue", title_justify="left")
    statuses = (
        "blocked",
        "pending",
        "paused",
        "queued",
        "running",
        "succeeded",
        "failed",
        "dead",
        "cancelled",
    )
    columns = ("queue", *statuses, "SQS: delayed", "ready", "in flight", "consumed")
    for column in columns:
        table.add_column(column, justify="left" if column == "queue" else "right")
    priority = runtime.priority_queue_urls()
    rows = [(name, url, True) for name, url in runtime.job_queue_urls().items()]
    rows += [(f"{name} (priority)", url, False) for name, url in priority.items()]
    for name, url, has_jobs in sorted(rows):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        by_status = counts.get(name, Counter())
        consumed = runtime.counts.get(f"{name}:done", 0)
        table.add_row(
            name,
            # A priority queue's jobs are counted on their queue's row.
            *(str(by_status[status]) if has_jobs else "" for status in statuses),
            attributes.get("ApproximateNumberOfMessagesDelayed", "0"),
            attributes.get("ApproximateNumberOfMessages", "0"),
            attributes.get("ApproximateNumberOfMessagesNotVisible", "0"),
            str(consumed) if name in runtime.consumed_queues else "-",
        )
    return table


def live_group(runtime: LocalRuntime, dynamodb: Any, sqs: Any) -> Group:
    """The live part: the tables alone, so they fit a small terminal (the banner is printed
    once above them)."""
    note = Text(
        "consumed = handled by the queue's consumer Lambda (event source mapping)", style="dim"
    )
    counts = TableCounts(runtime, dynamodb)
    parts: list[Any] = [status_table(runtime, counts, sqs), note]
    if counts.dags:
        parts.append(dag_table(counts))
    return Group(*parts)


__all__ = ["Console", "banner", "banner_lines", "live_group"]
