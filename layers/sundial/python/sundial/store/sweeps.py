"""What a sweep reads and records: a shard's due range, its cursor, its done markers, and the
highest shard count ever deployed.

- sweep cursor ("shard#<n>", "cursor"): sorts after every job key, so due-range queries
  never see it. It also keeps the shard's pacing state (`paced`: {queue: the next free send
  slot, ms}, `paced_by`: the sweep that wrote it; sundial.dispatch.fairness)
- sweep done:  ("shard#<n>", "done#<sweep token>"): that sweep sent all it claimed on the
  shard (written only when it left the cursor held behind jobs it sent)
- shard count: ("meta", "shards")"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sundial.errors import Unavailable
from sundial.ids import JobKey, shard_pk
from sundial.model.job import (
    Job,
    Keyed,
    Priority,
    Status,
)

if TYPE_CHECKING:
    pass
from sundial.store.job_items import item_to_job
from sundial.store.queue_states import QUEUES_PK
from sundial.store.table import (
    BATCH_ATTEMPTS,
    Item,
    TableAdapter,
    num_attr,
    opt_int,
    query_items,
    str_attr,
    transact,
)

CURSOR_SK = "cursor"


class QueueResumed(Exception):
    """A queue whose jobs a sweep passed over (paused) was resumed before the sweep moved its
    cursor: the cursor stays where it was (SweepStore.advance_cursor)."""


SWEEP_DONE_PREFIX = "done#"

META_PK, SHARDS_SK = "meta", "shards"


@dataclass(frozen=True, slots=True)
class DueRef(Keyed):
    """What a sweep needs to decide about a job, without its payload (dispatch.sweeper reads a
    whole due range first, to dispatch higher priorities first)."""

    key: JobKey
    queue: str
    priority: Priority
    status: Status
    direct: bool
    claim_token: str | None
    lease_until_ms: int | None
    retry_of: JobKey | None
    schedule_id: str | None
    chained: bool
    held: bool  # a root of a paused DAG (sundial.services.dags)
    origin: JobKey | None = None  # a moved job's: the key its id names (model.job.Keyed)


_DUE_REF_ATTRIBUTES = (
    "pk, sk, #queue, priority, #status, direct, claim_token, lease_until, retry_of,"
    " schedule_id, chained, held, origin"
)
# A moved job's pointer is not a job: due ranges leave it out (sundial.store.job_items).
_NOT_A_POINTER = "attribute_not_exists(moved_to)"


@dataclass(frozen=True, slots=True)
class ShardSweepState:
    """A shard's cursor item: its cursor (None: never swept) and its pacing state."""

    cursor: str | None = None
    paced: dict[str, int] = field(default_factory=dict)  # capped queue -> next free slot, ms


def _item_to_due_ref(item: Item) -> DueRef:
    return DueRef(
        key=JobKey.from_item_keys(item["pk"]["S"], item["sk"]["S"]),
        queue=item["queue"]["S"],
        priority=Priority(item["priority"]["S"]),
        status=Status(item["status"]["S"]),
        direct=item.get("direct", {}).get("BOOL", False),
        claim_token=item["claim_token"]["S"] if "claim_token" in item else None,
        lease_until_ms=opt_int(item, "lease_until"),
        retry_of=JobKey.from_job_id(item["retry_of"]["S"]) if "retry_of" in item else None,
        schedule_id=item["schedule_id"]["S"] if "schedule_id" in item else None,
        chained=item.get("chained", {}).get("BOOL", False),
        held=item.get("held", {}).get("BOOL", False),
        origin=JobKey.from_item_keys(item["pk"]["S"], item["origin"]["S"])
        if "origin" in item
        else None,
    )


@dataclass(frozen=True, slots=True)
class Malformed:
    """An item in a due range that is not a valid job (sundial.dispatch.sweeper marks it dead)."""

    key: JobKey | None  # None if even its keys cannot be read as a job's
    reason: str


def _job_key_or_none(item: Item) -> JobKey | None:
    try:
        return JobKey.from_item_keys(item["pk"]["S"], item["sk"]["S"])
    except (KeyError, ValueError, TypeError):
        return None


class SweepStore(TableAdapter):
    """The sweep's side of the table."""

    def _due_range(self, shard: int, from_sk: str, to_sk: str) -> dict[str, Any]:
        """The Query of one shard's keys from_sk..to_sk, in due order."""
        return {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": str_attr(shard_pk(shard)),
                ":from": str_attr(from_sk),
                ":to": str_attr(to_sk),
            },
            # A job written just before the sweep must not be missed.
            "ConsistentRead": True,
            "FilterExpression": _NOT_A_POINTER,
        }

    def query_due(self, shard: int, *, from_sk: str, to_sk: str) -> Iterator[Job]:
        """Jobs of one shard with from_sk <= sk <= to_sk, in due order, across pages."""
        for item in query_items(self._db, self._due_range(shard, from_sk, to_sk)):
            yield item_to_job(item)

    def query_due_refs(
        self, shard: int, *, from_sk: str, to_sk: str
    ) -> Iterator[DueRef | Malformed]:
        """As query_due, but only what a sweep decides on (no payload), so a whole backlog
        fits in a sweeper's memory."""
        request = self._due_range(shard, from_sk, to_sk) | {
            "ProjectionExpression": _DUE_REF_ATTRIBUTES,
            "ExpressionAttributeNames": {"#queue": "queue", "#status": "status"},
        }
        for item in query_items(self._db, request):
            try:
                yield _item_to_due_ref(item)
            except (KeyError, ValueError, TypeError) as error:
                # One bad item must not stop the sweep of its shard: hand it over as such.
                yield Malformed(_job_key_or_none(item), f"malformed job item: {error!r}")

    def read_cursors(self, shards: Sequence[int]) -> dict[int, str]:
        """The sweep cursor of each shard that has one: the lowest sort key still to look at."""
        return {
            shard: state.cursor
            for shard, state in self.read_sweep_states(shards).items()
            if state.cursor is not None
        }

    def read_sweep_states(self, shards: Sequence[int]) -> dict[int, ShardSweepState]:
        """The cursor item of each shard that has one: its cursor and its pacing state."""
        states: dict[int, ShardSweepState] = {}
        for start in range(0, len(shards), 100):
            keys: list[Any] = [
                {"pk": str_attr(shard_pk(s)), "sk": str_attr(CURSOR_SK)}
                for s in shards[start : start + 100]
            ]
            request: dict[str, Any] = {
                self._table: {
                    "Keys": keys,
                    "ConsistentRead": True,
                    "ProjectionExpression": "pk, #c, paced",
                }
            }
            request[self._table]["ExpressionAttributeNames"] = {"#c": "cursor"}
            for _ in range(BATCH_ATTEMPTS):
                response = self._db.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    shard = int(item["pk"]["S"].removeprefix("shard#"))
                    paced = item.get("paced", {}).get("M", {})
                    states[shard] = ShardSweepState(
                        cursor=item["cursor"]["S"] if "cursor" in item else None,
                        paced={queue: int(value["N"]) for queue, value in paced.items()},
                    )
                request = dict(response.get("UnprocessedKeys", {}))
                if not request:
                    break
            else:
                raise Unavailable("DynamoDB left sweep cursors unread")
        return states

    def advance_cursor(
        self,
        shard: int,
        cursor: str,
        *,
        paced: Mapping[str, int] | None = None,
        token: str | None = None,
        while_paused: Collection[str] = (),
    ) -> bool:
        """Move a shard's cursor forward, never back: concurrent sweepers may race here.

        With `paced` (the shard's pacing state after sweep `token`), the same write stores it
        and the cursor may also stay where it is; it is refused, writing nothing, if a later
        sweep (tokens sort by time) has stored its own state, or the cursor has moved past
        `cursor` meanwhile. A refused write loses only pacing precision: not moving a cursor
        is always safe (THE CURSOR RULE, sundial.timing).

        `while_paused`: the queues whose pending jobs this sweep passed over (left to their
        resume's catch-up). The cursor then moves only while every one of them is still paused,
        in one transaction with a check of each; raises QueueResumed, writing nothing, if one
        was resumed meanwhile (a sweep that saw it running may have claimed such a job, and only
        a sweep below it can take that claim over: sundial.timing, THE CURSOR RULE)."""
        update: dict[str, Any] = {
            "Key": {"pk": str_attr(shard_pk(shard)), "sk": str_attr(CURSOR_SK)},
            "UpdateExpression": "SET #c = :c",
            "ConditionExpression": "attribute_not_exists(#c) OR #c < :c",
            "ExpressionAttributeNames": {"#c": "cursor"},
            "ExpressionAttributeValues": {":c": str_attr(cursor)},
        }
        if paced is not None:
            if token is None:
                raise ValueError("a pacing state needs the sweep's token")
            update["UpdateExpression"] = "SET #c = :c, paced = :p, paced_by = :t"
            update["ConditionExpression"] = (
                "(attribute_not_exists(#c) OR #c <= :c)"
                " AND (attribute_not_exists(paced_by) OR paced_by < :t)"
            )
            update["ExpressionAttributeValues"] |= {
                ":p": {"M": {queue: num_attr(ms) for queue, ms in sorted(paced.items())}},
                ":t": str_attr(token),
            }
        if not while_paused:
            moved, _ = self._write_if("update", **update)
            return moved
        checks: list[Item] = [
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": {"pk": str_attr(QUEUES_PK), "sk": str_attr(queue)},
                    "ConditionExpression": "paused = :true",
                    "ExpressionAttributeValues": {":true": {"BOOL": True}},
                }
            }
            for queue in sorted(while_paused)
        ]
        failed = transact(self._db, [{"Update": {"TableName": self._table, **update}}, *checks])
        if any(index > 0 for index in failed):
            raise QueueResumed(sorted(while_paused))
        return not failed

    def record_sweep_done(
        self, shard: int, token: str, *, expires_at_s: int, not_sent: Collection[str] = ()
    ) -> None:
        """Record that sweep `token` finished on `shard`: it sent every job it claimed there
        except `not_sent` (ids whose send failed or whose claim's outcome is unknown). A later
        sweep that meets this sweep's claims behind a held cursor takes only the others as sent
        (THE CURSOR RULE, sundial.timing)."""
        item: Item = {
            "pk": str_attr(shard_pk(shard)),
            "sk": str_attr(f"{SWEEP_DONE_PREFIX}{token}"),
            "expires_at": num_attr(expires_at_s),
        }
        if not_sent:  # a string set cannot be empty
            item["not_sent"] = {"SS": sorted(not_sent)}
        self._db.put_item(TableName=self._table, Item=item)

    def sweep_done(self, shard: int, token: str) -> frozenset[str] | None:
        """None if sweep `token` has not finished on `shard`; else the ids it did not send."""
        item = self._get_item(
            {"pk": str_attr(shard_pk(shard)), "sk": str_attr(f"{SWEEP_DONE_PREFIX}{token}")}
        )
        if item is None:
            return None
        return frozenset(item.get("not_sent", {}).get("SS", []))

    def recorded_shard_count(self) -> int:
        item = self._get_item({"pk": str_attr(META_PK), "sk": str_attr(SHARDS_SK)})
        return int(item["shard_count"]["N"]) if item else 0

    def record_shard_count(self, shard_count: int) -> None:
        """Raise the recorded shard count; a lower value is ignored (shards only grow)."""
        self._write_if(
            "update",
            Key={"pk": str_attr(META_PK), "sk": str_attr(SHARDS_SK)},
            UpdateExpression="SET shard_count = :n",
            ConditionExpression="attribute_not_exists(shard_count) OR shard_count < :n",
            ExpressionAttributeValues={":n": num_attr(shard_count)},
        )
