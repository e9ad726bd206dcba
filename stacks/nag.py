"""cdk-nag (3.x): AWS Solutions checks run as a CDK policy-validation plugin during synth.

A finding that is not acknowledged fails synthesis: the CLI prints the policy validation report
and exits non-zero. Acknowledge a finding next to the resource it concerns, with `acknowledge`,
always with a specific reason. IAM5 findings are acknowledged one by one
(`AwsSolutions-IAM5[Resource::...]`): cdk-nag 3 has no blanket rule-level suppression for them.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stage, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def add_nag_checks(app: Stage) -> AwsSolutionsChecks:
    """Run the AWS Solutions rule pack over everything in `app` at synth time."""
    checks = AwsSolutionsChecks(app)
    Validations.of(app).add_plugins(checks)
    return checks


def acknowledge(scope: IConstruct, rule_id: str, *, reason: str) -> None:
    """Acknowledge (suppress) one cdk-nag finding on `scope` and the resources beneath it."""
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))
