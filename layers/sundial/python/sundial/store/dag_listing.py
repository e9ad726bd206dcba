"""The per-queue DAG index (GET /dags?queue=): one small item per DAG and queue it uses.

Item: pk "dags#<queue>", sk "<created ms, 13 digits>#<DAG id>", the DAG id. It has no expiry of
its own (a DAG paused or retried lives any time): it is deleted once the last of the DAG's nodes
on its queue has expired (sundial.services.job_retention). Entries written before that carry
an expiry of due time + twice the retention. A DAG is the nodes themselves (store.dag_nodes);
the index only says which DAGs a queue has, so no node's write (a release, a count, a cancel)
touches it.

Interleavings. A queue's DAG listing (GET /dags?queue=, store.dag_listing): a DAG's entries (one
per queue it uses) are written by its submit before any node, with a plain put of a fixed key (a
repeat writes the same item). A crash after them and before the nodes leaves entries with no nodes,
which a listing passes over (it reads each DAG's nodes) and which expire; a crash after some nodes
leaves a DAG that GET /dags/{id} shows too, and the listing shows it the same. No node write
(release, count, cancel, pause, resume) touches an entry, and a DAG is never deleted (its entries
expire after its nodes), so the listing interleaves with the DAG's progress without any rule. The
backfill puts an entry only if absent.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from sundial.ids import SHARD_PREFIX, SK_DIGITS, DagKey
from sundial.store.table import Item, TableAdapter, str_attr

DAG_LISTING_PREFIX = "dags#"


def dag_listing_pk(queue: str) -> str:
    return f"{DAG_LISTING_PREFIX}{queue}"


@dataclass(frozen=True, slots=True)
class DagEntry:
    """One DAG in one queue's index."""

    queue: str
    dag_id: str
    created_at_ms: int

    @property
    def key(self) -> Item:
        return {
            "pk": str_attr(dag_listing_pk(self.queue)),
            "sk": str_attr(f"{self.created_at_ms:0{SK_DIGITS}d}#{self.dag_id}"),
        }

    def item(self) -> Item:
        return {**self.key, "dag_id": str_attr(self.dag_id)}


def dag_entries(key: DagKey, queues: Collection[str], *, created_at_ms: int) -> list[DagEntry]:
    """A DAG's index entries, one per queue it uses."""
    return [DagEntry(queue, key.dag_id, created_at_ms) for queue in sorted(queues)]


@dataclass(frozen=True, slots=True)
class DagNodeRef:
    """What the backfill needs of a DAG node: its DAG, its queue, when it was made."""

    dag_id: str
    queue: str
    created_at_ms: int


class DagListingStore(TableAdapter):
    def put(self, entry: DagEntry) -> None:
        """Index the DAG under the entry's queue (a repeat writes the same item again)."""
        self._db.put_item(TableName=self._table, Item=entry.item())

    def put_if_absent(self, entry: DagEntry) -> bool:
        """The backfill's write: whether the entry was missing (and is now written)."""
        written, _ = self._write_if(
            "put", Item=entry.item(), ConditionExpression="attribute_not_exists(pk)"
        )
        return written

    def delete(self, entry: DagEntry) -> None:
        """Remove the DAG from the queue's index (its nodes there have all expired)."""
        self._db.delete_item(TableName=self._table, Key=entry.key)

    def page(self, queue: str, *, limit: int, after_sk: str | None) -> tuple[list[str], str | None]:
        """Up to `limit` DAG ids of the queue's index, oldest first, and the sort key to go on
        after (None at the end)."""
        return self._index_page(
            dag_listing_pk(queue), id_attribute="dag_id", limit=limit, after_sk=after_sk
        )

    def node_refs(self) -> Iterator[DagNodeRef]:
        """Every DAG node in the table: a Scan, which reads (and is charged for) the whole
        table. Only for the one-off backfill (sundial.backfill)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            # Nodes live in the shards' partitions (the index entries carry a dag_id too, and so
            # does a node's retry timer, which is no node and may outlive its DAG's nodes).
            "FilterExpression": (
                "begins_with(pk, :shard) AND attribute_exists(dag_id)"
                " AND attribute_not_exists(retry_of)"
            ),
            "ProjectionExpression": "dag_id, #queue, created_at",
            "ExpressionAttributeNames": {"#queue": "queue"},
            "ExpressionAttributeValues": {":shard": str_attr(SHARD_PREFIX)},
        }
        for page in self._db.get_paginator("scan").paginate(**request):
            for item in page.get("Items", []):
                yield DagNodeRef(
                    item["dag_id"]["S"], item["queue"]["S"], int(item["created_at"]["N"])
                )
