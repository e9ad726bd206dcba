"""What a DAG is: the submitted request (nodes, edges, validation), its status, and the
view GET /dags/{id} answers. Pure data; the graph checks are in model.dag_graph."""

from __future__ import annotations

from collections.abc import Collection
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

from sundial.ids import DagKey
from sundial.model.job import (
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
from sundial.retry import RetryPolicy, integral

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

    _integral = integral("max_attempts")

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

    _integral = integral("delay_seconds")

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
