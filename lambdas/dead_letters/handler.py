"""Fed by every queue's DLQ: indexes each dead letter in the job table (and marks a job whose
message SQS redrove `dead`), so the API can browse, replay and purge them."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.log_format import LeanFormatter
from sundial.wiring import dependencies

logger = Logger(logger_formatter=LeanFormatter())
tracer = Tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def index_record(record: SQSRecord) -> None:
    letter = dependencies().dead_letter_indexer.index(record)
    if letter is not None:
        logger.info(
            "dead letter indexed",
            extra={"queue": letter.queue, "job_id": letter.job_id, "error": letter.error_type},
        )
        # Per queue, so each queue's dead-letter alarm counts only its own (a batch may mix
        # queues, so not as a dimension of the handler's shared metrics).
        with single_metric(
            name="DeadLetters",
            unit=MetricUnit.Count,
            value=1,
            default_dimensions=metrics.default_dimensions,
        ) as dead_letters:
            dead_letters.add_dimension(name="queue", value=letter.queue)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_partial_response(
        event=event, record_handler=index_record, processor=processor, context=context
    )
    return dict(response)
