"""Unit tests of sundial/runs/."""
