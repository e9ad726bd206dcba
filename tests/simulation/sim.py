"""A deterministic simulation of the whole system (issue 12): the real domain code, wired as the
Lambdas wire it (sundial.wiring), on moto with one manual clock, driven by a seeded scheduler.

Modules: scheduler (the cooperative scheduler), world (slots, the effect, the API client's
behaviour, moto on the clock), actors (the operations), the profiles of issues 25 and 31
(long_time, move_limit, tenants, holders: each module's docstring says what it adds, and the
interleavings it relies on), oracle and oracle_schedules (the checks), this module (the run).

- **Actors.** Every operation (a submit, a cancel, a pause, a sweep, a consumer's batch, ...)
  runs on an actor thread of its own, with a boto3 session of its own. Only one thread runs at a
  time: a botocore `before-call` hook on each session hands control back to the scheduler before
  every AWS call, and the scheduler (random.Random(seed)) picks which actor goes on. So write
  sequences interleave at the granularity of AWS calls, the same way every time for a seed.
  An actor may also wait for the clock (Scheduler.wait_until: a job function running for
  minutes, a worker between heartbeats): it is carried into the next ticks' runs (World.waiting)
  until the clock passed its time, and interleaves with everything those ticks do.
- **Faults** (seeded, per AWS call): a crash before or after the call (the Lambda dies; the API
  client retries or gives up, the sweeper's next tick comes anyway, SQS redelivers the
  consumer's messages after their visibility timeout), throttling (the call fails with
  ThrottlingException), and partial SendMessageBatch failures (an entry withheld from SQS and
  reported Failed, as SQS does). Consumer crashes are crashes of the consumer's calls. A
  profile may plan a fault for a slot's next call of an operation (Slot.planned: the move
  limit's crashes around a send); planned faults are counted apart ("planned_crash",
  "planned_refusal"), and a duplicate run after one alone is still a violation.
- **Quotas** (issue 16): the `email` queue admits QUOTAS' submissions a second, so a submit,
  an idempotent repeat or a DAG touching it is sometimes refused (429; 413 for a batch with more
  `email` jobs than a second admits). So are (issue 25, item 8) a schedule's create, update and
  resume, counted as the occurrences they write at once (an every-minute cron writes 17, more
  than a second admits: counted over the seconds after, so it holds the window of the next
  ones), a move, a retry by id and each job of a dead-letter replay. A client repeats a 429
  after its Retry-After (the drain does, a second at a time), and gives up on a 413.
- **Oracle** (`Ledger.violations`), after a fault-free drain: every job accepted with 2xx and not
  cancelled ran at least once, never before its due second; a job whose cancel answered 200
  never ran after that answer; a duplicate run (one job, one attempt, run twice) in a run without
  a crash or throttle is a violation, after one it is counted; every run of a plain job never
  moved had exactly its submitted payload; every schedule occurrence fired exactly once
  (or was skipped or cancelled by its record) and no schedule's chain has a gap or stops; every
  schedule not deleted is in its queue's listing exactly once and no deleted one is, and every
  DAG in the listing of each queue it uses, once; a DAG
  node ran only after all its parents; a submission refused by a quota wrote nothing: no item
  carries the refused attempt's correlation id (each attempt has its own, as each API request
  has its own request id), a request refused at its first attempt left no idempotency
  record, and a schedule's create refused at its first attempt left no schedule; a flaky job
  (one made to fail its first attempts, retryable) ran to the end; no actor is still waiting
  for the clock after the drain.
- **Fair dispatch** (`Config.flood`, issue 16): thousands of jobs of one queue due at the same
  second, that queue capped (SUNDIAL_DISPATCH), while the run goes on around it; pauses of a
  whole queue then pause the flooding queue only. Each message's visibility time is recorded
  from the SendMessageBatch requests SQS accepted. The oracle adds: every job of the quiet
  queue (not paused, not a DAG node) is visible within `Flood.bound_ms` of its due time (a
  moved job's: the time its last answered move gave it; one whose move got no answer is left
  out, its time unknown), and,
  in a run without faults, the flood's messages on each shard are at least the shard's pacing
  gap apart (up to the first pause of the flooding queue, whose resume's catch-up is unpaced).
- **The profiles of issues 25 and 31**, each behind a flag, drawing from the generators only
  when on (the other profiles' seeds replay as they did): `--long` (tests.simulation.long_time:
  DynamoDB's TTL, the payload lifecycle and the history Lambda, jumps of days, a retention
  after the drain), `--move-limit` (tests.simulation.move_limit), `--tenants`
  (tests.simulation.tenants: a second tenant, every write checked against its tenant, a
  hostile message), `--holders` (tests.simulation.holders: second messages of one attempt
  without a fault, runs longer than the visibility timeout and a worker's lease).

The seams, and what each relies on:
- The sweeper's claim pool runs inline (an executor that runs each claim at once, so claims
  interleave at AWS-call granularity too, deterministically).
- The consumer's heartbeat thread is off. Before the holders profile the simulated consumer
  never outlived its visibility timeout; with it, a run longer than the timeout lets its
  message come back while it runs, which is what that profile is for (a Lambda consumer's
  attempt is its own until its invocation's deadline, whatever the message's visibility).
- A run's time passes only between ticks (the clock stands still while actors run): a long
  run waits for the clock, and a worker heartbeats at most every 30 s (a tick), within its
  60 s lease; the drain of the holders profile steps 30 s at a time for that reason.
- `sundial.services.moves.MAX_MOVES` is patched to MOVE_LIMIT in the move-limit profile.
- AWS's background processes, which moto runs none of, are emulated (tests.support): TTL and
  the payload lifecycle, each acting atomically (see long_time), and the table's stream read
  from the last sequence number each time (moto replaces a table, stream included, with a copy
  when a transaction fails). moto's S3 and DynamoDB stream times follow the clock in that
  profile only (long_time's imports would change the other profiles' seeded entropy).
- Seeded entropy: os.urandom (ULIDs, message ids, receipt handles), random.SystemRandom
  (`secrets`: DAG keys, attempt holders' tokens), the observer's own generator (a DAG the
  drain's repeat submits), and in the long profile moto's generator.
- A worker fetches its payload from the lease's presigned URL with `requests` (which moto
  intercepts) rather than the worker SDK's urllib3 call (which would go to the network).
Nothing of AWS is faked: every call reaches moto.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from unittest import mock

import sundial.services.moves
from sundial.clock import to_rfc3339
from sundial.errors import (
    SubmissionRateExceeded,
    SundialError,
)
from sundial.ids import JobKey
from sundial.model.job import MAX_MOVES, Status
from sundial.model.schedule import (
    ScheduleState,
)
from sundial.model.submission import SubmitJob
from sundial.services.dead_letters import DeadLetterFilter
from tests.simulation.aws import Slot, moto_at
from tests.simulation.config import (
    Config,
    Flood,
)
from tests.simulation.ledger import RunResult
from tests.simulation.long_time import lifecycle_rules
from tests.simulation.move_limit import MOVE_LIMIT
from tests.simulation.oracle import Oracle
from tests.simulation.scheduler import Actor


class World(Oracle):
    def plan_tick(self, tick: int, jobs_left: int) -> tuple[list[Actor], int]:
        rng = self.rng
        actors: list[Actor] = []
        api = ["api-1", "api-2", "api-3"]
        rng.shuffle(api)

        def add(slot: str, label: str, work: Callable[[], None]) -> None:
            actors.append(Actor(f"{slot}:{label}", work))

        if jobs_left > 0:
            count = min(jobs_left, rng.choice([1, 1, 2, 5]))
            slot_a = api.pop()
            add(slot_a, f"submit x{count}", lambda: self.op_submit(slot_a, count))
            jobs_left -= count
        reserved = (tick in self._schedule_ticks) + (tick in self._dag_ticks)
        if jobs_left > 0 and len(api) > reserved and rng.random() < 0.3:
            # A second client submitting in the same second: the two race for `email`'s window.
            more = min(jobs_left, rng.choice([1, 2, 3]))
            slot_b = api.pop()
            add(slot_b, f"submit x{more}", lambda: self.op_submit(slot_b, more))
            jobs_left -= more
        if tick in self._schedule_ticks:
            slot_s = api.pop()
            add(slot_s, "create schedule", lambda: self.op_create_schedule(slot_s))
        if tick in self._dag_ticks and api:
            slot_d = api.pop()
            add(slot_d, "submit DAG", lambda: self.op_submit_dag(slot_d))
        for slot_x in api:
            if rng.random() < 0.5:
                name, op = rng.choice(self.racing_ops())
                add(slot_x, name, partial(op, slot_x))
        if self.config.movers and rng.random() < 0.8:
            add("mover", "move job", lambda: self.op_move_job("mover", due_now_bias=0.8))
        if self.config.dead_letters or self.config.tenants or self.config.holders:
            add("dead-indexer", "index dead letters", lambda: self.op_index_dead("dead-indexer"))
        if self.config.dead_letters and rng.random() < 0.5:
            add("replayer", "replay dead letters", lambda: self.op_replay_dead("replayer"))
        actors += self.profile_actors(tick)
        if tick % 2 == 0:
            add("sweeper-1", "sweep", lambda: self.op_sweep("sweeper-1"))
            if rng.random() < 0.5:  # a second sweeper on the same shards (a retried tick)
                add("sweeper-2", "sweep", lambda: self.op_sweep("sweeper-2"))
        return actors + self.consumer_actors(), jobs_left

    def profile_actors(self, tick: int) -> list[Actor]:
        """The actors of the profiles added for issues 25 and 31, each drawing from the
        generators only when its profile is on (the other profiles' seeds replay as they did)."""
        config = self.config
        actors: list[Actor] = []
        if config.move_limit:
            actors += self.limit_actors()
        if config.tenants:
            actors += self.tenant_actors(tick)
        if config.holders:
            actors += self.holder_actors(tick)
        if config.long_time:
            actors += self.long_actors(tick)
        return actors

    def run(self) -> None:
        config = self.config
        self._schedule_ticks = set(self.rng.sample(range(config.ticks // 2), config.schedules))
        self._dag_ticks = set(self.rng.sample(range(config.ticks // 2), config.dags))
        jobs_left = config.jobs
        if config.flood is not None:
            self.submit_flood(config.flood)
        self.plan_profiles()
        self.faults_on = config.faults.any
        tick = 0
        while tick < config.ticks or jobs_left > 0:
            self.clock.advance(seconds=30)
            if config.long_time and tick in self.jump_ticks:
                self.jump(tick)
            self.trace(f"tick {tick} at {to_rfc3339(self.clock.now_ms())}")
            actors, jobs_left = self.plan_tick(tick, jobs_left)
            self.waiting = self.scheduler.run(self.waiting + actors)
            self.after_tick(tick)
            tick += 1
        self.drain()

    def prepare_profiles(self) -> None:
        if self.config.tenants:
            self.prepare_tenants()
        if self.config.holders:
            self.prepare_holders()
        self.limit_repeats = []

    def add_profile_slots(self) -> None:
        config = self.config
        if config.tenants:
            self.add_tenant_slots()
        if config.holders:
            self.add_holder_slots()
        if config.move_limit:
            self.slots["limit-mover"] = Slot(self, "limit-mover")
        if config.long_time:
            self.add_long_slots()
        if config.tenants:
            self.restrict_slots()

    def plan_profiles(self) -> None:
        """What the profiles of issues 25 and 31 decide before the first tick."""
        if self.config.tenants:
            self.plan_tenants()
        if self.config.long_time:
            self.plan_long()

    def after_tick(self, tick: int) -> None:
        if self.config.long_time:
            self.check_ownership(f"tick {tick}")

    def submit_flood(self, flood: Flood) -> None:
        """The flood, submitted before the run (in batches of 25, as a producer would), all due
        at the same second."""
        for start in range(0, flood.jobs, 25):
            requests = [
                SubmitJob(queue=flood.queue, delay_seconds=flood.due_in_s, payload={"n": n})
                for n in range(start, min(flood.jobs, start + 25))
            ]
            for result in self.observer.jobs.submit_many(requests):
                assert not isinstance(result, SundialError), result
                self.ledger.accepted[result.job.id] = result.job.due_ms
                self.ledger.flood.add(result.job.id)
        self.trace(f"flood: {flood.jobs} jobs of {flood.queue} due in {flood.due_in_s} s")

    def drain(self) -> None:
        """No more faults; everything paused is resumed; time runs on until all is done."""
        self.faults_on = False
        self.draining = True
        self.trace("drain")
        deps = self.observer
        self.clock.advance(seconds=31)  # past the in-flight window (SUBMIT_IN_FLIGHT)
        self.repeat_later()
        for queue in self.queues:
            deps.queue_control.resume(queue) if deps.queue_control.get(queue).paused else None
        for schedule_id in self.schedule_ids:
            if schedule_id in self.ledger.deleted_schedules:
                continue
            state = deps.schedule_store.get(schedule_id)
            if state is not None and state.state in (ScheduleState.PAUSED, ScheduleState.RESUMING):
                self.until_admitted(partial(deps.schedules.resume, schedule_id))
        for job_id in self.job_ids:
            job = deps.store.get(JobKey.from_job_id(job_id))
            if job is not None and job.status is Status.PAUSED:
                deps.jobs.resume(job_id)
        if self.config.long_time:
            self.resume_long_paused()
        self.drain_until = self.clock.now_ms()
        # Runs longer than a tick (the holders profile) see their time pass in smaller steps.
        steps, step_s = (80, 30) if self.config.holders else (40, 60)
        for _ in range(steps):
            self.clock.advance(seconds=step_s)
            actors = [Actor("sweeper-1:sweep", lambda: self.op_sweep("sweeper-1"))]
            actors += self._drain_dead_letters() + self.drain_profile_actors()
            self.waiting = self.scheduler.run(
                self.waiting + actors + self.consumer_actors(drain=True)
            )
        if self.waiting:
            self.ledger.stuck += [actor.name for actor in self.waiting]
        if self.config.long_time:
            self.retain()

    def drain_profile_actors(self) -> list[Actor]:
        actors: list[Actor] = []
        if self.config.holders:
            actors += self.worker_actors(drain=True)
        if self.config.long_time:
            actors += self.background_actors()
        return actors

    def _drain_dead_letters(self) -> list[Actor]:
        """With dead letters on, the drain indexes every DLQ and replays every queue's letters,
        as an operator would once the poison is gone."""
        if not (self.config.dead_letters or self.config.tenants or self.config.holders):
            return []

        def replay_all() -> None:
            for queue in self.queues:
                # A quota's 429 (`email`): the rest waits for the next minute's replay.
                with suppress(SubmissionRateExceeded):
                    while self.observer.dead_letters.replay(
                        queue, DeadLetterFilter(), limit=500
                    ).more:
                        pass

        return [
            Actor("dead-indexer:index", lambda: self.op_index_dead("dead-indexer")),
            Actor("replayer:replay all", replay_all),
        ]


def simulate(config: Config) -> RunResult:
    world = World(config)
    # ULIDs, message ids and receipt handles draw on os.urandom: seeded too, so a seed replays
    # the same keys in the same order.
    entropy = random.Random(config.seed)
    # `secrets` (DAG keys, attempt holders' tokens) draws on random.SystemRandom, which reads
    # the OS's urandom bound at import: seeded from a generator of its own.
    tokens = random.Random(config.seed * 7919 + 3)
    if config.long_time:
        lifecycle_rules()  # synthesized before moto starts (the CDK runs in a process of its own)
    # The move limit's seam: a job reaches the limit in a few ticks (tests.simulation.move_limit).
    limit = MOVE_LIMIT if config.move_limit else MAX_MOVES
    with (
        moto_at(world.clock, long_time=config.long_time, seed=config.seed),
        mock.patch("os.urandom", entropy.randbytes),
        mock.patch("random._urandom", tokens.randbytes),
        mock.patch.object(sundial.services.moves, "MAX_MOVES", limit),
    ):
        world.setup()
        world.run()
        return world.check()
