"""An AWS throttle or outage that outlasts botocore's retries answers 503 with Retry-After;
any other AWS error is a defect and is not disguised."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from sundial.wiring import Dependencies
from tests.support import FakeLambdaContext, call_api, http_api_event, load_handler

submit_lambda = load_handler("submit")


def _failing(error: Exception) -> Any:
    def fail(*_: Any, **__: Any) -> Any:
        raise error

    return fail


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}}, "PutItem")


@pytest.mark.parametrize(
    "error",
    [
        _client_error("ProvisionedThroughputExceededException"),
        _client_error("ThrottlingException"),
        EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
    ],
)
def test_a_throttle_or_outage_is_a_503_to_retry(
    deps: Dependencies, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    # Given DynamoDB refuses every write, after botocore's own retries
    monkeypatch.setattr(deps.store, "put_new", _failing(error))
    # When a job is submitted
    body = {"queue": "email", "delay_seconds": 3600}
    event = http_api_event("POST", "/jobs", body=json.dumps(body))
    response = submit_lambda.handler(event, FakeLambdaContext())
    # Then the answer says to come back, not that Sundial broke
    assert response["statusCode"] == 503
    assert response["headers"]["Retry-After"] == "1"
    assert "safe to repeat" in response["body"]


def test_any_other_aws_error_is_not_disguised(
    deps: Dependencies, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deps.store, "put_new", _failing(_client_error("AccessDeniedException")))
    with pytest.raises(ClientError, match="AccessDenied"):
        call_api(submit_lambda, "POST", "/jobs", body={"queue": "email", "delay_seconds": 3600})
