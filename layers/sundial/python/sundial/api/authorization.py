"""Per-queue authorization of every route: one middleware and one table saying, for each route,
which permission it needs and where its queue comes from (sundial.access has the model).

The middleware runs after request validation and before the route, so a 403 changes nothing.
A route with no entry in ROUTE_RULES cannot be registered (build_resolver checks), so a new
route cannot forget its check.

Routes addressed by id (`/jobs/{id}`, `/dags/{id}`, `/schedules/{id}`) need the queue of the item
they address. A caller allowed the permission on every queue (the default: the stack's own
account has every permission) is let through without reading it; any other caller costs one
read of the item first (the queue of a job, DAG or schedule never changes, so the read cannot
go stale before the write). An unknown id answers 404 as it would without the check. The item
read is kept for the route (`authorized_item`), so a GET answers from it and reads it once.

A schedule's id can be derived by anyone from its queue and idempotency key
(sundial.model.schedule), so a 403 for it would tell a stranger that the queue has a schedule
with that key. A caller with no permission at all on a schedule's queue is answered as if the
schedule did not exist (404, the same message); one with some permission on the queue (its team)
gets the 403 naming what it lacks. Job and DAG ids are random: their 403s stay, which say what
to ask for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, Route
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from sundial.access import Caller, Permission
from sundial.errors import Forbidden, ScheduleNotFound, SundialError
from sundial.wiring import Dependencies, dependencies

_Item = TypeVar("_Item")

# Where a route's queue(s) come from: its validated arguments (path parameters and body model)
# and, for routes addressed by id, the item they name.
QueueLocator = Callable[[dict[str, Any], Dependencies], Iterable[str]]


def _no_queue(args: dict[str, Any], _: Dependencies) -> Iterable[str]:
    """A listing: it names no queue, and shows only those the caller has the permission on
    (the route asks `permitted_queues`)."""
    return []


def _named_queue(args: dict[str, Any], _: Dependencies) -> Iterable[str]:
    """The `queue` argument: a path parameter, or a per-queue listing's query parameter."""
    return [args["queue"]]


def _body_queue(args: dict[str, Any], _: Dependencies) -> Iterable[str]:
    return [args["request"].queue]


def _batch_queues(args: dict[str, Any], _: Dependencies) -> Iterable[str]:
    return [job.queue for job in args["batch"].jobs]


def _dag_body_queues(args: dict[str, Any], _: Dependencies) -> Iterable[str]:
    return [node.queue for node in args["request"].nodes.values()]


# For a route addressed by id: reads the item the id names, and says its queues.
ItemLocator = Callable[[dict[str, Any], Dependencies], tuple[Any, Iterable[str]]]


def _job_item(args: dict[str, Any], deps: Dependencies) -> tuple[Any, Iterable[str]]:
    job = deps.jobs.get(args["job_id"])
    return job, [job.queue]


def _cancelled_job_item(args: dict[str, Any], deps: Dependencies) -> tuple[Any, Iterable[str]]:
    """A job's cancel reaches, for a DAG node whose DAG cancels descendants, every node
    downstream of it, on whatever queue: the caller needs the permission on those queues too
    (sundial.services.dag_progress, "Who may start a cascade")."""
    job = deps.jobs.get(args["job_id"])
    return job, [job.queue, *deps.dag_progress.cascade_queues(job)]


def _dag_item(args: dict[str, Any], deps: Dependencies) -> tuple[Any, Iterable[str]]:
    dag = deps.dags.get(args["dag_id"])
    return dag, [node.queue for node in dag.nodes]


def _schedule_item(args: dict[str, Any], deps: Dependencies) -> tuple[Any, Iterable[str]]:
    schedule = deps.schedules.find(args["schedule_id"])
    return schedule, [schedule.queue]


@dataclass(frozen=True)
class RouteRule:
    permission: Permission
    queues: QueueLocator = _no_queue
    # A route addressed by id finds its queues by reading the item instead (skipped for a
    # caller allowed on every queue).
    item: ItemLocator | None = None
    # For items whose ids others can derive: the not-found error a caller with no permission
    # at all on the item's queue gets instead of a 403 (see the module docstring).
    unknown: Callable[[dict[str, Any]], SundialError] | None = None


_READ, _SUBMIT, _CONTROL, _WORK, _ADMIN = (
    Permission.READ,
    Permission.SUBMIT,
    Permission.CONTROL,
    Permission.WORK,
    Permission.ADMIN,
)


def _job(permission: Permission) -> RouteRule:
    return RouteRule(permission, item=_job_item)


def _dag(permission: Permission) -> RouteRule:
    return RouteRule(permission, item=_dag_item)


def _schedule(permission: Permission) -> RouteRule:
    return RouteRule(
        permission,
        item=_schedule_item,
        unknown=lambda args: ScheduleNotFound(args["schedule_id"]),
    )


# (method, route as in openapi.json) -> what it needs. tests/handlers/test_authorization.py
# drives every entry with an allowed and a denied caller.
ROUTE_RULES: dict[tuple[str, str], RouteRule] = {
    ("POST", "/jobs"): RouteRule(_SUBMIT, _body_queue),
    ("POST", "/jobs/batch"): RouteRule(_SUBMIT, _batch_queues),
    ("GET", "/jobs/{job_id}"): _job(_READ),
    # A DAG node's cancel may cascade to its descendants: control on their queues too.
    ("DELETE", "/jobs/{job_id}"): RouteRule(_CONTROL, item=_cancelled_job_item),
    ("POST", "/jobs/{job_id}/retry"): _job(_CONTROL),
    ("POST", "/jobs/{job_id}/pause"): _job(_CONTROL),
    ("POST", "/jobs/{job_id}/resume"): _job(_CONTROL),
    # A change keeps the job's queue (ChangeJob has no queue), so the check stays true.
    ("PATCH", "/jobs/{job_id}"): _job(_CONTROL),
    ("POST", "/jobs/{job_id}/run-now"): _job(_CONTROL),
    ("POST", "/jobs/{job_id}/heartbeat"): _job(_WORK),
    ("POST", "/jobs/{job_id}/ack"): _job(_WORK),
    ("POST", "/jobs/{job_id}/nack"): _job(_WORK),
    ("POST", "/queues/{queue}/lease"): RouteRule(_WORK, _named_queue),
    ("GET", "/queues"): RouteRule(_READ, _no_queue),
    ("GET", "/queues/{queue}"): RouteRule(_READ, _named_queue),
    ("GET", "/queues/{queue}/jobs"): RouteRule(_READ, _named_queue),
    ("POST", "/queues/{queue}/pause"): RouteRule(_ADMIN, _named_queue),
    ("POST", "/queues/{queue}/resume"): RouteRule(_ADMIN, _named_queue),
    ("GET", "/queues/{queue}/dead"): RouteRule(_ADMIN, _named_queue),
    ("DELETE", "/queues/{queue}/dead"): RouteRule(_ADMIN, _named_queue),
    ("POST", "/queues/{queue}/dead/replay"): RouteRule(_ADMIN, _named_queue),
    ("POST", "/dags"): RouteRule(_SUBMIT, _dag_body_queues),
    # Read on the queue listed; DAGs also using a queue the caller may not read are left out.
    ("GET", "/dags"): RouteRule(_READ, _named_queue),
    ("GET", "/dags/{dag_id}"): _dag(_READ),
    ("DELETE", "/dags/{dag_id}"): _dag(_CONTROL),
    ("POST", "/dags/{dag_id}/pause"): _dag(_CONTROL),
    ("POST", "/dags/{dag_id}/resume"): _dag(_CONTROL),
    ("POST", "/schedules"): RouteRule(_SUBMIT, _body_queue),
    ("GET", "/schedules"): RouteRule(_READ, _named_queue),
    ("GET", "/schedules/{schedule_id}"): _schedule(_READ),
    ("DELETE", "/schedules/{schedule_id}"): _schedule(_CONTROL),
    ("PATCH", "/schedules/{schedule_id}"): _schedule(_CONTROL),
    ("GET", "/schedules/{schedule_id}/runs"): _schedule(_READ),
    ("POST", "/schedules/{schedule_id}/pause"): _schedule(_CONTROL),
    ("POST", "/schedules/{schedule_id}/resume"): _schedule(_CONTROL),
}


def rule_of(route: Route) -> RouteRule | None:
    return ROUTE_RULES.get((route.method.upper(), route.openapi_path))


def check_every_route_has_a_rule(routes: Iterable[Route]) -> None:
    """Fail the cold start (and every test) if a registered route has no rule."""
    missing = sorted(f"{r.method} {r.openapi_path}" for r in routes if rule_of(r) is None)
    if missing:
        raise LookupError(
            f"routes without an authorization rule: {', '.join(missing)}; add them to "
            "sundial.api.authorization.ROUTE_RULES"
        )


def authorize(caller: Caller | None, rule: RouteRule, args: dict[str, Any]) -> Any:
    """Raise Forbidden unless `caller` has the rule's permission on every queue the request
    touches. Returns the item read to find them (None if nothing was read)."""
    if caller is None:
        raise Forbidden(
            "the request carries no IAM caller identity: sign it with SigV4 (AWS), or name a "
            "caller with the X-Sundial-Caller header (local runtime)"
        )
    deps = dependencies()
    policy, queues = deps.settings.access, deps.settings.queue_urls.keys()
    if rule.item is not None and policy.allows_everywhere(caller, rule.permission, queues):
        return None
    item, touched = rule.item(args, deps) if rule.item else (None, rule.queues(args, deps))
    for queue in sorted(set(touched)):
        if not policy.allows(caller, rule.permission, queue):
            if rule.unknown is not None and not policy.allows_anything(caller, queue):
                raise rule.unknown(args)
            raise Forbidden(
                f"{caller.described()} lacks '{rule.permission}' on queue '{queue}'",
                queue=queue,
                permission=rule.permission.value,
            )
    return item


# The item authorization read for the request being handled (see the module docstring). A
# context variable, set around the route only: a router's `context` belongs to the last
# resolver that included it, and one process (the local runtime) builds several.
_authorized_item: ContextVar[Any] = ContextVar("authorized_item", default=None)


def authorization_middleware(app: ApiGatewayResolver, next_middleware: NextMiddleware) -> Any:
    """Powertools middleware: runs after validation (the route's arguments are parsed)."""
    rule = rule_of(app.context["_route"])
    if rule is None:  # Powertools' own not-found route (every route has a rule)
        return next_middleware(app)
    context = app.current_event.get("requestContext") or {}
    caller = Caller.from_request_context(context)
    item = authorize(caller, rule, app.context.get("_route_args", {}))
    token = _authorized_item.set(item)
    try:
        return next_middleware(app)
    finally:
        _authorized_item.reset(token)


def authorized_item(kind: type[_Item]) -> _Item | None:
    """The `kind` item this request's authorization read (for a caller not allowed on every
    queue), so the route need not read it again; None if it read none."""
    item = _authorized_item.get()
    return item if isinstance(item, kind) else None


def permitted_queues(event: Mapping[str, Any], permission: Permission) -> list[str]:
    """The deployment's queues the caller of `event` has `permission` on: what a listing
    route shows (the middleware has already refused a request with no caller)."""
    caller = Caller.from_request_context(event.get("requestContext") or {})
    if caller is None:
        return []
    settings = dependencies().settings
    return [q for q in sorted(settings.queue_urls) if settings.access.allows(caller, permission, q)]
