"""The dead-letter indexer: drains every DLQ into the index (store.dead_letters).

A DLQ receives a message two ways: the consumer SDK sends a job there when it marks it `dead`
(attempts ran out, or the error was not retryable), and SQS redrives a message that a consumer
kept crashing on (maxReceiveCount), which this indexer marks `dead`. The DLQ is a buffer, the
table is where dead letters are kept. (SQS cannot list a queue page by page, filter it, or
delete by age; a DynamoDB range can.)"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from sundial.clock import Clock
from sundial.ids import JobKey
from sundial.model.job import AttemptError, Job, Status
from sundial.store.attempts import AttemptStore
from sundial.store.dead_letters import DeadLetter, DeadLetterStore
from sundial.store.jobs import JobStore
from sundial.transport.envelope import Envelope

if TYPE_CHECKING:
    pass


logger = Logger(child=True)


# Why a redriven message died: its consumer failed or timed out without ending the attempt.
REDRIVE_ERROR = "DeliveryLimitExceeded"


INVALID_ENVELOPE_ERROR = "InvalidEnvelope"
# An envelope on one queue's DLQ naming a job of another queue (kept, never replayed).
FOREIGN_ENVELOPE_ERROR = "ForeignEnvelope"


MAX_BODY_CHARS = 4_096


class DeadLetterIndexer:
    """Turns DLQ messages into index items (the dead-letter indexer Lambda's record handler)."""

    def __init__(
        self,
        *,
        store: JobStore,
        attempt_store: AttemptStore,
        letters: DeadLetterStore,
        clock: Clock,
        dead_letter_urls: Mapping[str, str],
        retention_days: int,
        on_redriven: Callable[[Job], None] | None = None,
    ) -> None:
        """`on_redriven` is called with a job this indexer marked dead, so a DAG node's death
        reaches its descendants (sundial.services.dags), as a death recorded by its runner does."""
        self._store = store
        self._attempt_store = attempt_store
        self._letters = letters
        self._clock = clock
        self._on_redriven = on_redriven
        # A DLQ's ARN and URL both end with its name: {DLQ name: job queue}.
        self._queue_of_dlq = {url.rsplit("/", 1)[-1]: q for q, url in dead_letter_urls.items()}
        self._retention_s = retention_days * 86_400

    def index(self, record: SQSRecord) -> DeadLetter | None:
        now = self._clock.now_ms()
        queue = self._queue_of_dlq.get(record.event_source_arn.rsplit(":", 1)[-1])
        try:
            envelope = Envelope.model_validate_json(record.body)
        except ValidationError as error:
            if queue is None:
                raise RuntimeError(f"message from unknown DLQ {record.event_source_arn}") from error
            return self._index_invalid(record, queue, error, now)
        if queue is None:
            # Every DLQ this indexer reads is configured: a letter it cannot place is a wiring
            # error, and it must not decide any job (SQS delivers it again once fixed).
            raise RuntimeError(f"message from unknown DLQ {record.event_source_arn}")
        found = self._store.get(JobKey.from_job_id(envelope.id))
        if found is None:
            logger.warning("dead letter for an expired job dropped", extra={"id": envelope.id})
            return None
        if found.queue != queue or envelope.queue != queue:
            # A team may send anything to its own queue, and so to its DLQ: an envelope naming
            # another queue's job must not decide that job. Kept, as a letter of this queue.
            return self._index_foreign(record, queue, envelope, now)
        job = found if found.status is Status.DEAD else self._mark_redriven(found, envelope, now)
        if job is None:
            return None
        marked_here = job.last_error is not None and job.last_error.error_type == REDRIVE_ERROR
        if marked_here and self._on_redriven is not None:
            self._on_redriven(job)  # again on a repeat: an earlier delivery may have died first
        last = job.last_error
        letter = DeadLetter(
            queue=job.queue,
            dead_at_ms=job.finished_at_ms or now,
            ref=job.id,
            job_id=job.id,
            attempt=job.attempts or envelope.attempt,
            error_type=last.error_type if last else "Unknown",
            message=last.message if last else "",
            body=record.body[:MAX_BODY_CHARS],
        )
        self._letters.put(letter, expires_at_s=job.expires_at_s or now // 1000 + self._retention_s)
        return letter

    def _index_invalid(
        self, record: SQSRecord, queue: str, error: ValidationError, now: int
    ) -> DeadLetter:
        """A message that is not a Sundial envelope is kept as it is, by its message id."""
        letter = DeadLetter(
            queue=queue,
            dead_at_ms=int(record.attributes.sent_timestamp),
            ref=record.message_id,
            job_id=None,
            attempt=None,
            error_type=INVALID_ENVELOPE_ERROR,
            message=f"not a Sundial envelope: {error.errors()[0]['msg']}"[:500],
            body=record.body[:MAX_BODY_CHARS],
        )
        self._letters.put(letter, expires_at_s=now // 1000 + self._retention_s)
        return letter

    def _index_foreign(
        self, record: SQSRecord, queue: str, envelope: Envelope, now: int
    ) -> DeadLetter:
        """An envelope on `queue`'s DLQ that names a job of another queue: kept by its message
        id, like a body that is not an envelope, and never replayed."""
        logger.warning(
            "dead letter names a job of another queue; the job is left alone",
            extra={"id": envelope.id, "dlq_queue": queue, "envelope_queue": envelope.queue},
        )
        letter = DeadLetter(
            queue=queue,
            dead_at_ms=int(record.attributes.sent_timestamp),
            ref=record.message_id,
            job_id=None,
            attempt=None,
            error_type=FOREIGN_ENVELOPE_ERROR,
            message=f"names job {envelope.id}, which is not a job of queue '{queue}'"[:500],
            body=record.body[:MAX_BODY_CHARS],
        )
        self._letters.put(letter, expires_at_s=now // 1000 + self._retention_s)
        return letter

    def _mark_redriven(self, job: Job, envelope: Envelope, now: int) -> Job | None:
        """SQS redrove the message: its consumer kept failing before it ended the attempt, so
        the job is marked dead here, if that attempt of that revision is still the one waiting
        or running. None when the job went on otherwise meanwhile: it finished, it was moved,
        or it was retried (by id or a replay) before this letter was read, and its next attempt
        must not die of this one's letter."""
        redriven = AttemptError(
            attempt=envelope.attempt,
            at_ms=now,
            error_type=REDRIVE_ERROR,
            message="the consumer failed or timed out on every delivery (maxReceiveCount)",
            traceback_head="",
        )
        marked, current = self._attempt_store.mark_dead(
            job.key,
            attempt=envelope.attempt,
            revision=envelope.revision,
            error=redriven,
            now_ms=now,
            expires_at_s=now // 1000 + self._retention_s,
        )
        if current is not None and (marked or current.status is Status.DEAD):
            return current  # dead now (by this write, or meanwhile by an earlier delivery)
        status = current.status if current else "gone"
        logger.info(
            "dead letter dropped: the job finished or was retried",
            extra={"id": job.id, "status": status},
        )
        return None
