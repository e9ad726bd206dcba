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


def banner(runtime: LocalRuntime, log_hint: str | None) -> Panel:
    api, emulator = runtime.config.api_url, runtime.config.emulator_url
    queues = runtime.job_queue_urls()
    example_queue = "demo" if "demo" in queues else sorted(queues)[0]
    example = {"queue": example_queue, "delay_seconds": 10, "payload": {"hello": "world"}}
    lines = [
        f"[bold]API[/]       {api}",
        f"[bold]Emulator[/]  {emulator}   (moto; state is in memory and gone on exit)",
        f"[bold]Queues[/]    {', '.join(sorted(queues))}",
        "",
        "[bold]Submit[/]",
        f"  curl -s -X POST {api}/jobs -H 'content-type: application/json' \\",
        f"    -d '{json.dumps(example)}'",
        "[bold]Get[/] (use the id from the answer)",
        f"  curl -s {api}/jobs/JOB_ID",
        "[bold]Receive[/] from a queue with the AWS CLI",
        "  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_DEFAULT_REGION=us-east-1 \\",
        f"  aws --endpoint-url {emulator} sqs receive-message --wait-time-seconds 20 \\",
        f"    --queue-url {queues.get('default', queues[example_queue])}",
    ]
    if log_hint:
        lines += ["", f"[bold]Logs[/]      {log_hint}"]
    lines += ["", "Ctrl-C stops everything."]
    return Panel("\n".join(lines), title="Sundial is running locally", expand=False)


def job_counts(runtime: LocalRuntime, dynamodb: Any) -> dict[str, Counter[str]]:
    """Jobs per queue and status, read from the table (a scan: fine for a local emulator)."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    request: dict[str, Any] = {
        "TableName": runtime.table_name(),
        "ProjectionExpression": "pk, queue, #s",
        "ExpressionAttributeNames": {"#s": "status"},
    }
    while True:
        page = dynamodb.scan(**request)
        for item in page.get("Items", []):
            if item["pk"]["S"].startswith("shard#") and "queue" in item:
                counts[item["queue"]["S"]][item["status"]["S"]] += 1
        if "LastEvaluatedKey" not in page:
            return counts
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def status_table(runtime: LocalRuntime, dynamodb: Any, sqs: Any) -> Table:
    counts = job_counts(runtime, dynamodb)
    table = Table(title="jobs by queue", title_justify="left")
    statuses = ("pending", "queued", "running", "succeeded", "failed", "dead", "cancelled")
    columns = ("queue", *statuses, "SQS: delayed", "ready", "in flight", "consumed")
    for column in columns:
        table.add_column(column, justify="left" if column == "queue" else "right")
    for name, url in sorted(runtime.job_queue_urls().items()):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        by_status = counts.get(name, Counter())
        consumed = runtime.counts.get(f"{name}:done", 0)
        table.add_row(
            name,
            *(str(by_status[status]) for status in statuses),
            attributes.get("ApproximateNumberOfMessagesDelayed", "0"),
            attributes.get("ApproximateNumberOfMessages", "0"),
            attributes.get("ApproximateNumberOfMessagesNotVisible", "0"),
            str(consumed) if name in runtime.consumed_queues else "-",
        )
    return table


def live_group(runtime: LocalRuntime, dynamodb: Any, sqs: Any, header: Panel) -> Group:
    note = Text(
        "consumed = handled by the queue's consumer Lambda (event source mapping)", style="dim"
    )
    return Group(header, status_table(runtime, dynamodb, sqs), note)


__all__ = ["Console", "banner", "live_group"]
