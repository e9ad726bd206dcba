"""The fault profiles the simulation runs with (probabilities per AWS call)."""

from __future__ import annotations

from tests.simulation.config import Faults

CLEAN = Faults()  # races only: no duplicate may appear
FAULTY = Faults(crash=0.01, throttle=0.005, partial_batch=0.1)
