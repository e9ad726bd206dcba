"""DAG workflows: jobs that run once the jobs they depend on have succeeded.

- **Submit** writes every node as a job item on one shard at one due time (ids.DagKey), so the
  DAG id addresses each node and one range query reads them all. Roots are ordinary jobs
  (sent at once when due within the direct window, else by the sweeper at their time). Every
  other node is `blocked`, with `waiting_on` = its number of parents.
- **A node succeeds**: each child counts it once, with a conditional `ADD waiting_on -1` that
  also records the parent in `done_parents` (`NOT contains(done_parents, :parent)`), so a
  duplicate success never counts twice. The one write that takes `waiting_on` to 0 releases the
  child (blocked → queued), and then its message is sent. A child with a single parent is
  counted and released in that one write, so it costs what an ordinary job costs.
- **A node dies** (or is cancelled with DELETE /jobs/{id}): with on_failure=cancel_descendants
  every node downstream of it is cancelled (each cancel write returns the node, whose children
  are next); with on_failure=continue it counts as finished for its children, which run once
  all their parents have finished and are told which parents failed.
- **Who may start a cascade.** A caller's DELETE /jobs/{id} on a node cancels, under
  cancel_descendants, nodes on other queues too; so the cancel needs `control` on the queues of
  every node downstream of it (`cascade_queues`), as DELETE /dags/{id} needs it on every queue
  of the DAG. The API checks that before the cancel writes anything (sundial.api.authorization:
  a 403 names the queue and changes nothing). Every node downstream counts, whatever its
  status: which of them the cascade reaches depends on states that change meanwhile (a running
  node stops it; a failed one, due for a retry, is cancelled). Under on_failure=continue a
  cancel cancels nothing else: its children move on as the DAG's submitter (who needed `submit`
  on all its queues) asked for when a node fails, exactly as on its consumer's failure.
- **Crash safety.** Every step is a conditional write that may be repeated. A runner that dies
  after recording a success but before releasing the children (or sending them) leaves the
  parent's SQS message undeleted, so it is delivered again and the fence
  (runs.attempts.Attempts.admit) runs this again: counts already made are refused, a child counted
  to 0 but never released is released, and a child this parent released but may not have sent
  is sent again (the child's own fence drops a duplicate).

This module is the progress engine (a node ends: its children move); services.dags submits,
reads, cancels, pauses and resumes whole DAGs.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from ulid import ULID

from sundial.clock import Clock
from sundial.errors import Unavailable
from sundial.ids import DagKey, JobKey
from sundial.model.job import (
    Job,
    OnFailure,
    ParentResults,
    Status,
)
from sundial.services.deferral import DeferredSends
from sundial.services.release import Releaser
from sundial.store.dag_nodes import DagNodeStore
from sundial.store.jobs import JobStore
from sundial.transport.sender import Outgoing, QueueSender


class DagProgress:
    """Moves a DAG on when one of its nodes finishes. Called by runs.attempts.Attempts (both
    runners end attempts there) and, for DELETE /jobs/{id} on a node, by JobService."""

    def __init__(
        self,
        *,
        store: JobStore,
        nodes: DagNodeStore,
        sender: QueueSender,
        clock: Clock,
        retention_days: int,
        inline_results_bytes: int,
        releaser: Releaser | None = None,
        deferral: DeferredSends | None = None,
    ) -> None:
        """`releaser`: what holds a node of a paused queue for the queue's catch-up (and reads
        which queues are paused). `deferral`, for a consumer Lambda, whose role may not write
        a queue's state: a node of a paused queue is released `queued` and `direct` and sent
        later by a timer (services.deferral). Without either, every queue counts as running."""
        self._store = store
        self._nodes = nodes
        self._sender = sender
        self._clock = clock
        self._retention_s = retention_days * 86_400
        self._inline_bytes = inline_results_bytes
        self._releaser = releaser
        self._deferral = deferral

    def node_succeeded(self, node: Job, result_json: str | None) -> None:
        """Count the node on each child; release and send the children it completes."""
        self._finish(node, failed=False, result_json=result_json or "null")

    def node_stopped(self, node: Job) -> None:
        """The node died or was cancelled: apply its DAG's on_failure rule."""
        if node.dag is None:
            return
        if node.dag.on_failure is OnFailure.CONTINUE:
            self._finish(node, failed=True, result_json=None)
        else:
            self._cancel_descendants(node)

    def cascade_queues(self, node: Job) -> frozenset[str]:
        """The queues a cancel of `node` may cancel nodes on (see "Who may start a cascade"):
        those of every node downstream of it, if its DAG cancels descendants; none otherwise.
        Costs one range query of the DAG's nodes, for a node with children only."""
        link = node.dag
        if link is None or link.on_failure is not OnFailure.CANCEL_DESCENDANTS or not link.children:
            return frozenset()
        nodes = {
            n.dag.index: n
            for n in self._nodes.dag_nodes(DagKey.from_dag_id(link.dag_id))
            if n.dag is not None
        }
        queues: set[str] = set()
        seen: set[int] = set()
        frontier = [index for index, _ in link.children]
        while frontier:
            index = frontier.pop()
            if index in seen:
                continue
            seen.add(index)
            child = nodes.get(index)
            if child is None or child.dag is None:
                continue  # expired: nothing left to cancel there
            queues.add(child.queue)
            frontier += [grandchild for grandchild, _ in child.dag.children]
        return frozenset(queues)

    def paused_queues(self) -> frozenset[str]:
        """The queues paused now (one read of their states), whose nodes wait for them."""
        if self._deferral is not None:
            return self._deferral.paused_queues()
        return self._releaser.paused_queues() if self._releaser is not None else frozenset()

    def dispatch(self, nodes: Sequence[Job], *, paused: frozenset[str] | None = None) -> None:
        """Hand released nodes on: a queued one (released on a running queue) is sent to SQS;
        a pending one (its queue was paused when it was released) goes through the releaser
        like any due job of an API call, which records it for that queue's catch-up while the
        queue is still paused, or else sends it itself. Raises Unavailable if SQS refused any:
        the caller's work is then repeated (an SQS redelivery, or the client's retry), and the
        repeat dispatches them again.
        With a deferral (a consumer), a node of one of the `paused` queues (read again if not
        given) gets a timer instead, and every other node is sent (services.deferral)."""
        if self._deferral is not None:
            ready = self._deferral.sendable(nodes)
            if paused is None and ready:
                paused = self.paused_queues()
            paused = paused or frozenset()
            self._deferral.defer([node for node in ready if node.queue in paused])
            self.send([node for node in ready if node.queue not in paused])
            return
        self.send([node for node in nodes if node.status is not Status.PENDING])
        held = [node for node in nodes if node.status is Status.PENDING]
        if held:
            assert self._releaser is not None  # only a releaser's paused queues make these
            refused = self._releaser.release(held, owned=False, by="dag").failed
            if refused:
                ids = ", ".join(node.id for node in refused)
                raise Unavailable(f"released DAG nodes could not be sent to SQS: {ids}")

    def send(self, nodes: Sequence[Job]) -> None:
        """Send released (queued) nodes to their queues. Raises Unavailable if SQS refused any:
        the caller's work is then repeated (an SQS redelivery, or the client's retry), and the
        repeat sends them again."""
        if not nodes:
            return
        now = self._clock.now_ms()
        outgoing = [Outgoing(node, attempt=node.attempts + 1, due_ms=now) for node in nodes]
        refused = self._sender.send(outgoing, now_ms=now)
        if refused:
            ids = ", ".join(message.job.id for message in refused)
            raise Unavailable(f"released DAG nodes could not be sent to SQS: {ids}")

    def release_ready(
        self,
        node: Job | None,
        *,
        paused: Collection[str],
        released_by: int | None = None,
        known: dict[str, str] | None = None,
    ) -> Job | None:
        """Release a blocked node whose parents have all finished (unless its DAG is paused):
        queued, or pending if its queue is one of the `paused` ones (see `dispatch`).
        Returns the node after the write, or None if it was not (or no longer) releasable.
        `known`: parents' results already at hand, {name: result JSON}."""
        if node is None or node.status is not Status.BLOCKED:
            return None
        dag = node.dag
        if dag is None or dag.waiting_on or dag.held:
            return None
        released, after = self._nodes.release_node(
            node.key,
            token=self._token(),
            now_ms=self._clock.now_ms(),
            released_by=released_by,
            results_json=self._gather_results(node, known or {}),
            **self._release_mode(node.queue in paused, paused),
        )
        return after if released else None

    def _release_mode(self, queue_paused: bool, paused: Collection[str]) -> dict[str, Any]:
        """How a release treats paused queues: with a releaser, a node of a paused queue is
        released pending (for the catch-up the releaser records it in); with a deferral (whose
        writes never read or name a node's queue), every node is released queued, and `direct`
        while any queue is paused, so no sweep sends one that `dispatch` defers."""
        if self._deferral is not None:
            return {"direct": bool(paused)}
        return {"queue_paused": queue_paused}

    # -- success (and failure under on_failure=continue) -----------------------------------

    def _finish(self, parent: Job, *, failed: bool, result_json: str | None) -> None:
        dag = parent.dag
        if dag is None or not dag.children:
            return
        key = DagKey.from_dag_id(dag.dag_id)
        paused = self.paused_queues()
        released = []
        for child_index, parent_count in dag.children:
            child = self._count(
                key.node_key(child_index), parent_count, parent, failed, result_json, paused=paused
            )
            if child is not None:
                released.append(child)
        self.dispatch(released, paused=paused)

    def _count(
        self,
        child_key: JobKey,
        parent_count: int,
        parent: Job,
        failed: bool,
        result_json: str | None,
        *,
        paused: frozenset[str],
    ) -> Job | None:
        """Count `parent` on one child. Returns the child if it is to be dispatched now."""
        assert parent.dag is not None
        me = parent.dag.index
        known = {} if result_json is None else {parent.dag.node: result_json}
        if parent_count == 1:  # the only parent: count and release in one write
            written, child = self._release_counting(child_key, parent, failed, known, paused=paused)
            if written:
                return child
        else:
            written, child = self._nodes.count_finished_parent(child_key, parent=me, failed=failed)
            if written:
                return self.release_ready(child, paused=paused, released_by=me, known=known)
        return self._repair(child, parent, failed, known, paused)

    def _release_counting(
        self,
        child_key: JobKey,
        parent: Job,
        failed: bool,
        known: dict[str, str],
        *,
        paused: frozenset[str] = frozenset(),
        queue_paused: bool = False,
    ) -> tuple[bool, Job | None]:
        """Count `parent`, the child's last parent, and release the child, in one write:
        refused for a child on one of the `paused` queues, or with `queue_paused` released as
        pending, for its queue's catch-up. (With a deferral: released queued, see
        `_release_mode`.)"""
        assert parent.dag is not None
        inline = parent.dag.parent_results is ParentResults.INLINE
        mode: dict[str, Any] = {"unless_queues": paused, "queue_paused": queue_paused}
        if self._deferral is not None:
            mode = self._release_mode(queue_paused, paused)
        return self._nodes.release_node(
            child_key,
            token=self._token(),
            now_ms=self._clock.now_ms(),
            last_parent=parent.dag.index,
            failed=failed,
            released_by=parent.dag.index,
            results_json=self._results_text(known) if inline and known else None,
            **mode,
        )

    def _repair(
        self,
        child: Job | None,
        parent: Job,
        failed: bool,
        known: dict[str, str],
        paused: frozenset[str],
    ) -> Job | None:
        """The write on `child` (shown as it was) was refused. Finish what a crashed or paused
        earlier pass left undone, or release a child of a paused queue as pending; anything
        else (cancelled, released by another parent, already run) needs nothing."""
        assert parent.dag is not None
        me = parent.dag.index
        if child is None or child.dag is None:
            return None  # expired, or never written
        if (
            child.status in (Status.QUEUED, Status.PENDING)
            and child.attempts == 0
            and child.dag.released_by == me
        ):
            # This parent released it and may have died before sending it, or before recording
            # it for its paused queue's catch-up (a pending child: only a release makes one).
            return child
        if child.status is not Status.BLOCKED:
            return None
        if me in child.dag.done_parents:  # counted, but the release was cut short
            return self.release_ready(child, paused=paused, released_by=me, known=known)
        return self._count_refused(child, parent, failed, known, paused)

    def _count_refused(
        self,
        child: Job,
        parent: Job,
        failed: bool,
        known: dict[str, str],
        paused: frozenset[str],
    ) -> Job | None:
        """Count `parent` on a blocked `child` whose count-and-release write was refused: by
        the pause of the child's queue (the same one write again, releasing it as pending) or
        of its DAG (count only: the DAG's resume releases it)."""
        assert parent.dag is not None and child.dag is not None
        if child.queue in paused and child.dag.waiting_on == 1 and not child.dag.held:
            written, released = self._release_counting(
                child.key, parent, failed, known, queue_paused=True
            )
            if written:
                return released
        written, counted = self._nodes.count_finished_parent(
            child.key, parent=parent.dag.index, failed=failed
        )
        if not written:
            return None
        return self.release_ready(counted, paused=paused, released_by=parent.dag.index, known=known)

    def _gather_results(self, child: Job, known: dict[str, str]) -> str | None:
        """The parents' results to inline in a released child's message, if it wants them."""
        dag = child.dag
        if dag is None or dag.parent_results is not ParentResults.INLINE:
            return None
        key = DagKey.from_dag_id(dag.dag_id)
        results = dict(known)
        for name, index in dag.parents:
            if name not in results and index not in dag.failed_parents:
                parent = self._store.get(key.node_key(index))
                if parent is not None and parent.status is Status.SUCCEEDED:
                    results[name] = parent.result_json or "null"
        ordered = {name: results[name] for name, _ in dag.parents if name in results}
        return self._results_text(ordered)

    def _results_text(self, results: dict[str, str]) -> str:
        """{name: result} as JSON, taking results in order while they fit the budget; a
        parent left out is passed by reference only (its job id)."""
        parts: list[str] = []
        size = 2
        for name, text in results.items():
            part = f"{json.dumps(name, ensure_ascii=False)}:{text}"
            added = len(part.encode()) + (1 if parts else 0)
            if size + added <= self._inline_bytes:
                parts.append(part)
                size += added
        return "{" + ",".join(parts) + "}"

    # -- failure ----------------------------------------------------------------------------

    def _cancel_descendants(self, node: Job) -> None:
        """Cancel everything downstream of `node`. Each cancel write returns the node it
        cancelled, whose children are next; a node found cancelled already (a repeat) is
        walked through too, in case the earlier pass stopped part-way."""
        assert node.dag is not None
        key = DagKey.from_dag_id(node.dag.dag_id)
        now = self._clock.now_ms()
        frontier = [index for index, _ in node.dag.children]
        seen: set[int] = set()
        while frontier:
            index = frontier.pop()
            if index in seen:
                continue
            seen.add(index)
            _, child = self._store.cancel(
                key.node_key(index), now_ms=now, expires_at_s=now // 1000 + self._retention_s
            )
            if child is not None and child.dag is not None and child.status is Status.CANCELLED:
                frontier += [grandchild for grandchild, _ in child.dag.children]

    def _token(self) -> str:
        return f"dag:{ULID.from_timestamp(self._clock.now_ms() / 1000)}"
