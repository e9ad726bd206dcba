"""Infrastructure tests: the session-wide `synthesized` fixture lives in tests/conftest.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# jsii prints an end-of-life banner on Node 20 unless that major version is listed here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# `app`, `stacks` and `tests.infrastructure` resolve from the repo root, which plain `pytest`
# (unlike `python -m pytest`) does not put on sys.path.
REPO_ROOT = str(Path(__file__).resolve().parents[2])
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)
