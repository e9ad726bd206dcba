"""Submit, list, read, cancel, pause and resume whole DAGs: the domain behind /dags (how a DAG
moves on when its nodes end: services.dag_progress).

The DAG listing (GET /dags?queue=): a DAG may span queues, so it is indexed under each queue it
uses (store.dag_listing): a queue's list is one range query, and a caller who may read that
queue finds it there. One index item per queue used, written before the nodes: +1 write unit
per queue per DAG submitted (most DAGs use one or two queues), none per node or as it runs. A
DAG has no delete (a cancel keeps its nodes until they expire), so its entries expire with it.
(One "dags" partition by time instead would make each queue's list read every DAG's entry.)"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from sundial.clock import Clock
from sundial.errors import Conflict, DagNotFound, InvalidInput, QueueNotFound, Unavailable
from sundial.ids import DagKey
from sundial.model.dag import DagStatus, DagView, SubmitDag
from sundial.model.dag_graph import check_graph, children_of
from sundial.model.job import (
    CANCELLABLE,
    DagLink,
    Job,
    Status,
)
from sundial.model.placement import Where, due_soon, place
from sundial.model.submission import (
    MAX_HORIZON_S,
)
from sundial.services.cursors import decode_cursor, encode_cursor
from sundial.services.dag_progress import DagProgress
from sundial.services.jobs import JobService
from sundial.store.dag_listing import DagListingStore, dag_entries
from sundial.store.dag_nodes import DagNodeStore
from sundial.store.jobs import JobStore
from sundial.timing import SUBMIT_IN_FLIGHT_MS

# A DAG cancel reads and cancels again while it finds nodes to cancel (a submit in flight
# writes its roots last); a third pass finds nothing unless the DAG was submitted again.
_CANCEL_PASSES = 3


class DagService:
    """POST, GET and DELETE /dags: the domain behind the DAG routes."""

    def __init__(
        self,
        *,
        store: JobStore,
        nodes: DagNodeStore,
        jobs: JobService,
        progress: DagProgress,
        clock: Clock,
        listing: DagListingStore,
        queues: Collection[str],
        shard_count: int,
        retention_days: int,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._listing = listing
        self._queues = frozenset(queues)
        self._nodes = nodes
        self._jobs = jobs
        self._progress = progress
        self._clock = clock
        self._shard_count = shard_count
        self._retention_s = retention_days * 86_400
        self._rng = rng or random.Random()

    def submit(self, request: SubmitDag, *, correlation_id: str | None = None) -> DagView:
        """Validate the whole DAG, write its nodes, and send the roots that are due now.
        Invalid input raises InvalidInput before anything is written. `correlation_id`: the
        submitting request's id, kept with every node (Job.correlation_id)."""
        now = self._clock.now_ms()
        check_graph({name: node.depends_on for name, node in request.nodes.items()})
        start = request.start_ms(now)
        if start > now + MAX_HORIZON_S * 1000:
            raise InvalidInput("run_at", "more than 366 days ahead")
        requests = [(f"nodes.{name}.", node.job_request()) for name, node in request.nodes.items()]
        for prefix, job_request in requests:
            self._jobs.check(job_request, now, prefix)
        self._jobs.admit(requests, count_field="nodes")  # 413 or 429 before anything is written
        key = DagKey.new(
            shard=self._rng.randrange(self._shard_count),
            due_ms=start,
            node_count=len(request.nodes),
            now_ms=now,
        )
        # A root due soon on a paused queue is left pending for the queue's catch-up, as any
        # job submitted to it is (sundial.store.queue_states); the other roots are sent below.
        paused = self._jobs.paused_queues(
            {node.queue for node in request.nodes.values() if not node.depends_on}
            if due_soon(start, now)
            else set()
        )
        nodes = self._build(request, key, now, paused, correlation_id)
        # The queues' index first (services module docstring: "The DAG listing"): a submit that
        # dies after it leaves an entry with no nodes, which a listing passes over.
        queues = {node.queue for node in nodes}
        for entry in dag_entries(key, queues, created_at_ms=now):
            self._listing.put(entry)
        # Blocked nodes first: if the submit dies part-way, nothing written can run, and every
        # item written expires (a root due later is written only once all the others exist).
        blocked = [node for node in nodes if node.status is Status.BLOCKED]
        self._store.put_new(blocked, now_ms=self._clock.now_ms())
        roots = [node for node in nodes if node.status is not Status.BLOCKED]
        direct = self._jobs.write_new(roots, now)
        if blocked and self._cancelled_meanwhile(key):
            # A DELETE /dags/{id} read the DAG after its blocked nodes and before its roots,
            # cancelled what it read and answered 200: the roots must never run either.
            self._cancel_nodes(roots)
            return self.get(key.dag_id)
        if self._jobs.dispatch_direct(direct):
            raise Unavailable(f"DAG {key.dag_id}: a root could not be handed to SQS; retry")
        return DagView(key, nodes)

    def _cancelled_meanwhile(self, key: DagKey) -> bool:
        """Whether a node of the DAG is cancelled already, as the submit finishes writing it."""
        return any(node.status is Status.CANCELLED for node in self._nodes.dag_nodes(key))

    def _cancel_nodes(self, nodes: Sequence[Job]) -> list[Job]:
        """Cancel the cancellable ones of `nodes`, blocked first (see cancel)."""
        now = self._clock.now_ms()
        cancellable = [node for node in nodes if node.status in CANCELLABLE]
        for node in sorted(cancellable, key=lambda n: n.status is not Status.BLOCKED):
            self._store.cancel(node.key, now_ms=now, expires_at_s=now // 1000 + self._retention_s)
        return cancellable

    def of_queue(
        self, queue: str, *, readable: Collection[str], limit: int, cursor: str | None
    ) -> tuple[list[DagView], str | None]:
        """A page of the queue's DAGs, oldest first, each read whole (one range query of its
        nodes, a read unit per 4 KB of them), and the next page's cursor (None at the end). A
        DAG that uses a queue not in `readable` is left out, as GET /dags/{id} would refuse it
        (a page may then be short); so is one whose nodes are gone (expired, or a submit that
        died before writing them)."""
        if queue not in self._queues:
            raise QueueNotFound(queue)
        after = decode_cursor(cursor, queue, listing="dags") if cursor else None
        ids, last = self._listing.page(queue, limit=limit, after_sk=after)
        views = []
        for dag_id in ids:
            key = DagKey.from_dag_id(dag_id)
            nodes = self._nodes.dag_nodes(key)
            if nodes and {node.queue for node in nodes} <= set(readable):
                views.append(DagView(key, nodes))
        return views, encode_cursor(queue, last, listing="dags") if last else None

    def _build(
        self,
        request: SubmitDag,
        key: DagKey,
        now: int,
        paused: Collection[str],
        correlation_id: str | None,
    ) -> list[Job]:
        index = {name: i for i, name in enumerate(request.nodes)}
        children = children_of({name: node.depends_on for name, node in request.nodes.items()})
        jobs = []
        for i, (name, spec) in enumerate(request.nodes.items()):
            job = self._jobs.new_job(
                spec.job_request(),
                now,
                key=key.node_key(i),
                held=spec.queue in paused,
                correlation_id=correlation_id,
            )
            job.dag = DagLink(
                dag_id=key.dag_id,
                dag_name=request.name,
                node=name,
                index=i,
                parents=tuple(
                    (parent, index[parent])
                    for parent in sorted(spec.depends_on, key=index.__getitem__)
                ),
                children=tuple(
                    (index[child], len(request.nodes[child].depends_on)) for child in children[name]
                ),
                on_failure=request.on_failure,
                parent_results=request.parent_results,
                waiting_on=len(spec.depends_on),
            )
            if spec.depends_on:
                # The DAG owns it (the sweeper skips direct items). No expiry: its parents may
                # wait any time (a paused queue or DAG, a parent's retries), and a child that
                # expired under them was lost (store.dag_nodes: count_finished_parent). That
                # includes the expiry new_job gives a node due within the direct window.
                job.status, job.direct, job.expires_at_s = Status.BLOCKED, True, None
            jobs.append(job)
        return jobs

    def get(self, dag_id: str) -> DagView:
        key = DagKey.from_dag_id(dag_id)
        nodes = self._nodes.dag_nodes(key)
        if not nodes:
            raise DagNotFound(dag_id)
        return DagView(key, nodes)

    def cancel(self, dag_id: str) -> DagView:
        """Cancel every node not yet finished or running. Blocked nodes go first, so a node
        that succeeds meanwhile finds its children cancelled and releases nothing. A running
        node runs on; its message, like any cancelled job's, is skipped if not yet started.

        The DAG is read again after each pass until a read finds nothing left to cancel: its
        submit may still be writing it (its roots come last). A root written after that last
        read is cancelled by the submit itself, which reads the DAG after writing its roots
        and, finding a node cancelled (this cancel's writes came before that last read), never
        sends them (submit, _cancelled_meanwhile)."""
        view = self.get(dag_id)
        for _ in range(_CANCEL_PASSES):
            if not self._cancel_nodes(view.nodes):
                return view
            view = self.get(dag_id)
        raise Unavailable(f"DAG {dag_id} kept changing while it was being cancelled; retry")

    def pause(self, dag_id: str) -> DagView:
        """Hold every node not yet released (blocked, or a root still pending): no node is
        released until the DAG resumes. Released nodes run on, and their successes are
        counted; nothing is lost. Pausing twice is harmless; a finished DAG is a 409."""
        view = self.get(dag_id)
        if view.status not in (DagStatus.RUNNING, DagStatus.PAUSED):
            raise Conflict(f"DAG is {view.status}; only a running DAG can be paused")
        for node in view.nodes:
            if node.status in (Status.BLOCKED, Status.PENDING) and not _held(node):
                self._nodes.hold_node(node.key)
        return self.get(dag_id)

    def resume(self, dag_id: str) -> DagView:
        """Release what became ready while the DAG was paused, and dispatch its roots that are
        due. Also a repair: a node whose release or send was cut short is sent now. Resuming a
        DAG that is not paused does exactly that repair, and is otherwise harmless. A node on
        a paused queue is not sent: it is recorded for that queue's catch-up instead.

        A root this resume un-held is its own to send. A pending, direct root it found so is
        another call's (the submit's, an earlier resume's) until that call is certainly over:
        only then is it taken (a conditional write, so two repairs send it once) and sent."""
        view = self.get(dag_id)
        now = self._clock.now_ms()
        paused = self._progress.paused_queues()
        ready: list[Job] = []
        roots: list[Job] = []
        for node in view.nodes:
            held = _held(node)
            current = self._unhold(node, now, paused) if held else node
            if current is None:
                continue
            if current.status is Status.PENDING and current.direct:
                owned = current if held else self._take_stale(current, now)
                if owned is not None:
                    roots.append(owned)
            elif current.status is Status.PENDING and _for_catch_up(current, now, paused):
                ready.append(current)  # the dispatch records it for the catch-up, or sends it
            elif current.status is Status.BLOCKED:
                released = self._progress.release_ready(current, paused=paused)
                if released is not None:
                    ready.append(released)
        self._progress.dispatch(ready)
        if self._jobs.dispatch_direct(roots):
            raise Unavailable(f"DAG {dag_id}: a root could not be handed to SQS; retry")
        return self.get(dag_id)

    def _take_stale(self, node: Job, now: int) -> Job | None:
        """A pending, direct root whose sender may have died: taken to send, once every call
        that made it direct began SUBMIT_IN_FLIGHT_MS ago (None: still in flight, or taken)."""
        taken, after = self._store.take_direct(
            node.key, now_ms=now, stale_before_ms=now - SUBMIT_IN_FLIGHT_MS + 1
        )
        return after if taken else None

    def _unhold(self, node: Job, now: int, paused: Collection[str]) -> Job | None:
        """The node after lifting its hold (None if another resume lifted it first). A pending
        root due within the direct window becomes the resume's to send, unless its queue is
        paused."""
        make_direct = (
            node.status is Status.PENDING
            and place(node.due_ms, now, queue_paused=node.queue in paused).where is Where.SEND
        )
        unheld, after = self._nodes.unhold_node(
            node.key,
            make_direct=make_direct,
            expires_at_s=now // 1000 + self._retention_s if make_direct else None,
        )
        return after if unheld else None


def _for_catch_up(node: Job, now: int, paused: Collection[str]) -> bool:
    """A pending node (not direct) that nothing but a queue's catch-up would send: a child
    released while its queue was paused (children are never pending otherwise), or a root due
    soon on a paused queue, whose due time may lie below the catch-up's range."""
    assert node.dag is not None
    child = node.dag.released_at_ms is not None
    return child or place(node.due_ms, now, queue_paused=node.queue in paused).where is Where.HOLD


def _held(node: Job) -> bool:
    return node.dag is not None and node.dag.held
