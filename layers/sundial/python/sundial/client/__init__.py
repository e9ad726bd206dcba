"""The Python client of the Sundial API, and the `sundial` CLI built on it (`cli.py`).

    from sundial.client import NotFound, SundialClient

    sundial = SundialClient("https://abc123.execute-api.eu-west-1.amazonaws.com")
    job = sundial.submit("email", {"to": "ada@example.com"}, delay_seconds=3600)
    try:
        sundial.cancel_job(job.id)
    except NotFound:
        ...

It imports none of the server's code (no store, services or wiring; botocore only once a
request is signed), so it is light to install and to import anywhere.
"""

from sundial.client.backoff import Backoff
from sundial.client.calls import Repeat, new_idempotency_key
from sundial.client.client import SundialClient
from sundial.client.dead_letters import ReplayProgress
from sundial.client.errors import (
    ApiUnreachable,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    SundialError,
)
from sundial.client.models import (
    BatchResult,
    Cancelled,
    DagDetail,
    DeadLetterPage,
    DeadLetterView,
    Deleted,
    Envelope,
    FieldError,
    JobDetail,
    JobSummary,
    LeasedJobView,
    LeaseResult,
    PurgeResult,
    QueueDetail,
    QueueList,
    QueueSummary,
    ReplayResult,
    RetryPolicy,
    RunsPage,
    ScheduleDetail,
    UpdatedScheduleDetail,
)
from sundial.client.transport import ApiRequest, ApiResponse, HttpTransport, Transport

__all__ = [
    "ApiRequest",
    "ApiResponse",
    "ApiUnreachable",
    "Backoff",
    "BatchResult",
    "Cancelled",
    "Conflict",
    "DagDetail",
    "DeadLetterPage",
    "DeadLetterView",
    "Deleted",
    "Envelope",
    "FieldError",
    "Forbidden",
    "HttpTransport",
    "InvalidRequest",
    "JobDetail",
    "JobSummary",
    "LeaseResult",
    "LeasedJobView",
    "NotFound",
    "PayloadTooLarge",
    "PurgeResult",
    "QueueDetail",
    "QueueList",
    "QueueSummary",
    "RateLimited",
    "Repeat",
    "ReplayProgress",
    "ReplayResult",
    "RetryPolicy",
    "RunsPage",
    "ScheduleDetail",
    "ServerError",
    "SundialClient",
    "SundialError",
    "Transport",
    "UpdatedScheduleDetail",
    "new_idempotency_key",
]
