"""The timing constants dispatch relies on, each with its reason, and the asserts between them.

The rules they make safe (the owner rule, the cursor rule) are told in docs/invariants.md; each
write sequence's interleavings are in the docstring of the module that enforces it. Where a job
goes, and the one comparison with DIRECT_WINDOW_MS, is sundial.model.placement.
"""

from __future__ import annotations

# A job due within this of now is sent by its writer with DelaySeconds (SQS allows 15 minutes).
DIRECT_WINDOW_MS = 900_000
# A sweep sends jobs due up to now + this, then moves its shard's cursor to that frontier.
SWEEP_LOOKAHEAD_MS = 840_000
# A pending job written beyond the direct window is this far above every cursor: more than a
# submit can take between reading the clock and writing the item.
SWEEP_MARGIN_MS = DIRECT_WINDOW_MS - SWEEP_LOOKAHEAD_MS
# The submit Lambda's timeout: the longest between an API call's clock read and its write.
SUBMIT_TIMEOUT_MS = 10_000
# The sweeper Lambda's timeout: a shard's lease must outlive any sweeper that may still send.
SWEEPER_TIMEOUT_MS = 60_000
# An idempotent repeat that finds the first request unfinished waits this long before
# concluding that the first request died and finishing its work.
SUBMIT_IN_FLIGHT_MS = 30_000
# The sweeper stops taking new jobs when less than this is left before its Lambda deadline.
SWEEP_DEADLINE_MARGIN_MS = 5_000
# How far two AWS machines' clocks may disagree (they keep NTP time to within milliseconds): an
# attempt's holder lease (runner_until, set by the clock of the function that took it) must be
# past by more than this before another delivery takes the attempt over (sundial.store.attempts).
CLOCK_SKEW_MS = 5_000
# A shard's lease (sundial.store.sweeps, THE SHARD LEASE), from its take by the holder's clock:
# past the sweeper's hard timeout by more than the clocks' skew, so a holder is dead before
# any other sweeper's clock reads its lease as expired.
SWEEP_LEASE_MS = SWEEPER_TIMEOUT_MS + CLOCK_SKEW_MS + 1_000
# The longest a Lambda function runs (its hard timeout): a consumer's lease on an attempt when
# its deadline is unknown, and the lease of an attempt taken before holders were recorded.
LEGACY_RUNNER_MS = 15 * 60 * 1000
# A consumer's deferred send of a DAG node released onto a paused queue: a timer this far
# ahead, past the direct window, so no sweep can have passed it (sundial.services.deferral).
DEFERRED_SEND_MS = DIRECT_WINDOW_MS + 1_000

# A pending job is never written behind a cursor: the margin outlasts a submit, twice.
assert SWEEP_MARGIN_MS > SUBMIT_TIMEOUT_MS * 2
# A live sweeper's lease is never taken.
assert SWEEP_LEASE_MS > SWEEPER_TIMEOUT_MS + CLOCK_SKEW_MS
# A repeat never takes over from a first request that may still be running.
assert SUBMIT_IN_FLIGHT_MS > SUBMIT_TIMEOUT_MS
