"""Synthesizes the Sundial app once per test session (starting jsii is slow)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# jsii prints an end-of-life banner on Node 20 unless that major version is listed here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# `app`, `stacks` and `tests.infrastructure` resolve from the repo root, which plain `pytest`
# (unlike `python -m pytest`) does not put on sys.path.
REPO_ROOT = str(Path(__file__).resolve().parents[2])
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from tests.infrastructure.synthesis import Synthesized, synthesize  # noqa: E402


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk.out"))
