"""When to try a request again, and how long to wait first.

Not urllib3's `Retry`: it works inside one HTTP connection pool, so it cannot cover the other
transports (the in-process one the tests use), it would re-send a SigV4 signature made for the
first attempt, and it knows nothing of which Sundial calls are safe to repeat (a DAG submit
has no idempotency key; a job submit does). The client asks this module instead, per call.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff And
    Jitter"): attempt n waits a uniform random time in [0, min(cap, base * 2**(n-1))], so
    clients that failed together do not retry together. A `Retry-After` from the API wins when
    it asks for longer, but never beyond `max_retry_after_s`."""

    max_attempts: int = 5  # in all, the first included
    base_s: float = 0.25
    cap_s: float = 20.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def delay_s(
        self, attempt: int, *, retry_after_s: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait after failed attempt number `attempt` (1 for the first)."""
        ceiling = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        jittered = (rng or random).uniform(0.0, ceiling)
        if retry_after_s is not None:
            return max(jittered, min(retry_after_s, self.max_retry_after_s))
        return jittered


NO_RETRIES = Backoff(max_attempts=1)
