"""The committed OpenAPI document is the one the code generates (`make openapi`)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import sundial
from sundial.api.authorization import ROUTE_RULES
from sundial.api.openapi import configured_queues, openapi_json

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "openapi.json"
QUEUES = configured_queues(ROOT / "cdk.json")


def test_committed_openapi_matches_the_code() -> None:
    expected = openapi_json(QUEUES)
    assert COMMITTED.read_text() == expected, "run `make openapi` and commit openapi.json"


def test_openapi_states_ids_queues_times_and_auth() -> None:
    document = json.loads(openapi_json(QUEUES))
    parameters = {
        (path, p["name"]): p["schema"]
        for path, ops in document["paths"].items()
        for op in ops.values()
        for p in op.get("parameters", [])
    }
    assert parameters[("/jobs/{job_id}", "job_id")]["pattern"] == "^[A-Za-z0-9_-]{36}$"
    assert parameters[("/dags/{dag_id}", "dag_id")]["maxLength"] == 40
    assert parameters[("/schedules/{schedule_id}", "schedule_id")]["minLength"] == 26
    assert parameters[("/queues/{queue}", "queue")]["enum"] == ["default", "demo", "email"]
    submit = document["components"]["schemas"]["SubmitJob"]
    assert submit["properties"]["run_at"]["format"] == "date-time"
    assert submit["properties"]["queue"]["enum"] == ["default", "demo", "email"]
    assert (
        "America"
        not in document["components"]["schemas"]["CreateSchedule"]["properties"]["timezone"]["enum"]
    )
    assert document["security"] == [{"sigv4": []}]
    scheme = document["components"]["securitySchemes"]["sigv4"]
    assert scheme["x-amazon-apigateway-authtype"] == "awsSigv4"


def test_openapi_documents_every_route_with_400_not_422() -> None:
    document = json.loads(openapi_json(QUEUES))
    routes = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert routes == {
        ("/jobs", "post"),
        ("/jobs/batch", "post"),
        ("/jobs/{job_id}", "get"),
        ("/jobs/{job_id}", "delete"),
        ("/jobs/{job_id}", "patch"),
        ("/jobs/{job_id}/run-now", "post"),
        ("/jobs/{job_id}/retry", "post"),
        ("/queues/{queue}/dead", "get"),
        ("/queues/{queue}/dead", "delete"),
        ("/queues/{queue}/dead/replay", "post"),
        ("/queues/{queue}/lease", "post"),
        ("/jobs/{job_id}/heartbeat", "post"),
        ("/jobs/{job_id}/ack", "post"),
        ("/jobs/{job_id}/nack", "post"),
        ("/dags", "post"),
        ("/dags", "get"),
        ("/dags/{dag_id}", "get"),
        ("/dags/{dag_id}", "delete"),
        ("/dags/{dag_id}/pause", "post"),
        ("/dags/{dag_id}/resume", "post"),
        ("/jobs/{job_id}/pause", "post"),
        ("/jobs/{job_id}/resume", "post"),
        ("/schedules", "post"),
        ("/schedules", "get"),
        ("/schedules/{schedule_id}", "get"),
        ("/schedules/{schedule_id}", "delete"),
        ("/schedules/{schedule_id}", "patch"),
        ("/schedules/{schedule_id}/runs", "get"),
        ("/schedules/{schedule_id}/pause", "post"),
        ("/schedules/{schedule_id}/resume", "post"),
        ("/queues", "get"),
        ("/queues/{queue}", "get"),
        ("/queues/{queue}/jobs", "get"),
        ("/queues/{queue}/pause", "post"),
        ("/queues/{queue}/resume", "post"),
    }
    for path, ops in document["paths"].items():
        for method, operation in ops.items():
            takes_input = "parameters" in operation or "requestBody" in operation
            # A route that reads nothing from the request (GET /queues) cannot answer 400.
            assert ("400" in operation["responses"]) is takes_input, (path, method)
            assert "422" not in operation["responses"], (path, method)


def test_the_document_version_is_the_package_version() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    document = json.loads(COMMITTED.read_text())
    assert document["info"]["version"] == pyproject["project"]["version"] == sundial.__version__


def test_every_operation_states_its_permission_and_its_403() -> None:
    document = json.loads(COMMITTED.read_text())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            rule = ROUTE_RULES[(method.upper(), path)]
            assert operation["x-sundial-permission"] == rule.permission.value
            assert "403" in operation["responses"]
