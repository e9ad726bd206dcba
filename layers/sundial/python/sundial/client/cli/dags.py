"""`sundial dags`: submit, ls, get, cancel, pause and resume, with their arguments."""

from __future__ import annotations

import argparse
from typing import Any

from sundial.client.cli.commands import show_all, show_dag
from sundial.client.cli.options import Leaves, UsageError, listing_options, read_json
from sundial.client.client import SundialClient
from sundial.client.models import DagSummary
from sundial.client.output import Output, format_time


def _dags_submit(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    spec = read_json(args.spec, "DAG")
    if not isinstance(spec, dict) or "nodes" not in spec or "name" not in spec:
        raise UsageError('the DAG must be an object with "name" and "nodes" (the POST /dags body)')
    nodes = spec.pop("nodes")
    name = spec.pop("name")
    known = {"on_failure", "parent_results", "run_at", "delay_seconds"}
    if unknown := set(spec) - known:
        raise UsageError(f"the DAG has unknown fields: {', '.join(sorted(unknown))}")
    show_dag(client.submit_dag(name, nodes, **spec), out)


def _dags_ls(client: SundialClient, args: argparse.Namespace, out: Output) -> None:
    columns = ["id", "name", "status", "run at", "queues", "nodes"]

    def row(dag: DagSummary) -> list[str]:
        counts = ", ".join(f"{n} {status}" for status, n in sorted(dag.counts.items()))
        return [dag.id, dag.name, dag.status, format_time(dag.run_at), " ".join(dag.queues), counts]

    title = f"DAGs of {args.queue}"
    show_all(out, client.dags(args.queue), args.limit, title=title, columns=columns, row=row)


def add_dags(groups: Any, leaves: Leaves) -> None:
    """Adds `sundial dags` and its commands to the parser's `groups`."""
    dags = groups.add_parser("dags", help="DAG workflows").add_subparsers(
        dest="action", required=True
    )
    dag_submit = leaves.leaf(dags, "submit", _dags_submit, "submit a DAG (the POST /dags body)")
    listing_options(
        leaves.leaf(
            dags, "ls", _dags_ls, "the DAGs with a node on a queue, oldest first, with status"
        )
    )
    dag_submit.add_argument("spec", help='@dag.json (or inline JSON): {"name", "nodes", ...}')
    leaves.with_id(
        dags,
        "dag",
        {
            "get": ("get_dag", "show a DAG and each node's status"),
            "cancel": ("cancel_dag", "cancel every node not finished or running"),
            "pause": ("pause_dag", "release no node until resumed"),
            "resume": ("resume_dag", "release what became ready meanwhile"),
        },
    )
