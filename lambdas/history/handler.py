"""The job table's DynamoDB stream -> job history in S3 (gzip JSON lines per event date),
with partial batch responses (see sundial.history.capture); and, every hour, the stream's
failed batches replayed into the history (sundial.history.replay)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.history.replay import ReplayRequest
from sundial.log_format import LeanFormatter
from sundial.wiring import history

logger = Logger(logger_formatter=LeanFormatter())
tracer = Tracer()
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" in event:
        response = history().recorder.handle(event, context)
        failed = len(response.get("batchItemFailures") or [])
        if failed:  # alarmed (history/failed-records); written only then, so it costs nothing
            metrics.add_metric(name="HistoryRecordsFailed", unit=MetricUnit.Count, value=failed)
            metrics.flush_metrics()
        return response
    ReplayRequest.model_validate(event)
    return history().replayer.replay().summary()
