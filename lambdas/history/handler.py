"""The job table's DynamoDB stream -> job history in S3 (gzip JSON lines per event date),
with partial batch responses (see sundial.history.capture); and, every hour, the stream's
failed batches replayed into the history (sundial.history.replay)."""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.history.replay import ReplayRequest
from sundial.wiring import history

logger = Logger()
tracer = Tracer()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" in event:
        return history().recorder.handle(event, context)
    ReplayRequest.model_validate(event)
    return history().replayer.replay().summary()
