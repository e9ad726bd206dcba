"""The dags Lambda driven by real API Gateway HTTP API (v2) events."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.ids import DagKey
from sundial.model.dag import MAX_DAG_NODES
from sundial.model.submission import MAX_PAYLOAD_BYTES
from sundial.wiring import Dependencies
from tests.support import DAILY_REPORT as CARD_DAG
from tests.support import FakeLambdaContext, call_api, http_api_event, load_handler

dags_lambda = load_handler("dags")

# The card's DAG, with one node at high priority
DAILY_REPORT: dict[str, Any] = {
    **CARD_DAG,
    "nodes": {
        **CARD_DAG["nodes"],
        "load_cache": {**CARD_DAG["nodes"]["load_cache"], "priority": "high"},
    },
}


def _call(method: str, path: str, body: Any = None, *, raw: str | None = None) -> tuple[int, Any]:
    route = "/dags/{dag_id}" if path.count("/") == 2 else None
    text = raw if raw is not None else (json.dumps(body) if body is not None else None)
    response = dags_lambda.handler(
        http_api_event(method, path, body=text, route=route), FakeLambdaContext()
    )
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def _item_count(deps: Dependencies) -> int:
    return boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"]


def test_submit_get_and_cancel_a_dag(deps: Dependencies) -> None:
    # When the daily_report DAG is submitted
    status, created = _call("POST", "/dags", DAILY_REPORT)
    # Then it is 201 with every node: the root queued, the others blocked
    assert status == 201, created
    assert created["name"] == "daily_report"
    assert created["status"] == "running"
    assert created["on_failure"] == "cancel_descendants"
    assert created["run_at"] == created["created_at"] == "2026-11-21T12:00:00.000Z"
    assert {name: n["status"] for name, n in created["nodes"].items()} == {
        "extract": "queued",
        "transform": "blocked",
        "load_warehouse": "blocked",
        "load_cache": "blocked",
        "notify": "blocked",
    }
    assert created["nodes"]["notify"]["depends_on"] == ["load_warehouse", "load_cache"]
    assert created["counts"] == {"queued": 1, "blocked": 4}
    # And GET returns the same DAG
    status, got = _call("GET", f"/dags/{created['id']}")
    assert status == 200
    assert got == created
    # And each node is a job, readable with GET /jobs/{id}
    jobs_lambda = load_handler("jobs")
    node_id = created["nodes"]["load_cache"]["id"]
    event = http_api_event("GET", f"/jobs/{node_id}", route="/jobs/{job_id}")
    job = json.loads(jobs_lambda.handler(event, FakeLambdaContext())["body"])
    assert (job["status"], job["priority"], job["queue"]) == ("blocked", "high", "email")
    assert (job["dag_id"], job["dag_node"]) == (created["id"], "load_cache")
    # And DELETE cancels every node, and again
    status, cancelled = _call("DELETE", f"/dags/{created['id']}")
    assert status == 200
    assert cancelled["status"] == "cancelled"
    assert cancelled["counts"] == {"cancelled": 5}
    assert _call("DELETE", f"/dags/{created['id']}")[0] == 200


def test_a_dag_due_later_keeps_its_root_pending(deps: Dependencies) -> None:
    status, created = _call("POST", "/dags", {**DAILY_REPORT, "run_at": "2026-11-22T06:00:00Z"})
    assert status == 201
    assert created["run_at"] == "2026-11-22T06:00:00.000Z"
    assert created["nodes"]["extract"]["status"] == "pending"


def _nodes(count: int) -> dict[str, Any]:
    return {f"n{i}": {"queue": "default"} for i in range(count)}


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        (
            {
                "name": "loop",
                "nodes": {
                    "a": {"queue": "default", "depends_on": ["c"]},
                    "b": {"queue": "default", "depends_on": ["a"]},
                    "c": {"queue": "default", "depends_on": ["b"]},
                },
            },
            "nodes",
            "dependency cycle: a → b → c → a",
        ),
        (
            {"name": "self", "nodes": {"a": {"queue": "default", "depends_on": ["a"]}}},
            "nodes.a.depends_on",
            "node 'a' depends on itself",
        ),
        (
            {
                "name": "typo",
                "nodes": {
                    "extract": {"queue": "default"},
                    "t": {"queue": "default", "depends_on": ["extrct"]},
                },
            },
            "nodes.t.depends_on",
            "unknown node 'extrct' (nodes: extract, t)",
        ),
        (
            {"name": "queue", "nodes": {"a": {"queue": "nope"}}},
            "nodes.a.queue",
            "unknown queue 'nope' (known: default, email)",
        ),
        (
            {"name": "big", "nodes": _nodes(MAX_DAG_NODES + 1)},
            "nodes",
            f"at most {MAX_DAG_NODES} nodes; got 101",
        ),
        ({"name": "none", "nodes": {}}, "nodes", None),
        ({"name": "bad name", "nodes": {"a b": {"queue": "default"}}}, "nodes.a b.[key]", None),
        ({"nodes": {"a": {"queue": "default"}}}, "name", None),
        ({"name": "x", "nodes": {"a": {"queue": "default", "extra": 1}}}, "nodes.a.extra", None),
        (
            {"name": "x", "nodes": {"a": {"queue": "default"}}, "on_failure": "ignore"},
            "on_failure",
            None,
        ),
        (
            {"name": "x", "nodes": {"a": {"queue": "default"}}, "run_at": "tomorrow"},
            "run_at",
            "not an RFC 3339 timestamp (e.g. 2026-11-21T09:00:00Z)",
        ),
        (
            {
                "name": "x",
                "nodes": {"a": {"queue": "default"}},
                "run_at": "2026-11-21T13:00:00Z",
                "delay_seconds": 5,
            },
            "run_at",
            "give at most one of run_at or delay_seconds",
        ),
        (
            {"name": "x", "nodes": {"a": {"queue": "default"}}, "run_at": "2028-01-01T00:00:00Z"},
            "run_at",
            "more than 366 days ahead",
        ),
        (
            {"name": "x", "nodes": {"a": {"queue": "default", "payload": "x" * MAX_PAYLOAD_BYTES}}},
            "nodes.a.payload",
            None,
        ),
        (
            {
                "name": "x",
                "nodes": {
                    f"n{i}": {"queue": "default", "payload": "x" * 60_000} for i in range(18)
                },
            },
            "nodes",
            "the payloads add up to 1080036 bytes; the limit is 1048576",
        ),
    ],
)
def test_a_bad_dag_is_400_naming_the_field_and_writes_nothing(
    deps: Dependencies, body: Any, field: str, reason: str | None
) -> None:
    status, error = _call("POST", "/dags", body)
    assert status == 400, error
    fields = {e["field"]: e["reason"] for e in error["errors"]}
    assert field in fields, error
    if reason is not None:
        assert fields[field] == reason
    assert _item_count(deps) == 0


@pytest.mark.parametrize("raw", ["{not json", "", "null", "[1, 2]"])
def test_unparseable_body_is_400(deps: Dependencies, raw: str) -> None:
    status, _ = _call("POST", "/dags", raw=raw)
    assert status == 400
    assert _item_count(deps) == 0


def test_the_node_limit_itself_is_accepted(deps: Dependencies) -> None:
    status, created = _call("POST", "/dags", {"name": "wide", "nodes": _nodes(MAX_DAG_NODES)})
    assert status == 201
    assert created["counts"] == {"queued": MAX_DAG_NODES}
    assert _call("GET", f"/dags/{created['id']}")[1]["counts"] == {"queued": MAX_DAG_NODES}


def test_unknown_dag_is_404_and_malformed_id_is_400(deps: Dependencies) -> None:
    unknown = DagKey.new(shard=2, due_ms=1_800_000_000_000, node_count=4, now_ms=0).dag_id
    for method in ("GET", "DELETE"):
        assert _call(method, f"/dags/{unknown}")[0] == 404
        status, error = _call(method, "/dags/garbage")
        assert status == 400 and error["errors"][0]["field"] == "dag_id"
    assert _item_count(deps) == 0


def _post(path: str) -> tuple[int, Any]:
    action = path.rsplit("/", 1)[1]
    event = http_api_event("POST", path, route=f"/dags/{{dag_id}}/{action}")
    response = dags_lambda.handler(event, FakeLambdaContext())
    return response["statusCode"], json.loads(response["body"])


def test_pause_and_resume_a_dag(deps: Dependencies) -> None:
    _, created = _call("POST", "/dags", {**DAILY_REPORT, "delay_seconds": 3600})
    # When it is paused
    status, paused = _post(f"/dags/{created['id']}/pause")
    # Then every unreleased node is held
    assert (status, paused["status"]) == (200, "paused")
    assert all(node["paused"] for node in paused["nodes"].values())
    # And resume lets it run: its root, due in an hour, is the sweeper's again
    status, resumed = _post(f"/dags/{created['id']}/resume")
    assert (status, resumed["status"]) == (200, "running")
    assert resumed["nodes"]["extract"]["status"] == "pending"
    assert not any(node["paused"] for node in resumed["nodes"].values())
    # And a cancelled (finished) DAG cannot be paused
    _call("DELETE", f"/dags/{created['id']}")
    status, error = _post(f"/dags/{created['id']}/pause")
    assert status == 409 and "cancelled" in error["message"]


def test_pause_and_resume_of_unknown_or_malformed_ids(deps: Dependencies) -> None:
    unknown = DagKey.new(shard=2, due_ms=1_800_000_000_000, node_count=4, now_ms=0).dag_id
    for action in ("pause", "resume"):
        assert _post(f"/dags/{unknown}/{action}")[0] == 404
        status, error = _post(f"/dags/garbage/{action}")
        assert status == 400 and error["errors"][0]["field"] == "dag_id"
    assert _item_count(deps) == 0


def _list(path: str) -> tuple[int, Any]:
    return call_api(dags_lambda, "GET", path)


def test_a_queues_dags_are_listed_with_their_status(deps: Dependencies, clock: ManualClock) -> None:
    # Given the daily report (nodes on `default` and `email`) and, a second later (a listing
    # is in order of creation), a DAG on `default` only
    status, report = _call("POST", "/dags", DAILY_REPORT)
    assert status == 201, report
    clock.advance(seconds=1)
    status, other = _call("POST", "/dags", {"name": "one", "nodes": {"a": {"queue": "default"}}})
    assert status == 201, other
    _call("DELETE", f"/dags/{other['id']}")
    # When `email` and `default` are listed
    status, email = _list("/dags?queue=email")
    assert status == 200, email
    status, default = _list("/dags?queue=default&limit=1")
    assert status == 200, default
    # Then email has the report, with its status and counts; default pages through both
    assert email == {
        "items": [
            {
                "id": report["id"],
                "name": "daily_report",
                "status": "running",
                "run_at": report["run_at"],
                "created_at": report["created_at"],
                "finished_at": None,
                "queues": sorted({n["queue"] for n in report["nodes"].values()}),
                "counts": report["counts"],
            }
        ],
        "next_cursor": None,
    }
    assert [d["id"] for d in default["items"]] == [report["id"]]
    status, rest = _list(f"/dags?queue=default&limit=1&cursor={default['next_cursor']}")
    assert status == 200 and [(d["id"], d["status"]) for d in rest["items"]] == [
        (other["id"], "cancelled")
    ]
    # And a bad listing is refused
    assert _list("/dags")[0] == 400
    assert _list("/dags?queue=nope")[0] == 404
    assert _list("/dags?queue=default&cursor=nope")[0] == 400
