"""One sweep of one shard: read its due range, hold the shard (its lease), send each due job
without writing it, move or hold the cursor and release (sundial.store.sweeps, THE SHARD
LEASE; the cursor rules below and in dispatch.sweeper's docstring).

THE CURSOR RULE under the lease. The cursor only moves forward (the release writes it, and only
the lease's holder writes it), and past a job only if that job needs nothing from a sweep: sent
by this sweep, finished, cancelled, dead, paused, taken by its consumer, or owned by another path
that sends it (direct, a paused DAG's root, a paused queue's job, which its resume catches up).
A job that needs a send and did not get one holds the cursor at it: a failed send, a failed
read of the item, a job never looked at (short of time), a legacy claim by a live sweep. Two
exceptions keep a held cursor from turning into a storm of duplicate messages:
- The jobs this sweep sent above the held cursor are named in the release (`sent_above`, at
  most SENT_MAX sort keys; those beyond are sent again by the next sweep: duplicates, which the
  consumer's take makes no-ops). The next holder skips them and names them again while they
  lie above the cursor. The release is the one write that both moves the cursor and names
  them, so no holder reads one without the other.
- A capped queue's job with no send slot within SQS's 15 minutes (dispatch.fairness) does not
  hold the cursor: the release records, per such queue, the lowest of its deferred keys
  (`deferred_from`), and the next sweep reads that queue's pending jobs again from there (a
  filtered Query: reads, no writes). Pacing places a queue's jobs in due order, so its jobs
  between that key and the cursor are all deferred ones, not sent ones. A queue's pause reads
  the lowest of cursor and markers (SweepStore.read_cursors), so its catch-up covers them.
A holder that dies leaves the last release's cursor, `sent_above` and `deferred_from`; the next
holder sends again what the dead one sent (each a no-op at the take, or a job run once).
What the sweep does not write any more, and why the rest still holds:
- No claim: the job stays `pending` until its consumer takes it (sundial.store.attempts
  accepts a pending job that is due). A cancel, pause or move landing before the take
  succeeds (the item is pending) and the take then fails its condition; after the take the
  job is running and they answer 409 as before. GET /jobs/{id} shows such a job `queued`
  (services.job_view: pending, not direct, and due).
- A job changed between the range's read and its send, a failed send, a retry timer's expiry
  and a poison job: dispatch.shard_sends, which reads, sends and settles what this module
  decided.
- A resumed queue's catch-up owes a shard the pending jobs of its range (services.queues): a
  sweep leaves those to it (and may pass them), as it leaves a paused queue's, since the
  catch-up takes whatever it finds pending there and a job this sweep sent is still pending.
  The catch-up strikes a shard off only after sending every pending job it read there, and
  the jobs of its range were pending before the resume, so none is left to no one."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from math import inf

from sundial.clock import Clock
from sundial.dispatch.fairness import DispatchPlan, DispatchPolicy, Due, Pacer, plan_dispatch
from sundial.dispatch.outbox import Outbox
from sundial.dispatch.shard_sends import ShardSends, SweepReport, SweptJob, dag_held
from sundial.ids import due_sk_bound
from sundial.model.job import Job, Priority, Status
from sundial.services.chain import Action, OccurrenceChain
from sundial.store.jobs import JobStore
from sundial.store.sweeps import (
    SENT_MAX,
    DueRef,
    Malformed,
    QueueResumed,
    ShardSweepState,
    SweepStore,
)
from sundial.timing import SWEEP_DEADLINE_MARGIN_MS, SWEEP_LOOKAHEAD_MS
from sundial.transport.sender import SQS_BATCH, QueueSender

logger = logging.getLogger(__name__)


# Send decided jobs to SQS once this many are waiting, so a long backlog streams out.
_FLUSH_AT = SQS_BATCH * 10


PRIORITY_ORDER = (Priority.CRITICAL, Priority.HIGH, Priority.NORMAL, Priority.LOW)
_PRIORITY_RANK = {priority: rank for rank, priority in enumerate(PRIORITY_ORDER)}


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


class ShardSweep(ShardSends):
    def __init__(
        self,
        tools: SweepTools,
        *,
        shard: int,
        state: ShardSweepState | None,
        token: str,
        remaining_ms: Callable[[], int] | None,
        pool: Executor,
        paused_queues: frozenset[str] = frozenset(),
        catch_ups: Mapping[str, tuple[str, str]] | None = None,
        outbox: Outbox | None = None,
    ) -> None:
        """`outbox`: the sweeper's, shared by its shard sweeps (dispatch.outbox); by default
        one of this sweep's own."""
        state = state or ShardSweepState()
        self._store, self._sweeps, self._sender = tools.store, tools.sweeps, tools.sender
        self._policy = tools.policy
        self._clock, self._chain, self._retention_s = tools.clock, tools.chain, tools.retention_s
        self._shard = shard
        self._state = state
        self._cursor = state.cursor or due_sk_bound(0, upper=False)
        self._token = token
        self._remaining_ms = remaining_ms
        self._outbox = outbox or Outbox(tools.sender, tools.clock, pool)
        self._paused_queues = paused_queues
        self._catch_ups = dict(catch_ups or {})
        self._hold: str | None = None  # lowest sort key that must be looked at again
        self._leased = False
        self._to_send: list[SweptJob] = []  # decided, not yet read and sent
        self._sent: set[str] = set()  # sort keys sent, by this sweep or (above) the last holder
        self._deferred: dict[str, str] = {}  # capped queue -> lowest key left without a slot
        self._handled: set[str] = set()  # sort keys already dealt with in this sweep
        self._frontier_sk = ""
        self._expires_at_s = 0
        self._frontier = 0
        self._refs: list[DueRef] = []  # the due range as read
        self._malformed: list[Malformed] = []
        self._plan = DispatchPlan()  # its order, most urgent first, and the paced jobs' slots
        self._next = 0  # position in the plan's order: everything before it was considered
        self._considered: set[int] = set()
        # Pacing (sundial.dispatch.fairness): each capped queue's next free send slot on this
        # shard as read from the cursor item, its pacer during this sweep, and the slot of each
        # job placed (by sort key: a successor is not in _refs).
        self._paced_before: dict[str, int] = dict(state.paced)
        self._pacers: dict[str, Pacer] = {}
        self._slots: dict[str, int] = {}
        self._stopped = False
        # Queues whose pending jobs this sweep passed over as paused: the cursor moves past
        # them only while those queues are still paused (SweepStore.finish_sweep).
        self._passed_over: set[str] = set()
        self.shard = shard
        self.report = SweepReport(shards=1)

    def run(self) -> SweepReport:
        """The whole sweep of this shard on its own: read, dispatch, finish."""
        self.read()
        self.dispatch()
        return self.finish()

    def read(self) -> None:
        """Read the due range [cursor, now + lookahead] (references, no payloads), and each
        capped queue's deferred jobs below the cursor; then, if there is anything, take the
        shard's lease. A shard another sweep holds, or one with nothing in range, is left as
        it is: no write."""
        now = self._clock.now_ms()
        if self._state.lease is not None and self._state.lease_until_ms >= now:
            self.report.lease_busy += 1
            return  # a live sweep holds it: it sends what is due
        self._frontier = now + SWEEP_LOOKAHEAD_MS
        self._frontier_sk = due_sk_bound(self._frontier, upper=True)
        self._expires_at_s = now // 1000 + self._retention_s
        refs = list(
            self._sweeps.query_due_refs(self._shard, from_sk=self._cursor, to_sk=self._frontier_sk)
        )
        for queue, from_sk in self._state.deferred.items():
            if from_sk < self._cursor:
                below = self._sweeps.query_due_refs(
                    self._shard, from_sk=from_sk, to_sk=self._cursor, queue=queue
                )
                refs += [r for r in below if r.key is None or r.key.sk < self._cursor]
        if not refs:
            return
        if not self._sweeps.take_lease(
            self._shard, token=self._token, now_ms=now, read=self._state
        ):
            self.report.lease_busy += 1  # another sweep took it since this one read it
            return
        self._leased = True
        for ref in refs:
            if isinstance(ref, Malformed):
                self._poison_malformed(ref)
            else:
                self._refs.append(ref)
        self._refs.sort(key=lambda ref: ref.key.sk)
        self.report.seen = len(self._refs)
        self._plan_dispatch(now)

    def _plan_dispatch(self, now: int) -> None:
        """Higher priority first, then the minute each job is due (or its paced slot; overdue
        counts as now), queues taking turns by weight within it (sundial.dispatch.fairness).
        When the range holds more than one sweep can send (a backlog after an outage), the
        time goes to the urgent jobs; the cursor holds at the lowest job left, and the next
        sweep continues from there."""
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
            # No slot within SQS's horizon: left pending, and the release records where the
            # next sweep reads its queue again (module docstring).
            self._considered.add(index)
            self._defer(self._refs[index])

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
        """Send (every _FLUSH_AT) up to `limit` of the read jobs of `group`, in the plan's
        order. The sweeper calls it a few jobs per shard at a time, so every shard's jobs of a
        moment go before any shard's of a later one."""
        taken = 0
        while taken < limit and self.next_group() == group:
            if self._short_of_time():
                self._stop()
                return
            index = self._plan.order[self._next]
            self._next += 1
            self._considered.add(index)
            self._consider(self._refs[index])
            taken += 1
            if len(self._to_send) >= _FLUSH_AT:
                self._flush()

    def dispatch(self, priority: Priority | None = None) -> None:
        """Send the read jobs of `priority` (None: every job left), in the plan's order."""
        rank = None if priority is None else _PRIORITY_RANK[priority]
        while (group := self.next_group()) is not None and rank in (None, group[0]):
            self.dispatch_group(group)

    def finish(self) -> SweepReport:
        """Send what is left, then release the lease in the one write that moves or holds the
        cursor (module docstring). A shard this sweep did not hold is left as it is."""
        if not self._leased:
            return self.report
        self._flush()
        if len(self._considered) < len(self._refs):
            self._stop()  # jobs never looked at (short of time, or never dispatched) hold it
        cursor = max(self._hold or due_sk_bound(self._frontier + 1, upper=False), self._cursor)
        try:
            released = self._release(cursor, while_paused=self._passed_over)
        except QueueResumed:
            # A queue whose jobs this sweep passed over was resumed meanwhile: a sweep that saw
            # it running may send one of them and die. The cursor stays, so the next sweep
            # reads them again (THE CURSOR RULE: dispatch.sweeper, docs/invariants.md).
            self._hold_at(self._cursor)
            cursor = self._cursor
            released = self._release(cursor, while_paused=())
        if not released:
            logger.error("shard %s: the lease ran out before its release", self._shard)
            self.report.errors += 1
        if cursor < due_sk_bound(self._frontier + 1, upper=False) or self._deferred:
            self.report.held_shards.append(self._shard)  # work left below the frontier
        return self.report

    def _release(self, cursor: str, *, while_paused: Collection[str]) -> bool:
        sent = sorted(sk for sk in self._sent if sk >= cursor)[:SENT_MAX]
        deferred = {q: sk for q, sk in self._deferred.items() if sk < cursor}
        for queue, sk in self._state.deferred.items():
            if queue not in self._deferred and queue in self._paused_queues and sk < cursor:
                deferred[queue] = sk  # passed over while paused: kept for after its resume
        return self._sweeps.finish_sweep(
            self._shard,
            token=self._token,
            cursor=cursor,
            sent=sent,
            deferred=deferred,
            paced=self._pacing_state(),
            while_paused=while_paused,
        )

    def _pacing_state(self) -> dict[str, int] | None:
        """The pacing state to store if this sweep placed a job (else None: left as it is).
        A slot already past is dropped: it means the same as none (now)."""
        if not any(pacer.placed for pacer in self._pacers.values()):
            return None
        now = self._clock.now_ms()
        state = {q: ms for q, ms in self._paced_before.items() if q in self._pacers}
        state |= {q: pacer.next_free_ms for q, pacer in self._pacers.items() if pacer.placed}
        return {queue: ms for queue, ms in state.items() if ms > now}

    def _paceable(self, job: SweptJob) -> bool:
        """Would this sweep send it as a new dispatch (so pacing gives it a slot)? A job the
        last holder sent, or a legacy claim, is not paced: it may have been placed already."""
        return (
            job.status is Status.PENDING
            and not job.direct
            and not dag_held(job)
            and job.queue not in self._paused_queues
            and job.key.sk not in self._state.sent
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
        if dag_held(job):
            return  # a root of a paused DAG: resuming the DAG dispatches it
        if job.status is Status.PENDING:
            if job.key.sk in self._state.sent:
                self._sent.add(job.key.sk)  # the last holder sent it: named again if above
                return
            self._pending(job, now)
        elif job.status is Status.QUEUED and (job.claim_token or "").startswith("sweep:"):
            # A claim by a sweeper of before the lease: its sweep may have died before sending.
            if job.lease_until_ms is not None and job.lease_until_ms < now:
                self.report.taken_over += 1
                self._to_send.append(job)
            else:
                self._hold_at(job.key.sk)  # that sweep may still be sending it
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
        owed = self._catch_ups.get(job.queue)
        if owed is not None and owed[0] <= job.key.sk <= owed[1]:
            self.report.paused += 1
            return  # its queue's catch-up sends it (it would find it pending: sent twice)
        if not self._placed(job):
            return  # no slot within SQS's horizon: stays pending, read again from its marker
        if job.schedule_id is not None and self._chain is not None:
            self._occurrence(job, now)
        else:
            self._to_send.append(job)

    def _placed(self, job: SweptJob) -> bool:
        """A job of a capped queue met beyond the plan (a schedule's successor written by this
        sweep) is placed now, after every planned one; False when it gets no slot."""
        pacer = self._pacers.get(job.queue)
        if pacer is None or job.key.sk in self._slots or isinstance(job, DueRef):
            return True  # uncapped, or placed by the plan (a deferred ref never gets here)
        slot = pacer.place(job.due_ms)
        if slot is None:
            self._defer(job)
            return False
        self._slots[job.key.sk] = slot
        return True

    def _defer(self, job: SweptJob) -> None:
        self.report.deferred += 1
        if job.queue not in self._deferred or job.key.sk < self._deferred[job.queue]:
            self._deferred[job.queue] = job.key.sk

    def _occurrence(self, job: SweptJob, now: int) -> None:
        """Advance the schedule (sundial.services.chain) before dispatching its occurrence."""
        assert self._chain is not None
        advance = self._chain.decide(job, now_ms=now)  # parks it if its schedule is paused
        if advance.action is Action.FIRE:
            self._to_send.append(job)
        elif advance.action in (Action.SKIP, Action.DROP):
            self._chain.close(job.key, advance.action, now_ms=now)
        self._follow(advance.successor)

    def _follow(self, successor: Job | None) -> None:
        """A successor due within this sweep's range is dispatched now: the cursor is about to
        pass it, and the query may have read its page before it was written."""
        if successor is not None and successor.key.sk <= self._frontier_sk:
            self._consider(successor)

    def _short_of_time(self) -> bool:
        return self._remaining_ms is not None and self._remaining_ms() < SWEEP_DEADLINE_MARGIN_MS
