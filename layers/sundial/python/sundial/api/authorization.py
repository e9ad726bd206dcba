"""Per-queue authorization of every route: one middleware and one table saying, for each route,
which permission it needs (sundial.access.ROUTE_PERMISSIONS, plain data the CDK app reads too)
and where its queue comes from (sundial.access has the model).

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

Interleavings. Authorization (sundial.api.authorization) adds no write. A route addressed by id may
read the item first to learn its queue, then the route does what it always did (a DAG node's cancel
also reads its DAG's nodes, for the queues its cascade may reach). A job's, DAG node's or
schedule's queue is written once, when the item is created, and never changed, nor is a DAG's
shape, so whatever runs between the read and the route's own conditional writes cannot make the
check stale; a 403 is raised before the route runs, so it writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, Route
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from sundial.access import ROUTE_PERMISSIONS, Caller, Permission
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


@dataclass(frozen=True)
class _Where:
    """Where a route's queues come from (its permission is in ROUTE_PERMISSIONS)."""

    queues: QueueLocator = _no_queue
    item: ItemLocator | None = None
    unknown: Callable[[dict[str, Any]], SundialError] | None = None


_JOB, _DAG = _Where(item=_job_item), _Where(item=_dag_item)
_SCHEDULE = _Where(item=_schedule_item, unknown=lambda args: ScheduleNotFound(args["schedule_id"]))
_NAMED, _BODY = _Where(_named_queue), _Where(_body_queue)

# (method, route as in openapi.json) -> where its queues come from.
_WHERE: dict[tuple[str, str], _Where] = {
    ("POST", "/jobs"): _BODY,
    ("POST", "/jobs/batch"): _Where(_batch_queues),
    ("GET", "/jobs/{job_id}"): _JOB,
    # A DAG node's cancel may cascade to its descendants: their queues too.
    ("DELETE", "/jobs/{job_id}"): _Where(item=_cancelled_job_item),
    ("POST", "/jobs/{job_id}/retry"): _JOB,
    ("POST", "/jobs/{job_id}/pause"): _JOB,
    ("POST", "/jobs/{job_id}/resume"): _JOB,
    # A change keeps the job's queue (ChangeJob has no queue), so the check stays true.
    ("PATCH", "/jobs/{job_id}"): _JOB,
    ("POST", "/jobs/{job_id}/run-now"): _JOB,
    ("POST", "/jobs/{job_id}/heartbeat"): _JOB,
    ("POST", "/jobs/{job_id}/ack"): _JOB,
    ("POST", "/jobs/{job_id}/nack"): _JOB,
    ("POST", "/queues/{queue}/lease"): _NAMED,
    ("GET", "/queues"): _Where(_no_queue),
    ("GET", "/queues/{queue}"): _NAMED,
    ("GET", "/queues/{queue}/jobs"): _NAMED,
    ("POST", "/queues/{queue}/pause"): _NAMED,
    ("POST", "/queues/{queue}/resume"): _NAMED,
    ("GET", "/queues/{queue}/dead"): _NAMED,
    ("DELETE", "/queues/{queue}/dead"): _NAMED,
    ("POST", "/queues/{queue}/dead/replay"): _NAMED,
    ("POST", "/dags"): _Where(_dag_body_queues),
    # The queue listed; DAGs also using a queue the caller may not read are left out.
    ("GET", "/dags"): _NAMED,
    ("GET", "/dags/{dag_id}"): _DAG,
    ("DELETE", "/dags/{dag_id}"): _DAG,
    ("POST", "/dags/{dag_id}/pause"): _DAG,
    ("POST", "/dags/{dag_id}/resume"): _DAG,
    ("POST", "/schedules"): _BODY,
    ("GET", "/schedules"): _NAMED,
    ("GET", "/schedules/{schedule_id}"): _SCHEDULE,
    ("DELETE", "/schedules/{schedule_id}"): _SCHEDULE,
    ("PATCH", "/schedules/{schedule_id}"): _SCHEDULE,
    ("GET", "/schedules/{schedule_id}/runs"): _SCHEDULE,
    ("POST", "/schedules/{schedule_id}/pause"): _SCHEDULE,
    ("POST", "/schedules/{schedule_id}/resume"): _SCHEDULE,
}


def route_rules(
    permissions: Mapping[tuple[str, str], Permission], where: Mapping[tuple[str, str], _Where]
) -> dict[tuple[str, str], RouteRule]:
    """Each route's rule: its permission and where its queues come from. LookupError unless
    both tables name the same routes (a route with a permission but no way to find its queues,
    or the reverse, cannot start)."""
    if set(permissions) != set(where):
        odd = sorted(f"{m} {p}" for m, p in set(permissions) ^ set(where))
        raise LookupError(
            f"routes in only one of sundial.access.ROUTE_PERMISSIONS and "
            f"sundial.api.authorization's locators: {', '.join(odd)}"
        )
    return {
        route: RouteRule(permission, where[route].queues, where[route].item, where[route].unknown)
        for route, permission in permissions.items()
    }


# tests/handlers/test_authorization.py drives every entry with an allowed and a denied caller.
ROUTE_RULES: dict[tuple[str, str], RouteRule] = route_rules(ROUTE_PERMISSIONS, _WHERE)


def rule_of(route: Route) -> RouteRule | None:
    return ROUTE_RULES.get((route.method.upper(), route.openapi_path))


def check_every_route_has_a_rule(routes: Iterable[Route]) -> None:
    """Fail the cold start (and every test) if a registered route has no rule."""
    missing = sorted(f"{r.method} {r.openapi_path}" for r in routes if rule_of(r) is None)
    if missing:
        raise LookupError(
            f"routes without an authorization rule: {', '.join(missing)}; add them to "
            "sundial.access.ROUTE_PERMISSIONS (and where its queue comes from to "
            "sundial.api.authorization)"
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
