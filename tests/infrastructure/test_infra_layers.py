"""The Lambda layers: domain package and dependencies, for the pinned runtime and arch."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

from conftest import Synthesized
from stacks.layers import MissingDepsLayerError, SundialLayers

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
