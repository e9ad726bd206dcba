"""The shard lease on a cursor item (sundial.store.sweeps, THE SHARD LEASE) and the take of a
job a sweep sent without writing it (sundial.store.attempts), against moto."""

from __future__ import annotations

from typing import Any

from ulid import ULID

from sundial.ids import JobKey
from sundial.model.job import Job, Priority, Status
from sundial.store.sweeps import ShardSweepState
from sundial.timing import CLOCK_SKEW_MS, SWEEP_LEASE_MS, SWEEPER_TIMEOUT_MS
from sundial.wiring import Dependencies

NOW = 1_795_267_200_000


def _job(due_ms: int, **changes: object) -> Job:
    job = Job(
        key=JobKey(shard=2, due_ms=due_ms, ulid=str(ULID())),
        queue="default",
        payload_json='{"n":1}',
        priority=Priority.NORMAL,
        max_attempts=3,
        created_at_ms=NOW - 3_600_000,
    )
    for name, value in changes.items():
        setattr(job, name, value)
    return job


def _state(deps: Dependencies, shard: int = 2) -> ShardSweepState:
    return deps.sweeps.read_sweep_states([shard]).get(shard, ShardSweepState())


def test_the_lease_outlives_a_sweeper_and_the_clocks_skew() -> None:
    assert SWEEP_LEASE_MS > SWEEPER_TIMEOUT_MS + CLOCK_SKEW_MS


def test_one_write_takes_a_lease_and_one_releases_it_moving_the_cursor(
    deps: Dependencies,
) -> None:
    sweeps = deps.sweeps
    assert sweeps.take_lease(2, token="sweep:A", now_ms=NOW, read=_state(deps))
    held = _state(deps)
    assert (held.lease, held.lease_until_ms, held.sweeps) == ("sweep:A", NOW + SWEEP_LEASE_MS, 1)
    assert sweeps.finish_sweep(
        2,
        token="sweep:A",
        cursor="0000000000200#",
        sent={"0000000000300#X"},
        deferred={"capped": "0000000000150#Y"},
        paced={"capped": NOW + 5},
    )
    after = _state(deps)
    assert after == ShardSweepState(
        cursor="0000000000200#",
        paced={"capped": NOW + 5},
        sweeps=1,
        sent=frozenset({"0000000000300#X"}),
        deferred={"capped": "0000000000150#Y"},
    )
    # The next holder's release leaves nothing of it behind when it sent nothing above
    assert sweeps.take_lease(2, token="sweep:B", now_ms=NOW + 60_000, read=after)
    assert sweeps.finish_sweep(2, token="sweep:B", cursor="0000000000400#")
    assert _state(deps) == ShardSweepState(
        cursor="0000000000400#", paced={"capped": NOW + 5}, sweeps=2
    )


def test_a_live_lease_is_never_taken_and_an_expired_one_only_on_the_item_as_read(
    deps: Dependencies,
) -> None:
    sweeps = deps.sweeps
    read = _state(deps)
    assert sweeps.take_lease(2, token="sweep:A", now_ms=NOW, read=read)
    # Another sweeper while A lives (its clock may run ahead by the skew): refused
    live = _state(deps)
    assert not sweeps.take_lease(2, token="sweep:B", now_ms=NOW + SWEEP_LEASE_MS, read=live)
    # Two sweepers meeting at the expiry, both having read the item with A's lease: one wins
    expired = NOW + SWEEP_LEASE_MS + 1
    assert sweeps.take_lease(2, token="sweep:B", now_ms=expired, read=live)
    assert not sweeps.take_lease(2, token="sweep:C", now_ms=expired, read=live)
    # A sweeper that read the item before B's take (a stale view) is refused after B's release
    assert sweeps.finish_sweep(2, token="sweep:B", cursor="0000000000100#")
    assert not sweeps.take_lease(2, token="sweep:C", now_ms=expired + 1, read=live)
    # A late first holder's release is refused: nothing it saw is written
    assert not sweeps.finish_sweep(2, token="sweep:A", cursor="0000000000900#")
    assert _state(deps).cursor == "0000000000100#"


def test_the_take_accepts_a_due_pending_job_a_sweep_sent(deps: Dependencies) -> None:
    due = _job(NOW - 1_000)
    early = _job(NOW + CLOCK_SKEW_MS + 2_000)
    deps.store.put_new([due, early], now_ms=NOW - 3_600_000)
    attempts = deps.attempt_store
    take: dict[str, Any] = {
        "attempt": 1,
        "now_ms": NOW,
        "runner": "r",
        "runner_until_ms": NOW + 60_000,
    }
    assert attempts.mark_running(due.key, **take)[0]
    # A second message of the same attempt: the job is running, not pending any more
    assert not attempts.mark_running(due.key, **take | {"runner": "r2"})[0]
    # Not yet due (beyond the clocks' skew): no message of it can be on time
    assert not attempts.mark_running(early.key, **take)[0]


def test_a_cancel_or_pause_of_a_sent_job_before_its_take_wins(deps: Dependencies) -> None:
    cancelled, paused = _job(NOW - 1_000), _job(NOW - 2_000)
    deps.store.put_new([cancelled, paused], now_ms=NOW - 3_600_000)
    assert deps.store.cancel(cancelled.key, now_ms=NOW, expires_at_s=1)[0]
    assert deps.store.pause(paused.key, now_ms=NOW)[0]
    take: dict[str, Any] = {
        "attempt": 1,
        "now_ms": NOW,
        "runner": "r",
        "runner_until_ms": NOW + 60_000,
    }
    assert not deps.attempt_store.mark_running(cancelled.key, **take)[0]
    assert not deps.attempt_store.mark_running(paused.key, **take)[0]


def test_a_take_before_a_direct_senders_follow_up_clears_the_expiry(deps: Dependencies) -> None:
    # A direct job carries an expiry until its sender's follow-up write; the consumer's take
    # landed first, so that write is refused: the take itself must not leave the expiry.
    job = _job(NOW + 5_000, direct=True, expires_at_s=NOW // 1000 + 86_400)
    deps.store.put_new([job], now_ms=NOW)
    take: dict[str, Any] = {
        "attempt": 1,
        "now_ms": NOW + 5_000,
        "runner": "r",
        "runner_until_ms": NOW + 60_000,
    }
    assert deps.attempt_store.mark_running(job.key, **take)[0]
    assert not deps.store.claim(job.key, token="submit:x", now_ms=NOW + 5_001, lease_ms=0)
    current = deps.store.get(job.key)
    assert current is not None and current.status is Status.RUNNING
    assert current.expires_at_s is None
