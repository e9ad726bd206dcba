"""The payload bucket: puts, gets and presigns payloads stored in S3 (sundial.model.payloads).

A put comes before the DynamoDB write of the job that references it (sundial.timing, "A
PAYLOAD IN S3"); a get checks the object's bytes against the reference's sha256.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from sundial.errors import TooLargeForQueue
from sundial.model.payloads import (
    INLINE_PAYLOAD_BYTES,
    PayloadRef,
    PayloadStorage,
    PayloadUnavailable,
    check_payload,
    offloaded,
)

# S3's answers for an object that is not there (GetObject: NoSuchKey; a role without
# s3:ListBucket on the bucket is told AccessDenied instead, which this role is).
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


class PayloadStore:
    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket

    def put(self, queue: str, payload_json: str) -> PayloadRef:
        """Store a payload under its content's key. Repeating it (an idempotent retry of a
        submit) writes the same object again, which also restarts its lifecycle clock."""
        ref = PayloadRef.of(queue, payload_json)
        self._s3.put_object(
            Bucket=self.bucket,
            Key=ref.key,
            Body=payload_json.encode(),
            ContentType="application/json",
            ChecksumAlgorithm="SHA256",  # S3 refuses a body damaged on the way
        )
        return ref

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

    def refresh(self, ref: PayloadRef) -> None:
        """Restart the object's lifecycle clock (S3 counts an object's age from its last
        write): a copy onto itself, server-side, for a job given a later time (a move, a retry
        timer) without its payload at hand. A missing object is left missing: the job's run
        then fails for good with the reason (PayloadUnavailable)."""
        try:
            self._s3.copy_object(
                Bucket=self.bucket,
                Key=ref.key,
                CopySource={"Bucket": self.bucket, "Key": ref.key},
                MetadataDirective="REPLACE",  # S3 refuses a copy onto itself that changes nothing
                ContentType="application/json",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in _MISSING:
                raise

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
    payload_json: str,
    storage: PayloadStorage,
    *,
    field: str,
) -> PayloadRef | None:
    """Store a job's payload in S3 if it goes there (sundial.model.payloads.offloaded): its
    reference, or None for an inline one. 413 naming `field` if it must go to S3 and the
    deployment has no payload bucket (`payloads` None)."""
    if not offloaded(payload_json, storage):
        return None
    if payloads is None:
        raise TooLargeForQueue(
            field,
            f"payload is {len(payload_json.encode())} bytes; without a payload bucket "
            f"(SUNDIAL_PAYLOAD_BUCKET) the limit is {INLINE_PAYLOAD_BYTES}",
            queue=queue,
        )
    return payloads.put(queue, payload_json)
