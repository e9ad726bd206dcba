"""Per-queue access as the stack configures it: cdk.json's access lists and the construct's
grant_* helpers, which set the IAM policy and the access list together (stacks/access.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from app import build_app
from stacks.access import resource_path, routes_of
from stacks.settings import SettingsError, SundialSettings
from sundial.access import Permission
from sundial.model.job import Status
from sundial.model.submission import SubmitJob
from sundial.wiring import Dependencies, configure
from tests.infrastructure.synthesis import REPO_ROOT, cdk_json_context
from tests.support import call_api, load_handler

pytestmark = pytest.mark.infra

PACKAGE_ROOT = REPO_ROOT / "layers" / "sundial" / "python"
ACCOUNT = "123456789012"  # the stack's, as tests.support signs requests
SENDER, OPERATOR = "email-sender", "default-operator"
PARTNER_ACCOUNT = "210987654321"
EMAIL_ACCESS = {"submit": [PARTNER_ACCOUNT], "admin": ["arn:aws:iam::123456789012:user/platform"]}
API_FUNCTIONS = ("Submit", "Jobs", "Dags", "Workers", "Schedules", "Queues")
jobs_lambda = load_handler("jobs")


@pytest.fixture(scope="module")
def granted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Template, dict[str, Any]]:
    """The app with `email` access declared in cdk.json, `default` declaring an empty one
    (only what is granted), and two roles granted in code."""
    context = cdk_json_context()
    queues = context["sundial"]["queues"]
    queues["email"] = {**queues["email"], "access": EMAIL_ACCESS}
    queues["default"] = {**queues["default"], "access": {}}
    app = cdk.App(context=context, outdir=str(tmp_path_factory.mktemp("cdk.out")))
    stack = build_app(app)
    principal = iam.AccountRootPrincipal()
    sender = iam.Role(stack, "EmailSender", assumed_by=principal, role_name=SENDER)
    operator = iam.Role(stack, "DefaultOperator", assumed_by=principal, role_name=OPERATOR)
    stack.sundial.grant_submit("email", sender)
    stack.sundial.grant_control("default", operator)
    with pytest.raises(ValueError, match="unknown queue 'nope'"):
        stack.sundial.grant_read("nope", operator)
    template = Template.from_stack(stack)
    ids = {
        name: _logical_id(stack, role)
        for name, role in [("sender", sender), ("operator", operator)]
    }
    return template, ids


def role_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{name}"


def _resolved(value: Any, ids: dict[str, str]) -> str:
    """SUNDIAL_ACCESS as deployed: its Fn::Join of text and the granted roles' ARNs."""
    if isinstance(value, str):
        return value
    names = {ids["sender"]: SENDER, ids["operator"]: OPERATOR}
    parts = value["Fn::Join"][1]
    return "".join(
        part if isinstance(part, str) else role_arn(names[part["Fn::GetAtt"][0]]) for part in parts
    )


def _logical_id(stack: cdk.Stack, construct: iam.Role) -> str:
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnElement)
    return stack.get_logical_id(resource)


def _functions(template: Template) -> dict[str, Any]:
    return dict(template.find_resources("AWS::Lambda::Function"))


def _access_of(function: dict[str, Any]) -> Any:
    return function["Properties"]["Environment"]["Variables"].get("SUNDIAL_ACCESS")


def _policy_resources(template: Template, role_id: str) -> list[Any]:
    resources: list[Any] = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        properties = policy["Properties"]
        if {"Ref": role_id} not in properties["Roles"]:
            continue
        for statement in properties["PolicyDocument"]["Statement"]:
            assert statement["Action"] == "execute-api:Invoke"
            found = statement["Resource"]
            resources += found if isinstance(found, list) else [found]
    return resources


def _path_of(arn: Any) -> str:
    """The '/METHOD/path' tail of an execute-api ARN as CloudFormation joins it."""
    parts = arn["Fn::Join"][1]
    return str(parts[-1]).split("/", 1)[1].removeprefix("$default/")


def test_only_the_api_functions_read_the_access_lists(
    granted: tuple[Template, dict[str, Any]],
) -> None:
    template, _ = granted
    for logical_id, function in _functions(template).items():
        is_api = any(f"Functions{name}Function" in logical_id for name in API_FUNCTIONS)
        assert (_access_of(function) is not None) is is_api, logical_id


def test_a_grant_adds_the_role_to_the_queue_list_beside_cdk_json(
    granted: tuple[Template, dict[str, Any]],
) -> None:
    template, ids = granted
    submit = next(f for i, f in _functions(template).items() if "FunctionsSubmitFunction" in i)
    rendered = json.dumps(_access_of(submit))
    # cdk.json's lists are there, the granted roles' ARNs join them (resolved at deploy)
    assert PARTNER_ACCOUNT in rendered and "user/platform" in rendered
    assert json.dumps({"Fn::GetAtt": [ids["sender"], "Arn"]}) in rendered
    assert json.dumps({"Fn::GetAtt": [ids["operator"], "Arn"]}) in rendered
    # And `default`, declared empty, has its operator and nobody else
    lists = json.loads(_resolved(_access_of(submit), ids))
    assert lists["default"] == {"control": [role_arn(OPERATOR)]}
    assert "stack-account" not in rendered


def test_a_grant_on_a_queue_that_declares_no_access_fails_synth_saying_what_to_write(
    tmp_path: Any,
) -> None:
    """Issue 25, item 12: a grant on a queue with no `access` left it open to the whole
    account ("admin: stack-account"): any other role of the account read and cancelled its
    jobs. Now the grant is refused, naming the two things to write instead."""
    # Given cdk.json's `demo`, which declares no access lists
    assert "access" not in cdk_json_context()["sundial"]["queues"]["demo"]
    app = cdk.App(context=cdk_json_context(), outdir=str(tmp_path))
    stack = build_app(app)
    role = iam.Role(stack, "DemoReader", assumed_by=iam.AccountRootPrincipal())
    # When a role is granted to read it
    with pytest.raises(ValueError, match="queue 'demo' declares no access lists") as refused:
        stack.sundial.grant_read("demo", role)
    # Then the message says what to write, either way
    assert '"access": {} to allow only what is granted' in str(refused.value)
    assert '"access": {"admin": ["stack-account"]}' in str(refused.value)
    # And nothing was granted: the role has no policy
    assert _policy_resources(Template.from_stack(stack), _logical_id(stack, role)) == []


def test_a_caller_of_the_stack_account_not_granted_gets_403_on_a_granted_queue(
    granted: tuple[Template, dict[str, Any]], deps: Dependencies
) -> None:
    # Given the jobs function's access lists as synthesized (`default`: one operator granted
    # control in code), and a job on `default`
    template, ids = granted
    jobs = next(f for i, f in _functions(template).items() if "FunctionsJobsFunction" in i)
    configure(
        clock=deps.clock,
        environ={**os.environ, "SUNDIAL_ACCESS": _resolved(_access_of(jobs), ids)},
    )
    job = deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600)).job
    path, route = f"/jobs/{job.id}", "/jobs/{job_id}"
    # When another role of the same account reads or cancels it
    other = role_arn("someone-else")
    read = call_api(jobs_lambda, "GET", path, route=route, caller=other)
    cancel = call_api(jobs_lambda, "DELETE", path, route=route, caller=other)
    # Then it is refused (403 naming the queue), and the job is untouched
    assert read[0] == cancel[0] == 403, (read, cancel)
    assert "on queue 'default'" in cancel[1]["message"]
    assert deps.jobs.get(job.id).status is Status.PENDING
    # And the granted operator may cancel it
    assert call_api(jobs_lambda, "DELETE", path, route=route, caller=role_arn(OPERATOR))[0] == 200


def test_a_grant_gives_invoke_on_exactly_the_routes_of_its_permission(
    granted: tuple[Template, dict[str, Any]],
) -> None:
    template, ids = granted
    sender_paths = sorted(_path_of(arn) for arn in _policy_resources(template, ids["sender"]))
    assert sender_paths == sorted(f"{m}{p}" for m, p in routes_of(Permission.SUBMIT))
    operator_paths = {_path_of(arn) for arn in _policy_resources(template, ids["operator"])}
    assert operator_paths == {
        f"{method}{path.replace('{job_id}', '*').replace('{dag_id}', '*')}".replace(
            "{schedule_id}", "*"
        )
        for method, path in routes_of(Permission.CONTROL)
    }


def test_admin_routes_name_the_queue_in_the_path() -> None:
    assert resource_path("/queues/{queue}/dead", "email") == "/queues/email/dead"
    assert resource_path("/jobs/{job_id}/retry", "email") == "/jobs/*/retry"
    assert ("GET", "/queues/{queue}/dead") in routes_of(Permission.ADMIN)
    assert ("GET", "/queues/{queue}/dead") not in routes_of(Permission.READ)


@pytest.mark.parametrize(
    ("access", "message"),
    [
        ({"submit": ["everyone"]}, "'everyone' is not a principal"),
        ({"submit": ["arn:aws:iam::123456789012:role/a*b"]}, "'*' may only end the name"),
        ({"deploy": ["123456789012"]}, "deploy"),
    ],
)
def test_a_bad_access_list_fails_synth_naming_it(access: dict[str, Any], message: str) -> None:
    context = cdk_json_context()["sundial"]
    context["queues"]["email"] = {**context["queues"]["email"], "access": access}
    with pytest.raises(SettingsError, match=message):
        SundialSettings.from_context(context)


# Run in a fresh interpreter: the CDK app built and synthesized as `make synth` does, then the
# package's modules it loaded (before the route table was plain data: 70, every service and
# the API's authorization among them).
_SYNTH_PROBE = """
import json, sys, tempfile
import aws_cdk as cdk
from app import build_app
context = json.load(open("cdk.json"))["context"]
app = cdk.App(context=context, outdir=tempfile.mkdtemp())
build_app(app)
app.synth()
print(" ".join(m for m in sys.modules if m == "sundial" or m.startswith("sundial.")))
"""


def test_synthesizing_the_app_loads_none_of_the_runtime() -> None:
    # When the CDK app is synthesized in a fresh interpreter
    loaded = subprocess.run(
        [sys.executable, "-c", _SYNTH_PROBE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(PACKAGE_ROOT)])},
    ).stdout.split()
    # Then it read the route table, settings and key layouts it shares with the runtime, and
    # loaded none of the API, services, dispatch, attempts or composition root
    runtime_rooms = {"api", "services", "dispatch", "runs", "wiring"}
    runtime = [m for m in loaded if m.count(".") and m.split(".")[1] in runtime_rooms]
    assert runtime == [], runtime
    assert "sundial.access" in loaded
    assert len(loaded) <= 20, sorted(loaded)
