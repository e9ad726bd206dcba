"""The SQS message body consumers read. This is a public contract: add fields, never rename."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from sundial.clock import to_rfc3339
from sundial.models import Job, Priority

ENVELOPE_VERSION = 1


class Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    v: int = Field(default=ENVELOPE_VERSION, description="Envelope format version")
    id: str = Field(description="Job id: pass it to GET /jobs/{id}")
    queue: str
    payload: JsonValue
    run_at: str = Field(description="Due time, RFC 3339 UTC with milliseconds")
    attempt: int = Field(ge=1, description="1 for the first run, 2 for the first retry, ...")
    max_attempts: int = Field(ge=1)
    priority: Priority
    created_at: str


def envelope_body(job: Job, *, attempt: int, run_at_ms: int | None = None) -> str:
    """Serialise the envelope for a job. The payload JSON is spliced in as the client sent it.
    `run_at_ms` is when this attempt is due (a retry's time); by default the job's due time."""
    head = json.dumps(
        {
            "v": ENVELOPE_VERSION,
            "id": job.envelope_id,
            "queue": job.queue,
            "run_at": to_rfc3339(job.due_ms if run_at_ms is None else run_at_ms),
            "attempt": attempt,
            "max_attempts": job.max_attempts,
            "priority": str(job.priority),
            "created_at": to_rfc3339(job.created_at_ms),
        },
        separators=(",", ":"),
    )
    return f'{head[:-1]},"payload":{job.payload_json}}}'
