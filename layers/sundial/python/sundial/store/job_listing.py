"""Reading a queue's jobs of one status from the shards' due-time ranges (GET
/queues/{queue}/jobs): no index, so a plain job's writes stay as they are, and the read is
paid instead: a Query reads (and is charged for) every item of the shard's range, whatever its
queue or status; the filter only trims what comes back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sundial.ids import shard_pk
from sundial.model.job import Job, Status
from sundial.store.job_items import item_to_job
from sundial.store.table import TableAdapter, str_attr


@dataclass(frozen=True, slots=True)
class RangeRead:
    jobs: list[Job]  # the queue's jobs of the status, in due order
    scanned: int  # items read (and paid for), matching or not
    last_sk: str | None  # where the read stopped (inclusive); None: the range is read through


class JobRangeReader(TableAdapter):
    def read(
        self,
        shard: int,
        *,
        queue: str,
        status: Status,
        from_sk: str,
        to_sk: str,
        after_sk: str | None,
        limit: int,
    ) -> RangeRead:
        """One Query of `shard` with from_sk <= sk <= to_sk (after `after_sk` if given), reading
        at most `limit` items. Eventually consistent (half the read units): a listing. A moved
        job's pointer (status "moved") never matches a status, and the range holds job items
        only (the shard's cursor and sweep records sort outside every due time)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "FilterExpression": "#queue = :queue AND #status = :status",
            "ExpressionAttributeNames": {"#queue": "queue", "#status": "status"},
            "ExpressionAttributeValues": {
                ":pk": str_attr(shard_pk(shard)),
                ":from": str_attr(from_sk),
                ":to": str_attr(to_sk),
                ":queue": str_attr(queue),
                ":status": str_attr(str(status)),
            },
            "Limit": limit,
        }
        if after_sk is not None:
            request["ExclusiveStartKey"] = {
                "pk": str_attr(shard_pk(shard)),
                "sk": str_attr(after_sk),
            }
        response = self._db.query(**request)
        last = response.get("LastEvaluatedKey")
        return RangeRead(
            jobs=[item_to_job(item) for item in response.get("Items", [])],
            scanned=int(response.get("ScannedCount", 0)),
            last_sk=last["sk"]["S"] if last else None,
        )
