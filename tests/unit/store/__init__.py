"""Unit tests of sundial/store/."""
