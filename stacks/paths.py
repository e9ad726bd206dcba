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
GLUE_DIR = REPO_ROOT / "glue"
LOCK_FILE = REPO_ROOT / "requirements.lock"

# Never ship build litter in an asset (it would also change the asset hash on every run).
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "*.egg-info", "**/*.egg-info", ".installed"]


def locked_version(package: str) -> str:
    """The version of `package` pinned in requirements.lock (what the tests run with)."""
    prefix = f"{package.lower()}=="
    for line in LOCK_FILE.read_text().splitlines():
        if line.lower().startswith(prefix):
            return line[len(prefix) :].strip()
    raise LookupError(f"{package} is not pinned in {LOCK_FILE}")
