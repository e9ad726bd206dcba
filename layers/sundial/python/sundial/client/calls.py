"""The one way the client makes a request (`Calls`), and what every resource's calls share.

`Calls._call` builds the request, sends it through the transport, repeats it as its `Repeat`
allows (`send`, the one retry policy: the client's backoff, honouring `Retry-After`), raises
a failure as its typed error and reads a success into its model. The resource modules (`jobs`,
`schedules`, `dags`, `queues`, `dead_letters`, `leases`) add their methods on top of it, and
`SundialClient` joins them into one class. Also here: the helpers for what those methods send
(path segments, times, bodies without unset fields) and the iteration over a paginated
listing.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from sundial.client.backoff import Backoff
from sundial.client.errors import (
    ApiUnreachable,
    Conflict,
    RateLimited,
    ServerError,
    SundialError,
    error_for,
)
from sundial.client.models import RetryPolicy, format_rfc3339, from_api
from sundial.client.transport import ApiRequest, ApiResponse, Transport, TransportFailure

Model = TypeVar("Model", bound=BaseModel)
Item_co = TypeVar("Item_co", covariant=True)
Time = datetime | str  # a datetime (timezone-aware), or RFC 3339 text as the API takes it


class Repeat(Enum):
    """Whether a request may be sent again when its answer was lost or was a failure."""

    SAFE = "safe"  # idempotent: repeating it changes nothing more
    IF_NOT_APPLIED = "if_not_applied"  # only when the API certainly did nothing (429, no connect)


def new_idempotency_key() -> str:
    """A fresh key for one logical submit: random, so no two submits share one."""
    return f"sundial-client-{uuid.uuid4().hex}"


def api_time(value: Time | None) -> str | None:
    """A time as the API takes it: RFC 3339 text (text given is sent as it is)."""
    if value is None or isinstance(value, str):
        return value
    return format_rfc3339(value)


def without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that are set: the API takes an absent field as "the default"."""
    return {key: value for key, value in values.items() if value is not None}


def segment(value: str) -> str:
    """An id or queue name as one path segment: quoted, so it can never change the route."""
    if not value:
        raise ValueError("an id or queue name cannot be empty")
    return quote(value, safe="")


def retry_body(retry: RetryPolicy | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A retry policy as the API takes it."""
    if retry is None:
        return None
    if isinstance(retry, RetryPolicy):
        return retry.model_dump(exclude_none=True)
    return dict(retry)


class _Page(Protocol[Item_co]):
    @property
    def items(self) -> Sequence[Item_co]: ...

    @property
    def next_cursor(self) -> str | None: ...


def every_page(fetch: Callable[[str | None], _Page[Item_co]]) -> Iterator[Item_co]:
    """The items of every page of a listing, fetching each (`fetch(cursor)`) as the iteration
    reaches it."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


class Calls:
    """The request machinery the resource calls share; `SundialClient.__init__` sets its
    attributes."""

    backoff: Backoff
    _transport: Transport
    _sleep: Callable[[float], None]
    _rng: random.Random

    def _post(self, model: type[Model], path: str, body: Any = None) -> Model:
        return self._call(model, "POST", path, body=body, repeat=Repeat.SAFE)

    def _call(
        self,
        model: type[Model],
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        repeat: Repeat,
    ) -> Model:
        request = ApiRequest(
            method=method,
            path=path,
            query={key: str(value) for key, value in (query or {}).items()},
            body=json.dumps(body).encode() if body is not None else None,
        )
        response = self._send(request, repeat)
        return from_api(model, response.body)

    def _send(self, request: ApiRequest, repeat: Repeat) -> ApiResponse:
        return send(
            self._transport, request, repeat, backoff=self.backoff, sleep=self._sleep, rng=self._rng
        )


def send(
    transport: Transport,
    request: ApiRequest,
    repeat: Repeat,
    *,
    backoff: Backoff,
    sleep: Callable[[float], None],
    rng: random.Random | None = None,
) -> ApiResponse:
    """Send, repeating as `repeat` allows, up to the backoff's attempts; the last failure is
    raised as its typed error. The one retry policy of every request the client makes (the
    API's, and a leased job's presigned payload GET: sundial.client.leases)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            response = transport(request)
        except TransportFailure as failure:
            error: SundialError = ApiUnreachable(str(failure))
            may_repeat = repeat is Repeat.SAFE or not failure.sent
        else:
            if 200 <= response.status < 300:
                return response
            error = error_for(response.status, _json(response.body), response.headers)
            may_repeat = _is_transient(error, repeat)
        if not may_repeat or attempt >= backoff.max_attempts:
            raise error
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        sleep(backoff.delay_s(attempt, retry_after_s=retry_after, rng=rng))


def _is_transient(error: SundialError, repeat: Repeat) -> bool:
    if isinstance(error, RateLimited):
        return True  # refused before anything was done: always safe to send again
    if repeat is not Repeat.SAFE:
        return False
    if isinstance(error, ServerError):
        return True
    # The API's own wording for "the same request is still in flight": repeat it, as the
    # guarantees ask of clients (docs/guarantees.md).
    return isinstance(error, Conflict) and error.message.endswith("retry shortly")


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return body.decode(errors="replace")
