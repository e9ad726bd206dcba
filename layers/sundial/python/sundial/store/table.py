"""The table helpers every store shares: the attribute codec, conditional writes, queries
across pages, transactions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from sundial.errors import Unavailable
from sundial.ids import JobKey

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

Item = dict[str, Any]


def str_attr(value: str) -> dict[str, str]:
    return {"S": value}


def num_attr(value: int) -> dict[str, str]:
    return {"N": str(value)}


def opt_int(item: Item, name: str) -> int | None:
    return int(item[name]["N"]) if name in item else None


# How often a batch call is repeated for what DynamoDB left unprocessed.
BATCH_ATTEMPTS = 5
# Keys per BatchGetItem (DynamoDB's limit).
BATCH_GET = 100


def key_item(key: JobKey) -> Item:
    return {"pk": str_attr(key.pk), "sk": str_attr(key.sk)}


def is_condition_failure(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def query_items(db: DynamoDBClient, request: dict[str, Any]) -> Iterator[Item]:
    """Every item a Query returns, page after page (a page holds at most 1 MB)."""
    for page in db.get_paginator("query").paginate(**request):
        yield from page.get("Items", [])


def write_if(
    db: DynamoDBClient, table: str, operation: str, **request: Any
) -> tuple[bool, Item | None]:
    """A conditional PutItem or UpdateItem. Returns (written, the item as it was if not):
    a failed condition hands back the old item at no extra cost (ALL_OLD)."""
    call = db.put_item if operation == "put" else db.update_item
    try:
        response = call(
            TableName=table,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ReturnConsumedCapacity="TOTAL",
            **request,
        )
    except ClientError as error:
        if is_condition_failure(error):
            return False, cast("Item | None", dict(error.response).get("Item"))
        raise
    # With ReturnValues=ALL_NEW, hand back the item as written.
    return True, cast("Item | None", dict(response).get("Attributes"))


def transact(db: DynamoDBClient, writes: Sequence[Item]) -> list[int]:
    """TransactWriteItems: all of `writes` or none. Returns the indexes of the entries whose
    condition failed ([] when everything was written). Any other cancellation (a conflicting
    transaction, throttling) is raised: the caller's request fails and is retried whole."""
    try:
        db.transact_write_items(
            TransactItems=cast("Any", list(writes)), ReturnConsumedCapacity="TOTAL"
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            raise
        reasons = cast("list[Item]", dict(error.response).get("CancellationReasons", []))
        failed = [i for i, r in enumerate(reasons) if r.get("Code") == "ConditionalCheckFailed"]
        if not failed:
            raise
        return failed
    return []


class TableAdapter:
    """One table through one client: the base of every store in this package."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def _write_if(self, operation: str, **request: Any) -> tuple[bool, Item | None]:
        return write_if(self._db, self._table, operation, **request)

    def _get_item(self, key: Item) -> Item | None:
        """One item by its key, read consistently; None if there is none."""
        response = self._db.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        return cast("Item | None", dict(response).get("Item"))

    def _batch_get(
        self, keys: Sequence[Item], *, unread: str = "DynamoDB left reads unprocessed"
    ) -> list[Item]:
        """The items at `keys` that exist (consistent reads, BATCH_GET per request, repeated
        for what DynamoDB leaves unprocessed), in no order. Raises Unavailable(`unread`) if
        some are still unread after BATCH_ATTEMPTS."""
        found: list[Item] = []
        for start in range(0, len(keys), BATCH_GET):
            chunk = list(keys[start : start + BATCH_GET])
            request: dict[str, Any] = {self._table: {"Keys": chunk, "ConsistentRead": True}}
            for _ in range(BATCH_ATTEMPTS):
                response = self._db.batch_get_item(RequestItems=request)
                found += response.get("Responses", {}).get(self._table, [])
                request = dict(response.get("UnprocessedKeys", {}))
                if not request:
                    break
            else:
                raise Unavailable(unread)
        return found

    def _index_page(
        self, pk: str, *, id_attribute: str, limit: int, after_sk: str | None
    ) -> tuple[list[str], str | None]:
        """One page of an index partition (a queue's schedules or DAGs), in sort key order:
        up to `limit` ids (each item's `id_attribute`) and the sort key to go on after (None at
        the end). Eventually consistent: half the read units, and an item written a moment
        ago may show on the next call."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": str_attr(pk)},
            "Limit": limit,
        }
        if after_sk is not None:
            request["ExclusiveStartKey"] = {"pk": str_attr(pk), "sk": str_attr(after_sk)}
        response = self._db.query(**request)
        ids = [item[id_attribute]["S"] for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return ids, (last["sk"]["S"] if last else None)
