"""Domain errors. The HTTP adapter maps each to one status code; none of them is a 500."""

from __future__ import annotations


class SundialError(Exception):
    """Base class of every error Sundial raises on purpose."""


class InvalidInput(SundialError):
    """The request is wrong. Names the field and the reason (HTTP 400)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class JobNotFound(SundialError):
    """No job has this id (HTTP 404)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class QueueNotFound(SundialError):
    """No queue has this name (HTTP 404)."""

    def __init__(self, queue: str) -> None:
        super().__init__(f"queue {queue!r} not found")
        self.queue = queue


class DagNotFound(SundialError):
    """No DAG has this id, or all its nodes have expired (HTTP 404)."""

    def __init__(self, dag_id: str) -> None:
        super().__init__(f"DAG {dag_id} not found")
        self.dag_id = dag_id


class ScheduleNotFound(SundialError):
    """No schedule has this id, or it was deleted (HTTP 404)."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id} not found")
        self.schedule_id = schedule_id


class Conflict(SundialError):
    """The request is valid but the job's state does not allow it (HTTP 409)."""

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class Unavailable(SundialError):
    """AWS refused or failed the work after retries; nothing was accepted (HTTP 503)."""


class Forbidden(SundialError):
    """The caller lacks a permission on a queue, or carries no IAM identity (HTTP 403).
    Raised before anything is written."""

    def __init__(self, message: str, *, queue: str | None = None, permission: str | None = None):
        super().__init__(message)
        self.queue = queue
        self.permission = permission


class TooLargeForQueue(SundialError):
    """The request is larger than its queue accepts: a payload over the queue's
    max_payload_bytes, or more jobs for the queue in one request than its submission limit
    admits in a second (HTTP 413). Not transient: the same request never fits."""

    def __init__(self, field: str, reason: str, *, queue: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.queue = queue


class SubmissionRateExceeded(SundialError):
    """The queue has admitted its max_submissions_per_second in this second; nothing was written
    (HTTP 429 with Retry-After). `at_once`: the jobs a request writes together when it is more
    than a second admits (a schedule's first occurrences), counted over the seconds after."""

    def __init__(
        self,
        queue: str,
        *,
        limit_per_second: int,
        retry_after_s: int,
        at_once: int | None = None,
    ) -> None:
        spread = (
            f"; this request writes {at_once} jobs at once, which take the quota of the next "
            f"{-(-at_once // limit_per_second)} seconds"
            if at_once is not None
            else ""
        )
        super().__init__(
            f"queue {queue!r} accepts at most {limit_per_second} submissions per second"
            f"{spread}; nothing was written, retry after {retry_after_s} s"
        )
        self.queue = queue
        self.limit_per_second = limit_per_second
        self.retry_after_s = retry_after_s
