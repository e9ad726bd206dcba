"""Sundial's AWS CDK infrastructure: one construct per concern, composed by `Sundial`."""

from stacks.settings import LAMBDA_ARCH, LAMBDA_RUNTIME, SettingsError, SundialSettings
from stacks.sundial import Sundial, SundialStack

__all__ = [
    "LAMBDA_ARCH",
    "LAMBDA_RUNTIME",
    "SettingsError",
    "Sundial",
    "SundialSettings",
    "SundialStack",
]
