"""The client's models are written by hand (importing the server's would load the server), so
they are held to openapi.json here: the same fields, the same required ones, the same enums."""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from sundial.client import models
from sundial.clock import to_rfc3339

OPENAPI = Path(__file__).resolve().parents[3] / "openapi.json"
SCHEMAS: dict[str, Any] = json.loads(OPENAPI.read_text())["components"]["schemas"]
MODELS = [
    value
    for value in vars(models).values()
    if isinstance(value, type)
    and issubclass(value, BaseModel)
    and value.__module__ == models.__name__
    and value is not models.ApiModel
]
ENUMS = {
    name: value
    for name, value in vars(models).items()
    if typing.get_origin(value) is typing.Literal
}


def test_every_response_schema_has_a_client_model() -> None:
    # Every schema a 2xx answer refers to (directly or nested) is modelled.
    document = json.loads(OPENAPI.read_text())
    answered = {
        ref.rsplit("/", 1)[1]
        for operations in document["paths"].values()
        for operation in operations.values()
        for code, response in operation["responses"].items()
        if code.startswith("2")
        for ref in [response["content"]["application/json"]["schema"]["$ref"]]
    }
    assert answered <= {model.__name__ for model in MODELS}


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_a_model_has_the_fields_of_its_schema(model: type[BaseModel]) -> None:
    schema = SCHEMAS[model.__name__]
    assert set(model.model_fields) == set(schema["properties"])
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required == set(schema.get("required", [])) - _defaulted_in_schema(schema)


def _defaulted_in_schema(schema: dict[str, Any]) -> set[str]:
    return {name for name, prop in schema["properties"].items() if "default" in prop}


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_an_enum_has_the_values_of_its_schema(name: str) -> None:
    assert list(typing.get_args(ENUMS[name])) == SCHEMAS[name]["enum"]


def test_times_are_parsed_and_unknown_fields_ignored() -> None:
    job = models.JobSummary.model_validate(
        {
            "id": "AQAU",
            "queue": "email",
            "status": "pending",
            "run_at": "2026-11-21T13:00:00.000Z",
            "priority": "normal",
            "created_at": "2026-11-21T12:00:00.000Z",
            "added_in_a_later_version": True,
        }
    )
    assert (job.run_at - job.created_at).total_seconds() == 3600
    assert job.run_at.utcoffset() is not None


@pytest.mark.parametrize("epoch_ms", [0, 1_795_348_800_730, 1_795_348_800_000, 4_102_444_799_999])
def test_the_client_writes_a_time_as_the_api_does(epoch_ms: int) -> None:
    # The CLI's one time format is the API's (the client imports no server code: held here)
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    assert models.format_rfc3339(moment) == to_rfc3339(epoch_ms)
    # whatever the datetime's own offset
    assert models.format_rfc3339(moment.astimezone(timezone(timedelta(hours=-5)))) == to_rfc3339(
        epoch_ms
    )
    # and a parsed answer is written back as it came
    job = models.JobSummary.model_validate(
        {
            "id": "AQAU",
            "queue": "email",
            "status": "pending",
            "run_at": to_rfc3339(epoch_ms),
            "priority": "normal",
            "created_at": to_rfc3339(epoch_ms),
        }
    )
    assert job.model_dump(mode="json")["run_at"] == to_rfc3339(epoch_ms)


def test_an_answer_and_each_of_its_parts_give_back_the_apis_json() -> None:
    queue = {
        "queue": "email",
        "paused": False,
        "paused_at": None,
        "catching_up": False,
        "messages": {"visible": 3, "in_flight": 0, "delayed": 1},
        "dead_letters": 0,
        "dead_letters_capped": False,
        "dead_letter_queue_messages": None,
        "added_in_a_later_version": "é",
    }
    body = json.dumps({"queues": [queue]}, indent=2, ensure_ascii=False).encode()
    answer = models.from_api(models.QueueList, body)
    # The whole answer: its body as it came; a part: its JSON, unknown fields kept
    assert answer.api_json() == body.decode()
    [item] = answer.queues
    assert json.loads(item.api_json()) == queue
    assert item.messages.api_json() == '{"visible":3,"in_flight":0,"delayed":1}'
    # A model the client built itself gives its own JSON
    built = models.PurgeResult(purged=2, more=False)
    assert built.api_json() == '{"purged":2,"more":false}'
