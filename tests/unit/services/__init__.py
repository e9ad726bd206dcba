"""Unit tests of sundial/services/."""
