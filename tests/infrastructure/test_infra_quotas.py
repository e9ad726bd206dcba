"""A queue's payload limit on PATCH /jobs/{id}, through the jobs function run with the environment
the synthesized stack gives it (issue 25, item 9: the stack gave the jobs function no
SUNDIAL_QUOTAS, so a 5 KB payload on a queue limited to 1 KB, or a 3 MB one stored in S3, was
accepted)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Template

from app import build_app
from sundial.wiring import Dependencies
from tests.conftest import PAYLOAD_BUCKET
from tests.infrastructure.synthesis import cdk_json_context
from tests.support import call_api, load_handler

pytestmark = pytest.mark.infra

LIMIT = 1024
submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")


@pytest.fixture(scope="module")
def jobs_environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The jobs function's environment in a stack whose `email` queue takes payloads of at
    most LIMIT bytes."""
    context = cdk_json_context()
    email = context["sundial"]["queues"]["email"]
    context["sundial"]["queues"]["email"] = {**email, "max_payload_bytes": LIMIT}
    app = cdk.App(context=context, outdir=str(tmp_path_factory.mktemp("cdk.out")))
    stack = build_app(app)
    resource = stack.sundial.functions.jobs.node.default_child
    assert isinstance(resource, cdk.CfnElement)
    function = Template.from_stack(stack).to_json()["Resources"][stack.get_logical_id(resource)]
    variables: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
    return variables


@pytest.fixture
def environ(environ: dict[str, str], jobs_environment: dict[str, Any]) -> dict[str, str]:
    """The test's resources, with the quotas exactly as the stack hands them to the jobs
    function (none, if it hands it none)."""
    return environ | {k: v for k, v in jobs_environment.items() if k == "SUNDIAL_QUOTAS"}


def _objects() -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=PAYLOAD_BUCKET)
    return [entry["Key"] for entry in listed.get("Contents", [])]


@pytest.mark.parametrize(
    ("payload", "storage"),
    [({"text": "x" * 5_000}, None), ({"text": "x" * 3_000_000}, "s3")],
    ids=["5 KB inline", "3 MB to S3"],
)
def test_patch_over_its_queues_payload_limit_is_413_naming_the_field_and_changes_nothing(
    deps: Dependencies, payload: dict[str, str], storage: str | None
) -> None:
    # Given a job waiting on `email`, which takes payloads of at most 1 KB
    body = {"queue": "email", "delay_seconds": 3600, "payload": {"to": "a"}}
    status, created = call_api(submit_lambda, "POST", "/jobs", body=body)
    assert status == 201, created
    path = f"/jobs/{created['id']}"
    before = call_api(jobs_lambda, "GET", path, route="/jobs/{job_id}")
    items = boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"]
    # When a PATCH gives it a payload over that
    change: dict[str, Any] = {"payload": payload}
    change |= {"payload_storage": storage} if storage else {}
    status, answer = call_api(jobs_lambda, "PATCH", path, route="/jobs/{job_id}", body=change)
    # Then it is 413 naming the payload, its size, the queue and the limit
    size = len(json.dumps(payload, separators=(",", ":")).encode())
    assert status == 413, answer
    reason = f"payload is {size} bytes; queue 'email' accepts at most {LIMIT}"
    assert answer["errors"] == [{"field": "payload", "reason": reason}]
    # And nothing changed: the job, the table, the payload bucket
    assert call_api(jobs_lambda, "GET", path, route="/jobs/{job_id}") == before
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Items"] == items
    assert _objects() == []
