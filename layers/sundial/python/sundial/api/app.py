"""Builds the Powertools resolver: validation on, domain errors mapped to 4xx/503."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from sundial.api.models import ErrorBody, FieldError
from sundial.errors import (
    Conflict,
    DagNotFound,
    InvalidInput,
    JobNotFound,
    QueueNotFound,
    ScheduleNotFound,
    SundialError,
    Unavailable,
)

API_TITLE = "Sundial"
API_VERSION = "1.0.0"

_STATUS_OF: dict[type[SundialError], HTTPStatus] = {
    InvalidInput: HTTPStatus.BAD_REQUEST,
    JobNotFound: HTTPStatus.NOT_FOUND,
    QueueNotFound: HTTPStatus.NOT_FOUND,
    DagNotFound: HTTPStatus.NOT_FOUND,
    ScheduleNotFound: HTTPStatus.NOT_FOUND,
    Conflict: HTTPStatus.CONFLICT,
    Unavailable: HTTPStatus.SERVICE_UNAVAILABLE,
}


def error_response(status: HTTPStatus, body: ErrorBody) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(),
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
    errors = field_errors(list(error.errors()))
    message = "; ".join(f"{e.field}: {e.reason}" for e in errors) or "invalid request"
    return error_response(HTTPStatus.BAD_REQUEST, ErrorBody(message=message, errors=errors))


def _on_domain_error(error: SundialError) -> Response[str]:
    status = next(s for kind, s in _STATUS_OF.items() if isinstance(error, kind))
    errors = (
        [FieldError(field=error.field, reason=error.reason)]
        if isinstance(error, InvalidInput)
        else []
    )
    return error_response(status, ErrorBody(message=str(error), errors=errors))


class JsonApiResolver(APIGatewayHttpResolver):
    """Reads every request body as JSON, whatever its Content-Type: `curl -d` sends a form
    content type, and parsing a JSON body as a form only produces baffling errors."""

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        headers = event.get("headers") or {}
        content_type = next((k for k in headers if k.lower() == "content-type"), None)
        if content_type and "json" not in str(headers[content_type]).lower():
            headers = {k: v for k, v in headers.items() if k != content_type}
            event = {**event, "headers": {**headers, "content-type": "application/json"}}
        return super().resolve(event, context)


def build_resolver(*routers: Router) -> APIGatewayHttpResolver:
    app = JsonApiResolver(enable_validation=True)
    for router in routers:
        app.include_router(router)
    register: Callable[[Any], Callable[[Any], Any]] = app.exception_handler
    register(RequestValidationError)(_on_invalid_request)
    register(list(_STATUS_OF))(_on_domain_error)
    return app
