"""The simulation's settings: its queues and clock start, the fault probabilities and the
profiles a run is configured with (sundial's simulation, tests.simulation.sim)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sundial.retry import RetryPolicy
from sundial.timing import SWEEP_LEASE_MS

START = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
QUEUES = ("default", "email")
SHARDS = 8
PAYLOAD_BUCKET = "sundial-payloads"
VISIBILITY_S = 120  # tests.support.create_queues
# A flaky job's retries: within 10 minutes (the holders profile: a scheduled retry an operator
# overtakes), or one to four days apart (the long profile: timers the jumps' sweeps reach).
FLAKY_RETRY = RetryPolicy(initial_delay_seconds=600, factor=1.0, max_delay_seconds=600)
LONG_RETRY = RetryPolicy(initial_delay_seconds=86_400, factor=2.0, max_delay_seconds=4 * 86_400)
# `email` admits 3 submissions a second (SUNDIAL_QUOTAS); `default` has no quota.
QUOTAS = {"email": {"max_submissions_per_second": 3}}


@dataclass(frozen=True)
class Faults:
    """Per-AWS-call probabilities."""

    crash: float = 0.0  # before or after the call, half each
    throttle: float = 0.0
    partial_batch: float = 0.0  # per SendMessageBatch: one entry refused
    client_retry: float = 0.7  # an API client retries a request that got no answer

    @property
    def any(self) -> bool:
        return bool(self.crash or self.throttle or self.partial_batch)


@dataclass(frozen=True)
class Flood:
    """One queue floods: `jobs` of its jobs due at the same second, `due_in_s` after the start,
    submitted at the start; the queue is capped at `per_second`. `quiet` is the queue whose
    lateness is bounded."""

    queue: str = "default"
    quiet: str = "email"
    jobs: int = 2000
    per_second: int = 2  # 8 shards: a slot every 4 s per shard, so SQS's 15 minutes defer most
    due_in_s: int = 1200

    def bound_ms(self, faults: Faults) -> int:
        """The quiet queue's lateness bound: a job sent by the submit or a sweep is visible at
        its due second (DelaySeconds rounds up to a whole second). A fault adds at most the
        shard's lease after a sweep died holding it, and the next sweep that takes it."""
        return 1000 if not faults.any else SWEEP_LEASE_MS + 2 * 60_000


@dataclass(frozen=True)
class Config:
    seed: int
    jobs: int = 60  # plain jobs submitted (single and batch); schedules and DAGs come on top
    faults: Faults = field(default_factory=Faults)
    flood: Flood | None = None
    ticks: int = 45
    schedules: int = 2
    dags: int = 1
    trace: bool = False
    # Moves (issue 18): with `movers`, a client of its own moves a job nearly every tick (most
    # often one due about now, racing its claim, its send and its run), besides the racing
    # clients' occasional moves.
    movers: bool = False
    # Dead letters: with `dead_letters`, a quarter of the plain jobs fail their first attempt
    # with a non-retryable error, so they die and reach their DLQ. An indexer drains the DLQs
    # every tick, a replayer replays dead letters (all of a queue, or one job's) and clients
    # retry dead jobs by id (POST /jobs/{id}/retry), racing each other and everything else.
    dead_letters: bool = False
    # Time long enough for DynamoDB's TTL and S3's lifecycle to act (issue 25; tests.
    # simulation.long_time): the table's stream read by the history Lambda, TTL and the
    # payload bucket's lifecycle as background actors, jumps of days between some ticks (jobs
    # and schedules paused for months, retries days apart), and a retention after the drain.
    long_time: bool = False
    # The move limit (issue 25, item 2; tests.simulation.move_limit): MAX_MOVES lowered to
    # MOVE_LIMIT, a client pushing jobs to it, crashes around the last allowed move's send.
    move_limit: bool = False
    # A second tenant (issue 25; tests.simulation.tenants): the `billing` queue with callers,
    # a consumer and dead letters of its own, every write checked against its tenant, and a
    # hostile message naming the first tenant's job.
    tenants: bool = False
    # Second messages of one attempt without a fault, and runs longer than the visibility
    # timeout and a worker's lease (issue 31; tests.simulation.holders).
    holders: bool = False
    # An operator's pause, resume, cancel, node cancel and node retry racing DAG submits and
    # the nodes' progress, with runs that last (issue 32; tests.simulation.dag_controls).
    dag_controls: bool = False

    @property
    def profile_flags(self) -> str:
        """The command-line flags of this run's profiles (for the replay command)."""
        flags = {
            "--movers": self.movers,
            "--dead-letters": self.dead_letters,
            "--long": self.long_time,
            "--move-limit": self.move_limit,
            "--tenants": self.tenants,
            "--holders": self.holders,
            "--dag-controls": self.dag_controls,
        }
        return "".join(f" {flag}" for flag, on in flags.items() if on)
