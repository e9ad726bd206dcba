"""What a shard sweep does with the jobs it has decided to send (dispatch.shard_sweep decides,
and moves or holds the cursor): read each job's item right before its send, put the message in
the sweeper's outbox (dispatch.outbox), and settle the outcome; and the sweep's report.

The interleavings this side enforces (the rest of THE SHARD LEASE is in dispatch.shard_sweep's
docstring):
- A job read pending but changed before the sweep reads its item for the send (a cancel, a
  pause, a move, a direct owner) is not sent: the sweep reads each batch's items (one
  BatchGetItem per 100) right before sending them, and the cursor may pass it (it needs
  nothing from a sweep). A change after that read makes the message stale for the take.
- A job whose send failed (SQS refused it, or the request went wrong) holds the cursor at it:
  it is still pending, and the next sweep sends it.
- A retry timer gets its expiry once sent (one write, timers only: bookkeeping from then on).
- A poison job (no such queue, SQS refusing it as the sender's fault) is marked dead,
  conditional on it still being pending and not direct."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from sundial.clock import Clock
from sundial.dispatch.outbox import Outbox
from sundial.ids import JobKey
from sundial.model.job import Job, Status
from sundial.store.jobs import JobStore
from sundial.store.sweeps import DueRef, Malformed, SweepStore
from sundial.transport.sender import Outgoing, SendResult

logger = logging.getLogger(__name__)


# Items read per BatchGetItem (DynamoDB's limit).
_READ_BATCH = 100


# A due range is read as DueRefs (no payload); a schedule's successor arrives as a Job.
SweptJob = DueRef | Job


@dataclass(slots=True)
class SweepReport:
    shards: int = 0
    seen: int = 0
    dispatched: int = 0
    send_failures: int = 0
    taken_over: int = 0  # legacy claims of a sweeper of before the lease, sent again
    lease_busy: int = 0  # shards left alone: another sweep held (or took) the lease
    paused: int = 0  # pending jobs of paused queues, passed over
    paced: int = 0  # jobs of capped queues sent for a slot later than their due time
    deferred: int = 0  # jobs of capped queues left pending: no slot within SQS's 15 minutes
    poisoned: int = 0  # jobs that can never be sent as they are, marked dead with the reason
    errors: int = 0  # AWS errors met (a read, a poisoning, a release), each isolated
    held_shards: list[int] = field(default_factory=list)
    failed_shards: list[int] = field(default_factory=list)  # swept no further after an error
    # Per job sent: visible in SQS - due, in ms (transport.sender.SendResult.lateness_ms).
    lateness_ms: list[int] = field(default_factory=list, repr=False)

    def add(self, other: SweepReport) -> None:
        self.shards += other.shards
        self.seen += other.seen
        self.dispatched += other.dispatched
        self.send_failures += other.send_failures
        self.taken_over += other.taken_over
        self.lease_busy += other.lease_busy
        self.paused += other.paused
        self.paced += other.paced
        self.deferred += other.deferred
        self.poisoned += other.poisoned
        self.errors += other.errors
        self.held_shards += other.held_shards
        self.failed_shards += other.failed_shards
        self.lateness_ms += other.lateness_ms

    def summary(self) -> dict[str, object]:
        """The report as logged and returned: the counts, and the lateness as percentiles
        rather than one number per job."""
        counts = {
            name: getattr(self, name) for name in self.__dataclass_fields__ if name != "lateness_ms"
        }
        ordered = sorted(self.lateness_ms)
        if ordered:
            counts["lateness_ms"] = {
                "p50": ordered[(len(ordered) - 1) // 2],
                "p99": ordered[int(0.99 * (len(ordered) - 1))],
                "max": ordered[-1],
            }
        return counts


class ShardSends:
    """The send side of a ShardSweep (its base class), which sets these attributes."""

    _store: JobStore
    _sweeps: SweepStore
    _clock: Clock
    _shard: int
    _outbox: Outbox
    _to_send: list[SweptJob]  # decided, not yet read and sent
    _sent: set[str]  # sort keys sent, by this sweep or (above) the last holder
    _slots: dict[str, int]  # a paced job's send slot, by sort key
    _expires_at_s: int
    _hold: str | None  # lowest sort key that must be looked at again
    report: SweepReport

    def flush(self) -> None:
        """Send what this sweep has decided so far (the sweeper does after its urgent passes)."""
        self._flush()

    def _read_items(self, decided: list[SweptJob]) -> list[Job]:
        """The items of the jobs decided, read right before their send (refs carry no
        payload): those still waiting for a sweep's send. A job changed since it was read
        (cancelled, paused, moved, made direct, taken) needs nothing from this sweep."""
        refs = [job.key for job in decided if isinstance(job, DueRef)]
        items: dict[JobKey, Job | Malformed] = {}
        for start in range(0, len(refs), _READ_BATCH):
            chunk = refs[start : start + _READ_BATCH]
            try:
                items |= self._sweeps.fetch_jobs(chunk)
            except (ClientError, BotoCoreError):
                logger.exception("reading jobs of shard %s failed", self._shard)
                self.report.errors += 1
                self._hold_at(min(key.sk for key in chunk))
                return []
        ready: list[Job] = []
        for job in decided:
            current = job if isinstance(job, Job) else items.get(job.key)
            if isinstance(current, Malformed):
                self._poison(job, "MalformedJob", current.reason)
            elif current is not None and waits_for_send(current, legacy=job.status):
                ready.append(current)
        return ready

    def _flush(self) -> None:
        """Put in the outbox what this sweep decided, and send the outbox (with whatever other
        shards put there)."""
        self.stage()
        self._outbox.send()

    def stage(self) -> None:
        """Read and put in the outbox what is decided, without sending (the sweeper sends the
        outbox once for every shard before it finishes them)."""
        decided, self._to_send = self._to_send, []
        ready = self._read_items(decided)
        self._outbox.add(
            self,
            [
                Outgoing(job, attempt=job.retry_attempt or 1, slot_ms=self._slots.get(job.key.sk))
                for job in ready
            ],
        )

    def settle(self, outgoing: Sequence[Outgoing], result: SendResult) -> None:
        """The outcome of this sweep's messages (dispatch.outbox)."""
        failed = {message.job.id for message in result.failed}
        sent = [o.job for o in outgoing if o.job.id not in failed]
        self.report.dispatched += len(sent)
        self.report.paced += sum(
            1 for o in outgoing if o.visible_at_ms > o.run_at_ms and o.job.id not in failed
        )
        self.report.lateness_ms += result.lateness_ms
        self._sent.update(job.key.sk for job in sent)
        if logger.isEnabledFor(logging.INFO):
            # Each job sent with the request that submitted it, so one job can be followed
            # from the API's logs through this one to its consumer's (about 80 bytes a job).
            jobs = {job.id: job.correlation_id for job in sent}
            logger.info("jobs sent", extra={"shard": self._shard, "jobs": jobs})
        for rejected in result.rejected:
            self._poison(rejected.message.job, rejected.error_type, rejected.reason)
        for message in result.retry:
            self.report.send_failures += 1
            self._hold_at(message.job.key.sk)  # still pending: the next sweep sends it
        for job in sent:
            if job.retry_of is not None:
                self._expire_timer(job)

    def _expire_timer(self, timer: Job) -> None:
        """A retry timer sent is bookkeeping: it expires after the retention (best effort: one
        left without is only kept, never sent again, being below the cursor)."""
        try:
            self._store.expire_sent_timer(timer.key, expires_at_s=self._expires_at_s)
        except (ClientError, BotoCoreError):
            logger.exception("setting the expiry of timer %s failed", timer.id)

    def _poison(self, job: SweptJob | Job, error_type: str, reason: str) -> None:
        """A job that can never be sent as it is: dead, with the reason, if it is still pending
        and no one else owns it."""
        logger.warning("poison job %s: %s", job.id, reason)
        try:
            self._store.mark_poisoned(
                job.key,
                error_type=error_type,
                reason=reason,
                now_ms=self._clock.now_ms(),
                expires_at_s=self._expires_at_s,
                swept=True,
            )
        except (ClientError, BotoCoreError):
            logger.exception("marking %s dead failed", job.id)
            self.report.errors += 1
            self._hold_at(job.key.sk)
            return
        # Refused only if it is no longer waiting for a sweep (cancelled meanwhile): nothing to
        # send either.
        self.report.poisoned += 1

    def _poison_malformed(self, ref: Malformed) -> None:
        """An item in the range that is not a valid job: dead if it may be pending, so no
        sweep meets it again; the cursor passes it (it can never be sent)."""
        logger.warning("malformed item %s: %s", ref.key, ref.reason)
        if ref.key is None or self._store.mark_poisoned(
            ref.key,
            error_type="MalformedJob",
            reason=ref.reason,
            now_ms=self._clock.now_ms(),
            expires_at_s=self._expires_at_s,
        ):
            self.report.poisoned += 1

    def _hold_at(self, sk: str) -> None:
        if self._hold is None or sk < self._hold:
            self._hold = sk


def waits_for_send(job: Job, *, legacy: Status) -> bool:
    """Is `job`, as read right before its send, still for a sweep to send? A legacy claim
    (queued) was decided as such; anything else must still be pending and nobody else's."""
    if legacy is Status.QUEUED:
        return job.status is Status.QUEUED
    return job.status is Status.PENDING and not job.direct and not dag_held(job)


def dag_held(job: SweptJob) -> bool:
    """A root of a paused DAG (services.dags): read as a DueRef, or as a Job (a successor)."""
    if isinstance(job, DueRef):
        return job.held
    return job.dag is not None and job.dag.held
