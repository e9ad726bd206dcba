"""Per-queue authorization on every route (sundial.api.authorization): each route in openapi.json
with a caller that has the permission, one that lacks it, and a request with no identity; a 403
names the queue and the permission and changes nothing."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from sundial.access import Permission
from sundial.api.authorization import ROUTE_RULES
from sundial.clock import ManualClock
from sundial.model.job import Job
from sundial.wiring import Dependencies, configure, dependencies
from tests.support import DEFAULT_CALLER, TABLE, call_api, load_handler

ACCOUNT = "123456789012"
OTHER_ACCOUNT = "210987654321"
PLATFORM = DEFAULT_CALLER  # the IAM user every other test signs as: admin of both queues


def role(name: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:iam::{account}:role/{name}"


# One role per permission on `email`; `default` is the platform's and another account submits.
HOLDER = {
    Permission.SUBMIT: role("email-submitter"),
    Permission.READ: role("email-reader"),
    Permission.CONTROL: role("email-operator"),
    Permission.WORK: role("email-worker"),
    Permission.ADMIN: role("email-admin"),
}
ACCESS = {
    "email": {
        "submit": [role("email-submit*")],
        "read": [role("teams/email-reader")],  # a role path: sessions carry none
        "control": [HOLDER[Permission.CONTROL]],
        "work": [HOLDER[Permission.WORK]],
        "admin": [PLATFORM, HOLDER[Permission.ADMIN]],
    },
    "default": {"admin": [PLATFORM], "submit": [OTHER_ACCOUNT]},
}

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")
dags_lambda = load_handler("dags")
schedules_lambda = load_handler("schedules")
queues_lambda = load_handler("queues")
workers_lambda = load_handler("workers")


@pytest.fixture
def access(deps: Dependencies, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUNDIAL_ACCESS", json.dumps(ACCESS))
    configure(clock=clock, environ=dict(os.environ))


def _handler_of(path: str) -> Any:
    if path in ("/jobs", "/jobs/batch"):
        return submit_lambda
    if path.startswith("/dags"):
        return dags_lambda
    if path.startswith("/schedules"):
        return schedules_lambda
    if path.endswith(("/lease", "/heartbeat", "/ack", "/nack")):
        return workers_lambda
    if path.startswith("/queues/{queue}") and "/dead" not in path:
        return queues_lambda
    return jobs_lambda


def _created(path: str, body: dict[str, Any], route: str | None = None) -> dict[str, Any]:
    handler = _handler_of(route or path)
    status, created = call_api(handler, "POST", path, route=route, body=body, caller=PLATFORM)
    assert status in (200, 201), created
    return dict(created)


def _job() -> str:
    return str(_created("/jobs", {"queue": "email", "delay_seconds": 1200})["id"])


def _dag() -> str:
    nodes = {"a": {"queue": "email"}, "b": {"queue": "email", "depends_on": ["a"]}}
    body = {"name": "etl", "nodes": nodes, "delay_seconds": 1200}
    return str(_created("/dags", body)["id"])


def _schedule() -> str:
    return str(_created("/schedules", {"queue": "email", "rate": "1 hour"})["id"])


LEASE = {"lease": "not-a-real-lease"}


@dataclass(frozen=True)
class Case:
    """How to call one route against the `email` queue: (path, body) once its target exists."""

    prepare: Callable[[], tuple[str, Any]]


CASES: dict[tuple[str, str], Case] = {
    ("POST", "/jobs"): Case(lambda: ("/jobs", {"queue": "email", "delay_seconds": 60})),
    ("POST", "/jobs/batch"): Case(
        lambda: ("/jobs/batch", {"jobs": [{"queue": "email", "delay_seconds": 1200}]})
    ),
    ("GET", "/jobs/{job_id}"): Case(lambda: (f"/jobs/{_job()}", None)),
    ("DELETE", "/jobs/{job_id}"): Case(lambda: (f"/jobs/{_job()}", None)),
    ("POST", "/jobs/{job_id}/retry"): Case(lambda: (f"/jobs/{_job()}/retry", None)),
    ("POST", "/jobs/{job_id}/pause"): Case(lambda: (f"/jobs/{_job()}/pause", None)),
    ("POST", "/jobs/{job_id}/resume"): Case(lambda: (f"/jobs/{_job()}/resume", None)),
    ("PATCH", "/jobs/{job_id}"): Case(lambda: (f"/jobs/{_job()}", {"delay_seconds": 3600})),
    ("POST", "/jobs/{job_id}/run-now"): Case(lambda: (f"/jobs/{_job()}/run-now", None)),
    ("POST", "/jobs/{job_id}/heartbeat"): Case(lambda: (f"/jobs/{_job()}/heartbeat", LEASE)),
    ("POST", "/jobs/{job_id}/ack"): Case(lambda: (f"/jobs/{_job()}/ack", LEASE)),
    ("POST", "/jobs/{job_id}/nack"): Case(lambda: (f"/jobs/{_job()}/nack", LEASE)),
    ("POST", "/queues/{queue}/lease"): Case(lambda: ("/queues/email/lease", {"wait": 0})),
    ("GET", "/queues"): Case(lambda: ("/queues", None)),
    ("GET", "/queues/{queue}"): Case(lambda: ("/queues/email", None)),
    ("GET", "/queues/{queue}/jobs"): Case(lambda: ("/queues/email/jobs?status=pending", None)),
    ("POST", "/queues/{queue}/pause"): Case(lambda: ("/queues/email/pause", None)),
    ("POST", "/queues/{queue}/resume"): Case(lambda: ("/queues/email/resume", None)),
    ("GET", "/queues/{queue}/dead"): Case(lambda: ("/queues/email/dead", None)),
    ("DELETE", "/queues/{queue}/dead"): Case(
        lambda: ("/queues/email/dead?older_than=2026-11-21T12:00:00Z", None)
    ),
    ("POST", "/queues/{queue}/dead/replay"): Case(lambda: ("/queues/email/dead/replay", {})),
    ("POST", "/dags"): Case(
        lambda: ("/dags", {"name": "etl", "nodes": {"a": {"queue": "email"}}, "delay_seconds": 60})
    ),
    ("GET", "/dags"): Case(lambda: ("/dags?queue=email", None)),
    ("GET", "/dags/{dag_id}"): Case(lambda: (f"/dags/{_dag()}", None)),
    ("DELETE", "/dags/{dag_id}"): Case(lambda: (f"/dags/{_dag()}", None)),
    ("POST", "/dags/{dag_id}/pause"): Case(lambda: (f"/dags/{_dag()}/pause", None)),
    ("POST", "/dags/{dag_id}/resume"): Case(lambda: (f"/dags/{_dag()}/resume", None)),
    ("POST", "/schedules"): Case(lambda: ("/schedules", {"queue": "email", "rate": "1 hour"})),
    ("GET", "/schedules"): Case(lambda: ("/schedules?queue=email", None)),
    ("GET", "/schedules/{schedule_id}"): Case(lambda: (f"/schedules/{_schedule()}", None)),
    ("DELETE", "/schedules/{schedule_id}"): Case(lambda: (f"/schedules/{_schedule()}", None)),
    ("PATCH", "/schedules/{schedule_id}"): Case(
        lambda: (f"/schedules/{_schedule()}", {"payload": {"changed": True}})
    ),
    ("GET", "/schedules/{schedule_id}/runs"): Case(
        lambda: (f"/schedules/{_schedule()}/runs", None)
    ),
    ("POST", "/schedules/{schedule_id}/pause"): Case(
        lambda: (f"/schedules/{_schedule()}/pause", None)
    ),
    ("POST", "/schedules/{schedule_id}/resume"): Case(
        lambda: (f"/schedules/{_schedule()}/resume", None)
    ),
}
ROUTES = sorted(CASES)
# Listings name no queue: they show only the queues the caller has the permission on.
LISTINGS = {("GET", "/queues")}


def _call(route: tuple[str, str], caller: str | None) -> tuple[int, Any]:
    method, template = route
    path, body = CASES[route].prepare()
    handler = _handler_of(template)
    return call_api(handler, method, path, route=template, body=body, caller=caller)


def _state() -> tuple[list[Any], list[int]]:
    """Everything a request could change: every item, and every queue's message counts."""
    items = boto3.client("dynamodb").scan(TableName=TABLE)["Items"]
    sqs = boto3.client("sqs")
    counts = []
    for url in sorted(sqs.list_queues()["QueueUrls"]):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        counts += [
            int(attributes[name])
            for name in (
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            )
        ]
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True)), counts


def _denied_caller(permission: Permission) -> str:
    """A role of `email` that has some permission, but not this one."""
    return HOLDER[Permission.READ if permission is not Permission.READ else Permission.SUBMIT]


def test_every_route_in_openapi_has_a_rule_and_a_case() -> None:
    spec = json.loads(Path("openapi.json").read_text())
    routes = {(m.upper(), path) for path, ops in spec["paths"].items() for m in ops}
    assert routes == set(ROUTE_RULES) == set(CASES)


DENIABLE = [route for route in ROUTES if route not in LISTINGS]


@pytest.mark.parametrize("route", DENIABLE, ids=[" ".join(r) for r in DENIABLE])
def test_a_caller_without_the_permission_gets_403_and_nothing_changes(
    access: None, route: tuple[str, str]
) -> None:
    # Given the route's target on queue `email`, and a role with another permission on it
    permission = ROUTE_RULES[route].permission
    method, template = route
    path, body = CASES[route].prepare()
    before = _state()
    # When the role calls the route
    status, error = call_api(
        _handler_of(template),
        method,
        path,
        route=template,
        body=body,
        caller=_denied_caller(permission),
    )
    # Then it is a 403 naming the queue and the permission, and nothing changed
    assert status == 403, error
    assert f"lacks '{permission}' on queue 'email'" in error["message"]
    assert "email-" in error["message"]  # names the caller's role
    assert _state() == before


@pytest.mark.parametrize("route", ROUTES, ids=[" ".join(r) for r in ROUTES])
def test_a_caller_with_the_permission_is_let_through(access: None, route: tuple[str, str]) -> None:
    # Given the role holding exactly the route's permission (its session, as AWS signs it)
    permission = ROUTE_RULES[route].permission
    # When it calls the route, Then the route answers as it would (a 409 for a job in the wrong
    # state, say), never a 403
    status, body = _call(route, HOLDER[permission])
    assert status != 403, body
    assert status < 500, body


@pytest.mark.parametrize("route", ROUTES, ids=[" ".join(r) for r in ROUTES])
def test_a_request_without_an_identity_gets_403_and_nothing_changes(
    access: None, route: tuple[str, str]
) -> None:
    method, template = route
    path, body = CASES[route].prepare()
    before = _state()
    status, error = call_api(
        _handler_of(template), method, path, route=template, body=body, caller=None
    )
    assert status == 403 and "no IAM caller identity" in error["message"]
    assert _state() == before


def test_a_listing_shows_only_the_queues_the_caller_may_read(access: None) -> None:
    def listed(caller: str) -> list[str]:
        status, body = call_api(queues_lambda, "GET", "/queues", caller=caller)
        assert status == 200, body
        return [queue["queue"] for queue in body["queues"]]

    assert listed(HOLDER[Permission.READ]) == ["email"]
    assert listed(HOLDER[Permission.SUBMIT]) == []  # submits to email, cannot read it
    assert listed(PLATFORM) == ["default", "email"]
    assert listed(role("anyone", OTHER_ACCOUNT)) == []


def test_admin_has_every_permission(access: None) -> None:
    for route in ROUTES:
        status, body = _call(route, HOLDER[Permission.ADMIN])
        assert status not in (403, 500), (route, body)


def test_a_batch_with_one_forbidden_queue_is_refused_whole(access: None) -> None:
    # Given the other account may submit to `default` but not to `email`
    batch = {
        "jobs": [
            {"queue": "default", "delay_seconds": 1200},
            {"queue": "email", "delay_seconds": 1200},
        ]
    }
    before = _state()
    status, error = call_api(
        submit_lambda, "POST", "/jobs/batch", body=batch, caller=role("anything", OTHER_ACCOUNT)
    )
    assert status == 403 and "'submit' on queue 'email'" in error["message"]
    assert _state() == before
    # And its jobs for `default` alone are accepted
    status, _ = call_api(
        submit_lambda,
        "POST",
        "/jobs/batch",
        body={"jobs": batch["jobs"][:1]},
        caller=role("anything", OTHER_ACCOUNT),
    )
    assert status == 200


def test_a_dag_is_checked_on_every_queue_it_touches(access: None) -> None:
    # Given a DAG with a node on `email` and one on `default`
    nodes = {"a": {"queue": "email"}, "b": {"queue": "default", "depends_on": ["a"]}}
    dag = _created("/dags", {"name": "mixed", "nodes": nodes, "delay_seconds": 1200})
    # When the email operator cancels it, Then it may not: `default` is not its queue
    before = _state()
    status, error = call_api(
        dags_lambda,
        "DELETE",
        f"/dags/{dag['id']}",
        route="/dags/{dag_id}",
        caller=HOLDER[Permission.CONTROL],
    )
    assert status == 403 and "'control' on queue 'default'" in error["message"]
    assert _state() == before
    # And submitting such a DAG needs submit on both queues
    status, error = call_api(
        dags_lambda,
        "POST",
        "/dags",
        body={"name": "mixed", "nodes": nodes},
        caller=HOLDER[Permission.SUBMIT],
    )
    assert status == 403 and "'submit' on queue 'default'" in error["message"]


def test_a_caller_sees_only_its_own_queues_dead_letters(access: None) -> None:
    email_admin = HOLDER[Permission.ADMIN]
    assert call_api(jobs_lambda, "GET", "/queues/email/dead", caller=email_admin)[0] == 200
    status, error = call_api(jobs_lambda, "GET", "/queues/default/dead", caller=email_admin)
    assert status == 403 and "'admin' on queue 'default'" in error["message"]


@pytest.mark.parametrize(
    ("caller", "allowed"),
    [
        (role("email-reader"), True),  # listed with a path: matched by account and name
        (role("email-reader", OTHER_ACCOUNT), False),  # same name, another account
        (role("email-submitter"), False),  # a pattern for submit, not read
        (f"arn:aws:iam::{ACCOUNT}:user/email-reader", False),  # a user is not the role
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/email-reader/alice", True),  # a session
        (ACCOUNT, False),  # the account's root is not in email's lists
    ],
)
def test_principals_match_by_account_kind_and_name(
    access: None, caller: str, allowed: bool
) -> None:
    job = _job()
    status, _ = call_api(jobs_lambda, "GET", f"/jobs/{job}", route="/jobs/{job_id}", caller=caller)
    assert (status == 200) is allowed and status in (200, 403)


def test_without_access_lists_the_stack_account_may_do_everything(deps: Dependencies) -> None:
    # Given no queue declares access (the default cdk.json)
    job = str(_created("/jobs", {"queue": "email", "delay_seconds": 1200})["id"])
    # Then any identity of the stack's account may cancel, and another account's may not
    foreign = role("email-operator", OTHER_ACCOUNT)
    route = "/jobs/{job_id}"
    status, error = call_api(jobs_lambda, "DELETE", f"/jobs/{job}", route=route, caller=foreign)
    assert status == 403 and "'control' on queue 'email'" in error["message"]
    status, _ = call_api(jobs_lambda, "DELETE", f"/jobs/{job}", route=route, caller=role("anyone"))
    assert status == 200


def test_a_caller_allowed_everywhere_is_not_charged_a_read(
    deps: Dependencies, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the default lists (the stack account may do everything) and a job
    job = _job()
    reads: list[str] = []
    original = deps.jobs.get

    def counted_get(job_id: str) -> Job:
        reads.append(job_id)
        return original(job_id)

    monkeypatch.setattr(deps.jobs, "get", counted_get)
    # When it is cancelled, Then authorization read nothing (the cancel is one conditional write)
    status, _ = call_api(jobs_lambda, "DELETE", f"/jobs/{job}", route="/jobs/{job_id}")
    assert status == 200 and reads == []


def test_a_caller_lists_only_the_schedules_of_a_queue_it_may_read(access: None) -> None:
    # Given a schedule on `email` and one on `default`
    _schedule()
    _created("/schedules", {"queue": "default", "rate": "1 hour"})
    reader = HOLDER[Permission.READ]
    # Then email's reader lists email's, and is refused default's (403, naming it)
    status, page = call_api(schedules_lambda, "GET", "/schedules?queue=email", caller=reader)
    assert status == 200 and [s["queue"] for s in page["items"]] == ["email"]
    status, error = call_api(schedules_lambda, "GET", "/schedules?queue=default", caller=reader)
    assert status == 403 and "'read' on queue 'default'" in error["message"]


def test_a_dag_listing_leaves_out_dags_on_a_queue_the_caller_may_not_read(access: None) -> None:
    # Given a DAG on `email` only, and one on `email` and `default`
    own = _dag()
    nodes = {"a": {"queue": "email"}, "b": {"queue": "default", "depends_on": ["a"]}}
    _created("/dags", {"name": "mixed", "nodes": nodes, "delay_seconds": 1200})
    reader = HOLDER[Permission.READ]
    # Then email's reader lists only the first (GET /dags/{id} would refuse it the other)
    status, page = call_api(dags_lambda, "GET", "/dags?queue=email", caller=reader)
    assert status == 200 and [d["id"] for d in page["items"]] == [own], page
    # And the platform, which reads both queues, lists both
    status, page = call_api(dags_lambda, "GET", "/dags?queue=email", caller=PLATFORM)
    assert status == 200 and len(page["items"]) == 2
    # And default's DAGs are refused to email's reader
    status, error = call_api(dags_lambda, "GET", "/dags?queue=default", caller=reader)
    assert status == 403 and "'read' on queue 'default'" in error["message"]


def test_a_get_by_a_caller_allowed_on_some_queues_reads_its_item_once(
    access: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job, a DAG and a schedule on `email`, and the reads of each kind of item counted
    targets = {"jobs": _job(), "dags": _dag(), "schedules": _schedule()}
    deps = dependencies()
    reads: Counter[str] = Counter()
    for kind, owner, method in (
        ("jobs", deps.jobs, "get"),
        ("dags", deps.dags._nodes, "dag_nodes"),
        ("schedules", deps.schedules._schedules, "get"),
    ):
        original = getattr(owner, method)

        def counted(*args: Any, _kind: str = kind, _original: Any = original) -> Any:
            reads[_kind] += 1
            return _original(*args)

        monkeypatch.setattr(owner, method, counted)
    for kind, target in targets.items():
        path, route = f"/{kind}/{target}", f"/{kind}/{{{kind[:-1]}_id}}"
        # When the platform (allowed everywhere) and the email reader each GET it
        reads.clear()
        status, as_platform = call_api(_handler_of(route), "GET", path, route=route)
        assert status == 200
        platform_reads = reads[kind]
        reads.clear()
        status, as_reader = call_api(
            _handler_of(route), "GET", path, route=route, caller=HOLDER[Permission.READ]
        )
        # Then both see it, and the reader's check of its queue read nothing more: the route
        # answered from the item the check read
        assert status == 200 and as_reader == as_platform
        assert reads[kind] == platform_reads >= 1, kind


def _chain_dag(*queues: str) -> dict[str, Any]:
    """A DAG a -> b -> c whose nodes are on these queues (on_failure=cancel_descendants: a
    node's cancel cancels everything below it)."""
    names = ["a", "b", "c"]
    nodes = {
        name: {"queue": queue, **({"depends_on": [names[i - 1]]} if i else {})}
        for i, (name, queue) in enumerate(zip(names, queues, strict=True))
    }
    return _created("/dags", {"name": "chain", "nodes": nodes, "delay_seconds": 1200})


def _cancel_node(dag: dict[str, Any], node: str, caller: str = PLATFORM) -> tuple[int, Any]:
    job_id = dag["nodes"][node]["id"]
    return call_api(jobs_lambda, "DELETE", f"/jobs/{job_id}", route="/jobs/{job_id}", caller=caller)


def _node_statuses(dag: dict[str, Any]) -> dict[str, str]:
    status, now = call_api(dags_lambda, "GET", f"/dags/{dag['id']}", route="/dags/{dag_id}")
    assert status == 200, now
    return {name: node["status"] for name, node in now["nodes"].items()}


def test_cancelling_a_dag_node_does_not_cascade_into_a_queue_the_caller_may_not_control(
    access: None,
) -> None:
    # Given a DAG whose root is on `email` and whose descendants are on `email` and `default`
    dag = _chain_dag("email", "email", "default")
    before = _state()
    # When email's operator (control on `email` only) cancels the root by id
    status, error = _cancel_node(dag, "a", caller=role("email-operator"))
    # Then it is refused, naming the queue its cancel would reach, and nothing changed
    assert status == 403, error
    assert "'control' on queue 'default'" in error["message"]
    assert _state() == before
    # And a caller with control on both queues cancels the root and its descendants
    assert _cancel_node(dag, "a")[0] == 200
    assert _node_statuses(dag) == {"a": "cancelled", "b": "cancelled", "c": "cancelled"}


def test_cancelling_a_dag_node_that_cascades_only_into_its_own_queues_is_allowed(
    access: None,
) -> None:
    # Given a DAG on `default` then `email`, whose `email` node `b` has only `c` below it
    dag = _chain_dag("default", "email", "email")
    # When email's operator cancels `b`
    status, body = _cancel_node(dag, "b", caller=role("email-operator"))
    # Then it is cancelled, with `c`; the root on `default` is untouched
    assert status == 200, body
    assert _node_statuses(dag) == {"a": "pending", "b": "cancelled", "c": "cancelled"}


def _schedule_call(
    method: str, schedule_id: str, caller: str | None, route: str = "/schedules/{schedule_id}"
) -> tuple[int, Any]:
    return call_api(
        schedules_lambda, method, f"/schedules/{schedule_id}", route=route, caller=caller
    )


def test_schedule_keys_are_per_queue_and_never_reveal_another_queues_schedule(
    access: None,
) -> None:
    email_team, default_team = role("email-submitter"), role("anyone", OTHER_ACCOUNT)
    nightly = {"rate": "1 day", "idempotency_key": "nightly-report"}
    # Given `default`'s team has a schedule with the key "nightly-report"
    status, theirs = call_api(
        schedules_lambda,
        "POST",
        "/schedules",
        body={**nightly, "queue": "default"},
        caller=default_team,
    )
    assert status == 201, theirs
    before = _state()
    # When `email`'s team creates its own schedule with the same key
    status, ours = call_api(
        schedules_lambda,
        "POST",
        "/schedules",
        body={**nightly, "queue": "email"},
        caller=email_team,
    )
    # Then it is a new schedule on `email` (201), not a 409 that says the key is taken
    assert status == 201, ours
    assert ours["queue"] == "email" and ours["id"] != theirs["id"]
    assert _state() != before
    # And each team's repeat finds its own schedule
    for body, caller, mine in (
        ({**nightly, "queue": "email"}, email_team, ours),
        ({**nightly, "queue": "default"}, default_team, theirs),
    ):
        status, again = call_api(schedules_lambda, "POST", "/schedules", body=body, caller=caller)
        assert (status, again["id"]) == (200, mine["id"])
    # And `email`'s team, which has no permission on `default`, is answered about `default`'s
    # schedule exactly as about one that does not exist: 404, never a 403 naming `default`
    unknown = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"
    for method, route in (
        ("GET", "/schedules/{schedule_id}"),
        ("DELETE", "/schedules/{schedule_id}"),
        ("GET", "/schedules/{schedule_id}/runs"),
    ):
        suffix = "/runs" if route.endswith("/runs") else ""
        status, error = call_api(
            schedules_lambda,
            method,
            f"/schedules/{theirs['id']}{suffix}",
            route=route,
            caller=email_team,
        )
        _, absent = call_api(
            schedules_lambda,
            method,
            f"/schedules/{unknown}{suffix}",
            route=route,
            caller=email_team,
        )
        assert status == 404, error
        assert error["message"] == absent["message"].replace(unknown, theirs["id"])
    # And a caller with some permission on `email` but not this one still gets the 403
    status, error = _schedule_call("DELETE", ours["id"], role("email-reader"))
    assert status == 403 and "'control' on queue 'email'" in error["message"]
    # And `default`'s schedule is untouched
    status, still = _schedule_call("GET", theirs["id"], PLATFORM)
    assert (status, still["state"]) == (200, "active")


def test_a_schedule_key_taken_first_on_one_queue_is_free_on_another(access: None) -> None:
    # Given `email`'s team took "billing" first (squatting a key `default`'s team will use)
    email_team, default_team = role("email-submitter"), role("anyone", OTHER_ACCOUNT)
    body = {"rate": "1 hour", "idempotency_key": "billing"}
    status, squat = call_api(
        schedules_lambda, "POST", "/schedules", body={**body, "queue": "email"}, caller=email_team
    )
    assert status == 201, squat
    # When `default`'s team creates its schedule with that key
    status, created = call_api(
        schedules_lambda,
        "POST",
        "/schedules",
        body={**body, "queue": "default"},
        caller=default_team,
    )
    # Then it is created on `default`
    assert status == 201, created
    assert created["queue"] == "default" and created["id"] != squat["id"]
