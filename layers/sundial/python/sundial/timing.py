"""The timing rules dispatch relies on, in one place.

- A job due within DIRECT_WINDOW of its submission is sent to SQS by the submit Lambda itself,
  with DelaySeconds (SQS allows at most 15 minutes).
- Every other job is written `pending` with a due time beyond now + DIRECT_WINDOW. Sweepers run
  every minute and claim jobs due up to now + SWEEP_LOOKAHEAD, then advance a per-shard cursor
  to that frontier.
- Because DIRECT_WINDOW - SWEEP_LOOKAHEAD (60 s) exceeds the longest a submit can take between
  reading the clock and writing the item (the submit Lambda times out after 10 s), a pending job
  is never written behind a cursor, so no sweep can pass over it.
- A sweeper claim is a lease: if the claimer dies before it has sent the job and advanced the
  cursor, the job is taken over once CLAIM_LEASE has passed (longer than a sweeper can live).
- Some paths make a job pending again, or write one, within DIRECT_WINDOW: resuming a paused
  job or schedule, a new schedule's first occurrences, a paused queue's due-soon jobs. A sweep
  may already have passed them, so those paths send them themselves (sundial.release: the job
  is made `direct` first, so no sweeper claims it too), or, for a paused queue, record them for
  the catch-up its resume runs (sundial.queue_state).
"""

from __future__ import annotations

DIRECT_WINDOW_MS = 900_000
SWEEP_LOOKAHEAD_MS = 840_000
SUBMIT_TIMEOUT_MS = 10_000
CLAIM_LEASE_MS = 300_000
SWEEPER_TIMEOUT_MS = 60_000
# An idempotent repeat that finds the first request unfinished waits this long before
# concluding that the first request died and finishing its work.
SUBMIT_IN_FLIGHT_MS = 30_000
# The sweeper stops taking new jobs when less than this is left before its Lambda deadline.
SWEEP_DEADLINE_MARGIN_MS = 5_000

assert DIRECT_WINDOW_MS - SWEEP_LOOKAHEAD_MS > SUBMIT_TIMEOUT_MS * 2
assert CLAIM_LEASE_MS > 2 * SWEEPER_TIMEOUT_MS
assert SUBMIT_IN_FLIGHT_MS > SUBMIT_TIMEOUT_MS
