"""`sundial queues`: ls, get, pause and resume, with their arguments. A queue's dead letters
are `sundial dead` (dead.py)."""

from __future__ import annotations

import argparse
from typing import Any

from sundial.client.cli.commands import by_id
from sundial.client.cli.options import Leaves
from sundial.client.client import SundialClient
from sundial.client.output import Output


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


def add_queues(groups: Any, leaves: Leaves) -> None:
    """Adds `sundial queues` and its commands to the parser's `groups`."""
    queues = groups.add_parser("queues", help="queue state").add_subparsers(
        dest="action", required=True
    )
    leaves.leaf(queues, "ls", _queues_ls, "every queue you may read: state, depth, dead letters")
    for name, method, help_text in [
        ("get", "get_queue", "whether a queue is paused"),
        ("pause", "pause_queue", "hand nothing of the queue to SQS until resumed"),
        ("resume", "resume_queue", "resume; what came due meanwhile is sent at once"),
    ]:
        leaves.leaf(queues, name, by_id(method, "queue"), help_text).add_argument(
            "id", metavar="queue"
        )
