"""The sweeper: finds due and near-due jobs of its shards, claims each with a conditional
write, and hands them to SQS in batches with DelaySeconds so they surface at their due second.

Per shard it keeps a cursor: the lowest sort key that may still need work. Everything below
the cursor has been sent or needs nothing. A sweep reads [cursor, now + lookahead], then moves
the cursor to just past that frontier, or holds it at the first job it could not finish:
- a job whose send failed (it is un-claimed and retried next sweep);
- a job claimed by another live sweeper (that sweeper may yet fail);
- the first job left when the Lambda ran short of time.
A claim left behind by a dead sweeper expires after the lease and is taken over, so a crash at
any step loses nothing (the job may then be sent twice: at-least-once, only after a crash).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field
from ulid import ULID

from sundial.clock import Clock
from sundial.ids import due_sk_bound
from sundial.models import Job, Status
from sundial.sender import SQS_BATCH, Outgoing, QueueSender
from sundial.store import JobStore
from sundial.timing import CLAIM_LEASE_MS, SWEEP_DEADLINE_MARGIN_MS, SWEEP_LOOKAHEAD_MS

# Flush claimed jobs to SQS once this many are waiting, so a long backlog streams out.
_FLUSH_AT = SQS_BATCH * 10


class SweepRequest(BaseModel):
    """The fan-out's message to one sweeper."""

    model_config = ConfigDict(extra="forbid")

    shards: list[int] = Field(min_length=1, max_length=4096)


@dataclass(slots=True)
class SweepReport:
    shards: int = 0
    seen: int = 0
    dispatched: int = 0
    send_failures: int = 0
    lost_races: int = 0
    taken_over: int = 0
    held_shards: list[int] = field(default_factory=list)

    def add(self, other: SweepReport) -> None:
        self.shards += other.shards
        self.seen += other.seen
        self.dispatched += other.dispatched
        self.send_failures += other.send_failures
        self.lost_races += other.lost_races
        self.taken_over += other.taken_over
        self.held_shards += other.held_shards


class Sweeper:
    def __init__(self, *, store: JobStore, sender: QueueSender, clock: Clock) -> None:
        self._store = store
        self._sender = sender
        self._clock = clock

    def sweep(
        self, shards: Sequence[int], *, remaining_ms: Callable[[], int] | None = None
    ) -> SweepReport:
        """Sweep the given shards. `remaining_ms` reports the time left before the Lambda's
        deadline; the sweep stops early (keeping its place) when it runs short."""
        token = f"sweep:{ULID.from_timestamp(self._clock.now_ms() / 1000)}"
        cursors = self._store.read_cursors(shards)
        report = SweepReport()
        for shard in shards:
            if remaining_ms is not None and remaining_ms() < SWEEP_DEADLINE_MARGIN_MS:
                break  # the shards not reached keep their cursors; the next tick continues
            shard_sweep = _ShardSweep(
                store=self._store,
                sender=self._sender,
                clock=self._clock,
                shard=shard,
                cursor=cursors.get(shard),
                token=token,
                remaining_ms=remaining_ms,
            )
            report.add(shard_sweep.run())
        return report


class _ShardSweep:
    def __init__(
        self,
        *,
        store: JobStore,
        sender: QueueSender,
        clock: Clock,
        shard: int,
        cursor: str | None,
        token: str,
        remaining_ms: Callable[[], int] | None,
    ) -> None:
        self._store, self._sender, self._clock = store, sender, clock
        self._shard = shard
        self._cursor = cursor or due_sk_bound(0, upper=False)
        self._token = token
        self._remaining_ms = remaining_ms
        self._hold: str | None = None  # lowest sort key that must be looked at again
        self._claimed: list[Job] = []
        self.report = SweepReport(shards=1)

    def run(self) -> SweepReport:
        now = self._clock.now_ms()
        frontier = now + SWEEP_LOOKAHEAD_MS
        jobs = self._store.query_due(
            self._shard, from_sk=self._cursor, to_sk=due_sk_bound(frontier, upper=True)
        )
        for job in jobs:
            self.report.seen += 1
            if self._short_of_time():
                self._hold_at(job.key.sk)
                break
            self._consider(job)
            if len(self._claimed) >= _FLUSH_AT:
                self._flush()
        self._flush()
        next_cursor = self._hold or due_sk_bound(frontier + 1, upper=False)
        if self.report.seen and next_cursor > self._cursor:
            self._store.advance_cursor(self._shard, next_cursor)
        if self._hold:
            self.report.held_shards.append(self._shard)
        return self.report

    def _consider(self, job: Job) -> None:
        now = self._clock.now_ms()
        if job.direct:
            return  # the submit path owns it
        if job.dag is not None and job.dag.held:
            return  # a root of a paused DAG: resuming the DAG dispatches it
        if job.status is Status.PENDING:
            self._claim(job, now, from_token=None)
        elif job.status is Status.QUEUED and job.claim_token != self._token:
            if job.lease_until_ms is not None and job.lease_until_ms < now:
                self.report.taken_over += 1
                self._claim(job, now, from_token=job.claim_token)
            else:
                self._hold_at(job.key.sk)  # another live sweeper is sending it; it may fail

    def _claim(self, job: Job, now: int, *, from_token: str | None) -> None:
        outcome = self._store.claim(
            job.key,
            token=self._token,
            now_ms=now,
            lease_ms=CLAIM_LEASE_MS,
            from_token=from_token,
            keep_expiry=job.retry_of is not None,
        )
        if outcome.won:
            self._claimed.append(job)
            return
        self.report.lost_races += 1
        current = outcome.current
        if current is not None and current.status is Status.QUEUED:
            self._hold_at(job.key.sk)  # someone else claimed it first and may still fail

    def _flush(self) -> None:
        if not self._claimed:
            return
        claimed, self._claimed = self._claimed, []
        outgoing = [Outgoing(job, attempt=job.retry_attempt or 1) for job in claimed]
        failed = self._sender.send(outgoing, now_ms=self._clock.now_ms())
        self.report.dispatched += len(claimed) - len(failed)
        for message in failed:
            self.report.send_failures += 1
            # Best effort: if this write fails too, the claim's lease expires and it is retaken.
            self._store.unclaim(message.job.key, token=self._token)
            self._hold_at(message.job.key.sk)

    def _hold_at(self, sk: str) -> None:
        if self._hold is None or sk < self._hold:
            self._hold = sk

    def _short_of_time(self) -> bool:
        return self._remaining_ms is not None and self._remaining_ms() < SWEEP_DEADLINE_MARGIN_MS
