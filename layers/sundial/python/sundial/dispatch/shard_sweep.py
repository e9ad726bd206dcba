"""One sweep of one shard: read its due range, claim and send each job, move or hold its
cursor (the rules are in dispatch.sweeper's docstring and sundial.timing)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from math import inf

from botocore.exceptions import BotoCoreError, ClientError

from sundial.clock import Clock
from sundial.dispatch.fairness import DispatchPlan, DispatchPolicy, Due, Pacer, plan_dispatch
from sundial.ids import due_sk_bound
from sundial.model.job import Job, Priority, Status
from sundial.services.chain import Action, OccurrenceChain
from sundial.store.jobs import ClaimOutcome, JobStore
from sundial.store.sweeps import DueRef, Malformed, QueueResumed, SweepStore
from sundial.timing import CLAIM_LEASE_MS, SWEEP_DEADLINE_MARGIN_MS, SWEEP_LOOKAHEAD_MS
from sundial.transport.sender import SQS_BATCH, Outgoing, QueueSender

logger = logging.getLogger(__name__)


# Flush claimed jobs to SQS once this many are waiting, so a long backlog streams out.
_FLUSH_AT = SQS_BATCH * 10


# A shard whose sends keep failing stops claiming after this many (SQS is struggling; the
# next sweep goes on from there). It also bounds the done record's `not_sent` set (~40 KB).
NOT_SENT_MAX = 1000


PRIORITY_ORDER = (Priority.CRITICAL, Priority.HIGH, Priority.NORMAL, Priority.LOW)
_PRIORITY_RANK = {priority: rank for rank, priority in enumerate(PRIORITY_ORDER)}


# A due range is read as DueRefs (no payload); a schedule's successor arrives as a Job.
SweptJob = DueRef | Job


@dataclass(slots=True)
class SweepReport:
    shards: int = 0
    seen: int = 0
    dispatched: int = 0
    send_failures: int = 0
    lost_races: int = 0
    taken_over: int = 0
    paused: int = 0  # pending jobs of paused queues, passed over
    paced: int = 0  # jobs of capped queues sent for a slot later than their due time
    deferred: int = 0  # jobs of capped queues left pending: no slot within SQS's 15 minutes
    poisoned: int = 0  # jobs that can never be sent as they are, marked dead with the reason
    errors: int = 0  # AWS errors met (a claim, an un-claim, a shard), each isolated
    held_shards: list[int] = field(default_factory=list)
    failed_shards: list[int] = field(default_factory=list)  # swept no further after an error
    # Per job sent: visible in SQS - due, in ms (transport.sender.SendResult.lateness_ms).
    lateness_ms: list[int] = field(default_factory=list, repr=False)

    def add(self, other: SweepReport) -> None:
        self.shards += other.shards
        self.seen += other.seen
        self.dispatched += other.dispatched
        self.send_failures += other.send_failures
        self.lost_races += other.lost_races
        self.taken_over += other.taken_over
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


@dataclass(frozen=True)
class SweepTools:
    """What every shard sweep of one sweeper works with."""

    store: JobStore
    sweeps: SweepStore
    sender: QueueSender
    clock: Clock
    chain: OccurrenceChain | None = None
    retention_s: int = 30 * 86_400
    policy: DispatchPolicy = field(default_factory=DispatchPolicy)


class ShardSweep:
    def __init__(
        self,
        tools: SweepTools,
        *,
        shard: int,
        cursor: str | None,
        token: str,
        remaining_ms: Callable[[], int] | None,
        claims: Executor,
        paused_queues: frozenset[str] = frozenset(),
        paced: Mapping[str, int] | None = None,
    ) -> None:
        self._store, self._sweeps, self._sender = tools.store, tools.sweeps, tools.sender
        self._policy = tools.policy
        self._clock, self._chain, self._retention_s = tools.clock, tools.chain, tools.retention_s
        self._shard = shard
        self._cursor = cursor or due_sk_bound(0, upper=False)
        self._token = token
        self._remaining_ms = remaining_ms
        self._claims = claims
        self._paused_queues = paused_queues
        self._hold: str | None = None  # lowest sort key that must be looked at again
        self._in_flight: list[tuple[SweptJob, Future[ClaimOutcome]]] = []  # claims, in order
        self._claimed: list[Job] = []
        self._handled: set[str] = set()  # sort keys already dealt with in this sweep
        self._frontier_sk = ""
        # Ids this sweep claimed and did not send (or may have claimed: a claim whose outcome
        # is unknown). Its done record names them, so no later sweep takes them as sent.
        self._not_sent: set[str] = set()
        self._done_tokens: dict[str, frozenset[str] | None] = {}
        self._expires_at_s = 0
        self._frontier = 0
        self._refs: list[DueRef] = []  # the due range as read
        self._plan = DispatchPlan()  # its order, most urgent first, and the paced jobs' slots
        self._next = 0  # position in the plan's order: everything before it was considered
        self._considered: set[int] = set()
        # Pacing (sundial.dispatch.fairness): each capped queue's next free send slot on this
        # shard as read from the cursor item, its pacer during this sweep, and the slot of each
        # job placed (by sort key: a claim returns a Job, a successor is not in _refs).
        self._paced_before: dict[str, int] = dict(paced or {})
        self._pacers: dict[str, Pacer] = {}
        self._slots: dict[str, int] = {}
        self._malformed = 0
        self._stopped = False
        # Queues whose pending jobs this sweep passed over as paused: the cursor moves past
        # them only while those queues are still paused (SweepStore.advance_cursor).
        self._passed_over: set[str] = set()
        self.shard = shard
        self.report = SweepReport(shards=1)

    def run(self) -> SweepReport:
        """The whole sweep of this shard on its own: read, dispatch, finish."""
        self.read()
        self.dispatch()
        return self.finish()

    def read(self) -> None:
        """Read the due range [cursor, now + lookahead] (references, no payloads). An item that
        is not a valid job is marked dead with the reason (it can never be sent)."""
        now = self._clock.now_ms()
        self._frontier = now + SWEEP_LOOKAHEAD_MS
        self._frontier_sk = due_sk_bound(self._frontier, upper=True)
        self._expires_at_s = now // 1000 + self._retention_s
        for ref in self._sweeps.query_due_refs(
            self._shard, from_sk=self._cursor, to_sk=self._frontier_sk
        ):
            if isinstance(ref, Malformed):
                self._malformed += 1
                self._poison_malformed(ref)
            else:
                self._refs.append(ref)
        self.report.seen = len(self._refs)
        # Higher priority first, then the minute each job is due (or its paced slot; overdue
        # counts as now), queues taking turns by weight within it (sundial.dispatch.fairness).
        # When the range holds more than one sweep can send (a backlog after an outage), the
        # time goes to the urgent jobs; the cursor holds at the lowest job left, and the next
        # sweep continues from there.
        self._pacers = {
            queue: pacer
            for queue in self._policy.queues
            if (
                pacer := self._policy.pacer(
                    queue, next_free_ms=self._paced_before.get(queue, 0), now_ms=now
                )
            )
            is not None
        }
        self._plan = plan_dispatch(
            [
                Due(ref.queue, ref.due_ms, _PRIORITY_RANK[ref.priority], self._paceable(ref))
                for ref in self._refs
            ],
            policy=self._policy,
            pacers=self._pacers,
            now_ms=now,
        )
        for index, slot in self._plan.slots.items():
            self._slots[self._refs[index].key.sk] = slot
        for index in self._plan.deferred:
            # No slot within SQS's horizon: left pending and unclaimed, and the cursor holds at
            # it, so a later sweep places it (sundial.timing, "Fair dispatch").
            self._considered.add(index)
            self._hold_at(self._refs[index].key.sk)
        self.report.deferred = len(self._plan.deferred)

    def next_group(self) -> tuple[int, int] | None:
        """The (priority rank, moment) group of the next job this sweep would take; None when
        it has taken every one, or stopped."""
        order, considered = self._plan.order, self._considered
        while self._next < len(order) and order[self._next] in considered:
            self._next += 1
        if self._stopped or self._next >= len(order):
            return None
        return self._plan.groups[self._next]

    def dispatch_group(self, group: tuple[int, int], limit: float = inf) -> None:
        """Claim (and send every _FLUSH_AT) up to `limit` of the read jobs of `group`, in the
        plan's order. The sweeper calls it a few jobs per shard at a time, so every shard's
        jobs of a moment go before any shard's of a later one."""
        taken = 0
        while taken < limit and self.next_group() == group:
            if self._short_of_time() or len(self._not_sent) >= NOT_SENT_MAX:
                self._stop()
                return
            index = self._plan.order[self._next]
            self._next += 1
            self._considered.add(index)
            self._consider(self._refs[index])
            taken += 1
            if len(self._in_flight) + len(self._claimed) >= _FLUSH_AT:
                self._flush()

    def dispatch(self, priority: Priority | None = None) -> None:
        """Claim and send the read jobs of `priority` (None: every job left), in the plan's
        order. Claimed jobs are sent every _FLUSH_AT jobs and when the sweep finishes."""
        rank = None if priority is None else _PRIORITY_RANK[priority]
        while (group := self.next_group()) is not None and rank in (None, group[0]):
            self.dispatch_group(group)

    def finish(self) -> SweepReport:
        """Send what is claimed, then move or hold the cursor (THE CURSOR RULE,
        sundial.timing) and record the sweep as done where it holds below jobs it sent."""
        self._flush()
        if len(self._considered) < len(self._refs):
            self._stop()  # jobs never looked at (short of time, or never dispatched) hold it
        next_cursor = self._hold or due_sk_bound(self._frontier + 1, upper=False)
        paced = self._pacing_state()
        try:
            if paced is not None:
                # One write for both: the cursor (where it moved) and the pacing state.
                self._sweeps.advance_cursor(
                    self._shard,
                    max(next_cursor, self._cursor),
                    paced=paced,
                    token=self._token,
                    while_paused=self._passed_over,
                )
            elif (self.report.seen or self._malformed) and next_cursor > self._cursor:
                self._sweeps.advance_cursor(
                    self._shard, next_cursor, while_paused=self._passed_over
                )
        except QueueResumed:
            # A queue whose jobs this sweep passed over was resumed meanwhile: a sweep that saw
            # it running may have claimed one of them, and may die before sending it. The cursor
            # stays, so the next sweep reads them again (THE CURSOR RULE, sundial.timing).
            self._hold_at(self._cursor)
        if self._hold:
            self.report.held_shards.append(self._shard)
            if self.report.dispatched:
                # Jobs this sweep sent may lie above the held cursor: say they were sent, so a
                # later sweep does not take them over as if this one had died; and name those
                # it did not send, so a later sweep does not pass them (THE CURSOR RULE).
                self._sweeps.record_sweep_done(
                    self._shard,
                    self._token,
                    expires_at_s=self._expires_at_s,
                    not_sent=self._not_sent,
                )
        return self.report

    def flush(self) -> None:
        """Send what this sweep has claimed so far (the sweeper does after its urgent passes)."""
        self._flush()

    def _pacing_state(self) -> dict[str, int] | None:
        """The pacing state to store if this sweep placed a job (else None: nothing to write).
        A slot already past is dropped: it means the same as none (now)."""
        if not any(pacer.placed for pacer in self._pacers.values()):
            return None
        now = self._clock.now_ms()
        state = {q: ms for q, ms in self._paced_before.items() if q in self._pacers}
        state |= {q: pacer.next_free_ms for q, pacer in self._pacers.items() if pacer.placed}
        return {queue: ms for queue, ms in state.items() if ms > now}

    def _paceable(self, job: SweptJob) -> bool:
        """Would this sweep claim it as a new dispatch (so pacing gives it a slot)? A job taken
        over from a dead sweep is not paced: that sweep may have placed it already."""
        return (
            job.status is Status.PENDING
            and not job.direct
            and not _dag_held(job)
            and job.queue not in self._paused_queues
        )

    def _stop(self) -> None:
        """Take no more jobs: the cursor holds at the lowest job not looked at."""
        self._stopped = True
        left = [self._refs[i].key.sk for i in self._plan.order if i not in self._considered]
        if left:
            self._hold_at(min(left))

    def _consider(self, job: SweptJob) -> None:
        if job.key.sk in self._handled:
            return  # e.g. an occurrence this sweep wrote, met again further down the range
        self._handled.add(job.key.sk)
        now = self._clock.now_ms()
        if job.direct:
            return  # the submit path owns it
        if _dag_held(job):
            return  # a root of a paused DAG: resuming the DAG dispatches it
        if job.status is Status.PENDING:
            self._pending(job, now)
        elif job.status is Status.QUEUED and job.claim_token != self._token:
            not_sent = self._sweep_done(job.claim_token) if job.claim_token else None
            if not_sent is not None and job.id not in not_sent:
                return  # sent by a sweep that finished; its cursor was held below it
            # Still claimed by a live sweep, or by one that finished without sending it (it was
            # un-claimed since, or is retaken once its lease is over): never pass it.
            if job.lease_until_ms is not None and job.lease_until_ms < now:
                self.report.taken_over += 1
                self._claim(job, now, from_token=job.claim_token)
            else:
                self._hold_at(job.key.sk)  # another live sweeper is sending it; it may fail
        elif (
            job.status is Status.CANCELLED
            and job.schedule_id is not None
            and not job.chained
            and self._chain is not None
        ):
            # An occurrence cancelled before its time: the schedule goes on from it.
            self._follow(self._chain.advance(job, now_ms=now).successor)

    def _pending(self, job: SweptJob, now: int) -> None:
        if job.queue in self._paused_queues:
            self.report.paused += 1
            self._passed_over.add(job.queue)
            return  # stays pending; the queue's resume catches it up
        if not self._placed(job):
            return  # no slot within SQS's horizon: stays pending, the cursor holds at it
        if job.schedule_id is not None and self._chain is not None:
            self._occurrence(job, now)
        else:
            self._claim(job, now, from_token=None)

    def _placed(self, job: SweptJob) -> bool:
        """A job of a capped queue met beyond the plan (a schedule's successor written by this
        sweep) is placed now, after every planned one; False when it gets no slot."""
        pacer = self._pacers.get(job.queue)
        if pacer is None or job.key.sk in self._slots or isinstance(job, DueRef):
            return True  # uncapped, or placed by the plan (a deferred ref never gets here)
        slot = pacer.place(job.due_ms)
        if slot is None:
            self.report.deferred += 1
            self._hold_at(job.key.sk)
            return False
        self._slots[job.key.sk] = slot
        return True

    def _occurrence(self, job: SweptJob, now: int) -> None:
        """Advance the schedule (sundial.services.chain) before dispatching its occurrence."""
        assert self._chain is not None
        advance = self._chain.decide(job, now_ms=now)  # parks it if its schedule is paused
        if advance.action is Action.FIRE:
            self._claim(job, now, from_token=None, chained=True)
        elif advance.action in (Action.SKIP, Action.DROP):
            self._chain.close(job.key, advance.action, now_ms=now)
        self._follow(advance.successor)

    def _follow(self, successor: Job | None) -> None:
        """A successor due within this sweep's range is dispatched now: the cursor is about to
        pass it, and the query may have read its page before it was written."""
        if successor is not None and successor.key.sk <= self._frontier_sk:
            self._consider(successor)

    def _claim(
        self, job: SweptJob, now: int, *, from_token: str | None, chained: bool = False
    ) -> None:
        """Start the claim; its outcome is settled, in the order claims were started, before
        the next flush."""
        claim = self._claims.submit(
            self._store.claim,
            job.key,
            token=self._token,
            now_ms=now,
            lease_ms=CLAIM_LEASE_MS,
            from_token=from_token,
            expires_at_s=self._expires_at_s if job.retry_of is not None else None,
            swept=True,
            chained=chained,
            return_job=True,
        )
        self._in_flight.append((job, claim))

    def _settle_claims(self) -> None:
        in_flight, self._in_flight = self._in_flight, []
        for job, claim in in_flight:
            try:
                outcome = claim.result()
            except (ClientError, BotoCoreError):
                # The claim may or may not have been written: keep the job in sight. If it
                # was, its lease expires and a later sweep retakes it.
                logger.exception("claim of %s failed", job.id)
                self.report.errors += 1
                self._not_sent.add(job.id)
                self._hold_at(job.key.sk)
                continue
            except (KeyError, ValueError, TypeError) as error:
                # Claimed, but the item cannot be read as a job: it can never be sent.
                self._poison(job, "MalformedJob", f"malformed job item: {error!r}")
                continue
            self._settle(job, outcome)

    def _settle(self, job: SweptJob, outcome: ClaimOutcome) -> None:
        if outcome.won and outcome.job is not None:
            self._claimed.append(outcome.job)
            return
        self.report.lost_races += 1
        current = outcome.current
        if current is not None and current.status is Status.QUEUED:
            self._hold_at(job.key.sk)  # someone else claimed it first and may still fail
        elif (
            current is not None
            and current.status is Status.PENDING
            and not current.direct
            and not _dag_held(current)
        ):
            # A take-over lost to an un-claim: pending again, and no one else owns it
            # (THE CURSOR RULE, sundial.timing).
            self._hold_at(job.key.sk)

    def _flush(self) -> None:
        self._settle_claims()
        if not self._claimed:
            return
        claimed, self._claimed = self._claimed, []
        outgoing = [
            Outgoing(job, attempt=job.retry_attempt or 1, slot_ms=self._slots.get(job.key.sk))
            for job in claimed
        ]
        result = self._sender.dispatch(outgoing, now_ms=self._clock.now_ms, pool=self._claims)
        self.report.dispatched += len(claimed) - len(result.retry) - len(result.rejected)
        not_sent = {message.job.id for message in result.failed}
        self.report.paced += sum(
            1 for o in outgoing if o.visible_at_ms > o.run_at_ms and o.job.id not in not_sent
        )
        self.report.lateness_ms += result.lateness_ms
        if logger.isEnabledFor(logging.INFO):
            # Each job sent with the request that submitted it, so one job can be followed
            # from the API's logs through this one to its consumer's (about 80 bytes a job).
            failed = {message.job.id for message in result.failed}
            sent = {job.id: job.correlation_id for job in claimed if job.id not in failed}
            logger.info("jobs sent", extra={"shard": self._shard, "jobs": sent})
        for rejected in result.rejected:
            self._poison(rejected.message.job, rejected.error_type, rejected.reason)
        for message in result.retry:
            self.report.send_failures += 1
            self._not_sent.add(message.job.id)
            self._hold_at(message.job.key.sk)
            try:
                # Refused (False) when the job is no longer ours: cancelled meanwhile. Nothing
                # is left to send then, so that is no error.
                self._store.unclaim(message.job.key, token=self._token)
            except (ClientError, BotoCoreError):
                # Still claimed by us: the done record names it, so it is retaken after the lease.
                logger.exception("un-claim of %s failed", message.job.id)
                self.report.errors += 1

    def _poison(self, job: SweptJob | Job, error_type: str, reason: str) -> None:
        """A job this sweep claimed that can never be sent as it is: dead, with the reason."""
        logger.warning("poison job %s: %s", job.id, reason)
        try:
            self._store.mark_poisoned(
                job.key,
                error_type=error_type,
                reason=reason,
                now_ms=self._clock.now_ms(),
                expires_at_s=self._expires_at_s,
                token=self._token,
            )
        except (ClientError, BotoCoreError):
            logger.exception("marking %s dead failed", job.id)
            self.report.errors += 1
            self._not_sent.add(job.id)  # still claimed by us: retaken after the lease
            self._hold_at(job.key.sk)
            return
        # Refused only if it is no longer ours (cancelled meanwhile): nothing to send either.
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

    def _sweep_done(self, token: str) -> frozenset[str] | None:
        """The ids sweep `token` did not send, if it has finished on this shard; else None."""
        if token not in self._done_tokens:
            done = (
                self._sweeps.sweep_done(self._shard, token) if token.startswith("sweep:") else None
            )
            self._done_tokens[token] = done
        return self._done_tokens[token]

    def _hold_at(self, sk: str) -> None:
        if self._hold is None or sk < self._hold:
            self._hold = sk

    def _short_of_time(self) -> bool:
        return self._remaining_ms is not None and self._remaining_ms() < SWEEP_DEADLINE_MARGIN_MS


def _dag_held(job: SweptJob) -> bool:
    """A root of a paused DAG (services.dags): read as a DueRef, or as a Job (a successor)."""
    if isinstance(job, DueRef):
        return job.held
    return job.dag is not None and job.dag.held
