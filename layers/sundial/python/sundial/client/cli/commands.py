"""What the command groups share: a command's shape (`Command`), the command that calls one
client method by id and shows its answer (`by_id`), and the two ways of showing an answer
beyond `Output`'s own: a DAG with its nodes, and a listing fetched page after page."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from sundial.client.client import SundialClient
from sundial.client.models import ApiModel, DagDetail
from sundial.client.output import Output, summary

Command = Callable[[SundialClient, argparse.Namespace, Output], None]
Listed = TypeVar("Listed", bound=ApiModel)


def by_id(action: str, kind: str) -> Command:
    """A command that calls `client.<action>(args.id)` and shows what it returns."""

    def run(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
        result = getattr(client, action)(args.id)
        if isinstance(result, DagDetail):
            show_dag(result, out)
        else:
            out.item(result, f"{kind} {args.id}")

    return run


def show_dag(dag: DagDetail, out: Output) -> None:
    """A DAG's fields, then a table of its nodes (--json: the API's JSON)."""
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


def show_all(
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
