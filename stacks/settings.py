"""Sundial app configuration: the "sundial" key of the cdk.json context, validated by pydantic.

The Lambda runtime and architecture live here too, in one place: the dependencies layer
(`make deps`, see LAMBDA_PYTHON_VERSION / LAMBDA_PLATFORM in the Makefile) is built for exactly
this pair, so change them together.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from sundial.access import QueueAccess
from sundial.quotas import QueueQuota
from sundial.retry import QueueRetryDefaults
from sundial.settings import (
    DEFAULT_RETENTION_DAYS,
    DEFAULT_SHARD_COUNT,
    DEFAULT_SHARDS_PER_SWEEPER,
    MAX_DISPATCH_PER_SECOND,
    MAX_DISPATCH_WEIGHT,
    MAX_RETENTION_DAYS,
    MAX_SHARD_COUNT,
)

CONTEXT_KEY = "sundial"

LAMBDA_RUNTIME: lambda_.Runtime = lambda_.Runtime.PYTHON_3_13
LAMBDA_ARCH: lambda_.Architecture = lambda_.Architecture.ARM_64

# How long CloudWatch keeps function and API access logs (operational logs, not job history).
LOG_RETENTION: logs.RetentionDays = logs.RetentionDays.ONE_MONTH

QueueName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,39}$")]


class SettingsError(ValueError):
    """The "sundial" context is missing or invalid; the message names every bad key."""


class RetrySettings(QueueRetryDefaults):
    """A queue's retry defaults, given to every function as SUNDIAL_RETRY_DEFAULTS: at most
    max_attempts attempts in all, with exponential backoff from initial_delay_seconds, times
    `factor` per retry, capped at max_delay_seconds. The fields, their defaults and limits are
    the runtime's own (sundial.retry, where the formula, jitter included, is)."""

    # Strict: JSON numbers only, so a `true` or a "3" in cdk.json is an error, not a 1 or a 3.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, strict=True)


class QueueSettings(QueueQuota):
    """One job queue: an SQS queue plus its dead-letter queue, and its retry defaults. Its
    quotas, `max_submissions_per_second` and `max_payload_bytes` (both off unless declared),
    are the runtime's own fields, documented with why in sundial.quotas.QueueQuota."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Receives of ONE message before SQS redrives it to the DLQ. Sundial sends a NEW message for
    # every retry (and sends dead jobs to the DLQ itself), so this does not bound retries: it
    # only bounds how often a consumer may crash, time out or be throttled on the same message
    # (a crashed batch counts a receive for every message in it). Keep it >= 5, as AWS advises
    # for Lambda event sources, so throttling alone never dead-letters a job. Not coupled to
    # retry.max_attempts on purpose.
    max_receive_count: int = Field(ge=1, le=1000)
    visibility_timeout_seconds: int = Field(ge=1, le=43200)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    # A second SQS queue (with its own DLQ) for this queue's critical and high jobs: SQS has
    # no priorities, so urgent jobs get a queue a flood of normal and low jobs cannot delay,
    # with a consumer of its own concurrency (QueueConsumer(priority_queue=...)).
    priority_queue: bool = Field(default=False, strict=True)
    # Alarms (stacks/monitoring.py; the runbook in docs/operations.md says what to do):
    # dead letters indexed from this queue within 5 minutes, at or above which the queue's
    # dead-letter alarm fires; 1 means every dead job pages someone.
    dead_letter_alarm_threshold: int = Field(default=1, ge=1, le=1_000_000, strict=True)
    # The age of the oldest message, in seconds, at or above which the queue's backlog alarm
    # fires: its consumers are not keeping up. SQS counts a message's age from when it was
    # sent, and Sundial sends up to 15 minutes ahead with DelaySeconds, so stay above 900.
    oldest_message_alarm_seconds: int = Field(default=1800, ge=960, le=1_209_600, strict=True)
    # Who may use the queue, per permission (submit, read, control, work, admin): principals
    # as sundial.access describes (account ids, role/user ARNs, organization ids,
    # "stack-account"). None (the default): the stack's own account may do everything, as IAM
    # auth alone allowed, and a grant_* on the queue is refused (it would narrow nothing).
    # {} : nobody, until the construct's grant_* helpers add someone.
    access: QueueAccess | None = None
    # Fair dispatch (docs/api.md "Fair dispatch"; sundial.dispatch.fairness). The most jobs a second
    # the sweepers make visible on this queue: a flood due at once is spread over the following
    # seconds with DelaySeconds (in due order, never before due), so the team's consumers and
    # what they call see a steady rate. None: no cap. Global, approximated per shard (each shard
    # paces rate / shard_count); jobs sent by the submit itself (due within 15 minutes of their
    # submission) are not paced: the submission quota bounds them.
    max_dispatch_per_second: int | None = Field(
        default=None, ge=1, le=MAX_DISPATCH_PER_SECOND, strict=True
    )
    # This queue's turns in the sweeper's weighted round-robin between queues due at the same
    # moment: with weights 3 and 1, three of this queue's jobs are claimed and sent for each of
    # the other's, so a flood of one queue cannot starve another behind it.
    dispatch_weight: int = Field(default=1, ge=1, le=MAX_DISPATCH_WEIGHT, strict=True)


class HistoryPipelineSettings(BaseModel):
    """Job history in S3 and the Glue jobs that compact it and report on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # How long each bucket keeps its objects. Raw history is compacted daily, so the raw days
    # are only needed to re-run a compaction; curated Parquet and reports are the record.
    raw_retention_days: int = Field(default=30, ge=3, le=3650)
    curated_retention_days: int = Field(default=730, ge=30, le=3650)
    report_retention_days: int = Field(default=730, ge=30, le=3650)
    access_log_retention_days: int = Field(default=90, ge=1, le=3650)
    # The stream -> history Lambda batches: up to this many records, or this long.
    stream_batch_size: int = Field(default=1000, ge=1, le=10_000)
    stream_batching_window_seconds: int = Field(default=30, ge=0, le=300)
    # Both Glue jobs' capacity (Glue 5.0: G.1X is 4 vCPU / 16 GB per worker, at least 2).
    glue_worker_type: Literal["G.1X", "G.2X", "G.4X", "G.8X"] = "G.1X"
    glue_workers: int = Field(default=2, ge=2, le=299)
    # When the daily compaction (then the report) runs: a Glue cron expression, UTC.
    schedule: str = Field(default="cron(15 1 * * ? *)", pattern=r"^cron\(.+\)$")
    report_days: int = Field(default=14, ge=1, le=366)


class ApiSettings(BaseModel):
    """The HTTP API stage's throttle: what this deployment promises to accept. Every route
    shares it; a batch request (`POST /jobs/batch`, up to 25 jobs) is one request. The
    account's own API Gateway quota (10,000 requests/s per region unless raised) caps it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    throttle_rate_limit: int = Field(default=1000, ge=1, le=1_000_000, strict=True)
    throttle_burst_limit: int = Field(default=500, ge=1, le=1_000_000, strict=True)


class TableCapacitySettings(BaseModel):
    """The job table's capacity. On demand (the default) charges per request and needs no
    planning; provisioned capacity with auto scaling costs about 40% as much per write at a
    steady load (BENCHMARKS.md, section 1, gives the break-even) but throttles a burst above
    what is provisioned until scaling catches up, which shows as lateness (throttled writes
    are retried or refused with nothing written), never as a lost job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["on_demand", "provisioned"] = "on_demand"
    # Provisioned only: auto scaling keeps consumed/provisioned near the target utilization.
    min_write_units: int = Field(default=25, ge=1, le=400_000, strict=True)
    max_write_units: int = Field(default=40_000, ge=1, le=400_000, strict=True)
    min_read_units: int = Field(default=5, ge=1, le=400_000, strict=True)
    max_read_units: int = Field(default=10_000, ge=1, le=400_000, strict=True)
    target_utilization_percent: int = Field(default=70, ge=20, le=90, strict=True)

    @field_validator("max_write_units", "max_read_units")
    @classmethod
    def _max_not_below_min(cls, value: int, info: ValidationInfo) -> int:
        lower_bound = str(info.field_name).replace("max_", "min_")
        low = info.data.get(lower_bound)
        if low is not None and value < low:
            raise ValueError(f"must be at least {lower_bound} ({low})")
        return value


class ObservabilitySettings(BaseModel):
    """What every function records, which is also what it costs in CloudWatch and X-Ray.

    `tracing`: "active" samples each function's invocations into X-Ray (AWS's fixed rule for
    Lambda: the first request each second, then 5%; $5 per million traces);
    "pass_through" records a trace only when the caller sent a sampled trace header.
    `log_level`: the Powertools log level; "WARNING" drops the per-request INFO lines."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tracing: Literal["active", "pass_through"] = "active"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class OperationsSettings(BaseModel):
    """How the deployment is watched and what a stack operation may remove.

    `removal_policy`: what `cdk destroy` (or a replacement) does to the job queues, their DLQs,
    the dispatch-failures queue and the job table. "retain" (the default) keeps them, with
    their jobs and dead letters, and turns on the table's deletion protection; "destroy" is
    for throwaway stacks. The history buckets are always retained: they are the record.
    `alarm_topic_arn`: the SNS topic every alarm notifies; None creates one (encrypted with a
    key of the stack's own, which CloudWatch may use) whose ARN is a stack output.
    `reserve_dispatch_concurrency`: reserved concurrency for the fan-out and the sweepers, so
    a flood of other functions in the account cannot throttle dispatch (sized in
    stacks/functions.py from the shard settings). Turn it off in an account whose
    concurrency quota is still the new-account default, where no reservation is allowed.
    `dispatch_lateness_alarm_ms`: the p99 of (visible in SQS - due) over 5 minutes, in ms, at
    or above which the lateness alarm fires (three 5-minute periods in a row).
    `dashboard`: deploy the CloudWatch dashboard ($3 a month beyond an account's first three;
    the alarms do not depend on it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    removal_policy: Literal["retain", "destroy"] = "retain"
    alarm_topic_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$"
    )
    reserve_dispatch_concurrency: bool = Field(default=True, strict=True)
    dispatch_lateness_alarm_ms: int = Field(default=5000, ge=1000, le=3_600_000, strict=True)
    dashboard: bool = Field(default=True, strict=True)
    # Noncurrent object versions in the history buckets are kept this long, then expire: an
    # overwritten or deleted report or Parquet file can be restored within it.
    noncurrent_version_days: int = Field(default=30, ge=1, le=3650, strict=True)


class SundialSettings(BaseModel):
    """The whole Sundial deployment configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Defaults and limits shared with the runtime's settings (sundial.settings).
    shard_count: int = Field(default=DEFAULT_SHARD_COUNT, ge=1, le=MAX_SHARD_COUNT)
    shards_per_sweeper: int = Field(default=DEFAULT_SHARDS_PER_SWEEPER, ge=1)
    retention_days: int = Field(default=DEFAULT_RETENTION_DAYS, ge=1, le=MAX_RETENTION_DAYS)
    queues: dict[QueueName, QueueSettings] = Field(min_length=1)
    example_consumer_queue: str | None = "demo"
    """The queue the example consumer Lambda (lambdas/example_consumer) reads; None: no example."""
    history: HistoryPipelineSettings = Field(default_factory=HistoryPipelineSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    table_capacity: TableCapacitySettings = Field(default_factory=TableCapacitySettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    operations: OperationsSettings = Field(default_factory=OperationsSettings)

    @field_validator("example_consumer_queue")
    @classmethod
    def _example_queue_is_configured(cls, value: str | None, info: ValidationInfo) -> str | None:
        queues = info.data.get("queues")  # absent when the queues themselves are invalid
        if value is not None and queues is not None and value not in queues:
            raise ValueError(
                f"{value!r} is not a configured queue; use one of {sorted(queues)}, "
                "or null to deploy no example consumer"
            )
        return value

    @classmethod
    def from_context(cls, raw: Any) -> SundialSettings:
        """Validate the raw context value, raising SettingsError that names each bad key."""
        if not isinstance(raw, dict):
            raise SettingsError(
                f'cdk.json context "{CONTEXT_KEY}" must be an object, got {type(raw).__name__}'
            )
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{CONTEXT_KEY}.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                for error in exc.errors()
            )
            raise SettingsError(f"invalid cdk.json context: {problems}") from exc
