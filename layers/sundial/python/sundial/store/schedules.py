"""DynamoDB access for schedules and their runs, in the one table (see sundial.store.jobs).

Item kinds:
- schedule: ("sched#<id>", "schedule"): the definition and its state
- listing:  ("schedules#<queue>", "<created ms, 13 digits>#<id>"): one per live schedule, so
            GET /schedules?queue= is one range query. Written in the transaction that creates
            the schedule (+2 write units: a transaction's writes cost two), deleted in the one
            that deletes it (a delete is a transaction of two writes now, 4 units, not one
            update, 1); it holds the id only (what a list shows is read from the schedule
            items), so an update, pause, resume or occurrence writes nothing more.
- run:      ("sched#<id>", "run#<occurrence ms, 13 digits>"): the decision for one occurrence
            (sundial.model.schedule.RunRecord), so the runs list is one query, newest first.
            An occurrence of a revision after the first (an update, PATCH) has
            "run#<ms>#<its job's ULID>", so it never shares a record with an occurrence of
            another revision at the same time (the plain key sorts just before it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sundial.errors import Unavailable
from sundial.ids import SK_DIGITS, JobKey
from sundial.model.job import Job, Priority
from sundial.model.schedule import Misfire, RunOutcome, RunRecord, Schedule, ScheduleState
from sundial.retry import RetryPolicy
from sundial.store.job_items import item_to_job
from sundial.store.table import (
    Item,
    TableAdapter,
    key_item,
    num_attr,
    str_attr,
    transact,
)

if TYPE_CHECKING:
    pass

SCHEDULE_SK = "schedule"
# TransactWriteItems takes up to 100 entries: a park's check of the schedule and 99 occurrences.
PARKS_PER_TRANSACTION = 99
RUN_PREFIX = "run#"
SCHEDULE_PREFIX = "sched#"
LISTING_PREFIX = "schedules#"


def schedule_pk(schedule_id: str) -> str:
    return f"{SCHEDULE_PREFIX}{schedule_id}"


def listing_pk(queue: str) -> str:
    return f"{LISTING_PREFIX}{queue}"


def listing_sk(schedule: Schedule) -> str:
    return f"{schedule.created_at_ms:0{SK_DIGITS}d}#{schedule.id}"


def _listing_key(schedule: Schedule) -> Item:
    return {"pk": str_attr(listing_pk(schedule.queue)), "sk": str_attr(listing_sk(schedule))}


def schedule_to_item(schedule: Schedule) -> Item:
    item: Item = {
        "pk": str_attr(schedule_pk(schedule.id)),
        "sk": str_attr(SCHEDULE_SK),
        "queue": str_attr(schedule.queue),
        "payload": str_attr(schedule.payload_json),
        "priority": str_attr(str(schedule.priority)),
        "timezone": str_attr(schedule.timezone),
        "misfire": str_attr(str(schedule.misfire)),
        "shard": num_attr(schedule.shard),
        "created_at": num_attr(schedule.created_at_ms),
        "anchor": num_attr(schedule.anchor_ms),
        "first_at": num_attr(schedule.first_at_ms),
        "state": str_attr(str(schedule.state)),
    }
    for name, text in (
        ("cron", schedule.cron),
        ("rate", schedule.rate),
        ("name", schedule.name),
        ("fingerprint", schedule.fingerprint),
    ):
        if text is not None:
            item[name] = str_attr(text)
    for name, number in (
        ("max_attempts", schedule.max_attempts),
        ("start_at", schedule.start_at_ms),
        ("end_at", schedule.end_at_ms),
        ("paused_at", schedule.paused_at_ms),
        ("deleted_at", schedule.deleted_at_ms),
        ("revision", schedule.revision or None),
    ):
        if number is not None:
            item[name] = num_attr(number)
    if schedule.retry is not None:
        item["retry"] = str_attr(schedule.retry.model_dump_json())
    return item


def _opt_s(item: Item, name: str) -> str | None:
    return item[name]["S"] if name in item else None


def _opt_n(item: Item, name: str) -> int | None:
    return int(item[name]["N"]) if name in item else None


def item_to_schedule(item: Item) -> Schedule:
    return Schedule(
        id=item["pk"]["S"].removeprefix("sched#"),
        queue=item["queue"]["S"],
        payload_json=item["payload"]["S"],
        priority=Priority(item["priority"]["S"]),
        timezone=item["timezone"]["S"],
        misfire=Misfire(item["misfire"]["S"]),
        shard=int(item["shard"]["N"]),
        created_at_ms=int(item["created_at"]["N"]),
        anchor_ms=int(item["anchor"]["N"]),
        first_at_ms=int(item["first_at"]["N"]),
        cron=_opt_s(item, "cron"),
        rate=_opt_s(item, "rate"),
        name=_opt_s(item, "name"),
        max_attempts=_opt_n(item, "max_attempts"),
        retry=RetryPolicy.model_validate_json(item["retry"]["S"]) if "retry" in item else None,
        start_at_ms=_opt_n(item, "start_at"),
        end_at_ms=_opt_n(item, "end_at"),
        state=ScheduleState(item["state"]["S"]),
        paused_at_ms=_opt_n(item, "paused_at"),
        deleted_at_ms=_opt_n(item, "deleted_at"),
        fingerprint=_opt_s(item, "fingerprint"),
        revision=_opt_n(item, "revision") or 0,
    )


# What an update rewrites on the schedule item (the rest never changes).
_REVISED = ("payload", "priority", "timezone", "cron", "rate", "name", "max_attempts", "retry")
_RESTARTED = ("anchor", "first_at", "revision")


def run_sk(at_ms: int, job_ulid: str | None = None) -> str:
    plain = f"{RUN_PREFIX}{at_ms:0{SK_DIGITS}d}"
    return plain if job_ulid is None else f"{plain}#{job_ulid}"


def _record_sk(run: RunRecord) -> str:
    return run_sk(run.at_ms, JobKey.from_job_id(run.job_id).ulid if run.revised else None)


def _item_to_run(item: Item) -> RunRecord:
    sk = item["sk"]["S"].removeprefix(RUN_PREFIX)
    next_at = _opt_n(item, "next_at")
    return RunRecord(
        schedule_id=item["pk"]["S"].removeprefix("sched#"),
        at_ms=int(sk[:SK_DIGITS]),
        job_id=item["job_id"]["S"],
        outcome=RunOutcome(item["outcome"]["S"]),
        decided_at_ms=int(item["decided_at"]["N"]),
        next_at_ms=next_at,
        next_revision=_opt_n(item, "next_rev") or 0,
        revised=len(sk) > SK_DIGITS,
    )


def _run_item(run: RunRecord, *, expires_at_s: int) -> Item:
    item: Item = {
        "pk": str_attr(schedule_pk(run.schedule_id)),
        "sk": str_attr(_record_sk(run)),
        "job_id": str_attr(run.job_id),
        "outcome": str_attr(str(run.outcome)),
        "decided_at": num_attr(run.decided_at_ms),
        "expires_at": num_attr(expires_at_s),
    }
    if run.next_at_ms is not None:
        item["next_at"] = num_attr(run.next_at_ms)
    if run.next_revision:
        item["next_rev"] = num_attr(run.next_revision)
    return item


class Revised(StrEnum):
    """How an update's transaction ended (ScheduleStore.revise)."""

    REVISED = "revised"
    SCHEDULE_CHANGED = "schedule_changed"  # another update, or a delete, came first
    HEAD_DECIDED = "head_decided"  # the occurrence to replace was decided or changed meanwhile


class Parked(StrEnum):
    """How parking a paused schedule's occurrence ended (ScheduleStore.park)."""

    PARKED = "parked"
    NOT_PAUSED = "not_paused"  # the schedule was resumed meanwhile: nothing written
    GONE = "gone"  # the occurrence is no longer pending: nothing written


class Indexed(StrEnum):
    """How indexing one schedule for its queue's listing ended (ScheduleStore.index)."""

    INDEXED = "indexed"
    ALREADY = "already"  # its listing item exists
    DELETED = "deleted"  # deleted (or gone): a deleted schedule is never listed


class ScheduleStore(TableAdapter):
    def _key(self, schedule_id: str) -> Item:
        return {"pk": str_attr(schedule_pk(schedule_id)), "sk": str_attr(SCHEDULE_SK)}

    # -- schedules --------------------------------------------------------------------------

    def put_new(self, schedule: Schedule) -> Schedule | None:
        """Write a new schedule. Returns None, or the existing schedule if the id is taken."""
        written, old = self._write_if(
            "put", Item=schedule_to_item(schedule), ConditionExpression="attribute_not_exists(pk)"
        )
        if written:
            return None
        if not old:
            raise Unavailable("schedule changed concurrently; retry")
        return item_to_schedule(old)

    def create(self, schedule: Schedule, first_occurrence: Item) -> Schedule | None:
        """Write a new schedule and its first occurrence (a JobStore.new_job_write entry) in one
        transaction, so no sweep ever finds one without the other and no crash leaves a
        schedule without its chain. Returns None, or the existing schedule if the id is taken
        (an idempotent repeat)."""
        listed = self._listing_write(schedule)
        if not transact(self._db, [self.new_schedule_write(schedule), listed, first_occurrence]):
            return None
        existing = self.get(schedule.id)
        if existing is None:
            raise Unavailable("schedule changed concurrently; retry")
        return existing

    def park(self, schedule_id: str, occurrence_write: Item) -> Parked:
        """Pause an occurrence of a paused schedule (a JobStore.park_write entry), only while
        the schedule is still paused: a resume that lands first makes this fail, and the caller
        decides again (so a resumed schedule never keeps a parked occurrence)."""
        failed = transact(self._db, [self.paused_check(schedule_id), occurrence_write])
        if not failed:
            return Parked.PARKED
        return Parked.NOT_PAUSED if 0 in failed else Parked.GONE

    def park_all(self, schedule_id: str, occurrence_writes: Sequence[Item]) -> Parked:
        """Park many occurrences of a paused schedule (JobStore.park_write entries), up to
        PARKS_PER_TRANSACTION in each transaction with the check that the schedule is still
        paused (the rules of `park`, per transaction; services.chain, "Parking"). An occurrence
        whose park fails (it was taken, cancelled or removed meanwhile) is left out and the
        others are written again. NOT_PAUSED when a resume landed first: the transactions
        before it stay written (that resume reads them after its own write and releases them),
        and nothing more is parked. Otherwise PARKED (those no longer parkable are skipped)."""
        remaining = list(occurrence_writes)
        while remaining:
            chunk, rest = remaining[:PARKS_PER_TRANSACTION], remaining[PARKS_PER_TRANSACTION:]
            failed = transact(self._db, [self.paused_check(schedule_id), *chunk])
            if not failed:
                remaining = rest
            elif 0 in failed:
                return Parked.NOT_PAUSED
            else:  # each round leaves at least one out, so the loop ends
                skipped = {index - 1 for index in failed}
                remaining = [w for i, w in enumerate(chunk) if i not in skipped] + rest
        return Parked.PARKED

    def new_schedule_write(self, schedule: Schedule) -> Item:
        """A new schedule, as one TransactWriteItems entry (created with its first occurrence)."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": schedule_to_item(schedule),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _listing_write(self, schedule: Schedule) -> Item:
        """The schedule's item in its queue's listing (unconditional: it is written only
        with the schedule itself, whose put is conditional)."""
        item = _listing_key(schedule) | {
            "schedule_id": str_attr(schedule.id),
            "created_at": num_attr(schedule.created_at_ms),
        }
        return {"Put": {"TableName": self._table, "Item": item}}

    def paused_check(self, schedule_id: str) -> Item:
        """A TransactWriteItems entry that holds only while the schedule is paused."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self._key(schedule_id),
                "ConditionExpression": "#state = :paused",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":paused": str_attr(str(ScheduleState.PAUSED))},
            }
        }

    def get(self, schedule_id: str) -> Schedule | None:
        item = self._get_item(self._key(schedule_id))
        return item_to_schedule(item) if item else None

    def set_state(
        self,
        schedule_id: str,
        *,
        to: ScheduleState,
        when: Sequence[ScheduleState],
        now_ms: int,
        expires_at_s: int | None = None,
    ) -> tuple[bool, Schedule | None]:
        """Move the schedule to state `to` if it is in one of `when`. Returns (moved, the
        schedule as written, or as it was if not; None if there is no such schedule)."""
        moved, item = self._write_if(
            "update",
            **self._state_update(
                schedule_id, to=to, when=when, now_ms=now_ms, expires_at_s=expires_at_s
            ),
            ReturnValues="ALL_NEW",
        )
        return moved, item_to_schedule(item) if item else None

    def _state_update(
        self,
        schedule_id: str,
        *,
        to: ScheduleState,
        when: Sequence[ScheduleState],
        now_ms: int,
        expires_at_s: int | None,
    ) -> dict[str, Any]:
        """The conditional UpdateItem request of a state change (set_state, delete)."""
        sets = ["#state = :to"]
        removes: list[str] = []
        values: Item = {":to": str_attr(str(to))}
        if to is ScheduleState.PAUSED:
            sets.append("paused_at = :now")
        elif to is ScheduleState.ACTIVE:
            removes.append("paused_at")
        elif to is ScheduleState.DELETED:
            sets += ["deleted_at = :now", "expires_at = :expires"]
            values[":expires"] = num_attr(expires_at_s or 0)
        # (RESUMING changes the state only. It used to fall into the DELETED branch, which set
        # deleted_at and an expiry of 0: DynamoDB's TTL would have removed a resumed schedule.)
        if to in (ScheduleState.PAUSED, ScheduleState.DELETED):
            values[":now"] = num_attr(now_ms)
        allowed = {f":w{i}": str_attr(str(state)) for i, state in enumerate(when)}
        return {
            "Key": self._key(schedule_id),
            "UpdateExpression": f"SET {', '.join(sets)}"
            + (f" REMOVE {', '.join(removes)}" if removes else ""),
            "ConditionExpression": f"#state IN ({', '.join(allowed)})",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {**values, **allowed},
        }

    def delete(
        self,
        schedule: Schedule,
        *,
        when: Sequence[ScheduleState],
        now_ms: int,
        expires_at_s: int,
    ) -> bool:
        """Mark the schedule deleted (if in one of `when`) and remove its listing item, in one
        transaction: a listing never shows a deleted schedule nor misses a live one. Returns
        whether it was deleted now (False: its state was not one of `when`)."""
        state_write = {"TableName": self._table} | self._state_update(
            schedule.id,
            to=ScheduleState.DELETED,
            when=when,
            now_ms=now_ms,
            expires_at_s=expires_at_s,
        )
        # Unconditional: a schedule created before the listing existed has no item to remove.
        unlisted = {"Delete": {"TableName": self._table, "Key": _listing_key(schedule)}}
        return not transact(self._db, [{"Update": state_write}, unlisted])

    # -- the queue's listing -----------------------------------------------------------------

    def listing_page(
        self, queue: str, *, limit: int, after_sk: str | None
    ) -> tuple[list[str], str | None]:
        """Up to `limit` schedule ids of the queue's listing, oldest first, and the sort key to
        continue after (None at the end)."""
        return self._index_page(
            listing_pk(queue), id_attribute="schedule_id", limit=limit, after_sk=after_sk
        )

    def get_many(self, schedule_ids: Sequence[str]) -> dict[str, Schedule]:
        """The schedule items of `schedule_ids` that exist (consistent reads)."""
        keys = [self._key(schedule_id) for schedule_id in dict.fromkeys(schedule_ids)]
        return {s.id: s for s in map(item_to_schedule, self._batch_get(keys))}

    def schedule_items(self) -> Iterator[Schedule]:
        """Every schedule item in the table: a Scan, which reads (and is charged for) the
        whole table. Only for the one-off backfill of the listings (sundial.backfill)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "begins_with(pk, :prefix) AND sk = :schedule",
            "ExpressionAttributeValues": {
                ":prefix": str_attr(SCHEDULE_PREFIX),
                ":schedule": str_attr(SCHEDULE_SK),
            },
        }
        for page in self._db.get_paginator("scan").paginate(**request):
            yield from map(item_to_schedule, page.get("Items", []))

    def index(self, schedule: Schedule) -> Indexed:
        """Write the schedule's listing item if it has none, while it is not deleted: one
        transaction (a check of the schedule, a put-if-absent), so a delete racing the
        backfill never leaves a deleted schedule listed. Idempotent."""
        check: Item = {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self._key(schedule.id),
                "ConditionExpression": "attribute_exists(pk) AND #state <> :deleted",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":deleted": str_attr(str(ScheduleState.DELETED))},
            }
        }
        put = self._listing_write(schedule)
        put["Put"]["ConditionExpression"] = "attribute_not_exists(pk)"
        failed = transact(self._db, [check, put])
        if not failed:
            return Indexed.INDEXED
        return Indexed.DELETED if 0 in failed else Indexed.ALREADY

    # -- runs -------------------------------------------------------------------------------

    def revise(
        self,
        updated: Schedule,
        *,
        read_revision: int,
        replaced: RunRecord,
        expires_at_s: int,
        head_write: Item,
        new_head_write: Item,
    ) -> Revised:
        """An update, in one transaction: the schedule's new settings (conditional on the
        revision it was read at, and on not being deleted); the record that the head, the
        occurrence nothing has decided yet, was replaced (put-if-absent: whoever decides it
        first wins, a sweep or this); the head cancelled (`head_write`, conditional on it still
        being undecided); the new settings' first occurrence (`new_head_write`)."""
        item = schedule_to_item(updated)
        sets = [f"#{name} = :{name}" for name in _REVISED + _RESTARTED if name in item]
        removes = [f"#{name}" for name in _REVISED if name not in item]
        names = {f"#{name}": name for name in _REVISED + _RESTARTED} | {"#state": "state"}
        values = {f":{name}": item[name] for name in _REVISED + _RESTARTED if name in item}
        values[":deleted"] = str_attr(str(ScheduleState.DELETED))
        if read_revision:
            revision_holds = "#revision = :read"
            values[":read"] = num_attr(read_revision)
        else:
            revision_holds = "attribute_not_exists(#revision)"
        schedule_write: Item = {
            "Update": {
                "TableName": self._table,
                "Key": self._key(updated.id),
                "UpdateExpression": f"SET {', '.join(sets)}"
                + (f" REMOVE {', '.join(removes)}" if removes else ""),
                "ConditionExpression": f"{revision_holds} AND #state <> :deleted",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
        record_write: Item = {
            "Put": {
                "TableName": self._table,
                "Item": _run_item(replaced, expires_at_s=expires_at_s),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        failed = transact(self._db, [schedule_write, record_write, head_write, new_head_write])
        if not failed:
            return Revised.REVISED
        return Revised.SCHEDULE_CHANGED if 0 in failed or 3 in failed else Revised.HEAD_DECIDED

    def record_run(self, run: RunRecord, *, expires_at_s: int) -> RunRecord:
        """Write the decision for one occurrence unless one exists; return the one that holds."""
        item = _run_item(run, expires_at_s=expires_at_s)
        written, old = self._write_if(
            "put", Item=item, ConditionExpression="attribute_not_exists(pk)"
        )
        if written:
            return run
        if not old:
            raise Unavailable("run record changed concurrently; retry")
        return _item_to_run(old)

    def runs(
        self,
        schedule_id: str,
        *,
        limit: int,
        before_ms: int | None = None,
        after_ms: int | None = None,
    ) -> tuple[list[RunRecord], int | None]:
        """Up to `limit` runs, newest first, older than `before_ms` and newer than `after_ms`
        if given. Returns them and the occurrence time to continue before (None when there are
        no more)."""
        # "~" sorts after "#": a revised record at before_ms - 1 ("run#<ms>#<ulid>") is in.
        upper = f"{run_sk(before_ms - 1)}~" if before_ms is not None else f"{RUN_PREFIX}~"
        lower = run_sk(after_ms + 1) if after_ms is not None else RUN_PREFIX
        if lower > upper:  # an empty range (DynamoDB refuses BETWEEN with the bounds crossed)
            return [], None
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
            "ExpressionAttributeValues": {
                ":pk": str_attr(schedule_pk(schedule_id)),
                ":low": str_attr(lower),
                ":high": str_attr(upper),
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": limit,
        }
        page = self._db.query(**request)
        runs = [_item_to_run(item) for item in page.get("Items", [])]
        more = "LastEvaluatedKey" in page and len(runs) == limit
        if more and runs:
            # The next page starts before the last one's time: records sharing that time (an
            # occurrence an update replaced, and the new one for the same time) come in this
            # page, so none falls between two pages.
            seen = {run.job_id for run in runs}
            request["KeyConditionExpression"] = "pk = :pk AND begins_with(sk, :at)"
            request["ExpressionAttributeValues"] = {
                ":pk": str_attr(schedule_pk(schedule_id)),
                ":at": str_attr(run_sk(runs[-1].at_ms)),
            }
            del request["Limit"]
            same_time = self._db.query(**request).get("Items", [])
            runs += [r for r in map(_item_to_run, same_time) if r.job_id not in seen]
        return runs, runs[-1].at_ms if more and runs else None

    def jobs(self, keys: Sequence[JobKey]) -> dict[JobKey, Job]:
        """The job items at `keys` that exist (consistent reads, 100 per request)."""
        items = self._batch_get([key_item(k) for k in dict.fromkeys(keys)])
        return {job.key: job for job in map(item_to_job, items)}
