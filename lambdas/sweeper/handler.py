"""Async invoke from the fan-out: {"shards": [...]} -> claim due jobs and send them to SQS."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.dispatch.sweeper import SweepRequest
from sundial.log_format import LeanFormatter
from sundial.wiring import dependencies

logger = Logger(logger_formatter=LeanFormatter())
tracer = Tracer()
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_parser(model=SweepRequest)
def handler(event: SweepRequest, context: LambdaContext) -> dict[str, Any]:
    report = dependencies().sweeper.sweep(
        event.shards, remaining_ms=context.get_remaining_time_in_millis
    )
    # One value per job sent, so the alarm's and the dashboard's percentiles are exact; EMF
    # packs 100 values to a log line (Powertools flushes at 100), about 7 bytes a job.
    for lateness in report.lateness_ms:
        metrics.add_metric(name="DispatchLatenessMs", unit=MetricUnit.Milliseconds, value=lateness)
    metrics.add_metric(name="JobsDispatched", unit=MetricUnit.Count, value=report.dispatched)
    metrics.add_metric(name="SendFailures", unit=MetricUnit.Count, value=report.send_failures)
    metrics.add_metric(name="PoisonJobs", unit=MetricUnit.Count, value=report.poisoned)
    metrics.add_metric(name="SweepErrors", unit=MetricUnit.Count, value=report.errors)
    metrics.add_metric(name="FailedShards", unit=MetricUnit.Count, value=len(report.failed_shards))
    summary = report.summary()
    if report.poisoned or report.errors:
        logger.warning("sweep done with poison jobs or errors", extra=summary)
    else:
        logger.info("sweep done", extra=summary)
    return summary
