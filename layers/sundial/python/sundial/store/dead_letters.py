"""The dead-letter index in the job table: one item per message that reached a queue's DLQ.

Index item: pk "dead#<queue>", sk "<dead at, epoch ms, 13 digits>#<job id or message id>".
The sort key is the same each time the same death is indexed (a DLQ message delivered twice),
so indexing is idempotent."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sundial.store.table import Item, TableAdapter

if TYPE_CHECKING:
    pass


DEAD_PREFIX = "dead#"


MAX_PAGE = 100


@dataclass(frozen=True, slots=True)
class DeadLetter:
    queue: str
    dead_at_ms: int
    ref: str  # the job id, or the SQS message id of a body that is not an envelope
    job_id: str | None
    attempt: int | None
    error_type: str
    message: str
    body: str  # the envelope as it reached the DLQ (truncated)

    @property
    def sk(self) -> str:
        return f"{self.dead_at_ms:013d}#{self.ref}"


def dead_pk(queue: str) -> str:
    return f"{DEAD_PREFIX}{queue}"


def time_sk(epoch_ms: int) -> str:
    """The lowest sort key at `epoch_ms`: every letter that died at or after it sorts above."""
    return f"{max(epoch_ms, 0):013d}"


class DeadLetterStore(TableAdapter):
    """The index items in the job table."""

    def put(self, letter: DeadLetter, *, expires_at_s: int) -> None:
        item: Item = {
            "pk": {"S": dead_pk(letter.queue)},
            "sk": {"S": letter.sk},
            "ref": {"S": letter.ref},
            "error_type": {"S": letter.error_type},
            "message": {"S": letter.message},
            "body": {"S": letter.body},
            "expires_at": {"N": str(expires_at_s)},
        }
        if letter.job_id is not None:
            item["job_id"] = {"S": letter.job_id}
        if letter.attempt is not None:
            item["attempt"] = {"N": str(letter.attempt)}
        self._db.put_item(TableName=self._table, Item=item)

    def page(
        self,
        queue: str,
        *,
        from_sk: str,
        to_sk: str,
        error_type: str | None,
        limit: int,
        after_sk: str | None = None,
    ) -> tuple[list[DeadLetter], str | None]:
        """Up to `limit` letters with from_sk <= sk < to_sk, oldest first, and the sort key to
        continue after (None at the end). A filter by error type still reads the skipped
        items, so a page may come back short before the end."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": {"S": dead_pk(queue)},
                ":from": {"S": from_sk},
                ":to": {"S": to_sk},
            },
            "Limit": limit,
        }
        if error_type is not None:
            request["FilterExpression"] = "error_type = :error_type"
            request["ExpressionAttributeValues"][":error_type"] = {"S": error_type}
        if after_sk is not None:
            request["ExclusiveStartKey"] = {"pk": {"S": dead_pk(queue)}, "sk": {"S": after_sk}}
        response = self._db.query(**request)
        letters = [_letter(queue, item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return letters, (last["sk"]["S"] if last else None)

    def count(self, queue: str, *, cap: int) -> tuple[int, bool]:
        """How many letters the queue has, counting at most `cap`, and whether more remain: a
        COUNT query still reads (and is charged for) the items it counts, so a huge index is
        not read whole. A page stops at 1 MB, so large letters take several pages."""
        counted, after = 0, None
        while counted < cap:
            request: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": dead_pk(queue)}},
                "Select": "COUNT",
                "Limit": cap - counted,
            }
            if after is not None:
                request["ExclusiveStartKey"] = after
            response = self._db.query(**request)
            counted += int(response.get("Count", 0))
            after = response.get("LastEvaluatedKey")
            if after is None:
                return counted, False
        return counted, True

    def scan_range(
        self, queue: str, *, from_sk: str, to_sk: str, error_type: str | None
    ) -> Iterator[DeadLetter]:
        after: str | None = None
        while True:
            letters, after = self.page(
                queue,
                from_sk=from_sk,
                to_sk=to_sk,
                error_type=error_type,
                limit=MAX_PAGE,
                after_sk=after,
            )
            yield from letters
            if after is None:
                return

    def delete(self, letter: DeadLetter) -> None:
        self._db.delete_item(
            TableName=self._table,
            Key={"pk": {"S": dead_pk(letter.queue)}, "sk": {"S": letter.sk}},
        )


def _letter(queue: str, item: Item) -> DeadLetter:
    sk = item["sk"]["S"]
    return DeadLetter(
        queue=queue,
        dead_at_ms=int(sk.partition("#")[0]),
        ref=item["ref"]["S"],
        job_id=item["job_id"]["S"] if "job_id" in item else None,
        attempt=int(item["attempt"]["N"]) if "attempt" in item else None,
        error_type=item["error_type"]["S"],
        message=item["message"]["S"],
        body=item["body"]["S"],
    )
