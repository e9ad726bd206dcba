"""The job and its statuses, as the domain sees them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

from ulid import ULID

from sundial.ids import JobKey
from sundial.model.payloads import PayloadRef
from sundial.retry import RetryPolicy


class Status(StrEnum):
    PENDING = "pending"  # waiting in the table for its due time
    QUEUED = "queued"  # handed to SQS
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # an attempt failed; a retry is due
    DEAD = "dead"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"  # a DAG node waiting for its parents (sundial.services.dags)
    # Held in the table: never dispatched until resumed (POST /jobs/{id}/resume). The sweeper
    # passes over it like a finished job, so a paused job never holds a shard's cursor back.
    PAUSED = "paused"


CANCELLABLE = frozenset(
    {Status.PENDING, Status.QUEUED, Status.FAILED, Status.BLOCKED, Status.PAUSED}
)
FINISHED = frozenset({Status.SUCCEEDED, Status.DEAD, Status.CANCELLED})


@dataclass(frozen=True, slots=True)
class AttemptError:
    """What one failed attempt left behind, kept in the job's history."""

    attempt: int
    at_ms: int
    error_type: str
    message: str
    traceback_head: str


class Priority(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class OnFailure(StrEnum):
    """What a DAG does when a node dies (or is cancelled)."""

    CANCEL_DESCENDANTS = "cancel_descendants"  # everything downstream of it is cancelled
    CONTINUE = "continue"  # its children still run, once all their parents have finished


class ParentResults(StrEnum):
    """How a DAG node's message carries its parents' results."""

    REFERENCE = "reference"  # the parents' job ids
    INLINE = "inline"  # their results too, up to a size budget


@dataclass(frozen=True, slots=True)
class DagLink:
    """What makes a job a DAG node: its place in the graph and how far its parents got."""

    dag_id: str
    dag_name: str
    node: str
    index: int
    parents: tuple[tuple[str, int], ...] = ()  # (name, node index), in node order
    children: tuple[tuple[int, int], ...] = ()  # (node index, how many parents it has)
    on_failure: OnFailure = OnFailure.CANCEL_DESCENDANTS
    parent_results: ParentResults = ParentResults.REFERENCE
    waiting_on: int = 0  # parents not finished yet
    done_parents: frozenset[int] = frozenset()
    failed_parents: frozenset[int] = frozenset()  # finished without succeeding (CONTINUE)
    released_by: int | None = None  # the parent whose write released this node
    released_at_ms: int | None = None
    results_json: str | None = None  # INLINE: {parent name: result}, written on release
    held: bool = False  # its DAG is paused: not released until resumed


class Keyed:
    """A job's id and due time, read from its key (a Job, or a sweep's lighter DueRef).

    A job moved in time (PATCH /jobs/{id}) lives at a new key, at its new due time, and keeps
    the id it was submitted with: `origin` is the key that id names (None: never moved), where
    a pointer to the job's current key stays (sundial.store.job_items)."""

    __slots__ = ()
    key: JobKey
    origin: JobKey | None

    @property
    def id(self) -> str:
        return (self.origin or self.key).job_id

    @property
    def due_ms(self) -> int:
        return self.key.due_ms


@dataclass(frozen=True, slots=True)
class Move:
    """One change of a waiting job by PATCH /jobs/{id}, kept in its history."""

    at_ms: int
    from_run_at_ms: int
    to_run_at_ms: int
    changed: tuple[str, ...]  # the fields the request changed, e.g. ("run_at", "priority")
    # The request's fingerprint (ChangeJob.fingerprint): a repeat of it is recognised
    # (sundial.services.moves). None for moves recorded before it was kept.
    request: str | None = None


# A job keeps at most this many moves in its history (each about 100 bytes of its item); one
# more is refused (409), so a job's item stays far below DynamoDB's 400 KB.
MAX_MOVES = 100


@dataclass(slots=True)
class Job(Keyed):
    """One job item. `payload_json` is kept as the JSON text the client sent (re-serialised
    compactly), so it is stored and forwarded without float or key-order surprises. A payload
    stored in S3 (sundial.model.payloads) is `payload_ref`, and `payload_json` is then "null"."""

    key: JobKey
    queue: str
    payload_json: str
    priority: Priority
    max_attempts: int
    created_at_ms: int
    status: Status = Status.PENDING
    attempts: int = 0
    # True when the submit Lambda itself sends the job to SQS (due within the direct window).
    # The sweeper leaves such jobs alone: the submit path owns them until it has claimed them.
    direct: bool = False
    idempotency_key: str | None = None
    queued_at_ms: int | None = None
    cancelled_at_ms: int | None = None
    claim_token: str | None = None
    lease_until_ms: int | None = None
    expires_at_s: int | None = None
    retry: RetryPolicy | None = None  # None: the queue's defaults
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    next_attempt_at_ms: int | None = None
    result_json: str | None = None
    history: list[AttemptError] = field(default_factory=list)
    # A retry timer: an item at the retry's due time that stands for attempt `retry_attempt`
    # of the job at `retry_of`. The sweeper dispatches it like a job, under that job's id.
    retry_of: JobKey | None = None
    retry_attempt: int | None = None
    dag: DagLink | None = None  # set on the nodes of a DAG
    paused_at_ms: int | None = None
    # When an API call (a resume, a catch-up) last took the job to send it itself (direct).
    resumed_at_ms: int | None = None
    # When POST /jobs/{id}/retry (or a dead-letter replay) last re-queued it to run now.
    retried_at_ms: int | None = None
    # An occurrence of a recurring schedule (sundial.model.schedule). `chained`: its successor is
    # decided and written, so no sweep needs to advance the schedule from it again.
    schedule_id: str | None = None
    chained: bool = False
    # The id of the API request that submitted the job (API Gateway's request id), so one job
    # can be followed through the API, sweeper and consumer logs and the history.
    correlation_id: str | None = None
    # Moved in time (PATCH /jobs/{id}): the key its id names (see Keyed), how many changes it
    # has had (its messages carry it, and the consumer's fence skips one of an older revision),
    # and those changes.
    origin: JobKey | None = None
    revision: int = 0
    moves: list[Move] = field(default_factory=list)
    payload_ref: PayloadRef | None = None
    # The holder of the running attempt (sundial.store.attempts): its delivery's token, and
    # until when it is provably alive (its Lambda's deadline, or its worker's lease).
    runner: str | None = None
    runner_until_ms: int | None = None

    @property
    def envelope_id(self) -> str:
        """The id consumers see: the job's own, or for a retry timer the job it retries."""
        return self.retry_of.job_id if self.retry_of is not None else self.id

    @property
    def next_attempt(self) -> int:
        """The attempt a message sent for this item now carries: a retry timer's is its retry's
        (the timer's own `attempts` count nothing), any other job's the one after its last."""
        if self.retry_of is not None and self.retry_attempt is not None:
            return self.retry_attempt
        return self.attempts + 1

    @property
    def last_error(self) -> AttemptError | None:
        return self.history[-1] if self.history else None


def retry_timer(job: Job, *, attempt: int, at_ms: int) -> Job:
    """A retry timer: the item at `at_ms` that stands for attempt `attempt` of `job`, which the
    sweeper dispatches at that time under the job's id (Job.retry_of). It carries what the
    attempt's message carries (queue, payload or its stored reference, the DAG context, the
    job's revision); the fence reads the job itself when the message arrives. Written by the
    runners (a retry beyond SQS's delay window: runs.attempts) and by a consumer releasing a DAG
    node onto a paused queue (services.dag_progress), always more than SQS's 15-minute delay
    ahead, so no sweep can have passed it (services.deferral). Its key is derived from the job,
    the attempt, the revision and the time: the same retry written again (a repair) is the same
    item, so a conditional put writes no second timer. It has no expiry until the sweeper
    sends it (JobStore.claim gives it one then): a pause of its queue or DAG can hold it back
    for longer than any retention, and its job waits on it."""
    seed = hashlib.sha256(f"{job.id}#{attempt}#{job.revision}".encode()).digest()
    ulid = ULID.from_bytes(at_ms.to_bytes(6, "big") + seed[:10])
    return Job(
        key=JobKey(shard=job.key.shard, due_ms=at_ms, ulid=str(ulid)),
        queue=job.queue,
        payload_json=job.payload_json,
        payload_ref=job.payload_ref,  # its message references the same stored payload
        priority=job.priority,
        max_attempts=job.max_attempts,
        created_at_ms=job.created_at_ms,
        retry_of=job.origin or job.key,  # the job's id, wherever a move put it
        retry_attempt=attempt,
        revision=job.revision,  # its message is of the job's revision
        dag=job.dag,  # the retry's message carries the node's DAG context too
    )
