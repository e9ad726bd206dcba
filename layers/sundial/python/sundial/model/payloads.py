"""Large payloads: a payload over the inline limit, or any payload its submitter asks to store
so, lives in the stack's payload bucket, and the job item and every message carry a small
reference to it instead (`PayloadRef`).

An object belongs to ONE job: its key is `payloads/<queue>/<the job's ULID>/<sha256 of the
compact JSON>` (a new payload given to the job by a change is a new object; a reader checks
what it fetched against the hash). So its life is its job's, however long that is (a pause has
no time limit): the bucket's lifecycle never expires an object a job references; it expires
only those still tagged unreferenced (REFERENCE_TAG), which a crash left without a job. The
writer tags an object referenced once its job is written, and the history Lambda does so again
from the table's stream (a backstop); Sundial deletes an object when its job's item expires
(sundial.services.job_retention). Objects stored before keys named their job
(`payloads/<queue>/<sha256>`, shared by jobs with one payload) are never deleted by Sundial.

Pure: no AWS here (sundial.store.payloads stores and fetches the objects).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sundial.quotas

# A payload up to this size (compact UTF-8 JSON) stays in the job item and the SQS message
# unless its submitter asks for S3; a larger one is stored in the payload bucket.
INLINE_PAYLOAD_BYTES = sundial.quotas.MAX_PAYLOAD_BYTES
# The largest payload the API takes (stored in S3). What bounds it: Lambda's 6 MB limit on a
# synchronous invocation's request, which holds the API Gateway event with the request body as
# one JSON-escaped string, plus the event's own fields; 5 MiB of payload leaves ~1 MiB for the
# rest of the body and the escaping of a typical JSON document. (API Gateway's own limit, 10 MB,
# is never the one reached.) docs/api.md, "Large payloads".
MAX_STORED_PAYLOAD_BYTES = sundial.quotas.MAX_STORED_PAYLOAD_BYTES
PAYLOAD_PREFIX = "payloads"


class PayloadStorage(StrEnum):
    """Where a job's payload is kept, as its submitter asks (`payload_storage`)."""

    AUTO = "auto"  # in the job item up to INLINE_PAYLOAD_BYTES, in S3 beyond
    S3 = "s3"  # in S3 whatever its size


def payload_sha256(payload_json: str) -> str:
    return hashlib.sha256(payload_json.encode()).hexdigest()


# The object tag the bucket's lifecycle reads: an object tagged unreferenced (as every object is
# put) expires after UNREFERENCED_DAYS unless its job's writer (or the history Lambda) tagged it
# referenced first.
REFERENCE_TAG = "sundial-payload"
UNREFERENCED, REFERENCED = "unreferenced", "referenced"
# How long an object no job was written for is kept: longer than the history Lambda's stream
# backstop can lag (the stream keeps records 24 hours) with room to repair an outage.
UNREFERENCED_DAYS = 7


def payload_key(queue: str, job_ulid: str, sha256: str) -> str:
    return f"{PAYLOAD_PREFIX}/{queue}/{job_ulid}/{sha256}"


def owned_by_one_job(key: str) -> bool:
    """Whether an object's key names its job (this version's keys), so deleting it when that
    job expires takes it from no other job. A key of the older, content-addressed form may be
    shared by several jobs: never deleted."""
    parts = key.split("/")
    return len(parts) == 4 and parts[0] == PAYLOAD_PREFIX


def queue_prefix(queue: str) -> str:
    """The key prefix of one queue's payloads: a consumer may read only its own queue's."""
    return f"{PAYLOAD_PREFIX}/{queue}/"


def offloaded(payload_json: str, storage: PayloadStorage) -> bool:
    """Whether a payload goes to S3: asked for, or over the inline limit."""
    return storage is PayloadStorage.S3 or len(payload_json.encode()) > INLINE_PAYLOAD_BYTES


@dataclass(frozen=True, slots=True)
class PayloadRef:
    """Where a job's payload is: the object's key, the sha256 of its bytes (the compact JSON
    the client sent) and their count."""

    key: str
    sha256: str
    bytes: int

    @classmethod
    def of(cls, queue: str, job_ulid: str, payload_json: str) -> PayloadRef:
        """The reference of `payload_json` stored for the job with ULID `job_ulid`."""
        sha256 = payload_sha256(payload_json)
        return cls(payload_key(queue, job_ulid, sha256), sha256, len(payload_json.encode()))

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "sha256": self.sha256, "bytes": self.bytes}


class PayloadUnavailable(Exception):
    """A job's stored payload is gone (the bucket's lifecycle expired it) or is not the one
    the job references (its hash differs). Permanent: no retry brings it back, so the attempt
    fails without a retry and the job goes to its dead-letter queue."""


def check_payload(ref: PayloadRef, body: bytes) -> str:
    """`body` as JSON text if it is the referenced payload, else PayloadUnavailable."""
    if len(body) != ref.bytes or hashlib.sha256(body).hexdigest() != ref.sha256:
        raise PayloadUnavailable(
            f"payload object {ref.key} does not match its reference (sha256 {ref.sha256}, "
            f"{ref.bytes} bytes): refusing to run the job with it"
        )
    return body.decode()
