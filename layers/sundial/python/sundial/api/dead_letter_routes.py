"""Dead letters per queue: browse, replay, purge (served by the jobs function)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.metrics import MetricUnit

from sundial.api.models import (
    DeadLetterPage,
    DeadLetterView,
    ErrorBody,
    PurgeResult,
    ReplayRequest,
    ReplayResult,
)
from sundial.api.routes import _INVALID, RATE_LIMITED, _documented, metrics, time_query
from sundial.services.dead_letters import MAX_PER_REQUEST, DeadLetterFilter
from sundial.store.dead_letters import MAX_PAGE
from sundial.wiring import dependencies

QueueName = Annotated[str, Path(description="A queue declared in cdk.json", max_length=40)]
_UNKNOWN_QUEUE = _documented(ErrorBody, "Unknown queue")

dead_letters_router = Router()  # type: ignore[no-untyped-call]


@dead_letters_router.get(
    "/queues/<queue>/dead",
    summary="Browse a queue's dead letters",
    description="Oldest first, one page at a time. Every message that reached the queue's DLQ "
    "is here: jobs that ran out of attempts or failed with a non-retryable error, and "
    "messages SQS redrove after maxReceiveCount deliveries.",
    tags=["dead letters"],
    responses={200: _documented(DeadLetterPage, "A page"), 400: _INVALID, 404: _UNKNOWN_QUEUE},
)
def browse_dead_letters(  # noqa: PLR0917 - Powertools passes query parameters by name
    queue: QueueName,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page size")] = 50,
    cursor: Annotated[str | None, Query(max_length=2_000, description="From next_cursor")] = None,
    since: Annotated[str | None, Query(description="Dead at or after (RFC 3339)")] = None,
    until: Annotated[str | None, Query(description="Dead before (RFC 3339)")] = None,
    error_type: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> DeadLetterPage:
    which = DeadLetterFilter(
        since_ms=time_query("since", since),
        until_ms=time_query("until", until),
        error_type=error_type,
    )
    letters, next_cursor = dependencies().dead_letters.browse(
        queue, which, limit=limit, cursor=cursor
    )
    return DeadLetterPage(items=[DeadLetterView.of(x) for x in letters], next_cursor=next_cursor)


@dead_letters_router.post(
    "/queues/<queue>/dead/replay",
    summary="Replay dead letters",
    description="Re-queues the dead jobs among the queue's dead letters, all of them (no body, "
    "or {}) or those in a time range, of an error type or of one job, and removes their "
    "letters. "
    "Repeating a replay never runs a job twice: a job that is no longer dead is skipped. On a "
    "queue with a max_submissions_per_second each re-queued job counts as a submission: a "
    "request stops with `more` when the second's window is full (a 429 if it re-queued "
    "nothing).",
    tags=["dead letters"],
    responses={
        200: _documented(ReplayResult, "Replayed"),
        400: _INVALID,
        404: _UNKNOWN_QUEUE,
        429: RATE_LIMITED,
    },
)
def replay_dead_letters(queue: QueueName, request: ReplayRequest | None = None) -> ReplayResult:
    request = request or ReplayRequest()  # no body: every dead letter, as with {}
    outcome = dependencies().dead_letters.replay(queue, request.which(), limit=request.limit)
    metrics.add_metric(
        name="DeadLettersReplayed", unit=MetricUnit.Count, value=len(outcome.replayed)
    )
    return ReplayResult(
        replayed=outcome.replayed,
        skipped=outcome.skipped,
        unreplayable=outcome.unreplayable,
        more=outcome.more,
        in_flight=outcome.in_flight,
    )


@dead_letters_router.delete(
    "/queues/<queue>/dead",
    summary="Purge old dead letters",
    description="Deletes the letters that died before older_than (the jobs themselves stay "
    "until their retention ends).",
    tags=["dead letters"],
    responses={200: _documented(PurgeResult, "Purged"), 400: _INVALID, 404: _UNKNOWN_QUEUE},
)
def purge_dead_letters(
    queue: QueueName,
    older_than: Annotated[str, Query(description="Purge letters dead before this (RFC 3339)")],
    limit: Annotated[int, Query(ge=1, le=MAX_PER_REQUEST)] = MAX_PER_REQUEST,
) -> PurgeResult:
    before = time_query("older_than", older_than)
    assert before is not None
    outcome = dependencies().dead_letters.purge(queue, before_ms=before, limit=limit)
    return PurgeResult(purged=outcome.purged, more=outcome.more)
