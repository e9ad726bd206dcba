"""The SQS message body consumers read. This is a public contract: add fields, never rename."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from sundial.clock import to_rfc3339
from sundial.ids import DagKey
from sundial.model.job import DagLink, Job, Priority
from sundial.model.payloads import PayloadRef

ENVELOPE_VERSION = 1


class DagParent(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(description="The parent's job id: GET /jobs/{id} has its result")
    succeeded: bool = Field(
        default=True, description="False only under on_failure=continue: it died or was cancelled"
    )
    inlined: bool = Field(default=False, description="True when `result` holds its result")
    result: JsonValue = None


class DagContext(BaseModel):
    """Where a DAG node stands: present on the messages of DAG nodes only."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(description="The DAG id: GET /dags/{id}")
    name: str
    node: str = Field(description="This node's name in the DAG")
    parents: dict[str, DagParent] = Field(default_factory=dict)


class PayloadRefView(BaseModel):
    """Where a payload stored in S3 is (sundial.model.payloads)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    key: str = Field(description="The object's key in the stack's payload bucket")
    sha256: str = Field(description="Hex SHA-256 of the payload's compact UTF-8 JSON")
    bytes: int = Field(ge=0, description="The payload's size in bytes")

    def ref(self) -> PayloadRef:
        return PayloadRef(key=self.key, sha256=self.sha256, bytes=self.bytes)


class Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    v: int = Field(default=ENVELOPE_VERSION, description="Envelope format version")
    id: str = Field(description="Job id: pass it to GET /jobs/{id}")
    queue: str
    payload: JsonValue = Field(
        description="The job's payload. A payload stored in S3 travels as `payload_ref` (and "
        "null here); the consumer SDK and sundial.worker fetch it and put it here before the "
        "function sees the envelope"
    )
    payload_ref: PayloadRefView | None = Field(
        default=None,
        description="Present when the payload is stored in S3 (over the inline limit, or "
        "payload_storage s3): its key, sha256 and size",
    )
    run_at: str = Field(description="Due time, RFC 3339 UTC with milliseconds")
    attempt: int = Field(ge=1, description="1 for the first run, 2 for the first retry, ...")
    max_attempts: int = Field(ge=1)
    priority: Priority
    created_at: str
    dag: DagContext | None = None
    correlation_id: str | None = Field(
        default=None,
        description="The id of the API request that submitted the job (absent for schedule "
        "occurrences): search the logs for it to follow the job",
    )
    revision: int = Field(
        default=0,
        ge=0,
        description="How many times the job was changed (PATCH /jobs/{id}) before this message "
        "was sent; absent for 0. The consumer SDK skips a message of an older revision",
    )


def dag_context(dag: DagLink) -> dict[str, Any]:
    """The envelope's `dag` object for a node: its parents by job id, and their results when
    they were inlined on release."""
    key = DagKey.from_dag_id(dag.dag_id)
    results: dict[str, Any] = json.loads(dag.results_json) if dag.results_json else {}
    parents: dict[str, Any] = {}
    for name, index in dag.parents:
        parent: dict[str, Any] = {"id": key.node_key(index).job_id}
        parent["succeeded"] = index not in dag.failed_parents
        if name in results:
            parent |= {"inlined": True, "result": results[name]}
        parents[name] = parent
    return {"id": dag.dag_id, "name": dag.dag_name, "node": dag.node, "parents": parents}


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
            **({"dag": dag_context(job.dag)} if job.dag is not None else {}),
            **({"correlation_id": job.correlation_id} if job.correlation_id else {}),
            **({"revision": job.revision} if job.revision else {}),
            **({"payload_ref": job.payload_ref.as_json()} if job.payload_ref else {}),
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return f'{head[:-1]},"payload":{job.payload_json}}}'
