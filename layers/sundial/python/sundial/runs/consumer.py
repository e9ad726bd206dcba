"""The consumer SDK's engine: an SQS-triggered Lambda that runs a plain function per job.
Users import it through its public face, `sundial.consumer`:

    from sundial.consumer import NonRetryableError, consumer

    @consumer(non_retryable=(InvalidAddress,))
    def handler(job: Envelope) -> dict:
        send_email(job.payload["to"])
        return {"sent": True}

For each SQS record (Powertools batch processing, partial batch responses):
1. decode and validate the envelope; a body that is not one fails the record, so SQS redrives
   it to the DLQ after maxReceiveCount;
2. fence: read the job; skip it if it was cancelled, already succeeded or is dead, if this
   delivery is for an attempt that is no longer due (a duplicate) or for an older revision
   (moved or retried since), or if the job is not of the queue that delivered the message;
   skip a message whose id names no job of its queue (a retry timer's item, or another
   queue's job). The function gets the envelope rebuilt from the job's item (`as_stored`):
   its payload, queue and DAG context are the item's, never the message's, so whoever may
   send to the queue decides at most which attempt of which of its jobs is run;
   a payload stored in S3 (`payload_ref`) is fetched and checked against its sha256 here, and
   the function gets the envelope with the payload in place, as if it had been inline. A
   missing or altered object is a permanent failure of the attempt (the job goes dead, to the
   DLQ, with the reason); an S3 outage fails the record, so SQS delivers it again;
3. take the attempt: one conditional write `queued -> running` for this attempt. It fails if
   the job was cancelled after the read, and then the function is not called: so a cancel
   that answered 200 `cancelled` means the effect never runs, and a cancel that comes after
   this write answers 409 (the attempt has started). The write records this delivery as the
   attempt's holder until the invocation's deadline; a delivery of a `running` attempt takes
   it over only once its holder's deadline is past (sundial.store.attempts), and is turned
   away as busy before (the record fails, SQS delivers it again later);
4. call the function;
5. end the attempt with one conditional write: `succeeded` with the result, or on an exception
   `failed` with the error and the retry scheduled (SQS DelaySeconds up to 15 minutes, a
   timer item in the table beyond), or `dead` when attempts run out or the error is
   non-retryable, and then the envelope goes to the queue's DLQ.
A failure of Sundial's own bookkeeping (DynamoDB or SQS unavailable) fails the record, so SQS
delivers it again and the fence picks up where it stopped. Nothing runs twice for a job that
succeeded: the fence sees `succeeded`, and the success write is conditional on the attempt.

What the consumer works with (`ConsumerCollaborators`) is built here from its settings, not by
the composition root (sundial.wiring, which builds every service): a consumer Lambda loads the
job and attempt stores and the SQS sender, the payload bucket's store only when it has one,
and the DAG engine only on its first DAG node (tests/unit/test_layers.py counts the modules).
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.exceptions import OrphanedChildLoggerError
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import BotoCoreError, ClientError

from sundial.clock import Clock, SystemClock
from sundial.ids import JobKey
from sundial.model.job import Job, Priority
from sundial.model.payloads import PayloadRef, PayloadUnavailable
from sundial.runs.attempts import (
    MAX_RESULT_BYTES,
    Attempts,
    DagHooks,
    LifecycleDeps,
    attempt_error,
)
from sundial.settings import Settings, boto_config, payload_boto_config
from sundial.store.attempts import AttemptStore
from sundial.store.jobs import JobStore
from sundial.timing import LEGACY_RUNNER_MS
from sundial.transport.envelope import Envelope, envelope_body
from sundial.transport.sender import QueueSender

if TYPE_CHECKING:
    from sundial.store.dag_nodes import DagNodeStore
    from sundial.store.payloads import PayloadStore

logger = Logger(child=True)
JobFunction = Callable[[Envelope], Any]  # returns JSON-serialisable data, or None


@contextmanager
def _log_keys(**keys: object) -> Iterator[None]:
    """Adds `keys` to every Powertools log line of this thread while the block runs. A process
    without a Powertools Logger of its own (a plain script, a test) has nothing to add them to,
    and runs the block as it is."""
    try:
        logger.thread_safe_append_keys(**keys)
    except OrphanedChildLoggerError:
        yield
        return
    try:
        yield
    finally:
        logger.thread_safe_remove_keys(keys)


class UnknownQueueError(RuntimeError):
    """A record from an SQS queue this consumer is not configured with."""


def with_stored_payload(
    envelope: Envelope, ref: PayloadRef | None, payloads: PayloadStore | None
) -> Envelope:
    """The envelope with its payload in place: for a job whose item references a payload
    stored in S3 (`ref`, the item's: never the message's, which anyone able to send to the
    queue could point at another object), fetched and checked; as it is otherwise.
    PayloadUnavailable if it cannot be had for good."""
    if ref is None:
        return envelope
    if payloads is None:
        raise PayloadUnavailable(
            f"job {envelope.id}'s payload is stored in S3 ({ref.key}) and this consumer has no "
            "payload bucket (SUNDIAL_PAYLOAD_BUCKET)"
        )
    return envelope.model_copy(update={"payload": json.loads(payloads.get(ref))})


def as_stored(job: Job, message: Envelope) -> Envelope | None:
    """The envelope the function gets: rebuilt from the job's item (its queue, payload or stored
    reference, DAG context), with the message's attempt and due time. A message is only a
    pointer to an attempt: whoever could send to the queue (a consumer granted DAG children's
    queues, or a retry timer a consumer put) must not choose what runs. None when the message
    names an item that is no job of its queue: a retry timer (bookkeeping, never addressed by
    id) or a job of another queue."""
    if job.retry_of is not None or job.queue != message.queue:
        return None
    stored = Envelope.model_validate_json(envelope_body(job, attempt=message.attempt))
    return stored.model_copy(update={"run_at": message.run_at})


class NonRetryableError(Exception):
    """Raise this (or a type listed in non_retryable) to send the job straight to `dead`."""


class Heartbeat:
    """While a job runs, keeps its SQS message invisible: every third of the visibility
    timeout it pushes the visibility out by a whole timeout again. So a 10-minute job on a
    2-minute visibility timeout is not delivered a second time, while a consumer that dies
    stops beating and its message comes back within one timeout."""

    def __init__(
        self,
        *,
        queues: QueueSender,
        queue: str,
        receipt_handle: str,
        visibility_s: int,
        clock: Clock,
        priority: Priority = Priority.NORMAL,
    ) -> None:
        self._queues, self._queue, self._receipt = queues, queue, receipt_handle
        self._priority = priority  # critical and high may have come from a priority queue
        self._visibility_s = visibility_s
        self._clock = clock
        self._stop = threading.Event()
        self._beat = threading.Condition()
        self.beats = 0
        self._thread = threading.Thread(target=self._run, name="sundial-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def wait_for_beats(self, count: int, timeout_s: float) -> bool:
        with self._beat:
            return self._beat.wait_for(lambda: self.beats >= count, timeout=timeout_s)

    def _run(self) -> None:
        interval_ms = self._visibility_s * 1000 // 3
        while self._clock.wait_until(self._clock.now_ms() + interval_ms, self._stop):
            try:
                self._queues.extend_visibility(
                    self._queue, self._receipt, self._visibility_s, self._priority
                )
            except (ClientError, BotoCoreError):
                logger.warning("heartbeat failed; the message may be delivered again")
            with self._beat:
                self.beats += 1
                self._beat.notify_all()


class JobConsumer:
    def __init__(
        self,
        function: JobFunction,
        *,
        non_retryable: tuple[type[BaseException], ...] = (),
        visibility_timeout_s: int | None = 120,
        deps: Callable[[], LifecycleDeps],
    ) -> None:
        """`visibility_timeout_s`: the queue's visibility timeout, which the heartbeat keeps
        renewing while the function runs; None turns the heartbeat off. `deps` builds the
        collaborators on the first record (sundial.consumer passes the process's own)."""
        self._function = function
        self._visibility_s = visibility_timeout_s
        self.current_heartbeat: Heartbeat | None = None
        self._non_retryable: tuple[type[BaseException], ...] = (NonRetryableError, *non_retryable)
        self._deps_factory = deps
        self._attempts: Attempts | None = None
        self._queue_of_name: dict[str, str] | None = None
        # Until when an attempt taken by this invocation is provably its own (lambda_handler
        # sets it from the invocation's remaining time).
        self._deadline_ms = 0

    @property
    def attempts(self) -> Attempts:
        if self._attempts is None:
            self._attempts = Attempts(self._deps_factory())
        return self._attempts

    @property
    def deps(self) -> LifecycleDeps:
        return self.attempts.deps

    def lambda_handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        # This invocation cannot outlive its deadline, so an attempt it takes is provably its
        # own until then (the holder's lease, sundial.store.attempts).
        remaining = context.get_remaining_time_in_millis() if context else LEGACY_RUNNER_MS
        self._deadline_ms = self.deps.clock.now_ms() + remaining
        # A batch whose every record failed is reported item by item too, not as an error.
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        response = process_partial_response(
            event=event, record_handler=self.handle_record, processor=processor, context=context
        )
        return dict(response)

    def handle_record(self, record: SQSRecord) -> None:
        envelope = Envelope.model_validate_json(record.body)
        # Every log line of this job's run names it and the request that submitted it.
        with _log_keys(job_id=envelope.id, correlation_id=envelope.correlation_id):
            self._handle(record, envelope)

    def _handle(self, record: SQSRecord, envelope: Envelope) -> None:
        attempt = envelope.attempt
        queue = self._delivered_on(record)
        job = self.deps.store.get(JobKey.from_job_id(envelope.id))
        if job is None:
            logger.warning("job not found: expired or never accepted", extra={"id": envelope.id})
            return
        message, stored = envelope, as_stored(job, envelope)
        if stored is None:
            extra = {"id": message.id, "queue": message.queue, "job_queue": job.queue}
            logger.warning("skipped: the message does not match its job's item", extra=extra)
            return
        envelope = stored
        if not self.attempts.admit(job, attempt, revision=message.revision, queue=queue):
            return
        unavailable: PayloadUnavailable | None = None
        try:
            # The payload the job item references (the message's could name another object).
            envelope = with_stored_payload(envelope, job.payload_ref, self.deps.payloads)
        except PayloadUnavailable as error:
            unavailable = error  # the attempt is taken, then fails for good: below
        held = self.attempts.start(job, attempt, lease_until_ms=self._deadline_ms)
        if held is None:
            return  # cancelled since the read, or another runner took the attempt
        try:
            if unavailable is not None:
                raise unavailable
            result = self._run_with_heartbeat(envelope, record.receipt_handle)
        except Exception as error:  # every failure of the job is recorded
            failure = attempt_error(error, attempt=attempt, at_ms=self.deps.clock.now_ms())
            retryable = not isinstance(error, (*self._non_retryable, PayloadUnavailable))
            self.attempts.fail(job, held, error=failure, retryable=retryable)
        else:
            self.attempts.succeed(job, held, result=result)

    def _delivered_on(self, record: SQSRecord) -> str:
        """The Sundial queue whose SQS queue (or priority queue) delivered `record`, from the
        record's source ARN: an ARN and a URL both end with the queue's name. A queue this
        consumer is not configured with is an error (the record fails; after the queue's
        maxReceiveCount SQS moves it to the DLQ): it cannot tell whose jobs it may run."""
        if self._queue_of_name is None:
            settings = self.deps.settings
            urls = (*settings.queue_urls.items(), *settings.priority_queue_urls.items())
            self._queue_of_name = {url.rsplit("/", 1)[-1]: queue for queue, url in urls}
        name = record.event_source_arn.rsplit(":", 1)[-1]
        if name not in self._queue_of_name:
            raise UnknownQueueError(
                f"message from SQS queue {name}, which is none of this consumer's queues "
                "(SUNDIAL_QUEUE_URLS, SUNDIAL_PRIORITY_QUEUE_URLS)"
            )
        return self._queue_of_name[name]

    def _run_with_heartbeat(self, envelope: Envelope, receipt_handle: str) -> Any:
        if self._visibility_s is None or envelope.queue not in self.deps.settings.queue_urls:
            return self._function(envelope)
        heartbeat = Heartbeat(
            queues=self.deps.queues,
            queue=envelope.queue,
            receipt_handle=receipt_handle,
            visibility_s=self._visibility_s,
            clock=self.deps.clock,
            priority=envelope.priority,
        )
        self.current_heartbeat = heartbeat
        with heartbeat:
            return self._function(envelope)


class ConsumerCollaborators:
    """What a consumer runs with, built from its settings and its AWS clients, and nothing it
    does not need: within what a consumer Lambda's role allows (stacks/consumers.py), its
    updates of job items ask back only what they wrote and read the item after (read_back),
    and a DAG node it releases onto a paused queue is deferred with a timer
    (services.deferral) instead of being recorded in the queue's state, which it may not
    write. The DAG engine is built (and imported) on the first DAG node. `payloads` gives the
    payload bucket's store (None when the deployment has none, and nothing is imported)."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        *,
        dynamodb: Any,
        sqs: Any,
        payloads: Callable[[], PayloadStore | None],
        rng: random.Random,
    ) -> None:
        self.settings, self.clock = settings, clock
        self._dynamodb, self._sqs = dynamodb, sqs
        self._payloads, self._rng = payloads, rng

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> ConsumerCollaborators:
        """A consumer Lambda's: its SUNDIAL_* settings, the system clock, clients configured
        as every Sundial function's (sundial.settings.boto_config)."""
        import boto3  # noqa: PLC0415 - loaded with botocore by then; only needed here

        settings = Settings.from_env(environ)
        session = boto3.Session()
        config = boto_config()

        def payloads() -> PayloadStore | None:
            if settings.payload_bucket is None:
                return None
            from sundial.store.payloads import PayloadStore  # noqa: PLC0415

            client = session.client("s3", config=payload_boto_config())
            return PayloadStore(client, settings.payload_bucket)

        return cls(
            settings,
            SystemClock(),
            dynamodb=session.client("dynamodb", config=config),
            sqs=session.client("sqs", config=config),
            payloads=payloads,
            rng=random.Random(),
        )

    @cached_property
    def store(self) -> JobStore:
        return JobStore(self._dynamodb, self.settings.table_name, read_back=True)

    @cached_property
    def lifecycle(self) -> LifecycleDeps:
        settings = self.settings
        return LifecycleDeps(
            store=self.store,
            attempt_store=AttemptStore(self._dynamodb, settings.table_name, read_back=True),
            queues=QueueSender(self._sqs, settings.queue_urls, settings.priority_queue_urls),
            dead_letters=QueueSender(self._sqs, settings.dead_letter_urls),
            settings=settings,
            clock=self.clock,
            rng=self._rng,
            dags=lambda: self.dag_progress,  # built on the first DAG node
            payloads=self._payloads(),
        )

    @cached_property
    def dag_nodes(self) -> DagNodeStore:
        from sundial.store.dag_nodes import DagNodeStore  # noqa: PLC0415 - DAG nodes only

        return DagNodeStore(self._dynamodb, self.settings.table_name, read_back=True)

    @cached_property
    def dag_progress(self) -> DagHooks:
        # The DAG engine, imported on the first DAG node a consumer meets.
        from sundial.services.dag_progress import DagProgress  # noqa: PLC0415
        from sundial.services.deferral import DeferredSends  # noqa: PLC0415
        from sundial.store.queue_states import QueueStateStore  # noqa: PLC0415

        deferral = DeferredSends(
            store=self.store,
            queue_states=QueueStateStore(self._dynamodb, self.settings.table_name),
            clock=self.clock,
        )
        return DagProgress(
            store=self.store,
            nodes=self.dag_nodes,
            sender=self.lifecycle.queues,
            clock=self.clock,
            retention_days=self.settings.retention_days,
            inline_results_bytes=MAX_RESULT_BYTES,
            deferral=deferral,
        )


_installed: Callable[[], ConsumerCollaborators] | None = None
_process: ConsumerCollaborators | None = None


def process_collaborators() -> ConsumerCollaborators:
    """This process's consumer collaborators: those installed (sundial.wiring.configure, for
    tests and benchmarks), else built once from the environment, as a consumer Lambda's."""
    global _process  # noqa: PLW0603 - one set of clients per Lambda container, built lazily
    if _installed is not None:
        return _installed()
    if _process is None:
        _process = ConsumerCollaborators.from_environment(os.environ)
    return _process


def install_process_collaborators(collaborators: Callable[[], ConsumerCollaborators]) -> None:
    """Make `collaborators()` this process's consumer collaborators from now on."""
    global _installed  # noqa: PLW0603
    _installed = collaborators
