"""GET and POST /schedules; GET and DELETE /schedules/{schedule_id}; GET .../runs; POST
.../pause and .../resume."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.api.app import build_resolver
from sundial.api.schedules import schedules_router
from sundial.log_format import LeanFormatter

logger = Logger(logger_formatter=LeanFormatter())
tracer = Tracer()
metrics = Metrics()
app = build_resolver(schedules_router)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
