"""A deterministic simulation of the whole system (issue 12): the real domain code, wired as the
Lambdas wire it (sundial.wiring), on moto with one manual clock, driven by a seeded scheduler.

- **Actors.** Every operation (a submit, a cancel, a pause, a sweep, a consumer's batch, ...)
  runs on an actor thread of its own, with a boto3 session of its own. Only one thread runs at a
  time: a botocore `before-call` hook on each session hands control back to the scheduler before
  every AWS call, and the scheduler (random.Random(seed)) picks which actor goes on. So write
  sequences interleave at the granularity of AWS calls, the same way every time for a seed.
- **Faults** (seeded, per AWS call): a crash before or after the call (the Lambda dies; the API
  client retries or gives up, the sweeper's next tick comes anyway, SQS redelivers the
  consumer's messages after their visibility timeout), throttling (the call fails with
  ThrottlingException), and partial SendMessageBatch failures (an entry withheld from SQS and
  reported Failed, as SQS does). Consumer crashes are crashes of the consumer's calls.
- **Quotas** (issue 16): the `email` queue admits QUOTAS' submissions a second, so a submit,
  an idempotent repeat or a DAG touching it is sometimes refused (429; 413 for a batch with more
  `email` jobs than a second admits). So are (issue 25, item 8) a schedule's create, update and
  resume, counted as the occurrences they write at once (an every-minute cron writes 17, more
  than a second admits: counted over the seconds after, so it holds the window of the next
  ones), a move, a retry by id and each job of a dead-letter replay. A client repeats a 429
  after its Retry-After (the drain does, a second at a time), and gives up on a 413.
- **Oracle** (`Ledger.violations`), after a fault-free drain: every job accepted with 2xx and not
  cancelled ran at least once, never before its due second; a job whose cancel answered 200
  never ran; a duplicate run (one job, one attempt, run twice) in a run without a crash or
  throttle is a violation, after one it is counted; every schedule occurrence fired exactly once
  (or was skipped or cancelled by its record) and no schedule's chain has a gap or stops; every
  schedule not deleted is in its queue's listing exactly once and no deleted one is, and every
  DAG in the listing of each queue it uses, once; a DAG
  node ran only after all its parents; a submission refused by a quota wrote nothing: no item
  carries the refused attempt's correlation id (each attempt has its own, as each API request
  has its own request id), a request refused at its first attempt left no idempotency
  record, and a schedule's create refused at its first attempt left no schedule.
- **Fair dispatch** (`Config.flood`, issue 16): thousands of jobs of one queue due at the same
  second, that queue capped (SUNDIAL_DISPATCH), while the run goes on around it; pauses of a
  whole queue then pause the flooding queue only. Each message's visibility time is recorded
  from the SendMessageBatch requests SQS accepted. The oracle adds: every job of the quiet
  queue (not paused, not a DAG node) is visible within `Flood.bound_ms` of its due time (a
  moved job's: the time its last answered move gave it; one whose move got no answer is left
  out, its time unknown), and,
  in a run without faults, the flood's messages on each shard are at least the shard's pacing
  gap apart (up to the first pause of the flooding queue, whose resume's catch-up is unpaced).

The only seams: the sweeper's claim pool runs inline (an executor that runs each claim at once,
so claims interleave at AWS-call granularity too, deterministically), and the consumer's
heartbeat thread is off (the simulated consumer never outlives its visibility timeout).
Nothing of AWS is faked: every call reaches moto.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any
from unittest import mock

import boto3
import moto.core.utils
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import ClientError
from moto import mock_aws

import sundial.dispatch.sweeper
from sundial.clock import ManualClock, to_rfc3339
from sundial.consumer import JobConsumer
from sundial.errors import (
    Conflict,
    InvalidInput,
    SubmissionRateExceeded,
    SundialError,
    TooLargeForQueue,
    Unavailable,
)
from sundial.ids import JobKey
from sundial.local.triggers import sqs_record
from sundial.model.dag import SubmitDag
from sundial.model.job import Status
from sundial.model.payloads import INLINE_PAYLOAD_BYTES, PayloadStorage
from sundial.model.recurrence import CronRecurrence, zone
from sundial.model.schedule import (
    CreateSchedule,
    Misfire,
    RunOutcome,
    ScheduleState,
    UpdateSchedule,
    schedule_id_for,
)
from sundial.model.submission import ChangeJob, SubmitJob
from sundial.runs.consumer import NonRetryableError
from sundial.runs.dlq_indexer import REDRIVE_ERROR
from sundial.services.dead_letters import DeadLetterFilter
from sundial.services.schedules import RunView
from sundial.store.idempotency import IDEM_SK, idempotency_pk
from sundial.timing import CLAIM_LEASE_MS
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies, configure
from tests.support import (
    DAILY_REPORT,
    TABLE,
    FakeLambdaContext,
    create_priority_queues,
    create_queues,
    create_table,
    sqs_event,
)

START = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
QUEUES = ("default", "email")
SHARDS = 8
PAYLOAD_BUCKET = "sundial-payloads"
VISIBILITY_S = 120  # tests.support.create_queues
# `email` admits 3 submissions a second (SUNDIAL_QUOTAS); `default` has no quota.
QUOTAS = {"email": {"max_submissions_per_second": 3}}


class Crash(BaseException):
    """The Lambda (or the client) dies here. A BaseException, so no `except Exception` in the
    code under test (Powertools' batch processor included) can swallow it."""


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
        lease after a sweep died holding its claim, and the next sweep that takes it over."""
        return 1000 if not faults.any else CLAIM_LEASE_MS + 2 * 60_000


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


# -- the cooperative scheduler ----------------------------------------------------------------


class Actor:
    def __init__(self, name: str, work: Callable[[], None]) -> None:
        self.name = name
        self.work = work
        self.done = False
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None


class Scheduler:
    """Runs actors one at a time; an actor gives control back at each AWS call."""

    def __init__(self, rng: random.Random, trace: Callable[[str], None]) -> None:
        self._rng = rng
        self._trace = trace
        self._cv = threading.Condition()
        self._turn: Actor | None = None
        self._local = threading.local()

    def current(self) -> Actor | None:
        return getattr(self._local, "actor", None)

    def run(self, actors: list[Actor]) -> None:
        for actor in actors:
            actor.thread = threading.Thread(target=self._body, args=(actor,), daemon=True)
            actor.thread.start()
        live = list(actors)
        while live:
            actor = self._rng.choice(live)
            with self._cv:
                self._turn = actor
                self._cv.notify_all()
                self._cv.wait_for(lambda: self._turn is None)
            if actor.done:
                live.remove(actor)
                assert actor.thread is not None
                actor.thread.join()

    def pause_point(self) -> None:
        """Called on an actor's thread before each AWS call: let the scheduler pick again."""
        actor = self.current()
        if actor is None:
            return
        with self._cv:
            self._turn = None
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._turn is actor)

    def _body(self, actor: Actor) -> None:
        self._local.actor = actor
        with self._cv:
            self._cv.wait_for(lambda: self._turn is actor)
        try:
            actor.work()
        except Crash as crash:
            self._trace(f"  {actor.name}: CRASHED ({crash})")
            actor.error = crash
        except BaseException as error:
            self._trace(f"  {actor.name}: failed with {type(error).__name__}: {error}")
            actor.error = error
        finally:
            with self._cv:
                actor.done = True
                self._turn = None
                self._cv.notify_all()


class InlineExecutor(Executor):
    """Runs each submitted call at once, on the caller's thread (see the module docstring)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Crash:
            raise
        except BaseException as error:
            future.set_exception(error)
        return future

    def __init__(self, *_: Any, **__: Any) -> None:
        super().__init__()

    def __enter__(self) -> InlineExecutor:
        return self


# -- the ledger and the oracle ------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleUpdateSeen:
    """An update (PATCH) of a schedule that answered 200: its revision and settings, and the
    occurrences already decided when it answered (read right after: the only ones of an older
    revision that may still run)."""

    schedule_id: str
    revision: int
    cron: str
    payload: Any
    decided: frozenset[str]


@dataclass
class Ledger:
    accepted: dict[str, int] = field(default_factory=dict)  # job id -> due ms (2xx answered)
    cancelled: set[str] = field(default_factory=set)  # cancel answered 200
    maybe_cancelled: set[str] = field(default_factory=set)  # a cancel got no answer
    runs: list[tuple[str, int, int]] = field(default_factory=list)  # (job id, attempt, at ms)
    dag_nodes: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    schedules: set[str] = field(default_factory=set)
    deleted_schedules: set[str] = field(default_factory=set)
    paused_schedules: set[str] = field(default_factory=set)  # a pause was asked for
    # Updates answered 200, with what the oracle needs (ScheduleUpdateSeen), in answer order.
    schedule_updates: list[ScheduleUpdateSeen] = field(default_factory=list)
    payloads: dict[str, Any] = field(default_factory=dict)  # job id -> payload, as it ran
    faults: Counter[str] = field(default_factory=Counter)
    # Quota refusals: the correlation ids of the attempts refused, and how many of each kind.
    refused: list[str] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)
    refused_but_written: list[str] = field(default_factory=list)  # found at the refusal
    # (job id, attempt) -> when SQS first made it visible (send time + DelaySeconds)
    visible: dict[tuple[str, int], int] = field(default_factory=dict)
    paused_jobs: set[str] = field(default_factory=set)  # a pause was asked for
    flood: set[str] = field(default_factory=set)  # the flooding queue's job ids
    queue_of: dict[str, str] = field(default_factory=dict)  # job id -> queue, for plain jobs
    flood_paused_at: int | None = None  # the first pause of the flooding queue asked for
    # Moves (PATCH /jobs/{id}): per job, the moves answered 200 as (revision, due ms, payload
    # JSON), and those that got no answer as (the lowest due they can have set, payload JSON).
    moves: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    unanswered_moves: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    submitted_payload: dict[str, str] = field(default_factory=dict)  # job id -> payload JSON
    run_payloads: list[str] = field(default_factory=list)  # the payload of each run, as `runs`
    poisoned: set[str] = field(default_factory=set)  # submitted to fail their first attempt
    succeeded: set[str] = field(default_factory=set)  # ran to the end at least once
    retried: set[str] = field(default_factory=set)  # a retry by id answered 200

    def crashed(self) -> bool:
        return bool(
            self.faults["crash_before"] + self.faults["crash_after"] + self.faults["throttle"]
        )


@dataclass
class RunResult:
    seed: int
    jobs: int
    faults: Counter[str]
    lost: list[str]
    early: list[str]
    duplicates_clean: list[str]
    duplicates_after_fault: int
    cancelled_then_ran: list[str]
    schedule_errors: list[str]
    dag_errors: list[str]
    trace: list[str]
    refusals: Counter[str] = field(default_factory=Counter)
    refused_but_written: list[str] = field(default_factory=list)
    # Fair dispatch (Config.flood): the quiet queue's lateness per job (visible - due, ms),
    # those beyond the bound, and the flood's pacing errors.
    quiet_lateness_ms: list[int] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    pacing_errors: list[str] = field(default_factory=list)
    moves_answered: int = 0  # moves (PATCH /jobs/{id}) answered 200
    moved_and_ran: int = 0  # jobs moved (200) that then ran
    # Dead letters (Config.dead_letters): jobs that died and were never run again to the end,
    # and how many died and came back.
    never_brought_back: list[str] = field(default_factory=list)
    killed_by_stale_letters: list[str] = field(default_factory=list)
    died_and_came_back: int = 0

    @property
    def violations(self) -> list[str]:
        out = [f"lost {job}" for job in self.lost]
        out += [f"early {job}" for job in self.early]
        out += [f"duplicate without a crash {job}" for job in self.duplicates_clean]
        out += [f"cancelled then ran {job}" for job in self.cancelled_then_ran]
        out += [f"refused by a quota, yet written: {what}" for what in self.refused_but_written]
        out += [f"late {job}" for job in self.late]
        out += [f"dead and never brought back by a replay {job}" for job in self.never_brought_back]
        out += [f"marked dead by a stale dead letter {job}" for job in self.killed_by_stale_letters]
        return out + self.schedule_errors + self.dag_errors + self.pacing_errors


# -- the world ----------------------------------------------------------------------------------


class Slot:
    """One actor's own wiring: a session (its hooks see only its calls) and its clients."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.session = boto3.Session()
        self.withheld: list[dict[str, Any]] = []
        self.params: dict[str, Any] = {}
        for event, handler in (
            # First: a crash injected after the call (below) must not hide what SQS accepted.
            ("after-call.*.*", self._record_sent),
            ("before-call.*.*", self._before),
            ("after-call.*.*", self._after),
            ("provide-client-params.*.*", self._remember),
            ("provide-client-params.sqs.SendMessageBatch", self._withhold),
            ("after-call.sqs.SendMessageBatch", self._report_withheld),
        ):
            self.session.events.register(event, handler)
        self.deps = configure(
            clock=world.clock,
            environ=world.environ,
            session=self.session,
            rng=random.Random(world.rng.random()),
        )
        self.sqs = self.session.client("sqs")
        # Wired as sundial.consumer wires a consumer Lambda (its role's limits: services.deferral)
        self.consumer = JobConsumer(
            world.effect,
            visibility_timeout_s=None,
            deps=lambda: dataclasses.replace(
                self.deps.consumer_lifecycle, rng=random.Random(world.rng.random())
            ),
        )

    def _record_sent(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        """When each message SQS accepted becomes visible (the clock stands still in a tick)."""
        if model.name == "SendMessageBatch":
            _record_visible(self.world, self.params, parsed)

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        self.params = params  # the call's API parameters, for the trace

    def _before(self, model: Any, **_: Any) -> None:
        world = self.world
        world.scheduler.pause_point()
        call = f"{model.service_model.service_name}.{model.name}{_brief(self.params)}"
        world.trace(f"  {self._actor()} -> {call}")
        if not world.faults_on:
            return
        roll = world.rng.random()
        faults = world.config.faults
        if roll < faults.crash / 2:
            world.ledger.faults["crash_before"] += 1
            world.trace("     FAULT crash before the call")
            raise Crash(f"before {model.name}")
        if roll < faults.crash / 2 + faults.throttle:
            world.ledger.faults["throttle"] += 1
            world.trace("     FAULT throttled")
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded (simulated)"}},
                model.name,
            )

    def _after(self, model: Any, **_: Any) -> None:
        world = self.world
        if world.faults_on and world.rng.random() < world.config.faults.crash / 2:
            world.ledger.faults["crash_after"] += 1
            world.trace(f"     FAULT crash after {model.name}")
            raise Crash(f"after {model.name}")

    def _withhold(self, params: dict[str, Any], **_: Any) -> None:
        self.withheld = []
        world = self.world
        entries = params.get("Entries", [])
        if world.faults_on and entries and world.rng.random() < world.config.faults.partial_batch:
            refused = entries[world.rng.randrange(len(entries))]
            self.withheld = [refused]
            params["Entries"] = [e for e in entries if e is not refused]
            world.ledger.faults["partial_batch"] += 1
            world.trace(f"     FAULT SQS refuses entry {refused['Id']}")

    def _report_withheld(self, parsed: dict[str, Any], **_: Any) -> None:
        if self.withheld:
            parsed.setdefault("Failed", []).extend(
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError"}
                for e in self.withheld
            )
            self.withheld = []

    def _actor(self) -> str:
        actor = self.world.scheduler.current()
        return actor.name if actor else self.name


def _canonical(payload: Any) -> str:
    """A payload as comparable JSON text."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def _record_visible(world: World, params: dict[str, Any], parsed: dict[str, Any]) -> None:
    now = world.clock.now_ms()
    entries = {entry["Id"]: entry for entry in params.get("Entries", [])}
    visible = world.ledger.visible
    for accepted in parsed.get("Successful", []):
        entry = entries[accepted["Id"]]
        body = json.loads(entry["MessageBody"])
        key = (body["id"], body["attempt"])
        at = now + entry.get("DelaySeconds", 0) * 1000
        visible[key] = min(at, visible.get(key, at))


def _submit_one(deps: Dependencies, correlation_id: str, *, request: SubmitJob) -> Any:
    return deps.jobs.submit(request, correlation_id=correlation_id)


def _brief(params: dict[str, Any]) -> str:
    """The parameters that say what a call touches, for the trace."""
    key = params.get("Key")
    if isinstance(key, str):  # an S3 object (a payload stored in S3)
        return f" {key[:40]}"
    if key:
        update = params.get("UpdateExpression", "")[:28]
        return f" {key.get('pk', {}).get('S', '')}/{key.get('sk', {}).get('S', '')} {update}"
    if "Entries" in params:
        return f" {len(params['Entries'])} entries"
    values = params.get("ExpressionAttributeValues", {})
    shown = [v.get("S", "")[:24] for k, v in sorted(values.items()) if k in (":pk", ":from")]
    return f" {' '.join(shown)}" if shown else ""


class World:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.payload_rng = random.Random(config.seed * 7919 + 2)  # payloads stored in S3
        self.clock = ManualClock.at(START)
        self.ledger = Ledger()
        self.lines: list[str] = []
        self.faults_on = False
        self.scheduler = Scheduler(random.Random(config.seed * 7919 + 1), self.trace)
        self.environ: dict[str, str] = {}
        self.slots: dict[str, Slot] = {}
        self.schedule_ids: list[str] = []
        self.job_ids: list[str] = []
        self.later: list[Callable[[Dependencies], Any]] = []  # requests the clients repeat later
        self.attempts = itertools.count(1)  # numbers each API request's correlation id
        self.update_numbers = itertools.count(1)  # each schedule update's payload is its own

    def trace(self, line: str) -> None:
        self.lines.append(line)
        if self.config.trace:
            print(line, flush=True)

    def setup(self) -> None:
        dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
        create_table(dynamodb)
        urls, dead_letter_urls = create_queues(sqs)
        boto3.client("s3").create_bucket(Bucket=PAYLOAD_BUCKET)
        self.environ = {
            "SUNDIAL_TABLE_NAME": TABLE,
            "SUNDIAL_QUEUE_URLS": json.dumps(urls),
            "SUNDIAL_DEAD_LETTER_URLS": json.dumps(dead_letter_urls),
            "SUNDIAL_PRIORITY_QUEUE_URLS": json.dumps(create_priority_queues(sqs)),
            "SUNDIAL_SHARD_COUNT": str(SHARDS),
            "SUNDIAL_RETENTION_DAYS": "30",
            "SUNDIAL_SWEEPER_FUNCTION": "sundial-sweeper",
            "SUNDIAL_SHARDS_PER_SWEEPER": "4",
            "SUNDIAL_QUOTAS": json.dumps(QUOTAS),
            "SUNDIAL_PAYLOAD_BUCKET": PAYLOAD_BUCKET,
            "POWERTOOLS_SERVICE_NAME": "sundial",
            "POWERTOOLS_METRICS_NAMESPACE": "Sundial",
        }
        flood = self.config.flood
        if flood is not None:
            self.environ["SUNDIAL_DISPATCH"] = json.dumps(
                {flood.queue: {"max_per_second": flood.per_second, "weight": 1}}
            )
        for name in (
            "api-1",
            "api-2",
            "api-3",
            "mover",
            "sweeper-1",
            "sweeper-2",
            "consumer-1",
            "consumer-2",
            "dead-indexer",
            "replayer",
        ):
            self.slots[name] = Slot(self, name)
        # The observer's sends (the drain's resumes and repeated requests) are recorded too.
        observer = boto3.Session()
        sending: dict[str, Any] = {}
        observer.events.register(
            "provide-client-params.sqs.SendMessageBatch",
            lambda params, **_: sending.update(params=params),
        )
        observer.events.register(
            "after-call.sqs.SendMessageBatch",
            lambda parsed, **_: _record_visible(self, sending["params"], parsed),
        )
        self.observer = configure(clock=self.clock, environ=self.environ, session=observer)
        self.reader = boto3.client("dynamodb")  # the oracle's own reads, outside every actor

    # -- the job function: the effect ------------------------------------------------------

    def effect(self, job: Envelope) -> dict[str, Any]:
        # The function's own work takes time: other actors may run before its effect lands.
        self.scheduler.pause_point()
        now = self.clock.now_ms()
        self.ledger.runs.append((job.id, job.attempt, now))
        self.ledger.payloads[job.id] = job.payload
        self.ledger.run_payloads.append(_canonical(job.payload))
        self.trace(f"  EFFECT {job.id} attempt {job.attempt} at {to_rfc3339(now)}")
        if isinstance(job.payload, dict) and job.payload.get("poison") and job.attempt == 1:
            self.trace(f"     {job.id} fails: poisoned")
            raise NonRetryableError("poisoned: fails its first attempt (the simulation)")
        self.ledger.succeeded.add(job.id)
        return {"ran": job.id}

    # -- operations (each is one actor's work) -----------------------------------------------

    def _client_call(self, name: str, call: Callable[[Dependencies], Any]) -> Any:
        """An API request as a client makes it. One that got no answer (a crash) or a 5xx is
        retried at once with the same body, with the probability the faults give; otherwise
        the client comes back to it later, as the API asks (`503`: repeat it; a `409` "retry
        shortly"): the drain repeats it, once the in-flight window has passed."""
        slot = self.slots[name]
        while True:
            try:
                return call(slot.deps)
            except (Crash, ClientError, Unavailable) as error:
                if (
                    isinstance(error, Unavailable)
                    or self.rng.random() >= self.config.faults.client_retry
                ):
                    self.later.append(call)
                    raise
                self.trace(f"  {name}: the client retries")
            except Conflict as conflict:
                if "retry" in str(conflict):
                    self.later.append(call)
                raise
            except SubmissionRateExceeded:
                self.later.append(call)  # a 429: repeated after its Retry-After
                raise

    def _quota_checked(
        self,
        deps: Dependencies,
        submit: Callable[[Dependencies, str], Any],
        keys: list[tuple[str, str]],
        first: list[bool],
    ) -> Any:
        """One attempt of a request that creates jobs, with a correlation id of its own. If a
        quota refuses it, it is recorded; if this was the request's first attempt, none of its
        idempotency keys may have a record (no earlier attempt could have written one)."""
        correlation_id = f"sim-{next(self.attempts)}"
        first_attempt, first[0] = first[0], False
        try:
            return submit(deps, correlation_id)
        except (SubmissionRateExceeded, TooLargeForQueue) as refusal:
            kind = "429" if isinstance(refusal, SubmissionRateExceeded) else "413"
            self.ledger.refusals[kind] += 1
            self.ledger.refused.append(correlation_id)
            self.trace(f"     refused {kind}: {refusal}")
            for queue, key in keys if first_attempt else []:
                record = self.reader.get_item(
                    TableName=TABLE,
                    Key={"pk": {"S": idempotency_pk(queue, key)}, "sk": {"S": IDEM_SK}},
                ).get("Item")
                if record is not None:
                    self.ledger.refused_but_written.append(f"idempotency key {key}")
            raise

    def op_submit(self, slot: str, count: int) -> None:
        requests = [
            SubmitJob(
                queue=self.rng.choice(QUEUES),
                delay_seconds=self.rng.choice([0, 5, 30, 200, 600, 950, 1500]),
                **self._payload_fields(),
                idempotency_key=f"k{self.rng.randrange(10**9)}"
                if self.rng.random() < 0.5
                else None,
            )
            for _ in range(count)
        ]
        keys = [(r.queue, r.idempotency_key) for r in requests if r.idempotency_key]
        first = [True]
        try:
            results = self._client_call(
                slot,
                lambda deps: self._quota_checked(
                    deps,
                    lambda d, cid: d.jobs.submit_many(requests, correlation_id=cid),
                    keys,
                    first,
                ),
            )
        except (SubmissionRateExceeded, TooLargeForQueue):
            return  # refused by the `email` quota: nothing was accepted
        for request, result in zip(requests, results, strict=True):
            if isinstance(result, SundialError):
                continue
            self.ledger.accepted[result.job.id] = result.job.due_ms
            self.ledger.queue_of[result.job.id] = request.queue
            self.ledger.submitted_payload[result.job.id] = _canonical(request.payload)
            if isinstance(request.payload, dict) and request.payload.get("poison"):
                self.ledger.poisoned.add(result.job.id)
            self.job_ids.append(result.job.id)
            if request.idempotency_key and self.rng.random() < 0.2:  # a repeat, later
                try:
                    submit = partial(_submit_one, request=request)
                    repeat = self._client_call(
                        slot, partial(self._quota_checked, submit=submit, keys=[], first=[False])
                    )
                except SubmissionRateExceeded:
                    continue  # the client repeats it after Retry-After (the drain)
                assert repeat.job.id == result.job.id, "an idempotent repeat made a new job"

    def _payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"n": self.rng.randrange(1000)}
        # Drawn only with dead letters on: the other profiles' seeds replay as they did.
        if self.config.dead_letters and self.rng.random() < 0.25:
            payload["poison"] = True
        return payload

    def op_cancel(self, slot: str) -> None:
        if not self.job_ids:
            return
        now = self.clock.now_ms()
        # Half the time a job due about now: the cancel then races its dispatch and its run.
        due_now = [j for j in self.job_ids if abs(self.ledger.accepted[j] - now) < 60_000]
        job_id = self.rng.choice(due_now if due_now and self.rng.random() < 0.5 else self.job_ids)
        try:
            status = self._client_call(slot, lambda deps: deps.jobs.cancel(job_id))
        except Conflict:
            return
        except BaseException:
            self.ledger.maybe_cancelled.add(job_id)
            raise
        if status is Status.CANCELLED:
            self.ledger.cancelled.add(job_id)

    def _payload_fields(self) -> dict[str, Any]:
        """A job's payload (`_payload`): one in four stored in S3 (issue 17, item 5), either
        over the inline limit or asked for, so the oracle checks that its runs saw exactly it.
        Drawn from a generator of its own, so the other draws replay as they did."""
        payload = self._payload()
        kind = self.payload_rng.random()
        if kind < 1 / 8:
            blob = "x" * (INLINE_PAYLOAD_BYTES + self.payload_rng.randrange(1000))
            return {"payload": payload | {"blob": blob}}
        if kind < 1 / 4:
            return {"payload": payload, "payload_storage": PayloadStorage.S3}
        return {"payload": payload}

    def op_move_job(self, slot: str, due_now_bias: float = 0.5) -> None:
        """PATCH /jobs/{id}: a new time (now, within the direct window or beyond it), and half
        the time a new payload, for a job chosen as a cancel chooses (half the time one due
        about now, racing its dispatch and its run)."""
        if not self.job_ids:
            return
        now = self.clock.now_ms()
        due_now = [j for j in self.job_ids if abs(self.ledger.accepted[j] - now) < 60_000]
        chosen = due_now if due_now and self.rng.random() < due_now_bias else self.job_ids
        job_id = self.rng.choice(chosen)
        fields: dict[str, Any] = {"delay_seconds": self.rng.choice([0, 5, 60, 400, 950, 1800])}
        if self.rng.random() < 0.5:
            fields["payload"] = {"moved": next(self.attempts)}
            if self.payload_rng.random() < 0.25:  # a new payload stored in S3
                fields["payload_storage"] = "s3"
        change = ChangeJob.model_validate(fields)
        payload = _canonical(change.payload) if change.changes_payload else None
        floor = now + fields["delay_seconds"] * 1000  # the earliest due it can set
        try:
            job = self._client_call(slot, lambda deps: deps.moves.move(job_id, change))
        except Conflict as conflict:
            if "retry" in str(conflict):  # the client repeats it later (the drain): it may land
                self.ledger.unanswered_moves.setdefault(job_id, []).append((floor, payload or ""))
            return  # otherwise refused: nothing changed
        except InvalidInput:
            return
        except BaseException:
            # No answer: it may have landed, now or when the client repeats it (the drain).
            self.ledger.unanswered_moves.setdefault(job_id, []).append((floor, payload or ""))
            raise
        self.ledger.moves.setdefault(job_id, []).append((job.revision, job.due_ms, payload or ""))

    def op_pause_job(self, slot: str) -> None:
        if self.job_ids:
            job_id = self.rng.choice(self.job_ids)
            self.ledger.paused_jobs.add(job_id)
            self._answered(slot, lambda deps: deps.jobs.pause(job_id))

    def op_resume_job(self, slot: str) -> None:
        if self.job_ids:
            job_id = self.rng.choice(self.job_ids)
            self._answered(slot, lambda deps: deps.jobs.resume(job_id))

    def op_pause_queue(self, slot: str) -> None:
        queue = self.rng.choice(QUEUES)
        if self.config.flood is not None:
            # Only the flooding queue: its deferred jobs meet the pause, the quiet one's bound
            # holds for every job.
            queue = self.config.flood.queue
            if self.ledger.flood_paused_at is None:
                self.ledger.flood_paused_at = self.clock.now_ms()
        self._answered(slot, lambda deps: deps.queue_control.pause(queue))

    def op_resume_queue(self, slot: str) -> None:
        queue = self.rng.choice(QUEUES)
        if self.config.flood is not None:
            queue = self.config.flood.queue
        self._answered(slot, lambda deps: deps.queue_control.resume(queue))

    def op_create_schedule(self, slot: str) -> None:
        cron = self.rng.choice(["* * * * *", "*/2 * * * *", "*/5 * * * *"])
        request = CreateSchedule(
            queue=self.rng.choice(QUEUES),
            cron=cron,
            idempotency_key=f"s{self.rng.randrange(10**9)}",
            misfire=self.rng.choice(list(Misfire)),
        )

        def create(deps: Dependencies) -> None:
            """The request; a repeat (the drain's, after a 429 or no answer) records it too."""
            created = deps.schedules.create(request)
            if created.schedule.id not in self.ledger.schedules:
                self.ledger.schedules.add(created.schedule.id)
                self.schedule_ids.append(created.schedule.id)

        try:
            self._client_call(slot, create)
        except SubmissionRateExceeded as refusal:
            # Refused by `email`'s quota: no schedule of this key may exist (an attempt that
            # wrote one before a crash makes the client's retry find it, uncounted). The
            # drain repeats the request.
            self.ledger.refusals["429"] += 1
            self.trace(f"     refused 429: {refusal}")
            assert request.idempotency_key is not None
            schedule_id = schedule_id_for(request.queue, request.idempotency_key)
            if self.observer.schedule_store.get(schedule_id) is not None:
                self.ledger.refused_but_written.append(f"schedule {schedule_id}")
            raise

    def op_pause_schedule(self, slot: str) -> None:
        if self.schedule_ids:
            schedule_id = self.rng.choice(self.schedule_ids)
            self.ledger.paused_schedules.add(schedule_id)
            self._answered(slot, lambda deps: deps.schedules.pause(schedule_id))

    def op_resume_schedule(self, slot: str) -> None:
        if self.schedule_ids:
            schedule_id = self.rng.choice(self.schedule_ids)
            self._answered(slot, lambda deps: deps.schedules.resume(schedule_id))

    def op_delete_schedule(self, slot: str) -> None:
        if self.schedule_ids:
            schedule_id = self.rng.choice(self.schedule_ids)
            self.ledger.deleted_schedules.add(schedule_id)  # whatever it answers
            self._answered(slot, lambda deps: deps.schedules.delete(schedule_id))

    def op_update_schedule(self, slot: str) -> None:
        """A new cron and payload for a schedule, racing sweeps, pauses, resumes, deletes and
        other updates. A 200 is recorded with the occurrences decided by then."""
        if not self.schedule_ids:
            return
        schedule_id = self.rng.choice(self.schedule_ids)
        cron = self.rng.choice(["* * * * *", "*/2 * * * *", "*/3 * * * *", "*/5 * * * *"])
        request = UpdateSchedule(cron=cron, payload={"update": next(self.update_numbers)})
        try:
            updated = self._client_call(
                slot, lambda deps: deps.schedules.update(schedule_id, request)
            )
        except SundialError:
            return  # a 4xx (deleted, ended, kept changing), or no answer: the drain repeats it
        decided = frozenset(
            view.run.job_id
            for view in self._all_runs(schedule_id)
            if view.run.outcome is not RunOutcome.REPLACED
        )
        seen = ScheduleUpdateSeen(
            schedule_id, updated.schedule.revision, cron, request.payload, decided
        )
        self.ledger.schedule_updates.append(seen)
        self.trace(f"     updated {schedule_id} to revision {seen.revision}: {cron}")

    def _all_runs(self, schedule_id: str) -> list[RunView]:
        """Every run record of a schedule, oldest first (the oracle's read, outside actors)."""
        views: list[RunView] = []
        before: int | None = None
        while True:
            page, before = self.observer.schedules.runs(schedule_id, limit=100, before_ms=before)
            views += page
            if before is None:
                return sorted(views, key=lambda v: v.run.at_ms)

    def op_submit_dag(self, slot: str) -> None:
        # (It used to add an idempotency_key, which SubmitDag refuses: every DAG submit of the
        # simulation failed validation, so no DAG ever ran in it.)
        dag = SubmitDag.model_validate(DAILY_REPORT)
        try:
            view = self._client_call(
                slot,
                lambda deps: self._quota_checked(
                    deps,
                    lambda d, cid: d.dags.submit(dag, correlation_id=cid),
                    [],
                    [True],
                ),
            )
        except (SubmissionRateExceeded, TooLargeForQueue):
            return  # refused by the `email` quota (its two `email` nodes): nothing accepted
        for node in view.nodes:
            assert node.dag is not None
            parents = tuple(name for name, _ in node.dag.parents)
            self.ledger.dag_nodes[node.id] = (f"{view.id}/{node.dag.node}", parents)
            self.ledger.accepted[node.id] = node.due_ms

    def op_index_dead(self, slot: str) -> None:
        """The dead-letter indexer Lambda: each DLQ's messages indexed (a redriven one marked
        dead), each deleted once indexed; one that failed comes back after its visibility."""
        s = self.slots[slot]
        for queue, url in s.deps.settings.dead_letter_urls.items():
            messages = s.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            arn = f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[-1]}"
            for message in messages:
                s.deps.dead_letter_indexer.index(SQSRecord(sqs_record(dict(message), arn)))
                s.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                self.trace(f"     indexed a dead letter of {queue}")

    def op_replay_dead(self, slot: str) -> None:
        """POST /queues/{q}/dead/replay: every letter of a queue, a few at a time, or one job's
        (the admin UI's replay of one letter)."""
        queue = self.rng.choice(QUEUES)
        job_id = None
        if self.ledger.poisoned and self.rng.random() < 0.5:
            job_id = self.rng.choice(sorted(self.ledger.poisoned))
        which = DeadLetterFilter(job_id=job_id)
        limit = self.rng.choice([1, 3, 500])
        self._answered(slot, lambda deps: deps.dead_letters.replay(queue, which, limit=limit))

    def op_retry_job(self, slot: str) -> None:
        """POST /jobs/{id}/retry of a job submitted to die, racing its replay and its death.
        A retry re-runs a cancelled job too, by request: such a job is let off the oracle's
        "cancelled then ran" (recorded before the call: a retry with no answer may land)."""
        if not self.ledger.poisoned:
            return
        job_id = self.rng.choice(sorted(self.ledger.poisoned))
        self.ledger.retried.add(job_id)
        self._answered(slot, lambda deps: deps.jobs.retry(job_id))

    def op_sweep(self, slot: str) -> None:
        shards = list(range(SHARDS))
        self.slots[slot].deps.sweeper.sweep(shards)

    def op_consume(self, slot: str, queue: str) -> None:
        s = self.slots[slot]
        url = s.deps.settings.queue_urls[queue]
        messages = s.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            return
        arn = f"arn:aws:sqs:us-east-1:123456789012:{queue}"
        result = s.consumer.lambda_handler(sqs_event(messages, arn), FakeLambdaContext())
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                s.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def _answered(self, slot: str, call: Callable[[Dependencies], Any]) -> None:
        with suppress(SundialError):  # a 4xx: the state did not allow it
            self._client_call(slot, call)

    # -- the run ---------------------------------------------------------------------------

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
                name, op = rng.choice(self._racing_ops())
                add(slot_x, name, partial(op, slot_x))
        if self.config.movers and rng.random() < 0.8:
            add("mover", "move job", lambda: self.op_move_job("mover", due_now_bias=0.8))
        if self.config.dead_letters:
            add("dead-indexer", "index dead letters", lambda: self.op_index_dead("dead-indexer"))
            if rng.random() < 0.5:
                add("replayer", "replay dead letters", lambda: self.op_replay_dead("replayer"))
        if tick % 2 == 0:
            add("sweeper-1", "sweep", lambda: self.op_sweep("sweeper-1"))
            if rng.random() < 0.5:  # a second sweeper on the same shards (a retried tick)
                add("sweeper-2", "sweep", lambda: self.op_sweep("sweeper-2"))
        for index, queue in enumerate(QUEUES, start=1):
            add(
                f"consumer-{index}",
                f"consume {queue}",
                partial(self.op_consume, f"consumer-{index}", queue),
            )
        return actors, jobs_left

    def _racing_ops(self) -> list[tuple[str, Callable[[str], None]]]:
        dead_letters = [("retry job", self.op_retry_job)] if self.config.dead_letters else []
        return [
            *dead_letters,
            ("cancel", self.op_cancel),
            ("cancel", self.op_cancel),
            ("pause job", self.op_pause_job),
            ("move job", self.op_move_job),
            ("move job", self.op_move_job),
            ("resume job", self.op_resume_job),
            ("pause queue", self.op_pause_queue),
            ("resume queue", self.op_resume_queue),
            ("resume queue", self.op_resume_queue),
            ("pause schedule", self.op_pause_schedule),
            ("resume schedule", self.op_resume_schedule),
            ("resume schedule", self.op_resume_schedule),
            ("delete schedule", self.op_delete_schedule),
            ("update schedule", self.op_update_schedule),
        ]

    def run(self) -> None:
        config = self.config
        self._schedule_ticks = set(self.rng.sample(range(config.ticks // 2), config.schedules))
        self._dag_ticks = set(self.rng.sample(range(config.ticks // 2), config.dags))
        jobs_left = config.jobs
        if config.flood is not None:
            self.submit_flood(config.flood)
        self.faults_on = config.faults.any
        tick = 0
        while tick < config.ticks or jobs_left > 0:
            self.clock.advance(seconds=30)
            self.trace(f"tick {tick} at {to_rfc3339(self.clock.now_ms())}")
            actors, jobs_left = self.plan_tick(tick, jobs_left)
            self.scheduler.run(actors)
            tick += 1
        self.drain()

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
        self.trace("drain")
        deps = self.observer
        self.clock.advance(seconds=31)  # past the in-flight window (SUBMIT_IN_FLIGHT)
        for call in self.later:
            self.trace("  a client repeats a request that got no answer, a 5xx or a 409 retry")
            with suppress(SundialError):
                self._until_admitted(partial(call, deps))
        for queue in QUEUES:
            deps.queue_control.resume(queue) if deps.queue_control.get(queue).paused else None
        for schedule_id in self.schedule_ids:
            if schedule_id in self.ledger.deleted_schedules:
                continue
            state = deps.schedule_store.get(schedule_id)
            if state is not None and state.state in (ScheduleState.PAUSED, ScheduleState.RESUMING):
                self._until_admitted(partial(deps.schedules.resume, schedule_id))
        for job_id in self.job_ids:
            job = deps.store.get(JobKey.from_job_id(job_id))
            if job is not None and job.status is Status.PAUSED:
                deps.jobs.resume(job_id)
        self.drain_until = self.clock.now_ms()
        for _ in range(40):
            self.clock.advance(seconds=60)
            self.scheduler.run(
                [Actor("sweeper-1:sweep", lambda: self.op_sweep("sweeper-1"))]
                + self._drain_dead_letters()
                + [
                    Actor(
                        f"consumer-{i}:consume",
                        partial(self._consume_all, f"consumer-{i}", q),
                    )
                    for i, q in enumerate(QUEUES, start=1)
                ]
            )

    def _until_admitted(self, call: Callable[[], Any]) -> None:
        """A drain's request, repeated after each 429's Retry-After (time moves on meanwhile)."""
        for _ in range(10):
            try:
                call()
            except SubmissionRateExceeded as refusal:
                self.clock.advance(seconds=refusal.retry_after_s)
                continue
            return
        raise AssertionError("a drain request was refused by a quota ten times")

    def _drain_dead_letters(self) -> list[Actor]:
        """With dead letters on, the drain indexes every DLQ and replays every queue's letters,
        as an operator would once the poison is gone."""
        if not self.config.dead_letters:
            return []

        def replay_all() -> None:
            for queue in QUEUES:
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

    def _consume_all(self, slot: str, queue: str) -> None:
        for _ in range(20):
            s = self.slots[slot]
            url = s.deps.settings.queue_urls[queue]
            before = len(self.ledger.runs)
            self.op_consume(slot, queue)
            attrs = s.sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            if (
                len(self.ledger.runs) == before
                and attrs["Attributes"]["ApproximateNumberOfMessages"] == "0"
            ):
                return

    # -- the oracle --------------------------------------------------------------------------

    def check(self) -> RunResult:
        ledger, deps = self.ledger, self.observer
        runs_by_job: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for job_id, attempt, at in ledger.runs:
            runs_by_job[job_id].append((attempt, at))
        order = {job_id: i for i, (job_id, _, _) in reversed(list(enumerate(ledger.runs)))}
        lost, early, dup_clean, cancelled_ran = [], [], [], []
        dup_fault = 0
        for job_id, due_ms in ledger.accepted.items():
            runs = runs_by_job.get(job_id, [])
            if job_id in ledger.cancelled:
                if runs and job_id not in ledger.retried:
                    cancelled_ran.append(job_id)
                continue
            if not runs and job_id not in ledger.maybe_cancelled:
                job = deps.store.get(JobKey.from_job_id(job_id))  # read only to say why
                lost.append(f"{job_id} ({job.status if job else 'missing'})")
            first = min((at for attempt, at in runs if attempt == 1), default=None)
            if job_id in ledger.moves or job_id in ledger.unanswered_moves:
                early += self._check_moved(job_id, due_ms)
            elif first is not None and first < due_ms // 1000 * 1000:
                early.append(f"{job_id} ran {first - due_ms} ms early")
            attempts = Counter(attempt for attempt, _ in runs)
            if any(n > 1 for n in attempts.values()):
                if ledger.crashed():
                    dup_fault += 1
                else:
                    dup_clean.append(job_id)
        schedule_errors = self._check_schedules(runs_by_job, dup_clean) + self._check_listings()
        dag_errors = [
            f"DAG node {name} ran before its parent {parent}"
            for job_id, (name, parents) in ledger.dag_nodes.items()
            for parent in parents
            if job_id in order and self._parent_order(job_id, parent, order) is False
        ]
        written = self._correlation_ids()
        ledger.refused_but_written += [
            f"attempt {cid} wrote a job" for cid in ledger.refused if cid in written
        ]
        quiet, late, pacing = self._check_flood()
        never_back, stale = self._check_dead_letters(runs_by_job)
        return RunResult(
            never_brought_back=never_back,
            killed_by_stale_letters=stale,
            died_and_came_back=len(ledger.poisoned & ledger.succeeded & set(runs_by_job)),
            moves_answered=sum(len(moves) for moves in ledger.moves.values()),
            moved_and_ran=sum(1 for job_id in ledger.moves if job_id in runs_by_job),
            refusals=ledger.refusals,
            refused_but_written=ledger.refused_but_written,
            quiet_lateness_ms=quiet,
            late=late,
            pacing_errors=pacing,
            seed=self.config.seed,
            jobs=len(ledger.accepted),
            faults=ledger.faults,
            lost=lost,
            early=early,
            duplicates_clean=dup_clean,
            duplicates_after_fault=dup_fault,
            cancelled_then_ran=cancelled_ran,
            schedule_errors=schedule_errors,
            dag_errors=dag_errors,
            trace=self.lines,
        )

    def _check_dead_letters(
        self, runs_by_job: dict[str, list[tuple[int, int]]]
    ) -> tuple[list[str], list[str]]:
        """Jobs that died (poisoned) and never ran to the end after the drain's replays; and,
        in a run where no consumer crashed, jobs marked dead for a redrive that never was."""
        ledger, deps = self.ledger, self.observer
        never_back = [
            job_id
            for job_id in sorted(ledger.poisoned)
            if job_id in runs_by_job
            and job_id not in ledger.succeeded
            and job_id not in ledger.cancelled | ledger.maybe_cancelled
        ]
        stale = []
        if not ledger.crashed():
            # No consumer crashed, so SQS redrove nothing: a job marked dead for a redrive was
            # killed by a stale letter (one indexed after the job was retried).
            for job_id in sorted(ledger.poisoned):
                job = deps.store.get(JobKey.from_job_id(job_id))
                if job is not None and any(e.error_type == REDRIVE_ERROR for e in job.history):
                    stale.append(job_id)
        return never_back, stale

    def _check_moved(self, job_id: str, submitted_due_ms: int) -> list[str]:
        """A moved job's runs: each run of its first attempt comes no earlier than the due time
        of a move that can be the last one to have landed, and carries that move's payload.
        Those moves: the answered move with the highest revision (the last answered one to have
        landed; with no answered move, the submit itself), and every move that got no answer
        (it may have landed after)."""
        ledger = self.ledger
        answered = ledger.moves.get(job_id, [])
        if answered:
            # A move that kept the payload ("") allows any: an earlier move may have changed it.
            _, due, payload = max(answered)
            candidates = [(due, payload)]
        else:
            candidates = [(submitted_due_ms, ledger.submitted_payload.get(job_id, ""))]
        candidates += ledger.unanswered_moves.get(job_id, [])
        errors = []
        for index, (run_id, attempt, at) in enumerate(ledger.runs):
            if run_id != job_id or attempt != 1:
                continue
            payload = ledger.run_payloads[index]
            if not any(
                at >= due // 1000 * 1000 and (not wanted or payload == wanted)
                for due, wanted in candidates
            ):
                errors.append(
                    f"{job_id} (moved) ran at {to_rfc3339(at)} with payload {payload}: no move "
                    f"that can have landed last allows it ({candidates})"
                )
        return errors

    def _correlation_ids(self) -> set[str]:
        """The correlation id of every item in the table (jobs and DAG nodes carry one)."""
        ids: set[str] = set()
        for page in self.reader.get_paginator("scan").paginate(TableName=TABLE):
            ids.update(i["correlation_id"]["S"] for i in page["Items"] if "correlation_id" in i)
        return ids

    def _check_flood(self) -> tuple[list[int], list[str], list[str]]:
        """The quiet queue's lateness and its bound; the flood's pacing (see the docstring)."""
        flood, ledger = self.config.flood, self.ledger
        if flood is None:
            return [], [], []
        lateness: list[int] = []
        late: list[str] = []
        bound = flood.bound_ms(self.config.faults)
        for job_id, due_ms in self._quiet_jobs(flood.quiet).items():
            visible = ledger.visible.get((job_id, 1))
            if visible is None:
                late.append(f"{job_id}: never visible")
                continue
            lateness.append(visible - due_ms)
            if visible - due_ms > bound:
                late.append(f"{job_id}: visible {visible - due_ms} ms after its due time")
        pacing: list[str] = []
        if not self.config.faults.any:
            gap_ms = 1000 * SHARDS / flood.per_second
            paused_at = ledger.flood_paused_at or 2**62
            by_shard: dict[int, list[int]] = defaultdict(list)
            for job_id in ledger.flood:
                visible = ledger.visible.get((job_id, 1))
                if visible is not None and visible < paused_at:
                    by_shard[JobKey.from_job_id(job_id).shard].append(visible)
            for shard, times in sorted(by_shard.items()):
                times.sort()
                for before, after in itertools.pairwise(times):
                    if after - before < gap_ms - 1000:  # DelaySeconds rounds to whole seconds
                        pacing.append(f"flood on shard {shard}: {after - before} ms apart")
        return lateness, late, pacing

    def _quiet_jobs(self, quiet: str) -> dict[str, int]:
        """{job id: due} of the quiet queue's jobs the lateness bound applies to: not cancelled,
        paused, a DAG node or of unknown time. A moved job is due when its last move (the
        highest revision) put it; one with a move that may have landed unanswered is left out."""
        ledger = self.ledger
        excluded = ledger.cancelled | ledger.maybe_cancelled | ledger.paused_jobs
        excluded |= set(ledger.dag_nodes) | ledger.flood | set(ledger.unanswered_moves)
        return {
            job_id: max(ledger.moves[job_id])[1] if job_id in ledger.moves else due_ms
            for job_id, due_ms in ledger.accepted.items()
            if job_id not in excluded and ledger.queue_of.get(job_id) == quiet
        }

    def _parent_order(self, job_id: str, parent: str, order: dict[str, int]) -> bool | None:
        name, _ = self.ledger.dag_nodes[job_id]
        dag = name.split("/")[0]
        for other_id, (other, _) in self.ledger.dag_nodes.items():
            if other == f"{dag}/{parent}":
                return other_id in order and order[other_id] < order[job_id]
        return None

    def _check_schedules(
        self, runs_by_job: dict[str, list[tuple[int, int]]], dup_clean: list[str]
    ) -> list[str]:
        errors: list[str] = []
        for schedule_id in sorted(self.ledger.schedules - self.ledger.deleted_schedules):
            records = self._all_runs(schedule_id)
            errors += self._check_chain(schedule_id, records)
            for view in records:
                record = view.run
                ran = runs_by_job.get(record.job_id, [])
                due = record.at_ms <= self.clock.now_ms() - 60_000  # not one still ahead
                # Sent early, then held by a pause and missed by the time of the resume: its
                # misfire policy skipped it (the job is cancelled; the run says when it fired).
                skipped = (
                    schedule_id in self.ledger.paused_schedules
                    and view.job is not None
                    and view.job.status is Status.CANCELLED
                )
                if record.outcome.value == "fired" and not ran and due and not skipped:
                    errors.append(f"schedule {schedule_id}: occurrence {record.at_ms} never ran")
                if record.outcome is RunOutcome.REPLACED and ran:
                    errors.append(f"schedule {schedule_id}: replaced {record.at_ms} ran")
                first = min((at for attempt, at in ran if attempt == 1), default=None)
                if first is not None and first < record.at_ms // 1000 * 1000:
                    errors.append(f"schedule {schedule_id}: occurrence {record.at_ms} ran early")
            errors += self._check_updates(schedule_id, records, runs_by_job)
            fired = [v.run.job_id for v in records]
            for job_id in fired:
                attempts = Counter(a for a, _ in runs_by_job.get(job_id, []))
                if any(n > 1 for n in attempts.values()) and not self.ledger.crashed():
                    dup_clean.append(job_id)
        return errors

    def _check_listings(self) -> list[str]:
        """Every live schedule in the table (whatever its create answered) is in its queue's
        listing exactly once, and no deleted one is (the index is written and removed in the
        create's and the delete's transactions)."""
        deps = self.observer
        listed: Counter[str] = Counter()
        for queue in QUEUES:
            cursor: str | None = None
            while True:
                page, cursor = deps.schedules.of_queue(queue, limit=7, cursor=cursor)
                listed.update(schedule.id for schedule in page)
                if cursor is None:
                    break
        errors = []
        live = set()
        for schedule in deps.schedule_store.schedule_items():
            if schedule.state is ScheduleState.DELETED:
                if listed[schedule.id]:
                    errors.append(f"schedule {schedule.id}: deleted, and listed")
                continue
            live.add(schedule.id)
            if listed[schedule.id] != 1:
                errors.append(f"schedule {schedule.id}: listed {listed[schedule.id]} times")
        errors += [f"listed {i}, which is no live schedule" for i in set(listed) - live]
        deleted = self.ledger.deleted_schedules & set(self.schedule_ids)
        self.trace(f"listings: {len(live)} live schedules listed once, {len(deleted)} deleted")
        return errors + self._check_dag_listings()

    def _check_dag_listings(self) -> list[str]:
        """Every DAG with nodes in the table is in the listing of each queue it uses exactly
        once, and in no other (an entry whose submit died before its nodes is passed over)."""
        deps = self.observer
        uses: dict[str, set[str]] = defaultdict(set)
        for node in deps.dag_listing.node_refs():
            uses[node.dag_id].add(node.queue)
        errors = []
        for queue in QUEUES:
            listed: Counter[str] = Counter()
            cursor: str | None = None
            while True:
                views, cursor = deps.dags.of_queue(queue, readable=QUEUES, limit=3, cursor=cursor)
                listed.update(view.id for view in views)
                if cursor is None:
                    break
            expected = {dag_id for dag_id, queues in uses.items() if queue in queues}
            errors += [
                f"DAG {dag_id}: listed {listed[dag_id]} times on {queue}"
                for dag_id in expected | set(listed)
                if listed[dag_id] != (dag_id in expected)
            ]
        self.trace(f"listings: {len(uses)} DAGs listed once on each queue they use")
        return errors

    def _check_chain(self, schedule_id: str, records: list[RunView]) -> list[str]:
        """The run records form one chain: each names its successor (time and revision, so
        its job), none is named twice (no fork: no duplicate), one starts it, and the one
        successor not yet decided is still ahead (no gap; the chain never stopped)."""
        schedule = self.observer.schedule_store.get(schedule_id)
        assert schedule is not None
        ids = {view.run.job_id for view in records}
        successors = [
            schedule.occurrence_key(view.run.next_at_ms, view.run.next_revision).job_id
            for view in records
            if view.run.next_at_ms is not None
        ]
        named = Counter(successors)
        errors = [
            f"schedule {schedule_id}: {job} follows two runs" for job, n in named.items() if n > 1
        ]
        starts = [view.run.at_ms for view in records if view.run.job_id not in named]
        if len(starts) != 1:
            errors.append(f"schedule {schedule_id}: the chain starts at {starts} (a gap)")
        waiting = [
            view.run
            for view in records
            if view.run.next_at_ms is not None
            and schedule.occurrence_key(view.run.next_at_ms, view.run.next_revision).job_id
            not in ids
        ]
        if len(waiting) != 1 or (waiting[0].next_at_ms or 0) < self.drain_until:
            last = records[-1].run.at_ms if records else None
            errors.append(f"schedule {schedule_id}: its chain stopped (last run {last})")
        return errors

    def _check_updates(
        self,
        schedule_id: str,
        records: list[RunView],
        runs_by_job: dict[str, list[tuple[int, int]]],
    ) -> list[str]:
        """After an update answered 200, an occurrence of an older revision runs only if it
        was decided by then; an occurrence of that update's revision has its payload and
        falls on its cron."""
        schedule = self.observer.schedule_store.get(schedule_id)
        assert schedule is not None
        revision_of: dict[str, int] = {}
        for view in records:
            key = JobKey.from_job_id(view.run.job_id)
            revision_of[view.run.job_id] = next(
                r
                for r in range(schedule.revision + 1)
                if schedule.occurrence_key(key.due_ms, r) == key
            )
        errors: list[str] = []
        for update in (u for u in self.ledger.schedule_updates if u.schedule_id == schedule_id):
            cron = CronRecurrence.parse(update.cron, zone("UTC"))
            for view in records:
                job_id = view.run.job_id
                if not runs_by_job.get(job_id):
                    continue
                revision = revision_of[job_id]
                if revision < update.revision and job_id not in update.decided:
                    errors.append(
                        f"schedule {schedule_id}: {view.run.at_ms} of revision {revision} ran "
                        f"after revision {update.revision} answered, undecided by then"
                    )
                if revision == update.revision:
                    if self.ledger.payloads.get(job_id) != update.payload:
                        errors.append(f"schedule {schedule_id}: {job_id} ran an old payload")
                    if cron.next_after(view.run.at_ms - 1) != view.run.at_ms:
                        errors.append(f"schedule {schedule_id}: {job_id} is off its cron")
        return errors


@contextmanager
def _moto_at(clock: ManualClock) -> Iterator[None]:
    """moto reads the manual clock (SQS delays and visibility follow it)."""
    now = lambda: datetime.fromtimestamp(clock.now_ms() / 1000, tz=UTC).replace(tzinfo=None)  # noqa: E731
    with (
        mock_aws(),
        mock.patch.object(moto.core.utils, "utcnow", now),
        mock.patch.object(sundial.dispatch.sweeper, "ThreadPoolExecutor", InlineExecutor),
        mock.patch.dict(
            "os.environ",
            {
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "POWERTOOLS_TRACE_DISABLED": "1",
            },
        ),
    ):
        yield


def simulate(config: Config) -> RunResult:
    world = World(config)
    # ULIDs, message ids and receipt handles draw on os.urandom: seeded too, so a seed replays
    # the same keys in the same order.
    entropy = random.Random(config.seed)
    with _moto_at(world.clock), mock.patch("os.urandom", entropy.randbytes):
        world.setup()
        world.run()
        return world.check()
