"""Prints the OpenAPI document generated from the routes: `python -m sundial.api.openapi`.

Powertools generates the document from the routes and pydantic models; this module then states
the constraints the models check in code but JSON Schema can carry too, so a client (or a
fuzzer) reading the document knows what is accepted: id patterns and lengths, the configured
queue names, RFC 3339 `date-time` formats, IANA zone names, "exactly one of run_at or
delay_seconds", and the IAM (SigV4) security scheme. Constraints that depend on the clock or
on other data (a run_at at most 366 days ahead, a cron expression croniter accepts, a DAG's
references to its own nodes) are in the descriptions.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from sundial.api.app import API_TITLE, API_VERSION, build_resolver
from sundial.api.authorization import ROUTE_RULES
from sundial.api.control import job_control_router, queues_router
from sundial.api.dags import dags_router
from sundial.api.dead_letter_routes import dead_letters_router
from sundial.api.routes import jobs_router, submit_router
from sundial.api.schedules import schedules_router
from sundial.api.worker_routes import workers_router
from sundial.ids import DAG_ID_PATTERN, DAG_TOKEN_LENGTH, JOB_ID_PATTERN, TOKEN_LENGTH
from sundial.model.schedule import SCHEDULE_ID_LENGTH, SCHEDULE_ID_PATTERN

# Custom `format` names (OpenAPI allows any): what a value is, beyond its pattern.
JOB_ID_FORMAT = "sundial-job-id"
DAG_ID_FORMAT = "sundial-dag-id"
LEASE_FORMAT = "sundial-lease"
CRON_FORMAT = "cron"
RATE_FORMAT = "sundial-rate"
CURSOR_FORMAT = "sundial-cursor"

SECURITY_SCHEME = "sigv4"
_ID_SCHEMAS: dict[str, dict[str, Any]] = {
    "job_id": {
        "pattern": JOB_ID_PATTERN,
        "minLength": TOKEN_LENGTH,
        "maxLength": TOKEN_LENGTH,
        "format": JOB_ID_FORMAT,
    },
    "dag_id": {
        "pattern": DAG_ID_PATTERN,
        "minLength": DAG_TOKEN_LENGTH,
        "maxLength": DAG_TOKEN_LENGTH,
        "format": DAG_ID_FORMAT,
    },
    "schedule_id": {
        "pattern": SCHEDULE_ID_PATTERN,
        "minLength": SCHEDULE_ID_LENGTH,
        "maxLength": SCHEDULE_ID_LENGTH,
    },
}
# Request fields and query parameters that hold an RFC 3339 time.
_TIMES = {"run_at", "start_at", "end_at", "since", "until", "older_than", "before", "from", "to"}
# The rate grammar sundial.model.recurrence parses, as written (one space, lower case).
_RATE_PATTERN = r"^[1-9][0-9]{0,8} (second|minute|hour|day)s?$"
# A lease token (or a page cursor) is base64url without padding, as Sundial returns it.
_LEASE_PATTERN = "^[A-Za-z0-9_-]+$"


def configured_queues(cdk_json: Path) -> list[str]:
    """The queue names in cdk.json's `sundial` context, as the stack creates them."""
    context = json.loads(cdk_json.read_text())["context"]["sundial"]
    return sorted(context["queues"])


def iana_zones() -> list[str]:
    """The zone names of the pinned tzdata package (the Lambda layer's too): a list that is
    the same on every machine, unlike the system's zone files."""
    return sorted(resources.files("tzdata").joinpath("zones").read_text().split())


def _nullable_to_plain(schema: dict[str, Any]) -> dict[str, Any]:
    """{"anyOf": [X, {"type": "null"}], ...} -> X with the rest of the keys: an omitted field
    is the way to leave it out (null is accepted too, but never needed)."""
    branches = [b for b in schema.get("anyOf", []) if b != {"type": "null"}]
    if len(branches) != 1:
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**branches[0], **rest}


def _string_schemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The string branches of a property's schema (itself, or its anyOf members)."""
    if schema.get("type") == "string":
        yield schema
    for branch in schema.get("anyOf", []):
        if branch.get("type") == "string":
            yield branch


def _constrain_request_models(schemas: dict[str, Any], queues: Sequence[str]) -> None:
    for name in (
        "SubmitJob",
        "CreateSchedule",
        "DagNode",
        "SubmitDag",
        "ReplayRequest",
        "ChangeJob",
    ):
        properties = schemas[name]["properties"]
        for field, schema in properties.items():
            if field in _TIMES:
                for string in _string_schemas(schema):
                    string["format"] = "date-time"
            if field == "queue":
                schema["enum"] = list(queues)
                schema.pop("minLength", None)
                schema.pop("maxLength", None)
    # Exactly one of run_at or delay_seconds (the model's check, in JSON Schema).
    submit = schemas["SubmitJob"]
    for field in ("run_at", "delay_seconds"):
        submit["properties"][field] = _nullable_to_plain(submit["properties"][field])
    submit["oneOf"] = [{"required": ["run_at"]}, {"required": ["delay_seconds"]}]
    # A change: at least one field, at most one of run_at or delay_seconds, no null but the
    # payload's (null is a payload), and payload_storage only with a payload.
    change = schemas["ChangeJob"]
    for field in ("run_at", "delay_seconds", "priority", "max_attempts"):
        change["properties"][field] = _nullable_to_plain(change["properties"][field])
    change["not"] = {"required": ["run_at", "delay_seconds"]}
    change["minProperties"] = 1
    # payload_storage says where a new payload goes: only with a payload.
    change["dependentRequired"] = {"payload_storage": ["payload"]}
    # A DAG: at most one of them; node names are the only keys.
    dag = schemas["SubmitDag"]
    dag["not"] = {"required": ["run_at", "delay_seconds"]}
    dag["properties"]["nodes"]["additionalProperties"] = False
    dag["properties"]["nodes"]["description"] += (
        "; every depends_on names another node of this DAG, and there is no cycle"
    )
    # A schedule: exactly one of cron or rate; a known zone; the rate grammar.
    schedule = schemas["CreateSchedule"]
    for field in ("cron", "rate"):
        schedule["properties"][field] = _nullable_to_plain(schedule["properties"][field])
    schedule["oneOf"] = [{"required": ["cron"]}, {"required": ["rate"]}]
    schedule["properties"]["cron"]["format"] = CRON_FORMAT
    schedule["properties"]["rate"] |= {"pattern": _RATE_PATTERN, "format": RATE_FORMAT}
    schedule["properties"]["timezone"]["enum"] = iana_zones()
    schedule["properties"]["timezone"].pop("maxLength", None)
    # A schedule's update: at least one field, at most one of cron or rate, null only where the
    # model takes it (payload, max_attempts, retry, name), and each field as a create checks it.
    update = schemas["UpdateSchedule"]
    for field in ("cron", "rate", "timezone", "priority"):
        update["properties"][field] = _nullable_to_plain(update["properties"][field])
    update["not"] = {"required": ["cron", "rate"]}
    update["minProperties"] = 1
    update["properties"]["cron"]["format"] = CRON_FORMAT
    update["properties"]["rate"] |= {"pattern": _RATE_PATTERN, "format": RATE_FORMAT}
    update["properties"]["timezone"]["enum"] = iana_zones()
    update["properties"]["timezone"].pop("maxLength", None)
    for name in ("HeartbeatRequest", "AckRequest", "NackRequest"):
        lease = schemas[name]["properties"]["lease"]
        lease |= {"pattern": _LEASE_PATTERN, "format": LEASE_FORMAT}
        lease["description"] = "The lease token /lease returned for this job's attempt"


def _constrain_parameters(document: dict[str, Any], queues: Sequence[str]) -> None:
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter["schema"]
                name = parameter["name"]
                if name in _ID_SCHEMAS:
                    schema.pop("maxLength", None)
                    schema.update(_ID_SCHEMAS[name])
                elif name == "queue":  # a path parameter, or a listing's query parameter
                    schema.pop("maxLength", None)
                    schema["enum"] = list(queues)
                elif name == "cursor":
                    for string in _string_schemas(schema):
                        string |= {"pattern": _LEASE_PATTERN, "format": CURSOR_FORMAT}
                elif name in _TIMES:
                    for string in _string_schemas(schema):
                        string["format"] = "date-time"


def _secure(document: dict[str, Any]) -> None:
    """In AWS every route needs IAM auth: a SigV4-signed request (API Gateway's awsSigv4)."""
    document["components"]["securitySchemes"] = {
        SECURITY_SCHEME: {
            "type": "apiKey",
            "name": "Authorization",
            "in": "header",
            "description": "AWS Signature Version 4 (IAM auth): sign each request with "
            "credentials allowed execute-api:Invoke on the API",
            "x-amazon-apigateway-authtype": "awsSigv4",
        }
    }
    document["security"] = [{SECURITY_SCHEME: []}]


def _document_permissions(document: dict[str, Any]) -> None:
    """Each operation's permission (sundial.api.authorization) and its 403."""
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            rule = ROUTE_RULES[(method.upper(), path)]
            permission = rule.permission
            operation["x-sundial-permission"] = permission.value
            hidden = (
                " (a caller with no permission at all on the item's queue gets a 404, as for an"
                " unknown id)"
                if rule.unknown is not None
                else ""
            )
            operation["responses"]["403"] = {
                "description": f"The caller lacks '{permission}' on a queue the request "
                f"touches (named in the message){hidden}, or the request carries no IAM "
                "identity; nothing was changed",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                },
            }


def openapi_json(queues: Sequence[str]) -> str:
    resolver = build_resolver(
        submit_router,
        jobs_router,
        dead_letters_router,
        workers_router,
        dags_router,
        job_control_router,
        schedules_router,
        queues_router,
    )
    document: dict[str, Any] = json.loads(
        resolver.get_openapi_json_schema(
            title=API_TITLE,
            version=API_VERSION,
            summary="Serverless delayed-job scheduler and job queue",
            description="Submit jobs to run at a time or after a delay, or on a recurring "
            "schedule; they are handed to your SQS queue at their due second. In AWS every "
            "route needs IAM (SigV4) auth.",
        )
    )
    # Powertools documents its own 422 for validation errors; Sundial answers those with 400.
    for operations in document["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
    for schema in ("HTTPValidationError", "ValidationError"):
        document["components"]["schemas"].pop(schema, None)
    _constrain_request_models(document["components"]["schemas"], queues)
    _constrain_parameters(document, queues)
    _secure(document)
    _document_permissions(document)
    return json.dumps(document, indent=2) + "\n"


if __name__ == "__main__":
    # The queue names come from the app's cdk.json (the first argument, default ./cdk.json).
    cdk_json = Path(sys.argv[1] if len(sys.argv) > 1 else "cdk.json")
    print(openapi_json(configured_queues(cdk_json)), end="")
