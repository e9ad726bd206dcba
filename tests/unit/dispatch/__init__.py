"""Unit tests of sundial/dispatch/."""
