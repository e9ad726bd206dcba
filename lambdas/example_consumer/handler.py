"""Example consumer, built on the consumer SDK (sundial.consumer): logs each job it runs with
its lateness, and fails on purpose when the payload says {"fail": true}, so the retry and
dead-letter path can be watched locally (`make run`, then submit such a job to `demo`)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.clock import Clock, SystemClock
from sundial.consumer import JobConsumer
from sundial.log_format import LeanFormatter
from sundial.model.submission import parse_rfc3339
from sundial.transport.envelope import Envelope

logger = Logger(logger_formatter=LeanFormatter())
tracer = Tracer()
metrics = Metrics()
clock: Clock = SystemClock()


class AskedToFailError(Exception):
    """The payload asked this job to fail."""


def run_job(job: Envelope) -> dict[str, int]:
    lateness_ms = clock.now_ms() - parse_rfc3339(job.run_at)
    logger.info(
        "job ran",
        extra={
            "id": job.id,
            "queue": job.queue,
            "attempt": job.attempt,
            "priority": str(job.priority),
            "run_at": job.run_at,
            "lateness_ms": lateness_ms,
        },
    )
    metrics.add_metric(name="JobsRun", unit=MetricUnit.Count, value=1)
    if isinstance(job.payload, dict) and job.payload.get("fail") is True:
        raise AskedToFailError(f"job {job.id} was asked to fail")
    return {"lateness_ms": lateness_ms}


# The demo queue's visibility timeout (cdk.json): the heartbeat renews it while a job runs.
job_consumer = JobConsumer(run_job, visibility_timeout_s=30)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return job_consumer.lambda_handler(event, context)
