"""cdk.json sets every feature flag the installed aws-cdk-lib recommends, as `cdk init` writes
them, so `cdk synth` no longer prints "76 feature flags are not configured" on every run (issue
26). The synthesized template did not change with them (but for CDK's own metadata): the rest
of the infrastructure tests hold it to what it was."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk

ROOT = Path(__file__).resolve().parents[2]


def _recommended() -> dict[str, Any]:
    """aws-cdk-lib's recommended-feature-flags.json, from the package jsii runs."""
    [bundle] = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        flags: dict[str, Any] = json.load(member)
    return flags


def test_cdk_json_sets_every_recommended_feature_flag() -> None:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    recommended = _recommended()
    assert len(recommended) > 50
    missing = sorted(set(recommended) - set(context))
    assert missing == []
    different = {k: (context[k], v) for k, v in recommended.items() if context[k] != v}
    assert different == {}
