"""GET /dags?queue= underneath: a DAG indexed under each queue it uses when it is submitted,
listed oldest first with its status, left out where the caller may not read all its queues;
and the backfill of DAGs submitted before the index."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sundial.backfill import backfill_dags
from sundial.clock import ManualClock
from sundial.errors import InvalidInput, QueueNotFound
from sundial.model.dag import DagStatus, SubmitDag
from sundial.store.dag_listing import dag_listing_pk
from sundial.store.table import key_item
from sundial.wiring import Dependencies
from tests.support import TABLE

BOTH = ("default", "email")


def _submit(deps: Dependencies, clock: ManualClock, *queues: str) -> str:
    clock.advance(seconds=1)
    nodes: dict[str, Any] = {"n0": {"queue": queues[0]}}
    for i, queue in enumerate(queues[1:], start=1):
        nodes[f"n{i}"] = {"queue": queue, "depends_on": [f"n{i - 1}"]}
    request = SubmitDag.model_validate({"name": "etl", "nodes": nodes, "delay_seconds": 3600})
    return deps.dags.submit(request).id


def _listed(deps: Dependencies, queue: str, readable: tuple[str, ...] = BOTH) -> list[str]:
    ids, cursor = [], None
    while True:
        views, cursor = deps.dags.of_queue(queue, readable=readable, limit=2, cursor=cursor)
        ids += [view.id for view in views]
        if cursor is None:
            return ids


def _entries(queue: str) -> list[dict[str, Any]]:
    return list(
        boto3.client("dynamodb").query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": dag_listing_pk(queue)}},
        )["Items"]
    )


def test_a_dag_is_listed_under_each_queue_it_uses_oldest_first(
    deps: Dependencies, clock: ManualClock
) -> None:
    # Given DAGs on `default`, on `email`, and one spanning both (with two nodes on default)
    only_default = _submit(deps, clock, "default")
    only_email = _submit(deps, clock, "email")
    spanning = _submit(deps, clock, "default", "email", "default")
    later = _submit(deps, clock, "default")
    # Then each queue lists the DAGs with a node on it, once each, oldest first
    assert _listed(deps, "default") == [only_default, spanning, later]
    assert _listed(deps, "email") == [only_email, spanning]
    # And the spanning DAG has one entry per queue (not per node), with no expiry of its own
    # (it goes when the DAG's last node on its queue expires: sundial.services.job_retention)
    assert len(_entries("default")) == 3 and len(_entries("email")) == 2
    (entry,) = [e for e in _entries("email") if e["dag_id"]["S"] == spanning]
    assert "expires_at" not in entry


def test_a_listed_dag_shows_its_status_and_the_caller_sees_only_what_it_may_read(
    deps: Dependencies, clock: ManualClock
) -> None:
    own = _submit(deps, clock, "email")
    spanning = _submit(deps, clock, "email", "default")
    deps.dags.cancel(own)
    views, _ = deps.dags.of_queue("email", readable=BOTH, limit=10, cursor=None)
    assert [(v.id, v.status) for v in views] == [
        (own, DagStatus.CANCELLED),
        (spanning, DagStatus.RUNNING),
    ]
    # A caller who may read `email` only does not see the DAG that also runs on `default`
    assert _listed(deps, "email", readable=("email",)) == [own]


def test_a_dag_whose_nodes_are_gone_is_passed_over(deps: Dependencies, clock: ManualClock) -> None:
    # Given an entry whose DAG never got its nodes written (a submit that died after the index)
    gone = _submit(deps, clock, "default")
    kept = _submit(deps, clock, "default")
    client = boto3.client("dynamodb")
    for view_node in deps.dags.get(gone).nodes:
        client.delete_item(TableName=TABLE, Key=key_item(view_node.key))
    # Then the listing leaves it out
    assert _listed(deps, "default") == [kept]


def test_unknown_queue_and_foreign_cursor(deps: Dependencies, clock: ManualClock) -> None:
    for _ in range(3):
        _submit(deps, clock, "default")
    with pytest.raises(QueueNotFound):
        deps.dags.of_queue("nope", readable=BOTH, limit=1, cursor=None)
    _, cursor = deps.dags.of_queue("default", readable=BOTH, limit=1, cursor=None)
    assert cursor is not None
    with pytest.raises(InvalidInput):
        deps.dags.of_queue("email", readable=BOTH, limit=1, cursor=cursor)
    with pytest.raises(InvalidInput):
        deps.schedules.of_queue("default", limit=1, cursor=cursor)  # a DAG cursor


def test_the_backfill_indexes_older_dags_once(deps: Dependencies, clock: ManualClock) -> None:
    # Given DAGs from before the index
    one = _submit(deps, clock, "default")
    spanning = _submit(deps, clock, "email", "default")
    client = boto3.client("dynamodb")
    for queue in BOTH:
        for entry in _entries(queue):
            client.delete_item(TableName=TABLE, Key={"pk": entry["pk"], "sk": entry["sk"]})
    assert _listed(deps, "default") == []
    # When the backfill runs, Then they are listed as if indexed at their submit
    assert backfill_dags(deps.dag_listing) == (3, 0)
    assert _listed(deps, "default") == [one, spanning] and _listed(deps, "email") == [spanning]
    # And a second run writes nothing
    assert backfill_dags(deps.dag_listing) == (0, 3)
