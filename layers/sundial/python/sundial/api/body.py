"""The one decoding-and-limits layer every request body passes before any model sees it.

In order: the body's size in bytes, UTF-8, JSON nesting depth, the size of each number, JSON
itself (standard JSON only: no NaN or Infinity), and strings that UTF-8 can carry; then the
pydantic models. Each refusal is a RequestValidationError, so the resolver answers it as every
other invalid input: a 400 naming `body` and the reason, and nothing is written.

Why here and not in the models: Python's json and int parsing fail in ways that are not
validation errors (RecursionError past ~1,000 levels, ValueError past 4,300 digits,
UnicodeDecodeError from Powertools' `decoded_body`), and they fail before pydantic runs.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from functools import cached_property
from itertools import accumulate
from typing import Any

from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

# Lambda's limit for a synchronous invocation's request is 6 MB, so no larger body reaches a
# function in AWS; the local runtime and tests enforce the same bound.
MAX_BODY_BYTES = 6 * 1024 * 1024
# Far more than any request model nests (a DAG node's retry policy is 4 levels down); a
# payload is opaque to Sundial, and 64 levels is ample for it while keeping every walk of it
# (pydantic, json.dumps, error locations) far from Python's recursion limit.
MAX_JSON_DEPTH = 64
# Characters in one number literal (sign, digits, fraction, exponent). Every bounded field is
# a few digits; 100 leaves room for any identifier a payload carries, and stays far below
# Python's 4,300-digit limit on int conversion (and its quadratic cost).
MAX_NUMBER_CHARS = 100

# A JSON string, unrolled so the match is linear: quote, runs of plain characters or escapes.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class _Refused(ValueError):
    """Raised by the parse hooks; becomes the body's 400."""


def refuse(reason: str) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "body_invalid", "loc": ("body",), "msg": reason, "input": None}]
    )


def body_bytes(body: str | None, *, is_base64: bool) -> bytes:
    """The request body as the client sent it. API Gateway base64-encodes a body it does not
    take for text; the size limit applies to the bytes, before anything is decoded."""
    if not body:
        return b""
    if not is_base64:
        raw = body.encode("utf-8", errors="surrogatepass")
    else:
        if len(body) > (MAX_BODY_BYTES + 2) // 3 * 4:
            raise refuse(f"the body is over {MAX_BODY_BYTES} bytes")
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise refuse("the body is not valid base64 (isBase64Encoded)") from None
    if len(raw) > MAX_BODY_BYTES:
        raise refuse(f"the body is over {MAX_BODY_BYTES} bytes")
    return raw


def body_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise refuse(f"the body is not valid UTF-8 (at byte {error.start})") from None


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text, without parsing it (so without
    recursion): brackets inside strings are dropped first. Exact for valid JSON; for invalid
    JSON it is only an estimate, and the parser refuses that text anyway."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(_STEP[b] for b in brackets), default=0)


def _number(text: str) -> None:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number has more than {MAX_NUMBER_CHARS} characters")


def _int(text: str) -> int:
    _number(text)
    return int(text)


def _float(text: str) -> float:
    _number(text)
    value = float(text)
    if not math.isfinite(value):  # 1e999: a JSON number no JSON encoder can write back
        raise _Refused(f"the number {text} is out of range")
    return value


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON")


def parse_json(text: str) -> Any:
    """Standard JSON within the limits; RequestValidationError (a 400) otherwise."""
    depth = nesting_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise refuse(f"JSON nested {depth} levels deep; the limit is {MAX_JSON_DEPTH}")
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except _Refused as error:
        raise refuse(str(error)) from None
    except json.JSONDecodeError as error:
        raise refuse(f"invalid JSON: {error.msg} (at character {error.pos})") from None
    except RecursionError:  # not reached after the depth check; kept so it can never be a 500
        raise refuse(f"JSON nested too deep; the limit is {MAX_JSON_DEPTH}") from None
    try:
        # A \ud800 escape parses to a lone surrogate, which no UTF-8 store or response can
        # hold; find it now, not when the payload is first encoded.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise refuse("a string holds an unpaired surrogate (\\ud800-\\udfff)") from None
    return value


class BoundedHttpEvent(APIGatewayProxyEventV2):
    """The HTTP API event whose body is read through the limits above. Powertools reads a
    request's body only through `decoded_body` and `json_body`, so these two are the layer."""

    @cached_property
    def decoded_body(self) -> str | None:
        raw = body_bytes(self.body, is_base64=bool(self.is_base64_encoded))
        return body_text(raw) if raw else None

    @cached_property
    def json_body(self) -> Any:
        text = self.decoded_body
        return parse_json(text) if text else None
