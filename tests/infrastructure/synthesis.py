"""Synthesizes the Sundial app as app.py builds it, and reads the result back."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from app import STACK_NAME, build_app
from stacks.functions import construct_name
from stacks.sundial import SundialStack

REPO_ROOT = Path(__file__).resolve().parents[2]


def cdk_json_context() -> dict[str, Any]:
    context: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return context


@dataclass(frozen=True)
class Synthesized:
    """The app as `make synth` builds it, synthesized into `outdir`."""

    stack: SundialStack
    template: Template
    template_path: Path
    outdir: Path
    synth_error: str | None
    """The error app.synth() raised (a cdk-nag finding fails synth), or None."""
    nag_violations: list[str]
    """Unacknowledged cdk-nag findings, 'rule at construct path', from validate_scope."""

    def resources(self, resource_type: str) -> dict[str, Any]:
        """{logical id: resource} of every resource of `resource_type`."""
        return dict(self.template.find_resources(resource_type))

    def logical_id(self, path: str) -> str:
        """The logical id of the CloudFormation resource at construct `path` under the Sundial
        construct, e.g. "Functions/Sweeper/Function" or "JobQueues/email-dlq"."""
        node = self.stack.sundial.node.find_child(path.split("/", maxsplit=1)[0])
        for part in path.split("/")[1:]:
            node = node.node.find_child(part)
        resource = node if isinstance(node, cdk.CfnElement) else node.node.default_child
        assert isinstance(resource, cdk.CfnElement), path
        return self.stack.get_logical_id(resource)

    def function_id(self, name: str) -> str:
        """The logical id of a Sundial function by its lambdas/ directory name: "submit", "jobs",
        "fanout", "sweeper" or "example_consumer"."""
        return self.logical_id(f"Functions/{construct_name(name)}/Function")

    def function_properties(self, name: str) -> dict[str, Any]:
        properties: dict[str, Any] = self.resources("AWS::Lambda::Function")[
            self.function_id(name)
        ]["Properties"]
        return properties

    def allowed(self, name: str) -> dict[str, list[Any]]:
        """Every IAM action the function's role allows, mapped to the resources it applies to."""
        return allowed_actions(self._policies(name))

    def statements(self, name: str) -> list[dict[str, Any]]:
        """Every statement of the function's role policies, as synthesized (conditions too)."""
        return [
            statement
            for policy in self._policies(name)
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]

    def _policies(self, name: str) -> list[Mapping[str, Any]]:
        role_id = self.function_properties(name)["Role"]["Fn::GetAtt"][0]
        policies = self.resources("AWS::IAM::Policy").values()
        return [p for p in policies if {"Ref": role_id} in p["Properties"]["Roles"]]


def allowed_actions(policies: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Every action the IAM policies allow, mapped to the resources it applies to."""
    allowed: dict[str, list[Any]] = {}
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions, resources = statement["Action"], statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                allowed.setdefault(action, []).extend(
                    resources if isinstance(resources, list) else [resources]
                )
    return allowed


def synthesize(outdir: Path, sundial: Mapping[str, Any] | None = None) -> Synthesized:
    """Build the app with the cdk.json context, synthesize it into `outdir`, run cdk-nag.
    `sundial`: keys that replace those of the context's "sundial" settings."""
    context = cdk_json_context()
    context["sundial"] = {**context["sundial"], **(sundial or {})}
    app = cdk.App(context=context, outdir=str(outdir))
    stack = build_app(app)
    synth_error: str | None = None
    try:
        app.synth()
    except RuntimeError as exc:  # jsii surfaces CDK's "ValidationFailed" error as RuntimeError
        synth_error = str(exc)
    # The rule pack app.py registers, run again directly so a test can name each finding.
    report = AwsSolutionsChecks().validate_scope(app)
    nag_violations = [
        f"{violation.rule_name} at {resource.construct_path}"
        for violation in report.violations
        for resource in violation.violating_resources
    ]
    # The template is written even when validation fails, so structural tests still run.
    template_path = outdir / f"{STACK_NAME}.template.json"
    return Synthesized(
        stack=stack,
        template=Template.from_json(json.loads(template_path.read_text())),
        template_path=template_path,
        outdir=outdir,
        synth_error=synth_error,
        nag_violations=nag_violations,
    )
