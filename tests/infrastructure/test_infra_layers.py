"""The Lambda layers: domain package and dependencies, for the pinned runtime and arch."""

from __future__ import annotations

import re
from pathlib import Path

import aws_cdk as cdk
import pytest

from stacks.layers import MissingDepsLayerError, SundialLayers
from stacks.settings import LAMBDA_ARCH, LAMBDA_RUNTIME
from tests.infrastructure.synthesis import REPO_ROOT, Synthesized

pytestmark = pytest.mark.infra


def test_two_layers_for_python_313_arm64(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    # Then it has the domain and deps layers, both for python3.13 on arm64
    synthesized.template.resource_count_is("AWS::Lambda::LayerVersion", 2)
    for layer in synthesized.resources("AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_missing_deps_layer_asks_for_make_deps(tmp_path: Path) -> None:
    # Given a build folder without the dependencies layer
    stack = cdk.Stack(cdk.App(), "Scratch")

    # When the layers are created
    # Then synth stops and says how to build it
    with pytest.raises(MissingDepsLayerError, match="run `make deps` first"):
        SundialLayers(stack, "Layers", deps_layer_dir=tmp_path / "lambda-deps")


def test_runtime_matches_what_make_deps_builds_for() -> None:
    # Given the platform `make deps` builds the dependencies layer for
    makefile = (REPO_ROOT / "Makefile").read_text()
    python = re.search(r"^LAMBDA_PYTHON_VERSION\s*:=\s*(\S+)", makefile, re.MULTILINE)
    platform = re.search(r"^LAMBDA_PLATFORM\s*:=\s*(\S+)", makefile, re.MULTILINE)
    assert python and platform

    # Then the functions run on that Python, on the matching architecture
    assert LAMBDA_RUNTIME.name == f"python{python.group(1)}"
    expected_arch = "arm64" if platform.group(1).endswith("aarch64") else "x86_64"
    assert LAMBDA_ARCH.name == expected_arch
