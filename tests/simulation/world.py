"""The simulated world: its state and tenants, the job function (the effect), the API client's
behaviour (retries, quotas) and the hooks the profiles fill in (tests.simulation.aws holds the
actors' slots and moto on the clock)."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError

from sundial.clock import ManualClock, to_rfc3339
from sundial.errors import (
    Conflict,
    SubmissionRateExceeded,
    SundialError,
    TooLargeForQueue,
    Unavailable,
)
from sundial.model.submission import SubmitJob
from sundial.runs.consumer import NonRetryableError
from sundial.store.idempotency import IDEM_SK, idempotency_pk
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies, configure
from tests.simulation.aws import Slot, record_visible
from tests.simulation.config import (
    PAYLOAD_BUCKET,
    QUEUES,
    QUOTAS,
    SHARDS,
    START,
    Config,
)
from tests.simulation.ledger import Ledger
from tests.simulation.scheduler import Actor, Crash, Scheduler
from tests.support import (
    DAILY_REPORT,
    TABLE,
    create_priority_queues,
    create_queues,
    create_table,
)


def canonical(payload: Any) -> str:
    """A payload as comparable JSON text."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def submit_one(deps: Dependencies, correlation_id: str, *, request: SubmitJob) -> Any:
    return deps.jobs.submit(request, correlation_id=correlation_id)


@dataclass
class Tenant:
    """One team: the queues its actors may act on and change (and nothing else: the tenants
    profile checks every write), and what its clients made there."""

    name: str
    queues: tuple[str, ...]
    dag: Mapping[str, Any]  # the DAG its clients submit
    dies: bool = False  # a quarter of its jobs are poisoned, whatever the profile
    job_ids: list[str] = field(default_factory=list)
    schedule_ids: list[str] = field(default_factory=list)
    poisoned: set[str] = field(default_factory=set)


class WorldBase:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.payload_rng = random.Random(config.seed * 7919 + 2)  # payloads stored in S3
        self.clock = ManualClock.at(START)
        self.ledger = Ledger()
        self.lines: list[str] = []
        self.faults_on = False
        self.scheduler = Scheduler(
            random.Random(config.seed * 7919 + 1), self.trace, self.clock.now_ms
        )
        self.environ: dict[str, str] = {}
        self.slots: dict[str, Slot] = {}
        # The first tenant's actors are every actor the profiles before the second tenant had.
        self.first = Tenant("first", QUEUES, DAILY_REPORT)
        self.tenants = [self.first]
        self.slot_tenants: dict[str, Tenant] = {}  # a slot not named here: the first tenant's
        self.queues: tuple[str, ...] = QUEUES  # every tenant's
        self.quotas: dict[str, Any] = dict(QUOTAS)
        self.waiting: list[Actor] = []  # actors waiting for the clock, carried to the next run
        # Each queue's consumer Lambda slots (a pool: one invocation per slot at a time).
        self.consumer_pools: dict[str, list[str]] = {
            "default": ["consumer-1"],
            "email": ["consumer-2"],
        }
        self.busy: set[str] = set()  # slots running an invocation now
        self.lambda_remaining_ms = 60_000  # a consumer invocation's time (FakeLambdaContext's)
        self.batch_size = 10  # the most messages a consumer invocation takes
        self.dag_ids: list[str] = []
        self.idempotency_queues: dict[str, str] = {}  # idempotency record pk -> its queue
        self.later: list[Callable[[Dependencies], Any]] = []  # requests the clients repeat later
        self.attempts = itertools.count(1)  # numbers each API request's correlation id
        self.update_numbers = itertools.count(1)  # each schedule update's payload is its own
        self.drain_until = 0  # when the drain's time began to run (set by the drain)
        self.draining = False

    @property
    def job_ids(self) -> list[str]:
        """Every tenant's plain jobs."""
        return [job_id for tenant in self.tenants for job_id in tenant.job_ids]

    @property
    def schedule_ids(self) -> list[str]:
        return [s for tenant in self.tenants for s in tenant.schedule_ids]

    def tenant_of(self, slot: str) -> Tenant:
        return self.slot_tenants.get(slot, self.first)

    def prepare_profiles(self) -> None:
        """Before the world is set up: what the profiles change of it (queues, pools)."""

    def add_profile_slots(self) -> None:
        """Once the common slots exist: the profiles' own (drawn after, so the other profiles'
        slots draw as they did)."""

    def note_invocation(self, slot: str, *, deadline_ms: int) -> None:
        """A consumer invocation begins on `slot` (the holders profile keeps its deadline)."""

    def keep_undeleted(self, body: str) -> bool:
        """Whether a handled message is left for SQS to deliver again (the holders profile)."""
        return False

    def check_call(self, slot: Slot, service: str, operation: str, params: dict[str, Any]) -> None:
        """Called before each of a slot's AWS calls, with its parameters (the tenants profile
        records what each call changes: tests.simulation.tenants)."""

    def trace(self, line: str) -> None:
        self.lines.append(line)
        if self.config.trace:
            print(line, flush=True)

    def setup(self) -> None:
        self.prepare_profiles()
        dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
        create_table(dynamodb, stream=self.config.long_time)
        urls, dead_letter_urls = create_queues(sqs, self.queues)
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
            "SUNDIAL_QUOTAS": json.dumps(self.quotas),
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
        self.add_profile_slots()
        # The observer's sends (the drain's resumes and repeated requests) are recorded too.
        observer = boto3.Session()
        sending: dict[str, Any] = {}
        observer.events.register(
            "provide-client-params.sqs.SendMessageBatch",
            lambda params, **_: sending.update(params=params),
        )
        observer.events.register(
            "after-call.sqs.SendMessageBatch",
            lambda parsed, **_: record_visible(self, sending["params"], parsed),
        )
        # Seeded too: a DAG the drain's repeat submits draws its shard from it.
        self.observer = configure(
            clock=self.clock,
            environ=self.environ,
            session=observer,
            rng=random.Random(self.config.seed * 7919 + 4),
        )
        self.reader = boto3.client("dynamodb")  # the oracle's own reads, outside every actor

    # -- the job function: the effect ------------------------------------------------------

    def effect(self, job: Envelope) -> dict[str, Any]:
        # The function's own work takes time: other actors may run before its effect lands.
        self.scheduler.pause_point()
        failure = self.start_run(job)
        duration_ms = self.run_duration_ms(job)
        if duration_ms:  # a run longer than a tick (the holders profile)
            self.scheduler.wait_until(self.clock.now_ms() + duration_ms)
            self.trace(f"  EFFECT {job.id} attempt {job.attempt} ends")
        if failure is not None:
            raise failure
        self.ledger.succeeded.add(job.id)
        return {"ran": job.id}

    def start_run(self, job: Envelope) -> Exception | None:
        """A run of the job function begins: recorded, with the payload it got. Returns the
        error it ends with, if it is to fail: a poisoned job's first attempt (for good), a flaky
        job's first `flaky` attempts (retryable)."""
        now = self.clock.now_ms()
        self.ledger.runs.append((job.id, job.attempt, now))
        self.ledger.payloads[job.id] = job.payload
        self.ledger.run_payloads.append(canonical(job.payload))
        self.trace(f"  EFFECT {job.id} attempt {job.attempt} at {to_rfc3339(now)}")
        self.check_run(job.id)
        payload = job.payload if isinstance(job.payload, dict) else {}
        if payload.get("poison") and job.attempt == 1:
            self.trace(f"     {job.id} fails: poisoned")
            return NonRetryableError("poisoned: fails its first attempt (the simulation)")
        flaky = payload.get("flaky")
        if isinstance(flaky, int) and job.attempt <= flaky:
            self.trace(f"     {job.id} fails: flaky (attempt {job.attempt} of the first {flaky})")
            return RuntimeError("flaky: fails its first attempts (the simulation)")
        return None

    def run_duration_ms(self, job: Envelope) -> int:
        """How long a run lasts: no time at all, but in the holders profile."""
        return 0

    def check_run(self, job_id: str) -> None:
        """A run begins (the tenants profile checks that its consumer is of its tenant)."""

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

    def _answered(self, slot: str, call: Callable[[Dependencies], Any]) -> None:
        with suppress(SundialError):  # a 4xx: the state did not allow it
            self._client_call(slot, call)
