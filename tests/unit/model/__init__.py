"""Unit tests of sundial/model/."""
