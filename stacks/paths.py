"""Where the Lambda code and layer assets live, resolved from the repo root (not the cwd).

Absolute paths keep the constructs usable from another project's CDK app. Asset hashes are
content-based, so the absolute location does not change the synthesized template.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LAMBDAS_DIR = REPO_ROOT / "lambdas"
DOMAIN_LAYER_DIR = REPO_ROOT / "layers" / "sundial"
DEPS_LAYER_DIR = REPO_ROOT / "build" / "lambda-deps"

# Never ship build litter in an asset (it would also change the asset hash on every run).
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "*.egg-info", "**/*.egg-info", ".installed"]
