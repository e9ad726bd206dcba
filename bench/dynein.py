"""A Dynein-style scheduler, as Airbnb describes it (seeds: "Dynein: Building an Open-source
Distributed Delayed Job Queueing System"), for the cost baseline. It is a model of that design
built on the same AWS calls, not Airbnb's code:

- schedule: one PutItem of the job under (random shard, due time # UUID), status "scheduled";
- each scheduler tick, per shard: Query the jobs that are overdue, then per job
  - acquire: a conditional UpdateItem "scheduled" -> "acquired" (optimistic locking),
  - dispatch: one SendMessage of the job to its SQS queue,
  - delete: DeleteItem of the job.

So a job costs 3 write units (put, acquire, delete), a share of a Query, and one SendMessage,
and nothing records what became of it after dispatch. Left out, each in Dynein's favour: the
inbound SQS buffer queue in front of the scheduler (a send, a receive and a delete more per
job), and the scheduler's own polling of every shard every tick.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from typing import Any

from sundial.clock import to_rfc3339

SCHEDULED, ACQUIRED = "scheduled", "acquired"


@dataclass(frozen=True)
class DyneinJob:
    shard: int
    sort_key: str
    queue: str


class DyneinScheduler:
    def __init__(
        self,
        *,
        dynamodb: Any,
        sqs: Any,
        table: str,
        queue_urls: dict[str, str],
        shard_count: int,
        rng: random.Random,
    ) -> None:
        self._db, self._sqs = dynamodb, sqs
        self._table = table
        self._urls = queue_urls
        self._shards = shard_count
        self._rng = rng

    def schedule(self, *, queue: str, payload: Any, due_ms: int, now_ms: int) -> DyneinJob:
        job = DyneinJob(
            shard=self._rng.randrange(self._shards),
            sort_key=f"{due_ms:013d}#{uuid.UUID(int=self._rng.getrandbits(128))}",
            queue=queue,
        )
        self._db.put_item(
            TableName=self._table,
            Item={
                "pk": {"S": f"shard#{job.shard}"},
                "sk": {"S": job.sort_key},
                "status": {"S": SCHEDULED},
                "queue": {"S": queue},
                "payload": {"S": json.dumps(payload, separators=(",", ":"))},
                "created_at": {"N": str(now_ms)},
            },
        )
        return job

    def tick(self, shard: int, *, now_ms: int) -> int:
        """Dispatch every overdue job of `shard`. Returns how many were sent."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk <= :now",
            "ExpressionAttributeValues": {
                ":pk": {"S": f"shard#{shard}"},
                ":now": {"S": f"{now_ms:013d}#~"},
            },
            "ConsistentRead": True,
        }
        sent = 0
        while True:
            page = self._db.query(**request)
            for item in page.get("Items", []):
                if item["status"]["S"] == SCHEDULED and self._acquire(item, now_ms):
                    self._dispatch(item)
                    sent += 1
            if "LastEvaluatedKey" not in page:
                return sent
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _acquire(self, item: dict[str, Any], now_ms: int) -> bool:
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET #s = :acquired, acquired_at = :now",
                ConditionExpression="#s = :scheduled",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":acquired": {"S": ACQUIRED},
                    ":scheduled": {"S": SCHEDULED},
                    ":now": {"N": str(now_ms)},
                },
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def _dispatch(self, item: dict[str, Any]) -> None:
        due_ms = int(item["sk"]["S"].partition("#")[0])
        body = (
            f'{{"id":"{item["pk"]["S"]}/{item["sk"]["S"]}","queue":"{item["queue"]["S"]}",'
            f'"run_at":"{to_rfc3339(due_ms)}","payload":{item["payload"]["S"]}}}'
        )
        self._sqs.send_message(QueueUrl=self._urls[item["queue"]["S"]], MessageBody=body)
        self._db.delete_item(TableName=self._table, Key={"pk": item["pk"], "sk": item["sk"]})
