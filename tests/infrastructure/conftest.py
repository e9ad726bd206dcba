"""Synthesizes the Sundial app once per test session (starting jsii is slow)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# jsii prints an end-of-life banner on Node 20 unless the major version is listed here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# `app` and `stacks` live at the repo root, which is not on sys.path under plain `pytest`.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from app import STACK_NAME, build_app  # noqa: E402
from stacks.sundial import SundialStack  # noqa: E402


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

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = self.template.find_resources(resource_type)
        return found

    def logical_id(self, resource_type: str, path_fragment: str) -> str:
        """The logical id of the one resource of `resource_type` whose cdk path contains
        `path_fragment`, e.g. ("AWS::Lambda::Function", "/Functions/Sweeper/")."""
        matches = [
            logical_id
            for logical_id, resource in self.resources(resource_type).items()
            if path_fragment in resource.get("Metadata", {}).get("aws:cdk:path", "")
        ]
        assert len(matches) == 1, f"{resource_type} {path_fragment}: {matches}"
        return matches[0]

    def function_id(self, name: str) -> str:
        """The logical id of a Sundial function: "submit", "jobs", "fanout" or "sweeper"."""
        return self.logical_id("AWS::Lambda::Function", f"/Functions/{name.capitalize()}/")

    def function_properties(self, name: str) -> dict[str, Any]:
        properties: dict[str, Any] = self.resources("AWS::Lambda::Function")[
            self.function_id(name)
        ]["Properties"]
        return properties

    def allowed(self, name: str) -> dict[str, list[Any]]:
        """Every IAM action the function's role allows, mapped to the resources it applies to."""
        role_id = self.function_properties(name)["Role"]["Fn::GetAtt"][0]
        allowed: dict[str, list[Any]] = {}
        for policy in self.resources("AWS::IAM::Policy").values():
            if {"Ref": role_id} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                assert statement["Effect"] == "Allow"
                actions = statement["Action"]
                resources = statement["Resource"]
                for action in [actions] if isinstance(actions, str) else actions:
                    allowed.setdefault(action, []).extend(
                        resources if isinstance(resources, list) else [resources]
                    )
        return allowed


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
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
    template = Template.from_json(json.loads(template_path.read_text()))
    yield Synthesized(
        stack=stack,
        template=template,
        template_path=template_path,
        outdir=outdir,
        synth_error=synth_error,
        nag_violations=nag_violations,
    )
