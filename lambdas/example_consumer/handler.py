"""Example consumer: SQS batch of Sundial envelopes -> one "job ran" log line per job.

This example only logs. It does not re-check the job's status before running it (the fence
that makes cancel safe), record success or failure, or retry with backoff: the consumer SDK
that does all of that arrives with the job-lifecycle issue. Copy its shape, not its semantics.

A record whose body is not a valid envelope fails alone: it is reported in
`batchItemFailures`, SQS makes it visible again, and after the queue's `max_receive_count`
receives redrives it to the queue's DLQ. The rest of the batch is deleted as done.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.clock import Clock, SystemClock
from sundial.envelope import Envelope
from sundial.submission import parse_rfc3339

logger = Logger()
tracer = Tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.SQS)
clock: Clock = SystemClock()


@tracer.capture_method
def run_job(record: SQSRecord) -> None:
    """Run one job. Raises (failing this record only) when the body is not an envelope."""
    job = Envelope.model_validate_json(record.body)
    logger.info(
        "job ran",
        extra={
            "id": job.id,
            "queue": job.queue,
            "attempt": job.attempt,
            "priority": str(job.priority),
            "run_at": job.run_at,
            "lateness_ms": clock.now_ms() - parse_rfc3339(job.run_at),
            "message_id": record.message_id,
        },
    )
    metrics.add_metric(name="JobsRun", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=run_job, processor=processor, context=context
    )
