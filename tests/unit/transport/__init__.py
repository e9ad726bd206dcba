"""Unit tests of sundial/transport/."""
