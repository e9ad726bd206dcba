"""The errors the client raises: one type per kind of answer, each carrying the API's message
and its field errors, so callers can `except NotFound:` instead of reading status codes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import ValidationError

from sundial.client.models import ErrorBody, FieldError


class SundialError(Exception):
    """An answer the API gave that is not a success (or no answer at all: `status` None).

    `message` is the API's own message; `errors` its field errors (`[FieldError(field,
    reason)]`), e.g. `run_at: not an RFC 3339 timestamp`."""

    def __init__(
        self, message: str, *, status: int | None = None, errors: list[FieldError] | None = None
    ) -> None:
        super().__init__(f"HTTP {status}: {message}" if status is not None else message)
        self.status = status
        self.message = message
        self.errors: list[FieldError] = errors or []


class InvalidRequest(SundialError):
    """400: the request was refused and changed nothing; `errors` names each field."""


class Forbidden(SundialError):
    """403: the caller lacks the permission on the queue (or has no IAM identity)."""


class NotFound(SundialError):
    """404: no such job, DAG, schedule or queue (or route)."""


class Conflict(SundialError):
    """409: the item is not in a state that allows this (a running job cannot be cancelled),
    or the same request is still in flight ("retry shortly")."""


class PayloadTooLarge(SundialError):
    """413: the body is larger than the API accepts."""


class RateLimited(SundialError):
    """429: too many requests; `retry_after` is the seconds the API asked to wait, if it did."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 429,
        errors: list[FieldError] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, errors=errors)
        self.retry_after = retry_after


class ServerError(SundialError):
    """5xx: the API or AWS behind it failed; a 503 asks to repeat the request."""


class ApiUnreachable(SundialError):
    """No answer: the connection failed or timed out (`status` is None)."""


_BY_STATUS: dict[int, type[SundialError]] = {
    400: InvalidRequest,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
}


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """A Retry-After header (seconds, or an HTTP date) as seconds from now; None if absent or
    unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def error_for(status: int, body: Any, headers: Mapping[str, str]) -> SundialError:
    """The typed error for a non-2xx answer. A body that is not the API's ErrorBody (API
    Gateway's own answers, e.g. `{"message": "Forbidden"}` from IAM auth, or a proxy's HTML)
    still gives the right type, with what text there is as the message."""
    try:
        parsed = ErrorBody.model_validate(body)
        message, errors = parsed.message, list(parsed.errors)
    except ValidationError:
        message, errors = (str(body)[:500] if body else f"HTTP {status}"), []
    if status == 429:
        retry_after = retry_after_seconds(_header(headers, "retry-after"))
        return RateLimited(message, status=status, errors=errors, retry_after=retry_after)
    if status >= 500:
        return ServerError(message, status=status, errors=errors)
    kind = _BY_STATUS.get(status, SundialError)
    return kind(message, status=status, errors=errors)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
