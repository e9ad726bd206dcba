"""The sweeper: finds due and near-due jobs of its shards and hands them to SQS in batches
with DelaySeconds so they surface at their due second, holding each shard under a lease
instead of claiming each job (sundial.store.sweeps, THE SHARD LEASE).

Per shard it keeps a cursor: the lowest sort key that may still need a sweep's send. A sweep
reads [cursor, now + lookahead]; if anything is there it takes the shard's lease (one write),
sends every due job without writing it, and releases the lease in the write that moves the
cursor to just past that frontier, or holds it at the first job it could not send (a failed
send, the first job left when the Lambda ran short of time), naming the jobs it sent above
it (dispatch.shard_sweep). A shard held by a live sweep is left alone; a dead holder's lease
expires after the sweeper's hard timeout, and the next holder sends again from the cursor (a
duplicate message, which the consumer's take makes a no-op).

Higher priority goes first (critical, high, normal, low; then the minute each job is due, an
overdue job counting as due now) across the whole group: the sweep reads every shard's range,
then sends one (priority, moment) group at a time over all its shards, SHARD_TURN jobs per
shard in turn, so when a backlog exceeds what one sweep can send, the time goes to the urgent
jobs of every shard before any shard's less urgent ones. Within a group, queues take turns by
their dispatch weight, and a capped queue's jobs are paced over the following seconds
(dispatch.fairness), so one queue's flood does not starve another's jobs. Pending jobs of a
paused queue are passed over (sundial.store.queue_states), and so are those a resumed
queue's catch-up still owes; a schedule's occurrence first advances its schedule
(sundial.services.chain).

This module runs a sweep over a group of shards; dispatch.shard_sweep sweeps one shard.

THE CURSOR RULE (docs/invariants.md) against the writes it interleaves with (the rule under
the lease, and what it no longer writes, are in dispatch.shard_sweep's docstring):
- Two sweeps of one shard (the next tick, Lambda's async retry of the first, a second sweeper
  on the same shards): only the lease's holder sends and moves the cursor. A sweep that reads
  a live lease leaves the shard alone; two that read an expired one race on its take, which is
  conditional on the item's `sweeps` count as read, so one holds it and the other writes
  nothing (sundial.store.sweeps, THE SHARD LEASE). A holder's release names what it sent above
  a cursor it held (`sent_above`), so the next holder does not send those again.
- A cancel during a sweep's send: the cancel lands on the pending item; if before the sweep's
  read of the item, the job is not sent; if after, its message finds it cancelled at the take.
  Either way the job needs nothing more and the cursor may pass it.
- A poison job (queue not configured, malformed item, SQS rejecting the entry as the
  sender's fault) is marked dead with the reason (conditional on it still waiting for a sweep:
  pending, not direct), so it needs nothing more and the cursor passes it. A retryable failure
  (throttle, SQS internal error, a whole SendMessageBatch failing) holds the cursor instead.
- A queue's pause: a sweep passes over its pending jobs (the resume's catch-up sends them), and
  may move its cursor past them only while the queue is still paused: the release is one
  transaction with a check of each such queue's pause (SweepStore.finish_sweep). Why: a
  later sweep that reads the queue running may send such a job and die; had the first sweep
  moved past it, the next holder would not read it again. With the check, a resume that lands
  before the release makes it fail (the sweep releases again without moving the cursor); one
  that lands after finds the cursor moved while paused, and every sweep that reads the queue
  running reads its range after that, above the job. (Found by the fairness simulation, seed
  2; tests/unit/services/test_queues.py names it.) A resumed queue's catch-up still owing a
  shard sends that range's pending jobs itself; the sweep leaves them to it.
- An error on one shard stops only that shard: it is not finished, so its cursor is not moved
  and its lease runs out; the next holder sends again from the cursor, as after a crash.
- A sweeper reads the ranges of all its shards first, then sends one priority at a time over
  all of them, then finishes each shard. A read is therefore older when its job is sent than
  when shards were swept one by one; the sweep reads each batch's items right before sending
  them and sends only those still pending (dispatch.shard_sweep), and a job read but never
  looked at (short of time, a failed step) holds the cursor at it (ShardSweep.finish), so the
  cursor passes only what the sweep itself settled. Every shard's messages go out before any
  shard's release (dispatch.outbox).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from pydantic import BaseModel, ConfigDict, Field
from ulid import ULID

from sundial.clock import Clock
from sundial.dispatch.fairness import DispatchPolicy
from sundial.dispatch.outbox import Outbox
from sundial.dispatch.shard_sends import SweepReport
from sundial.dispatch.shard_sweep import PRIORITY_ORDER, ShardSweep, SweepTools
from sundial.model.job import Priority
from sundial.services.chain import OccurrenceChain
from sundial.services.queues import CATCH_UP_STALE_MS, CatchUp
from sundial.settings import QueueDispatch
from sundial.store.jobs import JobStore
from sundial.store.queue_states import QueueState, QueueStateStore
from sundial.store.sweeps import SweepStore
from sundial.timing import SWEEP_DEADLINE_MARGIN_MS
from sundial.transport.sender import QueueSender

logger = logging.getLogger(__name__)


# Priorities whose jobs are sent as soon as their pass over the shards ends.
URGENT = frozenset({Priority.CRITICAL, Priority.HIGH})

# Requests in flight at once in one sweep: a flush's SendMessageBatch requests go out together
# on this pool (transport.sender). Named for claims, which a sweep no longer makes: bench
# modules import it and bench.fairness also runs them against the package of an older revision
# (BEFORE_FAIR), which has only this name.
CLAIM_CONCURRENCY = 16

# Jobs one shard takes of a (priority, moment) group before the next shard's turn: a job on
# the group's last shard then waits for at most this many per shard before it, not for every
# other shard's share of a flood (a few hundredths of a second each at the sweeper's rate).
SHARD_TURN = 50
_URGENT_RANKS = frozenset(PRIORITY_ORDER.index(p) for p in URGENT)


class SweepRequest(BaseModel):
    """The fan-out's message to one sweeper."""

    model_config = ConfigDict(extra="forbid")

    shards: list[int] = Field(min_length=1, max_length=4096)


class Sweeper:
    def __init__(
        self,
        *,
        store: JobStore,
        sweeps: SweepStore,
        sender: QueueSender,
        clock: Clock,
        chain: OccurrenceChain | None = None,
        queue_states: QueueStateStore | None = None,
        catch_up: CatchUp | None = None,
        retention_days: int = 30,
        claim_concurrency: int = CLAIM_CONCURRENCY,
        dispatch: Mapping[str, QueueDispatch] | None = None,
        shard_count: int = 1,
    ) -> None:
        """`dispatch`: each queue's cap and weight (settings.dispatch); `shard_count`: the
        deployment's, which a cap is divided by (each shard paces its share)."""
        if claim_concurrency < 1:
            raise ValueError("claim_concurrency must be at least 1")
        self._tools = SweepTools(
            store=store,
            sweeps=sweeps,
            sender=sender,
            clock=clock,
            chain=chain,
            retention_s=retention_days * 86_400,
            policy=DispatchPolicy(queues=dict(dispatch or {}), shard_count=shard_count),
        )
        self._sweeps = sweeps
        self._clock = clock
        self._queue_states = queue_states
        self._catch_up = catch_up
        self._claim_concurrency = claim_concurrency

    def sweep(
        self, shards: Sequence[int], *, remaining_ms: Callable[[], int] | None = None
    ) -> SweepReport:
        """Sweep the given shards. `remaining_ms` reports the time left before the Lambda's
        deadline; the sweep stops early (keeping its place) when it runs short."""
        token = f"sweep:{ULID.from_timestamp(self._clock.now_ms() / 1000)}"
        # Queue states before cursors: a sweep that sees a pause started after it, so its
        # cursors are at least those the pause recorded (sundial.store.queue_states).
        states = self._queue_states.all() if self._queue_states is not None else {}
        paused = frozenset(name for name, state in states.items() if state.paused)
        cursors = self._sweeps.read_sweep_states(shards)
        report = SweepReport()
        with ThreadPoolExecutor(self._claim_concurrency, thread_name_prefix="send") as pool:
            # Every shard's messages go out together: requests by the jobs, not by the shards.
            outbox = Outbox(self._tools.sender, self._clock, pool)
            sweeps: list[ShardSweep] = []
            for shard in shards:
                if remaining_ms is not None and remaining_ms() < SWEEP_DEADLINE_MARGIN_MS:
                    break  # the shards not reached keep their cursors; the next tick continues
                shard_sweep = ShardSweep(
                    self._tools,
                    shard=shard,
                    state=cursors.get(shard),
                    token=token,
                    remaining_ms=remaining_ms,
                    pool=pool,
                    paused_queues=paused,
                    catch_ups=_owed(states, shard),
                    outbox=outbox,
                )
                if _isolated(shard_sweep, shard_sweep.read, report):
                    sweeps.append(shard_sweep)
            sweeps = self._dispatch(sweeps, report)
            sweeps = [s for s in sweeps if _isolated(s, s.stage, report)]
            outbox.send()  # settles every staged message before any shard is finished
            for shard_sweep in sweeps:
                if _isolated(shard_sweep, shard_sweep.finish, report):
                    report.add(shard_sweep.report)
        try:
            self._finish_catch_ups(states, shards, remaining_ms, report)
        except Exception:
            logger.exception("finishing a queue's catch-up failed")  # retried next sweep
            report.errors += 1
        return report

    def _dispatch(self, sweeps: list[ShardSweep], report: SweepReport) -> list[ShardSweep]:
        """One (priority, moment) group at a time across every shard, SHARD_TURN jobs per shard
        in turn: when the group's backlog is more than a sweep can send, a critical job of the
        last shard goes before a normal job of the first, and a job due now on the last shard
        before a later one of the first. What the urgent priorities decided is sent as soon as
        they are done, and the first moment's at the end of each turn (later moments fill
        their batches as they come, fewer SQS requests). Returns the shard sweeps still sound."""
        rank: int | None = None
        while True:
            groups = [group for s in sweeps if (group := s.next_group()) is not None]
            if not groups:
                break
            group = min(groups)
            if rank in _URGENT_RANKS and group[0] != rank:
                sweeps = [s for s in sweeps if _isolated(s, s.flush, report)]
            rank = group[0]
            sweeps = [
                s
                for s in sweeps
                if _isolated(s, partial(s.dispatch_group, group, SHARD_TURN), report)
                # What is due before the next sweep goes out at the end of its turn, not when
                # the shard has _FLUSH_AT decided: other shards' turns come in between.
                and (group[1] > 0 or _isolated(s, s.flush, report))
            ]
        return sweeps

    def _finish_catch_ups(
        self,
        states: dict[str, QueueState],
        shards: Sequence[int],
        remaining_ms: Callable[[], int] | None,
        report: SweepReport,
    ) -> None:
        """A queue resume whose catch-up was cut short (a timeout, a crash) is finished here,
        for this sweeper's shards, once it is old enough that the resume call has ended."""
        if self._catch_up is None:
            return
        now = self._clock.now_ms()
        for state in states.values():
            started = state.catch_started_ms or 0
            if state.paused or not state.catching_up or now - started < CATCH_UP_STALE_MS:
                continue
            outcome = self._catch_up.run(
                state,
                shards=shards,
                has_time=lambda: remaining_ms is None or remaining_ms() >= SWEEP_DEADLINE_MARGIN_MS,
            )
            report.dispatched += outcome.dispatched


def _owed(states: Mapping[str, QueueState], shard: int) -> dict[str, tuple[str, str]]:
    """{queue: [from, to]} of each resumed queue whose catch-up still owes `shard`: its pending
    jobs there are the catch-up's to send (dispatch.shard_sweep)."""
    return {
        name: (state.catch_from, state.catch_to)
        for name, state in states.items()
        if not state.paused
        and shard in state.catch_shards
        and state.catch_from is not None
        and state.catch_to is not None
    }


def _isolated(shard_sweep: ShardSweep, step: Callable[[], object], report: SweepReport) -> bool:
    """Run one step of a shard's sweep; False if it failed. One shard's failure never stops
    the others: a failed shard is not finished, so its cursor is not moved and its lease runs
    out; the next holder sends again from the cursor."""
    try:
        step()
    except Exception:
        logger.exception("sweep of shard %s failed", shard_sweep.shard)
        shard_sweep.report.errors += 1
        shard_sweep.report.failed_shards.append(shard_sweep.shard)
        report.add(shard_sweep.report)
        return False
    return True
