"""The payload bucket: puts, tags, gets, presigns and deletes payloads stored in S3
(sundial.model.payloads).

A put comes before the DynamoDB write of the job that references it, tagged unreferenced; the
tag turns referenced after that write (sundial.timing, "A PAYLOAD IN S3"); a get checks the
object's bytes against the reference's sha256.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from sundial.errors import TooLargeForQueue
from sundial.model.payloads import (
    INLINE_PAYLOAD_BYTES,
    REFERENCE_TAG,
    REFERENCED,
    UNREFERENCED,
    PayloadRef,
    PayloadStorage,
    PayloadUnavailable,
    check_payload,
    offloaded,
    owned_by_one_job,
)

# S3's answers for an object that is not there (GetObject: NoSuchKey; a role without
# s3:ListBucket on the bucket is told AccessDenied instead, which this role is).
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


class PayloadStore:
    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket

    def put(self, queue: str, job_ulid: str, payload_json: str) -> PayloadRef:
        """Store a payload for the job with ULID `job_ulid`, tagged unreferenced: the bucket's
        lifecycle removes it unless its job is written and it is tagged referenced
        (mark_referenced). Repeating it (an idempotent retry) writes the same object again."""
        ref = PayloadRef.of(queue, job_ulid, payload_json)
        self._s3.put_object(
            Bucket=self.bucket,
            Key=ref.key,
            Body=payload_json.encode(),
            ContentType="application/json",
            ChecksumAlgorithm="SHA256",  # S3 refuses a body damaged on the way
            Tagging=f"{REFERENCE_TAG}={UNREFERENCED}",
        )
        return ref

    def mark_referenced(self, ref: PayloadRef) -> None:
        """A job referencing the object is written: the lifecycle must never take it (it lives
        as long as its job; sundial.services.job_retention deletes it with the job)."""
        self._tag(ref, REFERENCED)

    def mark_unreferenced(self, ref: PayloadRef) -> None:
        """No job references the object any more (its job was given a new payload): the
        lifecycle removes it after UNREFERENCED_DAYS."""
        self._tag(ref, UNREFERENCED)

    def delete(self, ref: PayloadRef) -> None:
        """Remove an object its expired job owned alone (owned_by_one_job). Repeating it, or
        an object already gone, is harmless."""
        if owned_by_one_job(ref.key):
            self._s3.delete_object(Bucket=self.bucket, Key=ref.key)

    def _tag(self, ref: PayloadRef, value: str) -> None:
        if not owned_by_one_job(ref.key):
            return  # an older, shared object: nothing expires it by tag
        try:
            self._s3.put_object_tagging(
                Bucket=self.bucket,
                Key=ref.key,
                Tagging={"TagSet": [{"Key": REFERENCE_TAG, "Value": value}]},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in _MISSING:
                raise
            # Gone already: the job's run reports it (PayloadUnavailable), nothing to keep.

    def get(self, ref: PayloadRef) -> str:
        """The payload's JSON text, checked against the reference. PayloadUnavailable if the
        object is missing or not the referenced payload; other S3 errors are raised as they
        are (transient: the caller's delivery is retried)."""
        try:
            response = self._s3.get_object(Bucket=self.bucket, Key=ref.key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _MISSING:
                raise PayloadUnavailable(
                    f"payload object {ref.key} is missing (expired or never stored)"
                ) from None
            raise
        body: bytes = response["Body"].read()
        return check_payload(ref, body)

    def presigned_get(self, ref: PayloadRef, *, expires_s: int) -> str:
        """A URL any HTTP client may GET the object with for `expires_s` seconds (no AWS
        credentials): what a worker outside Lambda fetches a leased job's payload with."""
        url: str = self._s3.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": ref.key},
            ExpiresIn=max(1, expires_s),
        )
        return url


def store_payload(
    payloads: PayloadStore | None,
    queue: str,
    job_ulid: str,
    payload_json: str,
    storage: PayloadStorage,
    *,
    field: str,
    check_only: bool = False,
) -> PayloadRef | None:
    """Store a job's payload in S3 if it goes there (sundial.model.payloads.offloaded): its
    reference, or None for an inline one. 413 naming `field` if it must go to S3 and the
    deployment has no payload bucket (`payloads` None). `check_only`: that 413 alone (a
    request checks every payload before it writes anything)."""
    if not offloaded(payload_json, storage):
        return None
    if payloads is None:
        raise TooLargeForQueue(
            field,
            f"payload is {len(payload_json.encode())} bytes; without a payload bucket "
            f"(SUNDIAL_PAYLOAD_BUCKET) the limit is {INLINE_PAYLOAD_BYTES}",
            queue=queue,
        )
    return None if check_only else payloads.put(queue, job_ulid, payload_json)
