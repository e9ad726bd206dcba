"""What a job owns outside its own item lives exactly as long as the job, and goes with it.

A job can live any time: a pause has no limit, a move or weeks of retries make it later than
planned. So nothing a job owns expires by a clock of its own; it is removed when DynamoDB's TTL
removes the job's item (a retention after the job ended, or after an unsent direct job's due
time). The history Lambda reads that removal from the table's stream and hands the item, as it
was, to `expired`, which removes:
- a moved job's pointer (the item at the key its id names), if it still points at this item;
- its idempotency record, if it still names this job;
- its payload object in S3, if it owns it alone (sundial.model.payloads);
- its DAG's listing entry on its queue, once no node of that DAG on that queue is left.
Each removal is conditional or harmless to repeat, so a redelivered stream batch (Lambda
retries it) changes nothing more. Retry timers and pointers own nothing.

`written` is the stored payload's backstop: an insert or change of a job item that references
a stored payload tags that object referenced (its writer does so right after its write; a
writer that died in between would leave it to the lifecycle's unreferenced expiry).

Interleavings: the TTL removal comes a retention after the job ended, when nothing can change
it any more (a retry by id or a replay of a finished job needs its item). The DAG entry's
check reads the DAG's remaining nodes after this node's removal; the removal of the last node
of a queue is followed by its own stream record, which then finds none, so some removal always
sees the queue's nodes gone. A payload object never outlives the job's last item, and no job
other than its owner references it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger
from ulid import ULID

from sundial.ids import DagKey
from sundial.model.job import Job
from sundial.store.dag_listing import DagEntry, DagListingStore
from sundial.store.dag_nodes import DagNodeStore
from sundial.store.idempotency import IdempotencyKeys
from sundial.store.job_items import MovedJobPointers, item_to_job
from sundial.store.payloads import PayloadStore

logger = Logger(child=True)


class JobRetention:
    def __init__(
        self,
        *,
        pointers: MovedJobPointers,
        idempotency: IdempotencyKeys,
        dag_listing: DagListingStore,
        dag_nodes: DagNodeStore,
        payloads: PayloadStore | None,
    ) -> None:
        """`payloads`: the payload bucket (None: a deployment without one stores none)."""
        self._pointers = pointers
        self._idempotency = idempotency
        self._dag_listing = dag_listing
        self._dag_nodes = dag_nodes
        self._payloads = payloads

    def expired(self, item: Mapping[str, Any]) -> None:
        """A job item DynamoDB's TTL removed (its last image, low-level attribute values)."""
        if "moved_to" in item or "retry_of" in item:
            return  # a pointer, or a retry timer: they own nothing
        job = item_to_job(dict(item))
        if job.origin is not None and job.origin != job.key:
            self._pointers.forget(job.origin, moved_to=job.key)
        if job.idempotency_key is not None:
            self._idempotency.forget(queue=job.queue, key=job.idempotency_key, job_id=job.id)
        if job.payload_ref is not None and self._payloads is not None:
            self._payloads.delete(job.payload_ref)
        if job.dag is not None:
            self._forget_dag_entry(job)

    def written(self, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        """A job item inserted or changed: a stored payload it newly references is its job's."""
        if self._payloads is None or "retry_of" in new or "payload_ref" not in new:
            return
        if old is not None and old.get("payload_ref") == new.get("payload_ref"):
            return
        ref = item_to_job(dict(new)).payload_ref
        if ref is not None:
            self._payloads.mark_referenced(ref)

    def _forget_dag_entry(self, node: Job) -> None:
        """Delete the DAG's entry on the node's queue once no node of the DAG on that queue is
        left (this node's own removal came first: see the module docstring)."""
        assert node.dag is not None
        dag = DagKey.from_dag_id(node.dag.dag_id)
        if any(other.queue == node.queue for other in self._dag_nodes.dag_nodes(dag)):
            return
        # The entry's sort key starts with the DAG's submit time, its base ULID's timestamp.
        created = ULID.from_str(dag.base_ulid).milliseconds
        self._dag_listing.delete(DagEntry(node.queue, dag.dag_id, created))
        logger.info("DAG listing entry removed", extra={"dag_id": dag.dag_id, "queue": node.queue})
