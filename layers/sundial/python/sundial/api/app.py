"""Builds the Powertools resolver: validation on, domain errors mapped to 4xx/503."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from sundial import __version__
from sundial.api.authorization import authorization_middleware, check_every_route_has_a_rule
from sundial.api.body import BoundedHttpEvent
from sundial.api.models import ErrorBody, FieldError
from sundial.errors import (
    Conflict,
    DagNotFound,
    Forbidden,
    InvalidInput,
    JobNotFound,
    QueueNotFound,
    ScheduleNotFound,
    SubmissionRateExceeded,
    SundialError,
    TooLargeForQueue,
    Unavailable,
)
from sundial.model.submission import PAYLOAD_TOO_LARGE

API_TITLE = "Sundial"
API_VERSION = __version__

_STATUS_OF: dict[type[SundialError], HTTPStatus] = {
    InvalidInput: HTTPStatus.BAD_REQUEST,
    Forbidden: HTTPStatus.FORBIDDEN,
    JobNotFound: HTTPStatus.NOT_FOUND,
    QueueNotFound: HTTPStatus.NOT_FOUND,
    DagNotFound: HTTPStatus.NOT_FOUND,
    ScheduleNotFound: HTTPStatus.NOT_FOUND,
    Conflict: HTTPStatus.CONFLICT,
    Unavailable: HTTPStatus.SERVICE_UNAVAILABLE,
    TooLargeForQueue: HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    SubmissionRateExceeded: HTTPStatus.TOO_MANY_REQUESTS,
}


# An error answer stays small whatever the input: a 1,000-deep body once made pydantic repeat
# its location path for ~6 KB. At most this many field errors, each part cut to these lengths.
MAX_FIELD_ERRORS = 10
MAX_FIELD_CHARS = 120
MAX_REASON_CHARS = 300
MAX_MESSAGE_CHARS = 1_000


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def bounded(body: ErrorBody) -> ErrorBody:
    """The same error, its list and texts cut so the answer is at most a few KB."""
    errors = [
        FieldError(field=_cut(e.field, MAX_FIELD_CHARS), reason=_cut(e.reason, MAX_REASON_CHARS))
        for e in body.errors[:MAX_FIELD_ERRORS]
    ]
    return ErrorBody(message=_cut(body.message, MAX_MESSAGE_CHARS), errors=errors)


def error_response(
    status: HTTPStatus, body: ErrorBody, headers: Mapping[str, str] | None = None
) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=bounded(body).model_dump_json(),
        headers=dict(headers or {}),
    )


def _field_name(loc: Sequence[Any]) -> str:
    """('body', 'jobs', 3, 'run_at') -> 'jobs[3].run_at'; ('query', 'limit') -> 'limit'."""
    name = ""
    for part in loc:
        if part in ("body", "query", "path") and not name:
            continue
        if isinstance(part, int):
            name += f"[{part}]"
        else:
            name += f".{part}" if name else str(part)
    return name


def field_errors(errors: Sequence[dict[str, Any]]) -> list[FieldError]:
    """Pydantic/Powertools error dicts -> [{field, reason}]."""
    result = []
    for error in errors:
        ctx = error.get("ctx") or {}
        if error.get("type") == "json_invalid":
            reason = f"invalid JSON: {ctx.get('error', 'cannot parse')}"
            result.append(FieldError(field="body", reason=reason))
            continue
        field = _field_name(error.get("loc", ())) or str(ctx.get("field", "body"))
        reason = str(error.get("msg", error.get("type", "invalid")))
        result.append(FieldError(field=field, reason=reason.removeprefix("Value error, ")))
    return result


def _on_invalid_request(error: RequestValidationError) -> Response[str]:
    raw = list(error.errors())
    errors = field_errors(raw)
    shown = [*errors[:MAX_FIELD_ERRORS]]
    message = "; ".join(f"{e.field}: {e.reason}" for e in shown) or "invalid request"
    if len(errors) > len(shown):
        message += f"; and {len(errors) - len(shown)} more"
    # A payload over the API's limit never fits, whatever else is wrong: 413, naming it.
    too_large = any(e.get("type") == PAYLOAD_TOO_LARGE for e in raw)
    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE if too_large else HTTPStatus.BAD_REQUEST
    return error_response(status, ErrorBody(message=message, errors=errors))


def _on_domain_error(error: SundialError) -> Response[str]:
    status = next(s for kind, s in _STATUS_OF.items() if isinstance(error, kind))
    errors = (
        [FieldError(field=error.field, reason=error.reason)]
        if isinstance(error, InvalidInput | TooLargeForQueue)
        else []
    )
    # A 429 says when to come back (RFC 9110 Retry-After, in seconds).
    headers = (
        {"Retry-After": str(error.retry_after_s)}
        if isinstance(error, SubmissionRateExceeded)
        else None
    )
    return error_response(status, ErrorBody(message=str(error), errors=errors), headers)


# AWS answers that mean "not now" once botocore's own retries (standard mode, 5 attempts) are
# spent: the request is safe to repeat (every route is, by design: see docs/guarantees.md).
TRANSIENT_AWS_ERRORS = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "ThrottlingException",
        "Throttling",
        "TransactionConflictException",
        "InternalServerError",
        "ServiceUnavailable",
        "RequestThrottled",
        "KMS.ThrottlingException",
    }
)
AWS_RETRY_AFTER_S = 1


def _on_aws_error(error: ClientError | BotoCoreError) -> Response[str]:
    """A throttle or outage of DynamoDB or SQS after botocore's retries: 503 with
    Retry-After, as the API documents, not a 500. Any other AWS error is a defect: re-raised
    (a 500, logged with its traceback)."""
    code = error.response.get("Error", {}).get("Code", "") if isinstance(error, ClientError) else ""
    if isinstance(error, ClientError) and code not in TRANSIENT_AWS_ERRORS:
        raise error
    reason = code or type(error).__name__
    message = (
        f"AWS is throttling or unavailable ({reason}); retry the request, it is safe to repeat"
    )
    return error_response(
        HTTPStatus.SERVICE_UNAVAILABLE,
        ErrorBody(message=message, errors=[]),
        {"Retry-After": str(AWS_RETRY_AFTER_S)},
    )


class JsonApiResolver(APIGatewayHttpResolver):
    """Reads every request body as JSON, whatever its Content-Type: `curl -d` sends a form
    content type, and parsing a JSON body as a form only produces baffling errors. Every body
    is read through sundial.api.body's limits (size, UTF-8, depth, numbers) before a model
    sees it."""

    def _to_proxy_event(self, event: dict[str, Any]) -> BaseProxyEvent:
        # Powertools builds the event object here and reads the body only through it (its own
        # ALB resolver overrides this method the same way), so this is the one place a bounded
        # reader covers every route.
        return BoundedHttpEvent(event, self._json_body_deserializer)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        headers = event.get("headers") or {}
        content_type = next((k for k in headers if k.lower() == "content-type"), None)
        if content_type and "json" not in str(headers[content_type]).lower():
            headers = {k: v for k, v in headers.items() if k != content_type}
            event = {**event, "headers": {**headers, "content-type": "application/json"}}
        return super().resolve(event, context)


def _on_no_route(_: Exception) -> Response[str]:
    """An unknown path or method: the same error shape as every other answer."""
    return error_response(HTTPStatus.NOT_FOUND, ErrorBody(message="no such route", errors=[]))


def build_resolver(*routers: Router) -> APIGatewayHttpResolver:
    app = JsonApiResolver(enable_validation=True)
    for router in routers:
        app.include_router(router)
    # Powertools keeps the registered routes here; it reads them itself to build the schema.
    check_every_route_has_a_rule([*app._static_routes, *app._dynamic_routes])
    app.use(middlewares=[authorization_middleware])
    register: Callable[[Any], Callable[[Any], Any]] = app.exception_handler
    register(RequestValidationError)(_on_invalid_request)
    register(list(_STATUS_OF))(_on_domain_error)
    # Connection failures (BotoCoreError) are transient too; a ClientError only if its code is.
    register([ClientError, EndpointConnectionError, ConnectionClosedError, ReadTimeoutError])(
        _on_aws_error
    )
    app.not_found(_on_no_route)
    return app
