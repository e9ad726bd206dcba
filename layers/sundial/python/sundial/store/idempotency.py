"""Idempotency keys: ("idem#<sha256(queue, key)>", "idem") -> the job the key created."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sundial.errors import Unavailable

if TYPE_CHECKING:
    pass
from sundial.store.table import TableAdapter, is_condition_failure, num_attr, str_attr

IDEM_SK = "idem"


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    job_id: str
    fingerprint: str
    created_at_ms: int


def idempotency_pk(queue: str, key: str) -> str:
    digest = hashlib.sha256(f"{queue}\n{key}".encode()).hexdigest()
    return f"idem#{digest}"


class IdempotencyKeys(TableAdapter):
    """The key -> job records of `Idempotency-Key` submissions."""

    def remember(
        self, *, queue: str, key: str, record: IdempotencyRecord
    ) -> IdempotencyRecord | None:
        """Store the key -> job mapping unless the key is taken. Returns the existing record if
        it was taken (it costs no extra read: the failed condition returns it).

        The record has no expiry of its own: it lives exactly as long as its job, which a move,
        a pause or weeks of retries can make any time; it is deleted when the job's item
        expires (forget). A record whose request died before writing its job stays until a
        repeat of that request writes the job (about 200 bytes)."""
        written, old = self._write_if(
            "put",
            Item={
                "pk": str_attr(idempotency_pk(queue, key)),
                "sk": str_attr(IDEM_SK),
                "job_id": str_attr(record.job_id),
                "fingerprint": str_attr(record.fingerprint),
                "created_at": num_attr(record.created_at_ms),
            },
            ConditionExpression="attribute_not_exists(pk)",
        )
        if written:
            return None
        if not old:
            raise Unavailable("idempotency record changed concurrently; retry")
        return IdempotencyRecord(
            job_id=old["job_id"]["S"],
            fingerprint=old["fingerprint"]["S"],
            created_at_ms=int(old["created_at"]["N"]),
        )

    def forget(self, *, queue: str, key: str, job_id: str) -> bool:
        """Delete the key's record if it still names `job_id` (the job's item has expired). A
        record that names another job stays. Repeating it is harmless."""
        try:
            self._db.delete_item(
                TableName=self._table,
                Key={"pk": str_attr(idempotency_pk(queue, key)), "sk": str_attr(IDEM_SK)},
                ConditionExpression="job_id = :job",
                ExpressionAttributeValues={":job": str_attr(job_id)},
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True
