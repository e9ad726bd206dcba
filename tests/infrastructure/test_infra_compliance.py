"""cdk-nag (AWS Solutions) and cfn-lint find nothing on the synthesized app."""

from __future__ import annotations

import json

import pytest
from aws_cdk import Validations
from cfnlint.api import lint_file  # type: ignore[import-untyped]

from tests.infrastructure.synthesis import Synthesized

pytestmark = pytest.mark.infra


def test_cdk_nag_has_no_unacknowledged_findings(synthesized: Synthesized) -> None:
    # Given the app built exactly as app.py builds it, with the AwsSolutions checks registered
    # When it is synthesized and the rule pack is run over it
    # Then no finding is left: every exception is acknowledged with a reason next to its
    # resource (any finding, even a warning, would fail `make synth`)
    assert synthesized.nag_violations == []
    assert synthesized.synth_error is None


def test_validation_report_has_no_violations(synthesized: Synthesized) -> None:
    # Given the synthesized cloud assembly
    # When we read the policy validation report CDK writes next to the templates
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())

    # Then no plugin reported a violation
    assert [plugin for plugin in report["pluginReports"] if plugin.get("violations")] == []


def test_acknowledgments_all_carry_a_reason(synthesized: Synthesized) -> None:
    # Given every cdk-nag acknowledgment recorded in the construct tree
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    acknowledgments = {
        rule_id: reason
        for construct in synthesized.stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == key
        for rule_id, reason in entry.data.items()
    }

    # Then there are some, and each has a specific written reason
    assert acknowledgments
    for rule_id, reason in acknowledgments.items():
        assert len(str(reason)) >= 40, f"{rule_id}: reason too thin: {reason!r}"


def test_cfn_lint_finds_nothing(synthesized: Synthesized) -> None:
    # Given the synthesized CloudFormation template
    # When cfn-lint checks it, as `make cfn-lint` does
    matches = lint_file(synthesized.template_path)

    # Then there are no errors, warnings or informational findings
    assert [str(match) for match in matches] == []
