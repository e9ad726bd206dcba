"""The consumer SDK: wrap a plain function to make it a Sundial consumer Lambda.

    from sundial.consumer import Envelope, NonRetryableError, consumer

    @consumer(non_retryable=(InvalidAddress,))
    def handler(job: Envelope) -> dict:
        send_email(job.payload["to"])
        return {"sent": True}

This module is the SDK's whole public surface. Importing it loads the attempt lifecycle, the
job store and the SQS sender, not the API's services, schedules or DAG engine; the first record
builds the consumer's own collaborators from its settings (sundial.runs.consumer), never the
composition root, and the DAG engine is loaded only on the first DAG node. How a record is
handled: sundial.runs.consumer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sundial.retry import RetryPolicy
from sundial.runs.attempts import MAX_RESULT_BYTES, AttemptBusyError, LifecycleDeps
from sundial.runs.consumer import Heartbeat, JobFunction, NonRetryableError, process_collaborators
from sundial.runs.consumer import JobConsumer as _JobConsumer
from sundial.transport.envelope import Envelope

# The consumer's dependencies are the lifecycle's; the old names stay for existing callers.
ConsumerDeps = LifecycleDeps
ConsumerBusyError = AttemptBusyError


def process_deps() -> LifecycleDeps:
    """The Lambda's own collaborators, built from its settings once per process (on the first
    record: a cold start pays for no client before it has a job)."""
    return process_collaborators().lifecycle


class JobConsumer(_JobConsumer):
    """A consumer Lambda's record handler; `deps` defaults to the process's collaborators."""

    def __init__(
        self,
        function: JobFunction,
        *,
        non_retryable: tuple[type[BaseException], ...] = (),
        visibility_timeout_s: int | None = 120,
        deps: Callable[[], LifecycleDeps] = process_deps,
    ) -> None:
        super().__init__(
            function,
            non_retryable=non_retryable,
            visibility_timeout_s=visibility_timeout_s,
            deps=deps,
        )


def consumer(
    *,
    non_retryable: tuple[type[BaseException], ...] = (),
    visibility_timeout_s: int | None = 120,
) -> Callable[[JobFunction], Callable[[dict[str, Any], Any], dict[str, Any]]]:
    """Decorator: turns `def f(job: Envelope) -> JSON` into an SQS-triggered Lambda handler."""

    def wrap(function: JobFunction) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        job_consumer = JobConsumer(
            function, non_retryable=non_retryable, visibility_timeout_s=visibility_timeout_s
        )
        return job_consumer.lambda_handler

    return wrap


__all__ = [
    "MAX_RESULT_BYTES",
    "ConsumerBusyError",
    "ConsumerDeps",
    "Envelope",
    "Heartbeat",
    "JobConsumer",
    "JobFunction",
    "NonRetryableError",
    "RetryPolicy",
    "consumer",
    "process_deps",
]
