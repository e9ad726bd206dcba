"""Unit tests of sundial/api/."""
