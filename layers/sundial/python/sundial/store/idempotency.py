"""Idempotency keys: ("idem#<sha256(queue, key)>", "idem") -> the job the key created."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sundial.errors import Unavailable

if TYPE_CHECKING:
    pass
from sundial.store.table import TableAdapter, num_attr, str_attr

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
        self, *, queue: str, key: str, record: IdempotencyRecord, expires_at_s: int
    ) -> IdempotencyRecord | None:
        """Store the key -> job mapping unless the key is taken. Returns the existing record if
        it was taken (it costs no extra read: the failed condition returns it)."""
        written, old = self._write_if(
            "put",
            Item={
                "pk": str_attr(idempotency_pk(queue, key)),
                "sk": str_attr(IDEM_SK),
                "job_id": str_attr(record.job_id),
                "fingerprint": str_attr(record.fingerprint),
                "created_at": num_attr(record.created_at_ms),
                "expires_at": num_attr(expires_at_s),
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
