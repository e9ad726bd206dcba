"""DAG nodes: job items with DAG attributes (`dag_id`, `dag`, `waiting_on`, `done_parents`,
...). The nodes of one DAG share a shard and a due time, so their keys are one contiguous
range (ids.DagKey)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from sundial.ids import DagKey, JobKey, shard_pk
from sundial.model.job import (
    Job,
    Status,
)

if TYPE_CHECKING:
    pass
from sundial.store.job_items import JobItemStore, item_to_job
from sundial.store.table import Item, num_attr, query_items, str_attr


class DagNodeStore(JobItemStore):
    """The writes that move a DAG's nodes (sundial.services.dag_progress)."""

    def dag_nodes(self, dag: DagKey) -> list[Job]:
        """Every node of a DAG that exists, in node order: one range query on its shard."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
            # A job that happens to share the range is not one of the DAG's nodes.
            "FilterExpression": "dag_id = :dag",
            "ExpressionAttributeValues": {
                ":pk": str_attr(shard_pk(dag.shard)),
                ":first": str_attr(dag.node_key(0).sk),
                ":last": str_attr(dag.node_key(dag.node_count - 1).sk),
                ":dag": str_attr(dag.dag_id),
            },
            "ConsistentRead": True,
        }
        return [item_to_job(item) for item in query_items(self._db, request)]

    def count_finished_parent(
        self, key: JobKey, *, parent: int, failed: bool
    ) -> tuple[bool, Job | None]:
        """Count a blocked node's parent as finished, once: ADD -1 to its waiting_on, unless the
        parent is already in done_parents. Returns (counted, the node after the write, or as it
        was if not). Exactly one parent's write takes waiting_on to 0.
        A blocked node has no expiry, here or at its DAG's submit: its other parents may wait
        any time (a paused queue or DAG, weeks of retries), and an expiry that ran out under
        them lost the node (make chaos, seed 71 of the long profile). It gets one when it ends
        (run, cancelled with its DAG or by a parent's failure). The price: a DAG submit that
        dies after its blocked nodes and before its roots leaves those nodes (never run, never
        answered 2xx) until an operator cancels the DAG the listing shows."""
        values: Item = {
            ":minus_one": num_attr(-1),
            ":parents": {"NS": [str(parent)]},
            ":parent": num_attr(parent),
            ":blocked": str_attr(Status.BLOCKED),
        }
        update = "ADD waiting_on :minus_one, done_parents :parents" + (
            ", failed_parents :parents" if failed else ""
        )
        condition = "#status = :blocked AND NOT contains(done_parents, :parent)"
        return self._update_job(key, update=update, condition=condition, values=values)

    def release_node(
        self,
        key: JobKey,
        *,
        token: str,
        now_ms: int,
        last_parent: int | None = None,
        failed: bool = False,
        released_by: int | None = None,
        results_json: str | None = None,
        unless_queues: Collection[str] = (),
        queue_paused: bool = False,
        direct: bool = False,
    ) -> tuple[bool, Job | None]:
        """blocked -> queued, for a node all of whose parents have finished and whose DAG is not
        paused. The caller sends it to SQS next (a crash in between is repaired by the parent's
        redelivery, see services.dags). With `last_parent`, that parent is counted in the same
        write (the node's only remaining parent): a one-parent node costs no extra write.
        `unless_queues`: refuse a node on one of these queues (the paused ones).
        `queue_paused`: the node's queue is paused, so it becomes an ordinary pending job
        instead (not direct, so a queue's catch-up may take it; store.queue_states), which the
        caller records for the catch-up.
        `direct`: released queued and `direct`, so no sweep re-sends it: a consumer releasing
        nodes while some queue is paused, which defers those of a paused queue with a timer
        (services.dag_progress) and sends the others itself.
        Returns (released, the node after the write, or as it was if not).
        (Long because its one conditional write has several optional parts built together.)"""
        values: Item = {
            ":blocked": str_attr(Status.BLOCKED),
            ":now": num_attr(now_ms),
            ":zero": num_attr(0),
        }
        if queue_paused:
            values[":pending"] = str_attr(Status.PENDING)
            sets = ["#status = :pending", "released_at = :now"]
        else:
            values |= {":queued": str_attr(Status.QUEUED), ":token": str_attr(token)}
            sets = [
                "#status = :queued",
                "claim_token = :token",
                "lease_until = :now",
                "queued_at = :now",
                "released_at = :now",
            ]
        adds: list[str] = []
        condition = "#status = :blocked AND attribute_not_exists(held)"
        if unless_queues:
            names = {f":queue{i}": str_attr(queue) for i, queue in enumerate(sorted(unless_queues))}
            condition += f" AND NOT (#queue IN ({', '.join(names)}))"
            values |= names
        if last_parent is None:
            condition += " AND waiting_on = :zero"
        else:
            condition += " AND waiting_on = :one AND NOT contains(done_parents, :parent)"
            sets.append("waiting_on = :zero")
            adds.append("done_parents :parents" + (", failed_parents :parents" if failed else ""))
            values |= {
                ":one": num_attr(1),
                ":parent": num_attr(last_parent),
                ":parents": {"NS": [str(last_parent)]},
            }
        if direct:
            sets.append("direct = :true")
            values[":true"] = {"BOOL": True}
        if released_by is not None:
            sets.append("released_by = :by")
            values[":by"] = num_attr(released_by)
        if results_json is not None:
            sets.append("parent_results = :results")
            values[":results"] = str_attr(results_json)
        return self._update_job(
            key,
            update=f"SET {', '.join(sets)}"
            + (f" ADD {', '.join(adds)}" if adds else "")
            + (" REMOVE expires_at, direct" if queue_paused else " REMOVE expires_at"),
            condition=condition,
            values=values,
            names={"#queue": "queue"},
        )

    def hold_node(self, key: JobKey) -> tuple[bool, Job | None]:
        """Pause a DAG node that is not yet released: blocked, or a pending root. A held node
        has no expiry (a DAG may stay paused any time): its resume gives a root it sends one
        back (unhold_node). Returns (held now, the node after the write or as it was)."""
        return self._update_job(
            key,
            update="SET held = :true REMOVE expires_at",
            condition="#status IN (:blocked, :pending)",
            values={
                ":true": {"BOOL": True},
                ":blocked": str_attr(Status.BLOCKED),
                ":pending": str_attr(Status.PENDING),
            },
        )

    def unhold_node(
        self, key: JobKey, *, make_direct: bool, expires_at_s: int | None
    ) -> tuple[bool, Job | None]:
        """Resume a held DAG node. `make_direct`: a pending root that is due by now (or soon),
        which the caller then sends itself; marking it direct keeps sweepers off it.
        `expires_at_s`: the expiry a root the caller sends gets back (if it dies before, the
        node does not linger); None: none (a blocked node never has one: count_finished_parent)."""
        sets = (["direct = :true"] if make_direct else []) + (
            ["expires_at = :expires"] if expires_at_s is not None else []
        )
        values: Item = ({":true": {"BOOL": True}} if make_direct else {}) | (
            {":expires": num_attr(expires_at_s)} if expires_at_s is not None else {}
        )
        return self._update_job(
            key,
            update=(f"SET {', '.join(sets)} " if sets else "") + "REMOVE held",
            condition="attribute_exists(held)",
            values=values,
        )
