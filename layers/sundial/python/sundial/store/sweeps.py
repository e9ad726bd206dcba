"""What a sweep reads and records: a shard's due range, its cursor item (cursor, lease, pacing
state, what was sent above the cursor), and the highest shard count ever deployed.

- sweep cursor ("shard#<n>", "cursor"): sorts after every job key, so due-range queries never
  see it. Its attributes:
  - `cursor`: the lowest sort key that may still need a sweep's send;
  - `lease_token`, `lease_until`: the sweep holding the shard (its token) and until when (ms);
  - `sweeps`: how many leases were ever taken (the item's version: a lease is taken only on
    the item as the taker read it);
  - `sent_above`: sort keys of jobs at or above the cursor that the last holder sent (it held the
    cursor below them: a failed send, a sweep short of time), at most SENT_MAX;
  - `deferred_from`: {capped queue: the lowest sort key of its jobs left without a send slot}, below
    the cursor (the cursor passes them; the next sweep reads them again from there);
  - `paced`: {queue: the next free send slot, ms} (sundial.dispatch.fairness).
- shard count: ("meta", "shards")

THE SHARD LEASE. A sweep sends the jobs of a shard without writing any job item: it holds the
shard instead. Its write sequence, per shard:
1. read the cursor item (with every other shard's: one BatchGetItem) and the due range;
2. nothing in the range: stop there (a read, no write);
3. take the lease (take_lease: ONE conditional write, on no live lease and on `sweeps` being
   as read, so the holder's view of cursor, `sent_above` and `deferred_from` is current);
4. send every due job that needs it, in batches; no job item is written;
5. release (finish_sweep: ONE write, conditional on still holding the lease) that moves the
   cursor, stores `sent_above`, `deferred_from` and the pacing state, and removes the lease.
So a shard costs two writes per sweep that finds anything, none when its range is empty.
Why a lease cannot pass from a live holder to another: its expiry, SWEEP_LEASE_MS after the
take by the holder's clock, is past the sweeper's hard Lambda timeout plus CLOCK_SKEW_MS (the
most two clocks disagree), and a sweeper takes leases only while its Lambda runs, so a holder
is dead before another sweeper's clock reads its lease as expired. Two sweepers meeting at an
expiry: both conditional writes name the `sweeps` value read; one lands, the other is refused
and leaves the shard alone this time. A late first holder's release is refused too (the
lease's token is no longer its own): nothing it saw is written.
A holder that dies (before, during or after its sends, or with its release lost) leaves the
item as the last release wrote it: the next holder reads the same cursor and sends again what
lies above it. A job sent twice is run once: the consumer's take is conditional on the attempt
and the revision, and on the job being pending or queued, so the second message finds it
running or finished and is a no-op (THE ATTEMPT'S HOLDER, sundial.store.attempts)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sundial.ids import JobKey, shard_pk
from sundial.model.job import Job, Keyed, Priority, Status
from sundial.store.job_items import item_to_job
from sundial.store.queue_states import QUEUES_PK
from sundial.store.table import (
    Item,
    TableAdapter,
    key_item,
    num_attr,
    opt_int,
    query_items,
    str_attr,
    transact,
)
from sundial.timing import SWEEP_LEASE_MS

CURSOR_SK = "cursor"


class QueueResumed(Exception):
    """A queue whose jobs a sweep passed over (paused) was resumed before the sweep moved its
    cursor: the cursor stays where it was (SweepStore.finish_sweep)."""


# Sort keys kept in `sent` (about 40 bytes each): a release writes at most ~40 KB.
SENT_MAX = 1_000

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
    """A shard's cursor item: its cursor (None: never swept), its pacing state, its lease and
    what the last holder left for the next (module docstring)."""

    cursor: str | None = None
    paced: dict[str, int] = field(default_factory=dict)  # capped queue -> next free slot, ms
    lease: str | None = None  # the holding sweep's token
    lease_until_ms: int = 0
    sweeps: int = 0  # leases ever taken: the item's version
    sent: frozenset[str] = frozenset()  # sort keys sent above the cursor by the last holder
    deferred: dict[str, str] = field(default_factory=dict)  # capped queue -> lowest sort key


def _item_to_state(item: Item) -> ShardSweepState:
    paced = item.get("paced", {}).get("M", {})
    return ShardSweepState(
        cursor=item["cursor"]["S"] if "cursor" in item else None,
        paced={queue: int(value["N"]) for queue, value in paced.items()},
        lease=item["lease_token"]["S"] if "lease_token" in item else None,
        lease_until_ms=opt_int(item, "lease_until") or 0,
        sweeps=opt_int(item, "sweeps") or 0,
        sent=frozenset(item.get("sent_above", {}).get("SS", [])),
        deferred={q: v["S"] for q, v in item.get("deferred_from", {}).get("M", {}).items()},
    )


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
        self, shard: int, *, from_sk: str, to_sk: str, queue: str | None = None
    ) -> Iterator[DueRef | Malformed]:
        """As query_due, but only what a sweep decides on (no payload), so a whole backlog
        fits in a sweeper's memory. `queue`: only that queue's pending jobs (a capped queue's
        deferred jobs, read again below the cursor)."""
        request = self._due_range(shard, from_sk, to_sk) | {
            "ProjectionExpression": _DUE_REF_ATTRIBUTES,
            "ExpressionAttributeNames": {"#queue": "queue", "#status": "status"},
        }
        if queue is not None:
            request["FilterExpression"] += " AND #queue = :queue AND #status = :pending"
            request["ExpressionAttributeValues"] |= {
                ":queue": str_attr(queue),
                ":pending": str_attr(Status.PENDING),
            }
        for item in query_items(self._db, request):
            try:
                yield _item_to_due_ref(item)
            except (KeyError, ValueError, TypeError) as error:
                # One bad item must not stop the sweep of its shard: hand it over as such.
                yield Malformed(_job_key_or_none(item), f"malformed job item: {error!r}")

    def read_cursors(self, shards: Sequence[int]) -> dict[int, str]:
        """The sweep cursor of each shard that has one: the lowest sort key that may still need
        a sweep's send (a capped queue's deferred jobs may lie below the cursor itself)."""
        return {
            shard: min([state.cursor, *state.deferred.values()])
            for shard, state in self.read_sweep_states(shards).items()
            if state.cursor is not None
        }

    def read_sweep_states(self, shards: Sequence[int]) -> dict[int, ShardSweepState]:
        """The cursor item of each shard that has one: its cursor and its pacing state."""
        keys = [{"pk": str_attr(shard_pk(s)), "sk": str_attr(CURSOR_SK)} for s in shards]
        items = self._batch_get(keys, unread="DynamoDB left sweep cursors unread")
        return {int(item["pk"]["S"].removeprefix("shard#")): _item_to_state(item) for item in items}

    def advance_cursor(self, shard: int, cursor: str) -> bool:
        """Move a shard's cursor forward, never back, outside any lease: True if it moved.
        No sweep calls it (a sweep's release moves the cursor: finish_sweep); it places a
        cursor for the tests that start from a swept shard."""
        moved, _ = self._write_if(
            "update",
            Key={"pk": str_attr(shard_pk(shard)), "sk": str_attr(CURSOR_SK)},
            UpdateExpression="SET #c = :c",
            ConditionExpression="attribute_not_exists(#c) OR #c < :c",
            ExpressionAttributeNames={"#c": "cursor"},
            ExpressionAttributeValues={":c": str_attr(cursor)},
        )
        return moved

    def fetch_jobs(self, keys: Sequence[JobKey]) -> dict[JobKey, Job | Malformed]:
        """The items at `keys` (at most 100), read consistently with one BatchGetItem (and its
        repeats for unprocessed keys): the jobs a sweep sends, payloads and all. A key with no
        item (moved or expired since the range was read) is left out."""
        found: dict[JobKey, Job | Malformed] = {}
        items = self._batch_get([key_item(k) for k in keys], unread="DynamoDB left jobs unread")
        for item in items:
            if "moved_to" in item:
                continue  # a pointer: the job is elsewhere now
            key = JobKey.from_item_keys(item["pk"]["S"], item["sk"]["S"])
            try:
                found[key] = item_to_job(item)
            except (KeyError, ValueError, TypeError) as error:
                found[key] = Malformed(key, f"malformed job item: {error!r}")
        return found

    def as_shown(self, job: Job, *, now_ms: int) -> Job:
        """The job as GET /jobs/{id} shows it: `queued` is derived for a job a sweep sends
        without writing it (THE SHARD LEASE). A pending job that waits for a sweep (not direct,
        not a paused DAG's root) is shown queued once it is due, or once its shard's cursor
        has passed it (sent ahead of its time) or the last holder names it as sent, unless it
        lies among its queue's deferred jobs. One more read, for a pending job only."""
        if job.status is not Status.PENDING or job.direct or (job.dag and job.dag.held):
            return job
        sk = job.key.sk
        if job.key.due_ms > now_ms:
            state = self.read_sweep_states([job.key.shard]).get(job.key.shard)
            deferred = state.deferred.get(job.queue) if state else None
            passed = (
                state is not None
                and state.cursor is not None
                and sk < state.cursor
                and (deferred is None or sk < deferred)
            )
            if not passed and (state is None or sk not in state.sent):
                return job
        return replace(job, status=Status.QUEUED)

    def take_lease(self, shard: int, *, token: str, now_ms: int, read: ShardSweepState) -> bool:
        """Hold `shard` for sweep `token` until now + SWEEP_LEASE_MS: one conditional write,
        refused (False, nothing written) if another sweep holds a live lease or the item is no
        longer as `read` (a lease was taken since: what was read is stale)."""
        version = "sweeps = :read" if read.sweeps else "attribute_not_exists(sweeps)"
        values: Item = {
            ":t": str_attr(token),
            ":until": num_attr(now_ms + SWEEP_LEASE_MS),
            ":now": num_attr(now_ms),
            ":next": num_attr(read.sweeps + 1),
        }
        if read.sweeps:
            values[":read"] = num_attr(read.sweeps)
        taken, _ = self._write_if(
            "update",
            Key={"pk": str_attr(shard_pk(shard)), "sk": str_attr(CURSOR_SK)},
            UpdateExpression="SET lease_token = :t, lease_until = :until, sweeps = :next",
            ConditionExpression=(
                f"(attribute_not_exists(lease_until) OR lease_until < :now) AND {version}"
            ),
            ExpressionAttributeValues=values,
        )
        return taken

    def finish_sweep(
        self,
        shard: int,
        *,
        token: str,
        cursor: str,
        sent: Collection[str] = (),
        deferred: Mapping[str, str] | None = None,
        paced: Mapping[str, int] | None = None,
        while_paused: Collection[str] = (),
    ) -> bool:
        """Release the lease of sweep `token` in ONE write that also moves the cursor to
        `cursor` (never back: the caller passes at least the cursor it read, and no one else
        moved it while it held the lease), and stores `sent` (at most SENT_MAX), `deferred`
        and, if given, the pacing state. False, writing nothing, if the lease is no longer
        this sweep's (it outlived it: impossible while the clocks keep within CLOCK_SKEW_MS).

        `while_paused`: the queues whose pending jobs this sweep passed over (left to their
        resume's catch-up): the write is then one transaction with a check that each is still
        paused; raises QueueResumed, writing nothing, if one was resumed meanwhile (THE CURSOR
        RULE: dispatch.sweeper, docs/invariants.md). The caller then releases again without
        moving the cursor."""
        if len(sent) > SENT_MAX:
            raise ValueError(f"at most {SENT_MAX} keys sent above a cursor")
        sets = ["#c = :c"]
        removes = ["lease_token", "lease_until"]
        values: Item = {":c": str_attr(cursor), ":t": str_attr(token)}
        if sent:  # a string set cannot be empty
            sets.append("sent_above = :sent")
            values[":sent"] = {"SS": sorted(sent)}
        else:
            removes.append("sent_above")
        if deferred:
            sets.append("deferred_from = :d")
            values[":d"] = {"M": {q: str_attr(sk) for q, sk in sorted(deferred.items())}}
        else:
            removes.append("deferred_from")
        if paced is not None:
            sets.append("paced = :p")
            values[":p"] = {"M": {queue: num_attr(ms) for queue, ms in sorted(paced.items())}}
        update: dict[str, Any] = {
            "Key": {"pk": str_attr(shard_pk(shard)), "sk": str_attr(CURSOR_SK)},
            "UpdateExpression": f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
            "ConditionExpression": "lease_token = :t",
            "ExpressionAttributeNames": {"#c": "cursor"},
            "ExpressionAttributeValues": values,
        }
        if not while_paused:
            released, _ = self._write_if("update", **update)
            return released
        failed = transact(
            self._db,
            [{"Update": {"TableName": self._table, **update}}, *self._paused(while_paused)],
        )
        if any(index > 0 for index in failed):
            raise QueueResumed(sorted(while_paused))
        return not failed

    def _paused(self, queues: Collection[str]) -> list[Item]:
        """A transaction's checks that each of `queues` is still paused."""
        return [
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": {"pk": str_attr(QUEUES_PK), "sk": str_attr(queue)},
                    "ConditionExpression": "paused = :true",
                    "ExpressionAttributeValues": {":true": {"BOOL": True}},
                }
            }
            for queue in sorted(queues)
        ]

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
