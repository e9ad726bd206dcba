"""EventBridge (rate 1 minute) -> start one sweeper per shard group."""

from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sundial.dispatch.fanout import fan_out
from sundial.log_format import LeanFormatter
from sundial.wiring import dependencies

logger = Logger(logger_formatter=LeanFormatter())
tracer = Tracer()
metrics = Metrics()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deps = dependencies()
    failed: list[Sequence[int]] = []
    started = fan_out(
        sweeps=deps.sweeps,
        shard_count=deps.settings.shard_count,
        group_size=deps.settings.shards_per_sweeper,
        launch=deps.launcher,
        failed=failed,
    )
    metrics.add_metric(name="SweepersStarted", unit=MetricUnit.Count, value=started)
    metrics.add_metric(name="SweeperStartFailures", unit=MetricUnit.Count, value=len(failed))
    logger.info("fan-out done", extra={"sweepers": started, "failed_groups": failed})
    return {"sweepers": started}
