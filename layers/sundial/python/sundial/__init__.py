"""Sundial."""

# The package's version: pyproject.toml's, and the OpenAPI document's (a test keeps them equal).
__version__ = "0.1.0"
