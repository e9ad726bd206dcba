"""The job table's DynamoDB stream -> job history in S3 (gzip JSON lines per event date),
with partial batch responses (see sundial.history.capture)."""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.wiring import history_recorder

logger = Logger()
tracer = Tracer()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return history_recorder().handle(event, context)
