"""Second messages of one attempt without a fault, and runs longer than the visibility timeout
or a worker's lease (issue 31; `--holders`). In a run with no fault injected, none of them may
make a job's attempt run twice (the duplicate oracle), whatever message asks for it.

- **Long runs.** A run lasts a drawn time (half none, a fifth 30 to 100 s, the rest 150 to
  400 s; a run begun in the drain, none, so the drain finishes), spanning ticks: its function
  waits for the clock (Scheduler.wait_until), releasing the scheduler, and its actor is
  carried into the next ticks' runs until the clock passed its end. The Lambda consumers run
  with 15 minutes of remaining time (a run never outlives its invocation: it is cut to end
  5 s before the deadline) and their heartbeat off, so a run longer than the queue's
  visibility timeout (120 s) sees its message delivered again while it runs, to another
  invocation: `default` has a pool of three consumer slots, one invocation each at a time
  (Actors.consumer_actors), taking one message per invocation.
- **Workers** (`worker-1`, `worker-2`: `email` is consumed through deps.leases instead of a
  Lambda), each of concurrency 1 (as sundial.worker leases only for its free slots and
  heartbeats every job it holds): lease one job with wait 0 and a 60 s lease, run it (its
  payload fetched from the lease's presigned URL), heartbeat every 30 s while it runs (so a run
  of up to 400 s outlives its lease many times over), then ack, or nack a flaky attempt
  (retry_after_seconds of 0, 20 or 600 s).
- **Second messages without a fault:** a schedule's occurrence sent early by a sweep, then its
  schedule paused (the occurrence is parked: its message stays in SQS) and resumed at once (it
  is sent again: two messages of one attempt and revision; `flipper`); flaky jobs (a fifth of
  the plain jobs fail their first attempt, retryable, with a retry policy of up to 600 s) whose
  scheduled retry an operator overtakes with `POST /jobs/{id}/retry` (`operator`: its message
  and the scheduled retry's are both of attempt 2); and SQS delivering a message again after
  its run (the consumer leaves a tenth of the messages it handled, and half of those of DAG
  nodes, undeleted: they come back after the visibility timeout: a succeeded DAG parent's
  message delivered again re-releases its children, a failed attempt's schedules its retry
  again).
- **Oracle:** no duplicate run without a fault (Oracle.check); every flaky job ran to the end
  unless cancelled; no job was marked dead for a redrive (no consumer crashed, so SQS redrove
  only messages turned away as busy, whose letters must not kill a live holder's attempt); no
  actor is still running after the drain (Ledger.stuck).
"""

from __future__ import annotations

import json
import random
from functools import partial
from typing import Any

import requests

from sundial.errors import Conflict, SundialError
from sundial.ids import JobKey
from sundial.model.job import Status
from sundial.model.payloads import PayloadUnavailable, check_payload
from sundial.runs.dlq_indexer import REDRIVE_ERROR
from sundial.runs.leases import AckRequest, HeartbeatRequest, LeasedJob, LeaseRequest, NackRequest
from sundial.transport.envelope import Envelope
from tests.simulation.actors import Actors
from tests.simulation.aws import Slot
from tests.simulation.scheduler import Actor

LAMBDA_REMAINING_MS = 15 * 60 * 1000  # the consumers' invocations: Lambda's longest
WORKER_LEASE_S = 60
WORKER_QUEUE = "email"
WORKERS = ("worker-1", "worker-2")
CONSUMER_POOL = ("consumer-1", "consumer-1b", "consumer-1c")


class Holders(Actors):
    duration_rng: random.Random
    redelivery_rng: random.Random
    deadlines: dict[str, int]  # a consumer slot's invocation deadline

    def prepare_holders(self) -> None:
        self.duration_rng = random.Random(self.config.seed * 7919 + 5)
        self.redelivery_rng = random.Random(self.config.seed * 7919 + 6)
        self.deadlines = {}
        self.lambda_remaining_ms = LAMBDA_REMAINING_MS
        self.batch_size = 1
        self.consumer_pools["default"] = list(CONSUMER_POOL)
        del self.consumer_pools[WORKER_QUEUE]

    def add_holder_slots(self) -> None:
        for name in (*CONSUMER_POOL[1:], *WORKERS, "flipper", "operator"):
            self.slots[name] = Slot(self, name)

    def holder_actors(self, tick: int) -> list[Actor]:
        rng = self.rng
        actors = self.worker_actors()
        if tick % 2 == 1 and rng.random() < 0.5:
            actors.append(Actor("flipper:pause and resume a schedule", self.op_flip_schedule))
        if rng.random() < 0.5:
            actors.append(Actor("operator:retry over a scheduled retry", self.op_operator_retry))
        return actors

    def worker_actors(self, *, drain: bool = False) -> list[Actor]:
        return [
            Actor(f"{slot}:lease {WORKER_QUEUE}", partial(self.op_work, slot, drain=drain))
            for slot in WORKERS
            if slot not in self.busy
        ]

    # -- the job function's time ---------------------------------------------------------------

    def run_duration_ms(self, job: Envelope) -> int:
        if not self.config.holders:
            return 0
        drawn = self._drawn_duration_ms()
        actor = self.scheduler.current()
        deadline = self.deadlines.get(actor.name.split(":")[0]) if actor else None
        if deadline is not None:  # a Lambda: the run ends before its invocation's deadline
            drawn = max(0, min(drawn, deadline - 5_000 - self.clock.now_ms()))
        if drawn > 120_000:
            self.ledger.counts["runs longer than the visibility timeout"] += 1
        return drawn

    def _drawn_duration_ms(self) -> int:
        if self.draining:
            return 0  # runs begun in the drain take no time: the drain is to finish the work
        roll = self.duration_rng.random()
        if roll < 0.5:
            return 0
        if roll < 0.7:
            return self.duration_rng.randrange(30_000, 100_000)
        return self.duration_rng.randrange(150_000, 400_000)

    def note_invocation(self, slot: str, *, deadline_ms: int) -> None:
        if self.config.holders:
            self.deadlines[slot] = deadline_ms

    def keep_undeleted(self, body: str) -> bool:
        """Whether SQS is to deliver this handled message again (it is left undeleted)."""
        if not self.config.holders:
            return False
        try:
            dag = "dag" in json.loads(body)
        except ValueError:
            return False
        if self.redelivery_rng.random() < (0.5 if dag else 0.1):
            self.ledger.counts["messages delivered again after their run"] += 1
            return True
        return False

    # -- the actors ----------------------------------------------------------------------------

    def op_flip_schedule(self) -> None:
        """Pause a schedule whose next occurrence a sweep may have sent early, and resume it:
        the parked occurrence's message stays in SQS, the resume sends it again."""
        schedule_ids = self.first.schedule_ids
        if not schedule_ids:
            return
        schedule_id = self.rng.choice(schedule_ids)
        self.ledger.paused_schedules.add(schedule_id)
        self._answered("flipper", lambda deps: deps.schedules.pause(schedule_id))
        self._answered("flipper", lambda deps: deps.schedules.resume(schedule_id))
        self.ledger.counts["schedules paused and resumed at once"] += 1

    def op_operator_retry(self) -> None:
        """POST /jobs/{id}/retry of a flaky job whose first attempt failed, while its retry
        is scheduled (its message is on its way, delayed)."""
        flaky = sorted(self.ledger.flaky & set(self.first.job_ids))
        if not flaky:
            return
        job_id = self.rng.choice(flaky)
        job = self.observer.store.get(JobKey.from_job_id(job_id))  # the operator's GET
        if job is None or job.status is not Status.FAILED:
            return
        self.ledger.retried.add(job_id)
        self._answered("operator", lambda deps: deps.jobs.retry(job_id))
        self.ledger.counts["operator retries over a scheduled retry"] += 1

    def op_work(self, slot: str, *, drain: bool = False) -> None:
        """A worker outside Lambda: lease, run with heartbeats, ack or nack; in the drain,
        until the queue has nothing left to lease."""
        self.busy.add(slot)
        try:
            for _ in range(20 if drain else 1):
                leased = self.slots[slot].deps.leases.lease(
                    WORKER_QUEUE,
                    # One job at a time: a worker of concurrency 1 leases one (sundial.runs.
                    # worker leases only as many as it has free slots, and heartbeats each).
                    LeaseRequest(wait=0, max=1, lease_seconds=WORKER_LEASE_S),
                )
                for job in leased:
                    self._work_one(slot, job)
                if drain and not leased:
                    return
        finally:
            self.busy.discard(slot)

    def _work_one(self, slot: str, leased: LeasedJob) -> None:
        deps = self.slots[slot].deps
        token = leased.lease.token()
        envelope = leased.envelope
        self.scheduler.pause_point()  # the worker's own work takes time, as the function's
        try:
            envelope = _fetch_payload(envelope, leased.payload_url)
            failure: Exception | None = self.start_run(envelope)
        except PayloadUnavailable as unavailable:
            failure = unavailable
        end = self.clock.now_ms() + self._drawn_duration_ms()
        if end - self.clock.now_ms() > WORKER_LEASE_S * 1000:
            self.ledger.counts["worker runs longer than their lease"] += 1
        while self.clock.now_ms() < end:
            self.scheduler.wait_until(min(end, self.clock.now_ms() + WORKER_LEASE_S * 500))
            if self.clock.now_ms() >= end:
                break
            try:
                deps.leases.heartbeat(
                    envelope.id, HeartbeatRequest(lease=token, lease_seconds=WORKER_LEASE_S)
                )
            except Conflict:
                self.trace(f"     {slot} lost the lease of {envelope.id}")
                return  # its attempt is another's now: it reports nothing
        try:
            if failure is None:
                self.ledger.succeeded.add(envelope.id)
                deps.leases.ack(envelope.id, AckRequest(lease=token, result={"ran": envelope.id}))
            else:
                retry_after = self.rng.choice([0, 20, 600])
                nack = NackRequest(
                    lease=token,
                    error_type=type(failure).__name__,
                    message=str(failure),
                    retryable=not isinstance(failure, PayloadUnavailable)
                    and "poisoned" not in str(failure),
                    retry_after_seconds=retry_after,
                )
                deps.leases.nack(envelope.id, nack)
        except SundialError as refused:
            self.trace(f"     {slot}: the report of {envelope.id} was refused: {refused}")

    # -- the oracle ------------------------------------------------------------------------------

    def check_holders(self) -> list[str]:
        """No job was marked dead for a redrive in a run where no consumer crashed."""
        ledger = self.ledger
        errors = []
        if not ledger.crashed():
            for job_id in sorted(ledger.accepted):
                job = self.observer.store.get(JobKey.from_job_id(job_id))
                if job is not None and any(e.error_type == REDRIVE_ERROR for e in job.history):
                    errors.append(f"{job_id} marked dead for a redrive, with no consumer crash")
        return errors


def _fetch_payload(envelope: Envelope, payload_url: str | None) -> Envelope:
    """What sundial.worker.fetch_payload does, over `requests` (which moto intercepts;
    the worker's urllib3 call would go to the network)."""
    if envelope.payload_ref is None:
        return envelope
    ref = envelope.payload_ref.ref()
    if payload_url is None:
        raise PayloadUnavailable(f"job {envelope.id}: the lease gave no payload_url")
    response = requests.get(payload_url, timeout=10)
    if response.status_code == 404:
        raise PayloadUnavailable(f"payload object {ref.key} is missing")
    payload: Any = json.loads(check_payload(ref, response.content))
    return envelope.model_copy(update={"payload": payload})
