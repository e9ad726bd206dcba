"""Submission windows: how many jobs a rate-limited queue has admitted in one second of the
clock, in the one table (see sundial.store for the layout).

Item kind: ("quota#<queue>#<lane>", "window#<epoch second>") with `submitted` (jobs admitted in that
second on that lane) and `expires_at` (DynamoDB TTL: a window is never read once its second has
passed, so it is left to expire a minute later). A window is taken with one conditional
UpdateItem, `ADD submitted :n` only if the lane still has room for all n: the counter never
passes its limit, and a refused take writes nothing. The policy around it (limits, lanes,
refusals) is sundial.services.admission's.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from sundial.store.table import Item, TableAdapter, num_attr, str_attr

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
    return {"pk": str_attr(f"{QUOTA_PREFIX}{queue}#{lane}"), "sk": str_attr(f"window#{window_s}")}


class SubmissionWindows(TableAdapter):
    """The per-second submission counters of the rate-limited queues."""

    def take(self, *, queue: str, lane: int, window_s: int, count: int, limit: int) -> bool:
        """Count `count` jobs on the lane's window if it stays within `limit`. False, with
        nothing written, when the lane is full (or so hot that DynamoDB throttles it)."""
        try:
            written, _ = self._write_if(
                "update",
                Key=window_key(queue, lane, window_s),
                UpdateExpression="ADD submitted :count SET expires_at = :expires",
                ConditionExpression="attribute_not_exists(submitted) OR submitted <= :room",
                ExpressionAttributeValues={
                    ":count": num_attr(count),
                    ":room": num_attr(limit - count),
                    ":expires": num_attr(window_s + WINDOW_TTL_S),
                },
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _THROTTLED:
                return False
            raise
        return written

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
