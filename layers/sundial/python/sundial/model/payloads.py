"""Large payloads (issue 17, item 5): a payload over the inline limit, or any payload its
submitter asks to store so, lives in the stack's payload bucket, and the job item and every
message carry a small reference to it instead (`PayloadRef`).

The object's key is content-addressed, `payloads/<queue>/<sha256 of the compact JSON>`: an
idempotent repeat of a submit writes the same object, two jobs with one payload share it, and
a reader checks what it fetched against the hash. Sundial never deletes a payload object: the
bucket's lifecycle expires it (stacks/payload_bucket.py), long after any job that can still
run with it, so no interleaving of writes can take an object from a live job.

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


def payload_key(queue: str, sha256: str) -> str:
    return f"{PAYLOAD_PREFIX}/{queue}/{sha256}"


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
    def of(cls, queue: str, payload_json: str) -> PayloadRef:
        sha256 = payload_sha256(payload_json)
        return cls(payload_key(queue, sha256), sha256, len(payload_json.encode()))

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
