"""Whether a queue is paused, and the catch-up a resume owes it: DynamoDB access for the
queue-state items, in the one table (see sundial.store.jobs).

Item kind: ("queues", "<queue name>"). All queues' states are one small partition, so a sweeper
reads them with one query per run.

While a queue is paused its jobs stay `pending` and nothing hands them to SQS: the sweeper
passes over them (its cursor moves on, so they never hold back other queues' jobs on the same
shard), and the submit, resume and schedule paths leave due-soon jobs in the table instead of
sending them. A resume then owes the queue a catch-up: every pending job of the queue between
the lowest sweep cursor at pause time and 15 minutes past the resume, on every shard, plus the
jobs recorded in `held` (due-soon jobs released by an API call during the pause, which may lie
below that range). The catch-up is recorded on the item and each shard is struck off as it is
done, so a catch-up cut short (a timeout, a crash) is finished by the sweepers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sundial.model.job import Job, Status
from sundial.store.job_items import item_to_job
from sundial.store.table import (
    Item,
    TableAdapter,
    num_attr,
    query_items,
    str_attr,
    transact,
    write_if,
)

if TYPE_CHECKING:
    pass

QUEUES_PK = "queues"


# DynamoDB allows 100 entries per transaction; one is the queue's own item.
MAX_HOLD_BATCH = 99


class Hold(StrEnum):
    """How a QueueStateStore.hold_with transaction ended."""

    HELD = "held"  # the jobs are written and recorded: the queue's catch-up sends them
    NOT_PAUSED = "not_paused"  # nothing written: the queue is running, so the caller sends them
    JOB_CHANGED = "job_changed"  # nothing written: a job's own condition failed


@dataclass(frozen=True, slots=True)
class QueueState:
    name: str
    paused: bool = False
    paused_at_ms: int | None = None
    pause_from: str | None = None  # the lowest sweep cursor when the pause began
    catch_from: str | None = None  # the catch-up owed by the last resume: [from, to] per shard
    catch_to: str | None = None
    catch_shards: frozenset[int] = field(default_factory=frozenset)  # shards still to do
    held: frozenset[str] = field(default_factory=frozenset)  # job ids still to release
    catch_started_ms: int | None = None

    @property
    def catching_up(self) -> bool:
        return bool(self.catch_shards or self.held)


def _item_to_state(item: Item) -> QueueState:
    def text(name: str) -> str | None:
        return item[name]["S"] if name in item else None

    def number(name: str) -> int | None:
        return int(item[name]["N"]) if name in item else None

    return QueueState(
        name=item["sk"]["S"],
        paused=item.get("paused", {}).get("BOOL", False),
        paused_at_ms=number("paused_at"),
        pause_from=text("pause_from"),
        catch_from=text("catch_from"),
        catch_to=text("catch_to"),
        catch_shards=frozenset(int(n) for n in item.get("catch_shards", {}).get("NS", [])),
        held=frozenset(item.get("held", {}).get("SS", [])),
        catch_started_ms=number("catch_started"),
    )


class QueueStateStore(TableAdapter):
    def _key(self, queue: str) -> Item:
        return {"pk": str_attr(QUEUES_PK), "sk": str_attr(queue)}

    def _update(self, queue: str, **request: Any) -> tuple[bool, QueueState | None]:
        written, item = write_if(
            self._db, self._table, "update", Key=self._key(queue), ReturnValues="ALL_NEW", **request
        )
        return written, _item_to_state(item) if item else None

    def all(self) -> dict[str, QueueState]:
        """Every queue that was ever paused (the others have no item and are running)."""
        states: dict[str, QueueState] = {}
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": str_attr(QUEUES_PK)},
            "ConsistentRead": True,
        }
        for item in query_items(self._db, request):
            state = _item_to_state(item)
            states[state.name] = state
        return states

    def paused(self) -> frozenset[str]:
        """The queues paused now (one query, as `all`)."""
        return frozenset(name for name, state in self.all().items() if state.paused)

    def get(self, queue: str) -> QueueState:
        item = self._get_item(self._key(queue))
        return _item_to_state(item) if item else QueueState(name=queue)

    def pause(self, queue: str, *, now_ms: int, pause_from: str) -> tuple[bool, QueueState]:
        paused, state = self._update(
            queue,
            UpdateExpression="SET paused = :true, paused_at = :now, pause_from = :from",
            ConditionExpression="attribute_not_exists(paused) OR paused = :false",
            ExpressionAttributeValues={
                ":true": {"BOOL": True},
                ":false": {"BOOL": False},
                ":now": num_attr(now_ms),
                ":from": str_attr(pause_from),
            },
        )
        return paused, state or QueueState(name=queue)

    def resume(
        self, queue: str, *, now_ms: int, catch_from: str, catch_to: str, shards: Collection[int]
    ) -> tuple[bool, QueueState]:
        """paused -> running, recording the catch-up owed (widened to cover one left unfinished
        by an earlier resume: the caller passes the lower `catch_from`)."""
        resumed, state = self._update(
            queue,
            UpdateExpression=(
                "SET paused = :false, catch_from = :from, catch_to = :to,"
                " catch_started = :now REMOVE paused_at, pause_from"
                + (" ADD catch_shards :shards" if shards else "")
            ),
            ConditionExpression="paused = :true",
            ExpressionAttributeValues={
                ":true": {"BOOL": True},
                ":false": {"BOOL": False},
                ":now": num_attr(now_ms),
                ":from": str_attr(catch_from),
                ":to": str_attr(catch_to),
                **({":shards": {"NS": [str(s) for s in sorted(shards)]}} if shards else {}),
            },
        )
        return resumed, state or QueueState(name=queue)

    def hold(self, queue: str, job_id: str) -> bool:
        """Record a due-soon job for the catch-up, if the queue is still paused."""
        held, _ = self._update(
            queue,
            UpdateExpression="ADD held :id",
            ConditionExpression="paused = :true",
            ExpressionAttributeValues={":true": {"BOOL": True}, ":id": {"SS": [job_id]}},
        )
        return held

    def hold_with(self, queue: str, writes: list[Item], *, record: Collection[str] = ()) -> Hold:
        """Write `writes` (job entries from sundial.store.jobs: a new job, a resume, a hand-back) in
        one transaction that holds only while the queue is paused, recording the `record` job
        ids in its `held` set. So a due-soon job of a paused queue is never left pending below
        a cursor unseen: either the queue's resume (which flips `paused` first, then reads
        `held` and its catch-up range) sees it, or the transaction fails and the caller, the
        queue now running, sends the job itself (THE OWNER RULE, docs/invariants.md).

        A brand-new job needs no record: it is due no earlier than its submit, so inside the
        range every catch-up reads (from the lowest cursor at the pause). A resumed job or a
        handed-back one may be due long before that range, so it is recorded. At most
        MAX_HOLD_BATCH writes."""
        if len(writes) > MAX_HOLD_BATCH:
            raise ValueError(f"at most {MAX_HOLD_BATCH} writes per hold, got {len(writes)}")
        check: Item = {
            "TableName": self._table,
            "Key": self._key(queue),
            "ConditionExpression": "paused = :true",
            "ExpressionAttributeValues": {":true": {"BOOL": True}},
        }
        if record:
            check["UpdateExpression"] = "ADD held :ids"
            check["ExpressionAttributeValues"][":ids"] = {"SS": sorted(record)}
        entry: Item = {"Update": check} if record else {"ConditionCheck": check}
        writes = [*writes, entry]
        failed = transact(self._db, writes)
        if any(index < len(writes) - 1 for index in failed):
            return Hold.JOB_CHANGED
        if failed:
            return Hold.NOT_PAUSED
        return Hold.HELD

    def strike(
        self, queue: str, *, shards: Collection[int] = (), held: Collection[str] = ()
    ) -> None:
        """Strike finished shards and released jobs off the catch-up (a set left empty goes)."""
        parts, values = [], {}
        if shards:
            parts.append("catch_shards :shards")
            values[":shards"] = {"NS": [str(s) for s in sorted(shards)]}
        if held:
            parts.append("held :held")
            values[":held"] = {"SS": sorted(held)}
        if parts:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(queue),
                UpdateExpression=f"DELETE {', '.join(parts)}",
                ExpressionAttributeValues=values,
            )

    def pending_jobs(self, queue: str, shard_pk: str, *, from_sk: str, to_sk: str) -> Iterator[Job]:
        """The pending jobs of `queue` in one shard's sort-key range (a catch-up's read: it reads
        every job in the range, of every queue, and keeps this queue's pending ones)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "FilterExpression": "#queue = :queue AND #status = :pending",
            "ExpressionAttributeNames": {"#queue": "queue", "#status": "status"},
            "ExpressionAttributeValues": {
                ":pk": str_attr(shard_pk),
                ":from": str_attr(from_sk),
                ":to": str_attr(to_sk),
                ":queue": str_attr(queue),
                ":pending": str_attr(Status.PENDING),
            },
            "ConsistentRead": True,
        }
        for item in query_items(self._db, request):
            yield item_to_job(item)
