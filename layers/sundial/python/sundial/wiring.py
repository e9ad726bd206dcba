"""Builds the real collaborators (boto3 clients, store, sender, services) once per process.

Handlers call `dependencies()`. Tests and the local runtime call `configure()` to swap the clock
or the environment; nothing else is global. (Over 450 lines: it is the one composition root,
a few lines per collaborator, and splitting it would split the one place they are wired.)
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from sundial.clock import Clock, SystemClock
from sundial.dispatch.fanout import LambdaLauncher, Launch
from sundial.dispatch.sweeper import Sweeper
from sundial.history.capture import HistoryRecorder, HistorySettings, HistoryWriter
from sundial.history.replay import FailedBatchReplayer
from sundial.runs.attempts import MAX_RESULT_BYTES, Attempts, LifecycleDeps
from sundial.runs.dlq_indexer import DeadLetterIndexer
from sundial.runs.leases import LeaseService
from sundial.services.admission import Admission
from sundial.services.chain import OccurrenceChain
from sundial.services.dag_progress import DagProgress
from sundial.services.dags import DagService
from sundial.services.dead_letters import DeadLetterService
from sundial.services.direct import DirectSender
from sundial.services.job_listing import JobListing
from sundial.services.job_retention import JobRetention
from sundial.services.jobs import JobService
from sundial.services.moves import JobMover
from sundial.services.queues import CatchUp, QueueControl
from sundial.services.release import Releaser
from sundial.services.schedules import ScheduleService
from sundial.settings import Settings, boto_config, payload_boto_config
from sundial.store.attempts import AttemptStore
from sundial.store.dag_listing import DagListingStore
from sundial.store.dag_nodes import DagNodeStore
from sundial.store.dead_letters import DeadLetterStore
from sundial.store.idempotency import IdempotencyKeys
from sundial.store.job_items import MovedJobPointers
from sundial.store.job_listing import JobRangeReader
from sundial.store.jobs import JobStore
from sundial.store.payloads import PayloadStore
from sundial.store.queue_states import QueueStateStore
from sundial.store.schedules import ScheduleStore
from sundial.store.submission_windows import SubmissionWindows
from sundial.store.sweeps import SweepStore
from sundial.transport.depths import QueueDepths
from sundial.transport.receiver import SQS_MAX_WAIT_S, QueueReceiver
from sundial.transport.sender import QueueSender

if TYPE_CHECKING:
    from sundial.runs.consumer import ConsumerCollaborators

# Every call answers within a few seconds except a long poll, which holds the connection for up
# to SQS_MAX_WAIT_S: its client reads for that long plus this margin, or the read times out,
# botocore retries, and the lease answers 500 after about 30 s.
LONG_POLL_READ_MARGIN_S = 10


_BOTO_CONFIG = boto_config()
_LONG_POLL_CONFIG = boto_config(read_timeout=SQS_MAX_WAIT_S + LONG_POLL_READ_MARGIN_S)


@dataclass
class Dependencies:
    settings: Settings
    clock: Clock
    # A session of one's own lets tests and benchmarks hook every AWS call (botocore events).
    session: boto3.Session | None = None
    # Replaces the Lambda async invoke of sweepers, e.g. with an in-process call.
    launch: Launch | None = None
    # Seeds every random choice (shards, jitter) for a replayable run; None: from the OS.
    rng: random.Random | None = None

    def _random(self) -> random.Random:
        return random.Random(self.rng.random()) if self.rng is not None else random.Random()

    @cached_property
    def _session(self) -> boto3.Session:
        return self.session or boto3.Session()

    def _client(self, service: str, config: Config = _BOTO_CONFIG) -> Any:
        return self._session.client(service, config=config)  # type: ignore[call-overload]

    @cached_property
    def _dynamodb(self) -> Any:
        return self._client("dynamodb")

    @property
    def dynamodb(self) -> Any:
        """The DynamoDB client every store of this set shares (a test may hook its calls)."""
        return self._dynamodb

    @cached_property
    def store(self) -> JobStore:
        return JobStore(self._dynamodb, self.settings.table_name)

    @cached_property
    def attempt_store(self) -> AttemptStore:
        return AttemptStore(self._dynamodb, self.settings.table_name)

    @cached_property
    def dag_nodes(self) -> DagNodeStore:
        return DagNodeStore(self._dynamodb, self.settings.table_name)

    @cached_property
    def dag_listing(self) -> DagListingStore:
        return DagListingStore(self._dynamodb, self.settings.table_name)

    @cached_property
    def sweeps(self) -> SweepStore:
        return SweepStore(self._dynamodb, self.settings.table_name)

    @cached_property
    def idempotency(self) -> IdempotencyKeys:
        return IdempotencyKeys(self._dynamodb, self.settings.table_name)

    @cached_property
    def sqs(self) -> Any:
        """The SQS client the senders share (a test may hook its calls)."""
        return self._client("sqs")

    @cached_property
    def sender(self) -> QueueSender:
        return QueueSender(self.sqs, self.settings.queue_urls, self.settings.priority_queue_urls)

    @cached_property
    def payloads(self) -> PayloadStore | None:
        """The payload bucket (SUNDIAL_PAYLOAD_BUCKET), if the deployment has one."""
        if self.settings.payload_bucket is None:
            return None
        client = self._client("s3", payload_boto_config())
        return PayloadStore(client, self.settings.payload_bucket)

    @cached_property
    def dead_letter_sender(self) -> QueueSender:
        return QueueSender(self.sqs, self.settings.dead_letter_urls)

    @cached_property
    def jobs(self) -> JobService:
        return JobService(
            store=self.store,
            attempt_store=self.attempt_store,
            idempotency=self.idempotency,
            sender=self.sender,
            clock=self.clock,
            queues=self.settings.queue_urls.keys(),
            retry_defaults=self.settings.retry_defaults,
            shard_count=self.settings.shard_count,
            retention_days=self.settings.retention_days,
            on_cancelled=self.dag_progress.node_stopped,
            queue_states=self.queue_states,
            chain=self.chain,
            rng=self._random(),
            admission=self.admission,
            payloads=self.payloads,
        )

    @cached_property
    def direct(self) -> DirectSender:
        """Sends jobs due within the direct window at once (their first attempt), for the paths
        that release or move jobs outside submit."""
        return DirectSender(store=self.store, sender=self.sender, clock=self.clock)

    @cached_property
    def moves(self) -> JobMover:
        """Changes to waiting jobs (PATCH /jobs/{id})."""
        return JobMover(
            store=self.store,
            direct=self.direct,
            clock=self.clock,
            retention_days=self.settings.retention_days,
            queue_states=self.queue_states,
            admission=self.admission,
            payloads=self.payloads,
        )

    @cached_property
    def admission(self) -> Admission:
        """The queues' quotas (SUNDIAL_QUOTAS), applied before a submit writes anything."""
        return Admission(
            quotas=self.settings.quotas,
            windows=SubmissionWindows(self._dynamodb, self.settings.table_name),
            clock=self.clock,
            rng=self._random(),
        )

    @cached_property
    def dag_progress(self) -> DagProgress:
        # Parents' results are inlined into a child up to the size of one stored result.
        return DagProgress(
            store=self.store,
            nodes=self.dag_nodes,
            sender=self.sender,
            clock=self.clock,
            retention_days=self.settings.retention_days,
            inline_results_bytes=MAX_RESULT_BYTES,
            releaser=self.releaser,
        )

    @cached_property
    def dags(self) -> DagService:
        return DagService(
            store=self.store,
            nodes=self.dag_nodes,
            jobs=self.jobs,
            progress=self.dag_progress,
            clock=self.clock,
            listing=self.dag_listing,
            queues=self.settings.queue_urls.keys(),
            shard_count=self.settings.shard_count,
            retention_days=self.settings.retention_days,
            rng=self._random(),
        )

    @cached_property
    def queue_depths(self) -> QueueDepths:
        return QueueDepths(
            self._client("sqs"),
            self.settings.queue_urls,
            self.settings.priority_queue_urls,
            self.settings.dead_letter_urls,
        )

    @cached_property
    def job_listing(self) -> JobListing:
        return JobListing(
            reader=JobRangeReader(self._dynamodb, self.settings.table_name),
            letters=self.dead_letter_store,
            clock=self.clock,
            queues=self.settings.queue_urls.keys(),
            shard_count=self.settings.shard_count,
        )

    @cached_property
    def dead_letter_store(self) -> DeadLetterStore:
        return DeadLetterStore(self._client("dynamodb"), self.settings.table_name)

    @cached_property
    def dead_letters(self) -> DeadLetterService:
        return DeadLetterService(
            letters=self.dead_letter_store,
            jobs=self.jobs,
            queues=frozenset(self.settings.queue_urls),
        )

    @cached_property
    def dead_letter_indexer(self) -> DeadLetterIndexer:
        return DeadLetterIndexer(
            store=self.store,
            attempt_store=self.attempt_store,
            letters=self.dead_letter_store,
            clock=self.clock,
            dead_letter_urls=self.settings.dead_letter_urls,
            retention_days=self.settings.retention_days,
            on_redriven=self.dag_progress.node_stopped,
        )

    @cached_property
    def attempts(self) -> Attempts:
        return Attempts(
            LifecycleDeps(
                store=self.store,
                attempt_store=self.attempt_store,
                queues=self.sender,
                dead_letters=self.dead_letter_sender,
                settings=self.settings,
                clock=self.clock,
                rng=self._random(),
                dags=lambda: self.dag_progress,
                payloads=self.payloads,
            )
        )

    @cached_property
    def consumer(self) -> ConsumerCollaborators:
        """The consumer SDK's collaborators (sundial.runs.consumer builds them) on this set's
        clients and payload bucket: what a consumer runs with in a process `configure`d here
        (tests, benchmarks). Imported here: the API's functions never load the consumer."""
        from sundial.runs.consumer import ConsumerCollaborators  # noqa: PLC0415

        return ConsumerCollaborators(
            self.settings,
            self.clock,
            dynamodb=self._dynamodb,
            sqs=self.sqs,
            payloads=lambda: self.payloads,
            rng=self._random(),
        )

    @property
    def consumer_lifecycle(self) -> LifecycleDeps:
        return self.consumer.lifecycle

    @property
    def consumer_dag_nodes(self) -> DagNodeStore:
        return self.consumer.dag_nodes

    @cached_property
    def leases(self) -> LeaseService:
        receiver = QueueReceiver(
            self._client("sqs", _LONG_POLL_CONFIG),
            self.settings.queue_urls,
            self.settings.priority_queue_urls,
        )
        return LeaseService(attempts=self.attempts, receiver=receiver)

    @cached_property
    def sweeper(self) -> Sweeper:
        return Sweeper(
            store=self.store,
            sweeps=self.sweeps,
            sender=self.sender,
            clock=self.clock,
            chain=self.chain,
            queue_states=self.queue_states,
            catch_up=self.catch_up,
            retention_days=self.settings.retention_days,
            dispatch=self.settings.dispatch,
            shard_count=self.settings.shard_count,
        )

    # -- schedules and queue pauses ---------------------------------------------------------

    @cached_property
    def schedule_store(self) -> ScheduleStore:
        return ScheduleStore(self._dynamodb, self.settings.table_name)

    @cached_property
    def queue_states(self) -> QueueStateStore:
        return QueueStateStore(self._dynamodb, self.settings.table_name)

    @property
    def _default_attempts(self) -> dict[str, int]:
        return {
            queue: self.settings.retry_defaults_for(queue).max_attempts
            for queue in self.settings.queue_urls
        }

    @cached_property
    def chain(self) -> OccurrenceChain:
        return OccurrenceChain(
            schedules=self.schedule_store,
            store=self.store,
            clock=self.clock,
            retention_days=self.settings.retention_days,
            default_attempts=self._default_attempts,
        )

    @cached_property
    def releaser(self) -> Releaser:
        return Releaser(
            store=self.store,
            chain=self.chain,
            direct=self.direct,
            queue_states=self.queue_states,
            clock=self.clock,
        )

    @cached_property
    def catch_up(self) -> CatchUp:
        return CatchUp(
            states=self.queue_states, releaser=self.releaser, store=self.store, clock=self.clock
        )

    @cached_property
    def queue_control(self) -> QueueControl:
        return QueueControl(
            states=self.queue_states,
            sweeps=self.sweeps,
            catch_up=self.catch_up,
            clock=self.clock,
            queues=self.settings.queue_urls.keys(),
            shard_count=self.settings.shard_count,
        )

    @cached_property
    def schedules(self) -> ScheduleService:
        return ScheduleService(
            schedules=self.schedule_store,
            store=self.store,
            releaser=self.releaser,
            chain=self.chain,
            clock=self.clock,
            queues=self.settings.queue_urls.keys(),
            default_attempts=self._default_attempts,
            shard_count=self.settings.shard_count,
            retention_days=self.settings.retention_days,
            rng=self._random(),
            admission=self.admission,
        )

    @cached_property
    def launcher(self) -> Launch:
        if self.launch is not None:
            return self.launch
        if not self.settings.sweeper_function:
            raise RuntimeError("SUNDIAL_SWEEPER_FUNCTION is not set")
        return LambdaLauncher(self._client("lambda"), self.settings.sweeper_function)


_current: Dependencies | None = None


def dependencies() -> Dependencies:
    global _current  # noqa: PLW0603 - one set of clients per Lambda container, built lazily
    if _current is None:
        _current = Dependencies(settings=Settings.from_env(os.environ), clock=SystemClock())
    return _current


def configure(
    *,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    session: boto3.Session | None = None,
    launch: Launch | None = None,
    rng: random.Random | None = None,
) -> Dependencies:
    """Replace the process's dependencies, e.g. with a ManualClock. Returns the new set, whose
    consumer collaborators the process's consumer SDK then uses too (built on its first
    record, as in a Lambda)."""
    from sundial.runs.consumer import install_process_collaborators  # noqa: PLC0415

    global _current  # noqa: PLW0603
    configured = _current = Dependencies(
        settings=Settings.from_env(environ if environ is not None else os.environ),
        clock=clock or SystemClock(),
        session=session,
        launch=launch,
        rng=rng,
    )
    install_process_collaborators(lambda: configured.consumer)
    return configured


@dataclass(frozen=True)
class HistoryFunctions:
    """The history Lambda's two tasks: record the stream, replay failed batches."""

    recorder: HistoryRecorder
    replayer: FailedBatchReplayer


_history: HistoryFunctions | None = None


def history(
    environ: Mapping[str, str] | None = None, session: boto3.Session | None = None
) -> HistoryFunctions:
    """The history Lambda's collaborators (its own settings: no queues, and the table only to
    delete expired moved jobs' pointers), built once per process; passing `environ` or
    `session` builds new ones (tests)."""
    global _history  # noqa: PLW0603 - one S3 client per Lambda container, built lazily
    if _history is None or environ is not None or session is not None:
        settings = HistorySettings.from_env(environ if environ is not None else os.environ)
        aws = session or boto3.Session()
        client: Any = aws.client("s3", config=_BOTO_CONFIG)
        writer = HistoryWriter(client, settings.history_bucket, settings.history_prefix)
        retention = None
        if settings.table_name is not None:
            dynamodb: Any = aws.client("dynamodb", config=_BOTO_CONFIG)
            table = settings.table_name
            bucket = settings.payload_bucket
            retention = JobRetention(
                pointers=MovedJobPointers(dynamodb, table),
                idempotency=IdempotencyKeys(dynamodb, table),
                dag_listing=DagListingStore(dynamodb, table),
                dag_nodes=DagNodeStore(dynamodb, table),
                payloads=PayloadStore(client, bucket) if bucket is not None else None,
            )
        _history = HistoryFunctions(
            recorder=HistoryRecorder(writer, retention),
            replayer=FailedBatchReplayer(client, settings.history_bucket, writer),
        )
    return _history


def history_recorder(
    environ: Mapping[str, str] | None = None, session: boto3.Session | None = None
) -> HistoryRecorder:
    """The stream recorder of `history()`."""
    return history(environ, session).recorder
