"""Prints the OpenAPI document generated from the routes: `python -m sundial.api.openapi`."""

from __future__ import annotations

import json
from typing import Any

from sundial.api.app import API_TITLE, API_VERSION, build_resolver
from sundial.api.control import job_control_router, queues_router
from sundial.api.dags import dags_router
from sundial.api.dead_letter_routes import dead_letters_router
from sundial.api.routes import jobs_router, submit_router
from sundial.api.schedules import schedules_router
from sundial.api.worker_routes import workers_router


def openapi_json() -> str:
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
    return json.dumps(document, indent=2) + "\n"


if __name__ == "__main__":
    print(openapi_json(), end="")
