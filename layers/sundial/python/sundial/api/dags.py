"""The DAG routes (served by the `dags` Lambda) and their response bodies."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, Field

from sundial.access import Permission
from sundial.api.authorization import authorized_item, permitted_queues
from sundial.api.models import AttemptErrorView, ErrorBody, _time
from sundial.api.routes import (
    _INVALID,
    RATE_LIMITED,
    TOO_LARGE_FOR_QUEUE,
    _documented,
    _json,
    metrics,
    request_id,
)
from sundial.clock import to_rfc3339
from sundial.model.dag import MAX_DAG_NODES, DagStatus, DagView, SubmitDag
from sundial.model.job import Job, OnFailure, ParentResults, Status
from sundial.services.cursors import MAX_LISTING_PAGE
from sundial.wiring import dependencies

DagId = Annotated[str, Path(description="The DAG id returned by POST /dags", max_length=100)]

dags_router = Router()  # type: ignore[no-untyped-call]

_UNKNOWN = _documented(ErrorBody, "Unknown DAG (or all its nodes have expired)")


class DagNodeView(BaseModel):
    id: str = Field(description="The node's job id: GET /jobs/{id} has its payload and result")
    queue: str
    status: Status
    depends_on: list[str]
    attempts: int
    max_attempts: int
    released_at: str | None = Field(
        default=None, description="When its parents had all finished and it was sent"
    )
    queued_at: str | None = None
    started_at: str | None = Field(default=None, description="Start of the latest attempt")
    finished_at: str | None = None
    cancelled_at: str | None = None
    paused: bool = Field(default=False, description="Held by POST /dags/{id}/pause")
    last_error: AttemptErrorView | None = None

    @classmethod
    def of(cls, job: Job) -> DagNodeView:
        assert job.dag is not None
        return cls(
            id=job.id,
            queue=job.queue,
            status=job.status,
            depends_on=[name for name, _ in job.dag.parents],
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            released_at=_time(job.dag.released_at_ms),
            queued_at=_time(job.queued_at_ms),
            started_at=_time(job.started_at_ms),
            finished_at=_time(job.finished_at_ms),
            cancelled_at=_time(job.cancelled_at_ms),
            paused=job.dag.held,
            last_error=AttemptErrorView.of(job.last_error) if job.last_error else None,
        )


class DagDetail(BaseModel):
    id: str
    name: str
    status: DagStatus = Field(
        description="running, paused, succeeded (every node did), failed (all finished, one "
        "or more dead) or cancelled (all finished, one or more cancelled, none dead)"
    )
    on_failure: OnFailure
    parent_results: ParentResults
    run_at: str = Field(description="When the roots were due")
    created_at: str
    finished_at: str | None = Field(default=None, description="When the last node finished")
    counts: dict[Status, int] = Field(description="Nodes per status")
    nodes: dict[str, DagNodeView]

    @classmethod
    def of(cls, view: DagView) -> DagDetail:
        link = view.link
        counts: dict[Status, int] = {}
        for node in view.nodes:
            counts[node.status] = counts.get(node.status, 0) + 1
        return cls(
            id=view.id,
            name=link.dag_name,
            status=view.status,
            on_failure=link.on_failure,
            parent_results=link.parent_results,
            run_at=to_rfc3339(view.key.due_ms),
            created_at=to_rfc3339(view.nodes[0].created_at_ms),
            finished_at=_time(view.finished_at_ms),
            counts=counts,
            nodes={node.dag.node: DagNodeView.of(node) for node in view.nodes if node.dag},
        )


@dags_router.post(
    "/dags",
    summary="Submit a DAG",
    description=f"Up to {MAX_DAG_NODES} nodes. Roots run at run_at (default now); every other "
    "node runs once all the nodes it depends on have succeeded. Invalid input (an unknown or "
    "self reference, a cycle, an unknown queue, too many nodes) is a 400 and writes nothing; "
    "so is a queue's quota (413, 429: each node counts on its queue).",
    tags=["dags"],
    responses={
        201: _documented(DagDetail, "Created"),
        400: _INVALID,
        413: TOO_LARGE_FOR_QUEUE,
        429: RATE_LIMITED,
        503: _documented(ErrorBody, "AWS was unavailable; the DAG may be partly written, retry"),
    },
)
def submit_dag(request: SubmitDag) -> Response[str]:
    view = dependencies().dags.submit(request, correlation_id=request_id(dags_router))
    metrics.add_metric(name="DagsSubmitted", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="DagNodesSubmitted", unit=MetricUnit.Count, value=len(view.nodes))
    return _json(HTTPStatus.CREATED, DagDetail.of(view))


class DagSummary(BaseModel):
    id: str
    name: str
    status: DagStatus
    run_at: str = Field(description="When the roots were due")
    created_at: str
    finished_at: str | None = None
    queues: list[str] = Field(description="The queues its nodes run on")
    counts: dict[Status, int] = Field(description="Nodes per status")

    @classmethod
    def of(cls, view: DagView) -> DagSummary:
        detail = DagDetail.of(view)
        return cls(
            id=detail.id,
            name=detail.name,
            status=detail.status,
            run_at=detail.run_at,
            created_at=detail.created_at,
            finished_at=detail.finished_at,
            queues=sorted({node.queue for node in view.nodes}),
            counts=detail.counts,
        )


class DagPage(BaseModel):
    items: list[DagSummary] = Field(description="Oldest first; GET /dags/{id} has the nodes")
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null at the end. A page may be short "
        "before the end: DAGs that also use a queue the caller may not read are left out"
    )


@dags_router.get(
    "/dags",
    summary="List a queue's DAGs",
    description="Every DAG with a node on the queue, oldest first, with its status and node "
    "counts, a page at a time. A page costs one query of the queue's DAG index and one range "
    "query of each DAG's nodes. A DAG that also uses a queue the caller may not read is left "
    "out, as GET /dags/{id} would refuse it. DAGs submitted before the index existed appear "
    "once the deployment's backfill has run (docs/deploy.md, Upgrading).",
    tags=["dags"],
    responses={
        200: _documented(DagPage, "A page"),
        400: _INVALID,
        404: _documented(ErrorBody, "Unknown queue"),
    },
)
def list_dags(
    queue: Annotated[str, Query(min_length=1, max_length=40, description="A queue's name")],
    limit: Annotated[int, Query(ge=1, le=MAX_LISTING_PAGE, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2_000, description="From next_cursor")] = None,
) -> DagPage:
    readable = permitted_queues(dags_router.current_event, Permission.READ)
    views, next_cursor = dependencies().dags.of_queue(
        queue, readable=readable, limit=limit, cursor=cursor
    )
    return DagPage(items=[DagSummary.of(view) for view in views], next_cursor=next_cursor)


@dags_router.get(
    "/dags/<dag_id>",
    summary="Get a DAG",
    description="Its overall status and every node's status, attempts and times.",
    tags=["dags"],
    responses={200: _documented(DagDetail, "The DAG"), 400: _INVALID, 404: _UNKNOWN},
)
def get_dag(dag_id: DagId) -> DagDetail:
    return DagDetail.of(authorized_item(DagView) or dependencies().dags.get(dag_id))


@dags_router.delete(
    "/dags/<dag_id>",
    summary="Cancel a DAG",
    description="Cancels every node that is not finished or running (a running node runs "
    "on, and releases nothing). Repeating it is harmless.",
    tags=["dags"],
    responses={200: _documented(DagDetail, "The DAG, cancelled"), 400: _INVALID, 404: _UNKNOWN},
)
def cancel_dag(dag_id: DagId) -> DagDetail:
    view = dependencies().dags.cancel(dag_id)
    metrics.add_metric(name="DagsCancelled", unit=MetricUnit.Count, value=1)
    return DagDetail.of(view)


@dags_router.post(
    "/dags/<dag_id>/pause",
    summary="Pause a DAG",
    description="No node is released until the DAG resumes: blocked nodes stay blocked even "
    "when their parents finish, and roots not yet sent wait. Nodes already released run on, "
    "and their successes are counted. Repeating it is harmless.",
    tags=["dags"],
    responses={
        200: _documented(DagDetail, "The DAG, paused"),
        400: _INVALID,
        404: _UNKNOWN,
        409: _documented(ErrorBody, "The DAG has finished"),
    },
)
def pause_dag(dag_id: DagId) -> DagDetail:
    view = dependencies().dags.pause(dag_id)
    metrics.add_metric(name="DagsPaused", unit=MetricUnit.Count, value=1)
    return DagDetail.of(view)


@dags_router.post(
    "/dags/<dag_id>/resume",
    summary="Resume a DAG",
    description="Releases the nodes whose parents finished while it was paused and sends "
    "its roots that are due. Repeating it is harmless (it also re-sends a node whose "
    "release was cut short by a failure).",
    tags=["dags"],
    responses={
        200: _documented(DagDetail, "The DAG, running again"),
        400: _INVALID,
        404: _UNKNOWN,
        503: _documented(ErrorBody, "AWS was unavailable; repeat the resume"),
    },
)
def resume_dag(dag_id: DagId) -> DagDetail:
    view = dependencies().dags.resume(dag_id)
    metrics.add_metric(name="DagsResumed", unit=MetricUnit.Count, value=1)
    return DagDetail.of(view)
