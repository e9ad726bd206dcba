"""Sundial."""
