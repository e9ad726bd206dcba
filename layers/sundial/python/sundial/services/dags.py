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
- **Crash safety.** Every step is a conditional write that may be repeated. A runner that dies
  after recording a success but before releasing the children (or sending them) leaves the
  parent's SQS message undeleted, so it is delivered again and the fence
  (lifecycle.Attempts.admit) runs this again: counts already made are refused, a child counted
  to 0 but never released is released, and a child this parent released but may not have sent
  is sent again (the child's own fence drops a duplicate).
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from ulid import ULID

from sundial.clock import Clock
from sundial.errors import Conflict, DagNotFound, InvalidInput, Unavailable
from sundial.ids import DagKey, JobKey
from sundial.model.dag_graph import check_graph, children_of
from sundial.model.job import (
    CANCELLABLE,
    FINISHED,
    DagLink,
    Job,
    OnFailure,
    ParentResults,
    Priority,
    Status,
)
from sundial.model.submission import (
    MAX_HORIZON_S,
    StrictInt,
    SubmitJob,
    check_payload_size,
    json_size,
    parse_rfc3339,
)
from sundial.retry import RetryPolicy
from sundial.services.jobs import JobService
from sundial.services.release import Releaser
from sundial.store.jobs import JobStore
from sundial.timing import DIRECT_WINDOW_MS
from sundial.transport.sender import Outgoing, QueueSender

# Why 100: a node's success makes one conditional write per child, inside the consumer's
# Lambda (a fan-out to 99 children is ~100 writes and one SQS batch per 10, well inside a
# consumer's timeout); a dying node's cancellation walks at most 99 descendants the same way;
# GET reads every node in one range query. The id format itself allows 65,535.
MAX_DAG_NODES = 100
# All node payloads together, so a request stays far inside Lambda's 6 MB invocation payload.
MAX_DAG_PAYLOAD_BYTES = 1_048_576
_NODE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
NodeName = Annotated[str, StringConstraints(pattern=_NODE_NAME)]


class DagNode(BaseModel):
    """One node: a job template plus the nodes it waits for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queue: str = Field(min_length=1, max_length=40, description="A queue declared in cdk.json")
    payload: Annotated[JsonValue, AfterValidator(check_payload_size)] = None
    depends_on: list[NodeName] = Field(
        default_factory=list,
        max_length=MAX_DAG_NODES - 1,
        description="Nodes that must succeed before this one runs; none for a root",
    )
    priority: Priority = Priority.NORMAL
    max_attempts: StrictInt | None = Field(
        default=None, ge=1, le=100, description="Attempts in all; default: the queue's"
    )
    retry: RetryPolicy | None = Field(
        default=None, description="Backoff between attempts; default: the queue's"
    )

    def job_request(self) -> SubmitJob:
        """The node as a job submission (its due time comes from the DAG's key)."""
        return SubmitJob(
            queue=self.queue,
            payload=self.payload,
            priority=self.priority,
            max_attempts=self.max_attempts,
            retry=self.retry,
            delay_seconds=0,
        )


class SubmitDag(BaseModel):
    """A DAG of jobs. Nodes run when every node they depend on has succeeded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[\x20-\x7e]+$")
    nodes: dict[NodeName, DagNode] = Field(
        min_length=1,
        max_length=MAX_DAG_NODES,
        description=f"Node name -> node, at most {MAX_DAG_NODES}",
    )
    on_failure: OnFailure = Field(
        default=OnFailure.CANCEL_DESCENDANTS,
        description="When a node dies: cancel everything downstream of it, or let its "
        "children run anyway once all their parents have finished",
    )
    parent_results: ParentResults = Field(
        default=ParentResults.REFERENCE,
        description="Each node's message names its parents' job ids; `inline` adds their "
        "results, up to 16 KiB in all per node",
    )
    run_at: str | None = Field(
        default=None, description="When the roots run, RFC 3339 with offset; default: now"
    )
    delay_seconds: StrictInt | None = Field(default=None, ge=0, le=MAX_HORIZON_S)

    @field_validator("nodes", mode="before")
    @classmethod
    def _node_limit(cls, value: object) -> object:
        if isinstance(value, dict) and len(value) > MAX_DAG_NODES:
            raise ValueError(f"at most {MAX_DAG_NODES} nodes; got {len(value)}")
        return value

    @model_validator(mode="after")
    def _valid(self) -> Self:
        if self.run_at is not None and self.delay_seconds is not None:
            raise PydanticCustomError(
                "run_at_or_delay",
                "give at most one of run_at or delay_seconds",
                {"field": "run_at"},
            )
        if self.run_at is not None:
            try:
                parse_rfc3339(self.run_at)
            except ValueError as error:
                raise PydanticCustomError("run_at", str(error), {"field": "run_at"}) from None
        size = sum(json_size(node.payload) for node in self.nodes.values())
        if size > MAX_DAG_PAYLOAD_BYTES:
            raise PydanticCustomError(
                "dag_payloads",
                "the payloads add up to {size} bytes; the limit is {limit}",
                {"field": "nodes", "size": size, "limit": MAX_DAG_PAYLOAD_BYTES},
            )
        return self

    def start_ms(self, now_ms: int) -> int:
        """When the roots are due: run_at (a past time means now), now + delay, or now."""
        if self.run_at is not None:
            return max(parse_rfc3339(self.run_at), now_ms)
        return now_ms + (self.delay_seconds or 0) * 1000


class DagStatus(StrEnum):
    RUNNING = "running"  # some node has not finished
    PAUSED = "paused"  # ... and the DAG is paused: no node is released until it resumes
    SUCCEEDED = "succeeded"  # every node succeeded
    FAILED = "failed"  # every node finished, and one or more died
    CANCELLED = "cancelled"  # every node finished, one or more cancelled, none dead


def dag_status(statuses: Collection[Status], *, paused: bool = False) -> DagStatus:
    """A DAG's overall status from its nodes' statuses."""
    if not set(statuses) <= FINISHED:
        return DagStatus.PAUSED if paused else DagStatus.RUNNING
    if set(statuses) == {Status.SUCCEEDED}:
        return DagStatus.SUCCEEDED
    return DagStatus.FAILED if Status.DEAD in statuses else DagStatus.CANCELLED


@dataclass(frozen=True, slots=True)
class DagView:
    """A DAG as read from its nodes (the nodes are the only record of it)."""

    key: DagKey
    nodes: list[Job]  # in node order

    @property
    def id(self) -> str:
        return self.key.dag_id

    @property
    def link(self) -> DagLink:
        link = self.nodes[0].dag
        assert link is not None
        return link

    @property
    def status(self) -> DagStatus:
        held = any(node.dag is not None and node.dag.held for node in self.nodes)
        return dag_status({node.status for node in self.nodes}, paused=held)

    @property
    def finished_at_ms(self) -> int | None:
        if self.status not in (DagStatus.SUCCEEDED, DagStatus.FAILED, DagStatus.CANCELLED):
            return None
        return max(node.finished_at_ms or node.cancelled_at_ms or 0 for node in self.nodes)


class DagProgress:
    """Moves a DAG on when one of its nodes finishes. Called by lifecycle.Attempts (both
    runners end attempts there) and, for DELETE /jobs/{id} on a node, by JobService."""

    def __init__(
        self,
        *,
        store: JobStore,
        sender: QueueSender,
        clock: Clock,
        retention_days: int,
        inline_results_bytes: int,
        releaser: Releaser | None = None,
    ) -> None:
        """`releaser`: what holds a node of a paused queue for the queue's catch-up (and reads
        which queues are paused); without it every queue counts as running."""
        self._store = store
        self._sender = sender
        self._clock = clock
        self._retention_s = retention_days * 86_400
        self._inline_bytes = inline_results_bytes
        self._releaser = releaser

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

    def paused_queues(self) -> frozenset[str]:
        """The queues paused now (one read of their states), whose nodes wait for them."""
        return self._releaser.paused_queues() if self._releaser is not None else frozenset()

    def dispatch(self, nodes: Sequence[Job]) -> None:
        """Hand released nodes on: a queued one (released on a running queue) is sent to SQS;
        a pending one (its queue was paused when it was released) goes through the releaser
        like any due job of an API call, which records it for that queue's catch-up while the
        queue is still paused, or else sends it itself. Raises Unavailable if SQS refused any:
        the caller's work is then repeated (an SQS redelivery, or the client's retry), and the
        repeat dispatches them again."""
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
        released, after = self._store.release_node(
            node.key,
            token=self._token(),
            now_ms=self._clock.now_ms(),
            released_by=released_by,
            results_json=self._gather_results(node, known or {}),
            queue_paused=node.queue in paused,
        )
        return after if released else None

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
        self.dispatch(released)

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
            written, child = self._store.count_finished_parent(
                child_key, parent=me, failed=failed, expires_at_s=self._expiry()
            )
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
        pending, for its queue's catch-up."""
        assert parent.dag is not None
        inline = parent.dag.parent_results is ParentResults.INLINE
        return self._store.release_node(
            child_key,
            token=self._token(),
            now_ms=self._clock.now_ms(),
            last_parent=parent.dag.index,
            failed=failed,
            released_by=parent.dag.index,
            results_json=self._results_text(known) if inline and known else None,
            unless_queues=paused,
            queue_paused=queue_paused,
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
        written, counted = self._store.count_finished_parent(
            child.key, parent=parent.dag.index, failed=failed, expires_at_s=self._expiry()
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

    def _expiry(self) -> int:
        """A blocked node expires this long after its last parent finished, unless released."""
        return self._clock.now_ms() // 1000 + self._retention_s

    def _token(self) -> str:
        return f"dag:{ULID.from_timestamp(self._clock.now_ms() / 1000)}"


class DagService:
    """POST, GET and DELETE /dags: the domain behind the DAG routes."""

    def __init__(
        self,
        *,
        store: JobStore,
        jobs: JobService,
        progress: DagProgress,
        clock: Clock,
        shard_count: int,
        retention_days: int,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._progress = progress
        self._clock = clock
        self._shard_count = shard_count
        self._retention_s = retention_days * 86_400
        self._rng = rng or random.Random()

    def submit(self, request: SubmitDag) -> DagView:
        """Validate the whole DAG, write its nodes, and send the roots that are due now.
        Invalid input raises InvalidInput before anything is written."""
        now = self._clock.now_ms()
        check_graph({name: node.depends_on for name, node in request.nodes.items()})
        start = request.start_ms(now)
        if start > now + MAX_HORIZON_S * 1000:
            raise InvalidInput("run_at", "more than 366 days ahead")
        for name, node in request.nodes.items():
            self._jobs.check(node.job_request(), now, f"nodes.{name}.")
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
            if start <= now + DIRECT_WINDOW_MS
            else set()
        )
        nodes = self._build(request, key, now, paused)
        # Blocked nodes first: if the submit dies part-way, nothing written can run, and every
        # item written expires (a root due later is written only once all the others exist).
        self._store.put_new([node for node in nodes if node.status is Status.BLOCKED])
        roots = [node for node in nodes if node.status is not Status.BLOCKED]
        if self._jobs.dispatch_direct(self._jobs.write_new(roots, now)):
            raise Unavailable(f"DAG {key.dag_id}: a root could not be handed to SQS; retry")
        return DagView(key, nodes)

    def _build(
        self, request: SubmitDag, key: DagKey, now: int, paused: Collection[str]
    ) -> list[Job]:
        index = {name: i for i, name in enumerate(request.nodes)}
        children = children_of({name: node.depends_on for name, node in request.nodes.items()})
        jobs = []
        for i, (name, spec) in enumerate(request.nodes.items()):
            job = self._jobs.new_job(
                spec.job_request(), now, key=key.node_key(i), held=spec.queue in paused
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
                # The DAG owns it (the sweeper skips direct items); unreleased, it expires.
                job.status, job.direct = Status.BLOCKED, True
                job.expires_at_s = key.due_ms // 1000 + self._retention_s
            jobs.append(job)
        return jobs

    def get(self, dag_id: str) -> DagView:
        key = DagKey.from_dag_id(dag_id)
        nodes = self._store.dag_nodes(key)
        if not nodes:
            raise DagNotFound(dag_id)
        return DagView(key, nodes)

    def cancel(self, dag_id: str) -> DagView:
        """Cancel every node not yet finished or running. Blocked nodes go first, so a node
        that succeeds meanwhile finds its children cancelled and releases nothing. A running
        node runs on; its message, like any cancelled job's, is skipped if not yet started."""
        view = self.get(dag_id)
        now = self._clock.now_ms()
        for node in sorted(view.nodes, key=lambda n: n.status is not Status.BLOCKED):
            if node.status in CANCELLABLE:
                self._store.cancel(
                    node.key, now_ms=now, expires_at_s=now // 1000 + self._retention_s
                )
        return self.get(dag_id)

    def pause(self, dag_id: str) -> DagView:
        """Hold every node not yet released (blocked, or a root still pending): no node is
        released until the DAG resumes. Released nodes run on, and their successes are
        counted; nothing is lost. Pausing twice is harmless; a finished DAG is a 409."""
        view = self.get(dag_id)
        if view.status not in (DagStatus.RUNNING, DagStatus.PAUSED):
            raise Conflict(f"DAG is {view.status}; only a running DAG can be paused")
        for node in view.nodes:
            if node.status in (Status.BLOCKED, Status.PENDING) and not _held(node):
                self._store.hold_node(node.key)
        return self.get(dag_id)

    def resume(self, dag_id: str) -> DagView:
        """Release what became ready while the DAG was paused, and dispatch its roots that are
        due. Also a repair: a node whose release or send was cut short is sent now. Resuming a
        DAG that is not paused does exactly that repair, and is otherwise harmless. A node on
        a paused queue is not sent: it is recorded for that queue's catch-up instead."""
        view = self.get(dag_id)
        now = self._clock.now_ms()
        paused = self._progress.paused_queues()
        ready: list[Job] = []
        roots: list[Job] = []
        for node in view.nodes:
            current = self._unhold(node, now, paused) if _held(node) else node
            if current is None:
                continue
            if current.status is Status.PENDING and current.direct:
                roots.append(current)
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

    def _unhold(self, node: Job, now: int, paused: Collection[str]) -> Job | None:
        """The node after lifting its hold (None if another resume lifted it first). A pending
        root due within the direct window becomes the resume's to send, unless its queue is
        paused."""
        near = node.status is Status.PENDING and node.due_ms <= now + DIRECT_WINDOW_MS
        unheld, after = self._store.unhold_node(
            node.key, make_direct=near and node.queue not in paused
        )
        return after if unheld else None


def _for_catch_up(node: Job, now: int, paused: Collection[str]) -> bool:
    """A pending node (not direct) that nothing but a queue's catch-up would send: a child
    released while its queue was paused (children are never pending otherwise), or a root due
    soon on a paused queue, whose due time may lie below the catch-up's range."""
    assert node.dag is not None
    child = node.dag.released_at_ms is not None
    return child or (node.queue in paused and node.due_ms <= now + DIRECT_WINDOW_MS)


def _held(node: Job) -> bool:
    return node.dag is not None and node.dag.held
