"""A zero-latency stand-in for AWS, used ONLY to benchmark Sundial's own CPU per job.

It answers at botocore's HTTP layer (a `before-send` hook returns the response, so nothing
is sent): every request is still validated and serialized by botocore, and every answer is a
valid response for that operation, parsed by botocore as a real one would be. What it does
not do is behave like AWS (no state, no conditions): correctness is tested against moto; this
exists so that moto's own per-call work does not drown out Sundial's.
"""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

Responder = Callable[[dict[str, Any]], dict[str, Any]]


class _Body(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def _send_message_batch(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "Successful": [
            {
                "Id": entry["Id"],
                "MessageId": str(uuid.uuid4()),
                "MD5OfMessageBody": hashlib.md5(entry["MessageBody"].encode()).hexdigest(),
            }
            for entry in request["Entries"]
        ],
        "Failed": [],
    }


def _send_message(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "MessageId": str(uuid.uuid4()),
        "MD5OfMessageBody": hashlib.md5(request["MessageBody"].encode()).hexdigest(),
    }


def _batch_get_nothing(request: dict[str, Any]) -> dict[str, Any]:
    return {"Responses": {table: [] for table in request["RequestItems"]}, "UnprocessedKeys": {}}


def _empty(_request: dict[str, Any]) -> dict[str, Any]:
    return {}


DEFAULT_RESPONDERS: dict[tuple[str, str], Responder] = {
    ("dynamodb", "PutItem"): _empty,
    ("dynamodb", "UpdateItem"): _empty,
    ("dynamodb", "DeleteItem"): _empty,
    ("dynamodb", "GetItem"): _empty,
    ("dynamodb", "BatchWriteItem"): lambda _request: {"UnprocessedItems": {}},
    ("dynamodb", "BatchGetItem"): _batch_get_nothing,
    ("dynamodb", "Query"): lambda _request: {"Items": [], "Count": 0, "ScannedCount": 0},
    ("sqs", "SendMessageBatch"): _send_message_batch,
    ("sqs", "SendMessage"): _send_message,
    ("sqs", "ChangeMessageVisibility"): _empty,
}


class ZeroLatencyAws:
    """Install on a boto3 session; every client made from it then talks to this stub."""

    def __init__(self, responders: dict[tuple[str, str], Responder] | None = None) -> None:
        self.responders = {**DEFAULT_RESPONDERS, **(responders or {})}
        self.calls = 0

    def install(self, session: Any) -> None:
        session.events.register_first("before-send", self._answer)

    def _answer(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        service, operation = event_name.split(".")[1:]
        self.calls += 1
        headers = HTTPHeaders()
        headers["x-amzn-RequestId"] = str(uuid.uuid4())
        if service == "lambda":  # Invoke with InvocationType=Event: 202, no body
            return AWSResponse(request.url, 202, headers, _Body(b""))
        responder = self.responders.get((service, operation))
        if responder is None:
            raise NotImplementedError(f"the zero-latency stub has no answer for {event_name}")
        body = json.loads(request.body or b"{}")
        headers["Content-Type"] = "application/x-amz-json-1.0"
        return AWSResponse(request.url, 200, headers, _Body(json.dumps(responder(body)).encode()))
