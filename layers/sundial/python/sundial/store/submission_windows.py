"""Submission windows: how many jobs a rate-limited queue has admitted in one second of the
clock, in the one table (see sundial.store for the layout).

Item kind: ("quota#<queue>#<lane>", "window#<epoch second>") with `submitted` (jobs admitted in that
second on that lane) and `expires_at` (DynamoDB TTL: a window is never read once its second has
passed, so it is left to expire a minute later). A window is taken with one conditional
UpdateItem, `ADD submitted :n` only if the lane still has room for all n: the counter never
passes its limit, and a refused take writes nothing. A request counted over several seconds
(`take_many`: a schedule's first occurrences, written at once) takes each of those windows the
same way, all in one TransactWriteItems: all or none. The policy around it (limits, lanes,
spreads, refusals) is sundial.services.admission's.
"""

from __future__ import annotations

from collections.abc import Mapping

from botocore.exceptions import ClientError

from sundial.store.table import Item, TableAdapter, num_attr, query_items, str_attr, transact

QUOTA_PREFIX = "quota#"
# How long a window's item outlives its second before DynamoDB's TTL may delete it.
WINDOW_TTL_S = 60
# DynamoDB's answers for a request over the item's (or the table's) throughput, after the SDK's
# own retries: a counter that hot is a full one.
_THROTTLED = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
}


def window_key(queue: str, lane: int, window_s: int) -> Item:
    # The sort key starts with a letter: only a job's sort key starts with a digit (its due time).
    # Epoch seconds have 10 digits until the year 2286, so the keys sort as the seconds do.
    return {"pk": str_attr(f"{QUOTA_PREFIX}{queue}#{lane}"), "sk": str_attr(f"window#{window_s}")}


def _take_update(key: Item, window_s: int, count: int, limit: int) -> Item:
    """`count` more on a window, only if it stays within `limit`."""
    return {
        "Key": key,
        "UpdateExpression": "ADD submitted :count SET expires_at = :expires",
        "ConditionExpression": "attribute_not_exists(submitted) OR submitted <= :room",
        "ExpressionAttributeValues": {
            ":count": num_attr(count),
            ":room": num_attr(limit - count),
            ":expires": num_attr(window_s + WINDOW_TTL_S),
        },
    }


class SubmissionWindows(TableAdapter):
    """The per-second submission counters of the rate-limited queues."""

    def take(self, *, queue: str, lane: int, window_s: int, count: int, limit: int) -> bool:
        """Count `count` jobs on the lane's window if it stays within `limit`. False, with
        nothing written, when the lane is full (or so hot that DynamoDB throttles it)."""
        try:
            written, _ = self._write_if(
                "update", **_take_update(window_key(queue, lane, window_s), window_s, count, limit)
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _THROTTLED:
                return False
            raise
        return written

    def take_many(self, *, queue: str, lane: int, takes: Mapping[int, int], limit: int) -> bool:
        """Count takes[window_s] jobs on each of those windows of the lane, each only if it
        stays within `limit`: all or none, in one TransactWriteItems (at most 100 windows).
        False, with nothing written, if a window lacked room, or a concurrent write to one of
        them (or DynamoDB's throttling) cancelled the transaction."""
        writes = [
            {
                "Update": {
                    "TableName": self._table,
                    **_take_update(window_key(queue, lane, window_s), window_s, count, limit),
                }
            }
            for window_s, count in sorted(takes.items())
        ]
        try:
            return not transact(self._db, writes)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code in _THROTTLED or code == "TransactionCanceledException":
                return False
            raise

    def counted(self, *, queue: str, lane: int, first_s: int, last_s: int) -> dict[int, int]:
        """{window second: jobs counted} for the lane's windows first_s..last_s that have any:
        one consistent Query of the lane's partition."""
        first, last = window_key(queue, lane, first_s), window_key(queue, lane, last_s)
        items = query_items(
            self._db,
            {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
                "ExpressionAttributeValues": {
                    ":pk": first["pk"],
                    ":first": first["sk"],
                    ":last": last["sk"],
                },
                "ConsistentRead": True,
            },
        )
        return {
            int(item["sk"]["S"].removeprefix("window#")): int(item["submitted"]["N"])
            for item in items
            if "submitted" in item
        }

    def give_back(self, *, queue: str, lane: int, window_s: int, count: int) -> None:
        """Uncount jobs taken on a window by a request that was then refused for another queue.
        Unconditional: the window item exists (it was just taken)."""
        self._db.update_item(
            TableName=self._table,
            Key=window_key(queue, lane, window_s),
            UpdateExpression="ADD submitted :uncount",
            ExpressionAttributeValues={":uncount": num_attr(-count)},
            ReturnConsumedCapacity="TOTAL",
        )

    def submitted(self, *, queue: str, lane: int, window_s: int) -> int:
        """The jobs counted on a lane's window (0 if none): for tests and operators."""
        item = self._get_item(window_key(queue, lane, window_s))
        return int(item["submitted"]["N"]) if item else 0
