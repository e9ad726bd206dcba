"""GET and DELETE /jobs/{job_id}, POST /jobs/{job_id}/retry, /pause and /resume, and the dead
letters of each queue: GET and DELETE /queues/{queue}/dead, POST /queues/{queue}/dead/replay."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.api.app import build_resolver
from sundial.api.control import job_control_router
from sundial.api.dead_letter_routes import dead_letters_router
from sundial.api.routes import jobs_router
from sundial.log_format import LeanFormatter

logger = Logger(logger_formatter=LeanFormatter())
tracer = Tracer()
metrics = Metrics()
app = build_resolver(jobs_router, dead_letters_router, job_control_router)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
