#!/usr/bin/env python3
"""The Sundial CDK app: `make synth` (or `cdk synth`) runs this.

Settings come from the "sundial" key of the cdk.json context. cdk-nag's AWS Solutions checks run
as a validation plugin: an unacknowledged finding fails synth (the CLI prints the report, and a
copy is written to cdk.out/validation-report.json).
"""

from __future__ import annotations

import sys

import aws_cdk as cdk

from stacks.nag import add_nag_checks
from stacks.settings import CONTEXT_KEY, SettingsError, SundialSettings
from stacks.sundial import SundialStack

STACK_NAME = "Sundial"


def build_app(app: cdk.App) -> SundialStack:
    """Add the Sundial stack (env-agnostic) and the cdk-nag checks to `app`."""
    settings = SundialSettings.from_context(app.node.try_get_context(CONTEXT_KEY))
    stack = SundialStack(
        app,
        STACK_NAME,
        settings=settings,
        description="Sundial: serverless delayed-job scheduler",
    )
    add_nag_checks(app)
    return stack


def main() -> None:
    app = cdk.App()
    try:
        build_app(app)
    except SettingsError as exc:
        sys.exit(f"sundial: {exc}")
    app.synth()


if __name__ == "__main__":
    main()
