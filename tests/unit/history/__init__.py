"""Unit tests of sundial/history/."""
