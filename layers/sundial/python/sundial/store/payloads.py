"""The payload bucket: puts, tags, gets, presigns and deletes payloads stored in S3
(sundial.model.payloads).

A put comes before the DynamoDB write of the job that references it, tagged unreferenced; the
tag turns referenced after that write ("A PAYLOAD IN S3" below); a get checks the
object's bytes against the reference's sha256.

A PAYLOAD IN S3 (sundial.model.payloads, sundial.store.payloads). A submit (POST /jobs, batch, an
idempotent repeat that writes the job again) and a move with a new payload (PATCH /jobs/{id})
whose payload goes to S3 write the object FIRST, under its job's own key
(payloads/<queue>/<job ULID>/<sha256>), tagged unreferenced; then the job's DynamoDB write(s)
exactly as before, carrying the reference; then the tag turns referenced (a move also tags the
payload it replaced unreferenced). The bucket's lifecycle expires only unreferenced objects,
UNREFERENCED_DAYS after their write; the object of a live job is never expired, whatever its
age (a pause has no limit). Interleavings:
- A crash between the put and the job's write leaves an unreferenced object no job references
  (an idempotent repeat stores nothing: it finds the first request's record first). The
  reverse order could leave a job whose payload never arrives; this one cannot.
- A crash between the job's write and the tag leaves a job whose object is still tagged
  unreferenced: the history Lambda, reading the job's insert from the table's stream, tags it
  referenced (sundial.services.job_retention.written), within the stream's retention and
  long before UNREFERENCED_DAYS. A move's crash before tagging the replaced object keeps it
  (a leak, never a loss).
- Every other sequence (sweeps and their claims, direct sends, pauses, cancels, moves of the
  time, the attempt's writes, retries and timers, dead-letter replays, catch-ups) reads and
  writes the job item only and copies the reference as it is; none writes or deletes an
  object. An object belongs to one job, so nothing another job does can change or take it.
- The object goes when its job's item expires (DynamoDB's TTL, a retention after the job
  ended): the history Lambda reads the removal and deletes it (sundial.services.job_retention);
  a retry timer's removal takes nothing (it references its job's object). Objects of the older,
  content-addressed form (payloads/<queue>/<sha256>, possibly shared) are never deleted.
- The consumer (or a worker, through the lease's presigned URL) reads the object the job ITEM
  references, after the fence and before the function; a missing or altered object fails the
  attempt without a retry (the job goes dead, its envelope to the DLQ), an S3 outage fails the
  delivery (SQS redelivers).
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
