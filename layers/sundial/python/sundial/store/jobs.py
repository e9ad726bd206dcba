"""Job items and their transitions before an attempt runs: written, claimed by a direct
sender, cancelled, paused, resumed, held for a paused queue, or poisoned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sundial.errors import Unavailable
from sundial.ids import JobKey
from sundial.model.job import (
    CANCELLABLE,
    AttemptError,
    Job,
    Status,
)
from sundial.model.placement import due_soon
from sundial.timing import CLOCK_SKEW_MS, SWEEP_LOOKAHEAD_MS

if TYPE_CHECKING:
    pass
from sundial.store.job_items import (
    MARK_DEAD,
    MOVED,
    JobItemStore,
    appended_error,
    item_to_job,
    job_to_item,
    pointer_item,
)
from sundial.store.table import (
    BATCH_ATTEMPTS,
    Item,
    key_item,
    num_attr,
    str_attr,
    transact,
)

_CANCELLABLE_VALUES = {f":c{i}": {"S": str(s)} for i, s in enumerate(sorted(CANCELLABLE))}


class UnsafeWrite(RuntimeError):
    """A write that would leave a due-soon pending job that nobody owns: a sweep may already
    have passed its due time, so nothing would ever send it (THE OWNER RULE, docs/invariants.md).
    Raised before anything is written; it is a bug in the calling path, never a user error."""


def check_owned(job: Job, now_ms: int) -> None:
    """Refuse a new pending job due within the direct window unless it is `direct` (its
    writer sends it). `now_ms`: the clock as the write is made, never the job's first submit
    (a retry timer carries its job's `created_at`, and a slow call reaches its write late). A
    paused queue's due-soon job is written with its queue's `held` record in one transaction
    instead (QueueStateStore.hold_with), never through here."""
    if job.status is Status.PENDING and due_soon(job.due_ms, now_ms) and not job.direct:
        raise UnsafeWrite(f"job {job.id} is due within the direct window but nobody sends it")


def may_be_behind_a_sweep(due_ms: int, *, written_by_ms: int) -> bool:
    """Whether a pending job written by `written_by_ms` (the writer's clock once its write
    returned) may be due at or below a cursor already: a sweep passes `due_ms` only if it read
    its range at some s with s + SWEEP_LOOKAHEAD_MS >= due_ms, and a read after the write saw
    the job; so the write is safe if written_by_ms + SWEEP_LOOKAHEAD_MS (+ the clocks' skew) is
    still short of due_ms. Otherwise the writer must send the job itself."""
    return written_by_ms + SWEEP_LOOKAHEAD_MS + CLOCK_SKEW_MS >= due_ms


class JobStore(JobItemStore):
    """The job items of the table (see sundial.store for the layout)."""

    def put_new(self, jobs: Sequence[Job], *, now_ms: int) -> None:
        """Write brand-new jobs (fresh ULIDs, so no condition is needed), 25 per request.
        Raises UnsafeWrite, before writing anything, for a due-soon job nobody sends (as of
        `now_ms`, the caller's clock just before this write)."""
        for job in jobs:
            check_owned(job, now_ms)
        for start in range(0, len(jobs), 25):
            requests: list[Any] = [
                {"PutRequest": {"Item": job_to_item(job)}} for job in jobs[start : start + 25]
            ]
            for _ in range(BATCH_ATTEMPTS):
                response = self._db.batch_write_item(
                    RequestItems={self._table: requests}, ReturnConsumedCapacity="TOTAL"
                )
                requests = list(response.get("UnprocessedItems", {}).get(self._table, []))
                if not requests:
                    break
            else:
                raise Unavailable(f"DynamoDB left {len(requests)} job writes unprocessed")

    def put_if_absent(self, job: Job, *, now_ms: int) -> bool:
        """Write a job unless an item already has its key. True if this call created it.
        Raises UnsafeWrite for a due-soon job nobody sends (as of `now_ms`, as put_new)."""
        check_owned(job, now_ms)
        written, _ = self._write_if(
            "put", Item=job_to_item(job), ConditionExpression="attribute_not_exists(pk)"
        )
        return written

    def get(self, key: JobKey) -> Job | None:
        """The job whose id names `key`, wherever a move put it."""
        return self._get_job(key)

    def claim(
        self, key: JobKey, *, token: str, now_ms: int, lease_ms: int, chained: bool = False
    ) -> bool:
        """pending -> queued, conditionally: the direct sender's record that it sent the job
        (submit, a resume or take, a retry, a queue's catch-up: services.direct). The claim
        clears the item's expiry (set only on direct jobs until they are claimed). A root of a
        paused DAG (`held`) is not claimed: resuming the DAG dispatches it. `chained`: also
        record that the job's schedule has advanced past it. False, writing nothing, if the
        job is no longer pending."""
        values: Item = {
            ":pending": str_attr(Status.PENDING),
            ":queued": str_attr(Status.QUEUED),
            ":token": str_attr(token),
            ":lease": num_attr(now_ms + lease_ms),
            ":at": num_attr(now_ms),
        }
        if chained:
            values[":true"] = {"BOOL": True}
        won, _ = self._update_job(
            key,
            update=(
                "SET #status = :queued, claim_token = :token, lease_until = :lease,"
                " queued_at = :at" + (", chained = :true" if chained else "") + " REMOVE expires_at"
            ),
            condition="#status = :pending AND attribute_not_exists(held)",
            values=values,
            returns=None,
        )
        return won

    def expire_sent_timer(self, key: JobKey, *, expires_at_s: int) -> bool:
        """A retry timer a sweep has sent: from now on bookkeeping, it expires at
        `expires_at_s` (it had none while a pause could hold it back: model.job.retry_timer).
        Only a timer still pending without an expiry (False otherwise, writing nothing)."""
        written, _ = self._update_job(
            key,
            update="SET expires_at = :expires",
            condition="#status = :pending AND attribute_exists(retry_of)"
            " AND attribute_not_exists(expires_at)",
            values={":pending": str_attr(Status.PENDING), ":expires": num_attr(expires_at_s)},
            returns=None,
        )
        return written

    def cancel(
        self, key: JobKey, *, now_ms: int, expires_at_s: int, chained: bool = False
    ) -> tuple[bool, Job | None]:
        """Cancel if pending, queued, failed, blocked or paused. Returns (cancelled now, the job
        as cancelled, or as it was if not). `chained`: a schedule's occurrence whose successor is
        already written.

        One conditional write and no read: a missing item fails the condition too, and comes back
        as (False, None).
        """
        extra: Item = {":true": {"BOOL": True}} if chained else {}
        return self._update_job(
            key,
            update="SET #status = :cancelled, cancelled_at = :now, expires_at = :expires"
            + (", chained = :true" if chained else ""),
            follow=True,
            condition=f"#status IN ({', '.join(_CANCELLABLE_VALUES)})",
            values={
                ":cancelled": str_attr(Status.CANCELLED),
                ":now": num_attr(now_ms),
                ":expires": num_attr(expires_at_s),
                **_CANCELLABLE_VALUES,
                **extra,
            },
        )

    def pause(self, key: JobKey, *, now_ms: int) -> tuple[bool, Job | None]:
        """pending -> paused, in one conditional write. Only a job waiting in the table for the
        sweeper may be paused: not one the submit or resume path is sending (direct) nor one
        already handed to SQS, and not a schedule's occurrence (its schedule parks those:
        park_write). Returns (paused now, the job as written, or as it was if not)."""
        condition = (
            "#status = :pending AND attribute_not_exists(direct)"
            " AND attribute_not_exists(schedule_id)"
        )
        return self._update_job(
            key,
            update="SET #status = :paused, paused_at = :now",
            condition=condition,
            follow=True,
            values={
                ":paused": str_attr(Status.PAUSED),
                ":pending": str_attr(Status.PENDING),
                ":now": num_attr(now_ms),
            },
        )

    def resume(
        self, key: JobKey, *, now_ms: int, direct: bool, stale_before_ms: int
    ) -> tuple[bool, Job | None]:
        """paused -> pending. With `direct`, the caller sends the job itself and then claims it
        (as submit does), so the sweeper must leave it alone. A direct resume that died before
        its send left the job pending and direct; once older than `stale_before_ms` it may be
        resumed again. Returns (resumed, the job as written, or as it was if not)."""
        return self._update_job(
            key,
            update=(
                "SET #status = :pending, resumed_at = :now"
                + (", direct = :true" if direct else "")
                + " REMOVE paused_at"
            ),
            condition=(
                "#status = :paused"
                " OR (#status = :pending AND direct = :true AND resumed_at < :stale)"
            ),
            values={
                ":pending": str_attr(Status.PENDING),
                ":paused": str_attr(Status.PAUSED),
                ":true": {"BOOL": True},
                ":now": num_attr(now_ms),
                ":stale": num_attr(stale_before_ms),
            },
        )

    def take_direct(
        self, key: JobKey, *, now_ms: int, stale_before_ms: int
    ) -> tuple[bool, Job | None]:
        """Make a pending job this caller's to send (direct), so no sweeper claims it: for jobs
        the cursor may have passed. A job another caller made direct and abandoned (every call
        that did so, its submit, a resume or take, a retry, began before `stale_before_ms`, and
        it is still unsent) may be taken again. Returns (taken, the job as written or, if not
        taken, as it is: not pending, someone else holds it, or its DAG is paused; None if
        there is no such job)."""
        return self._update_job(
            key,
            update="SET direct = :true, resumed_at = :now",
            # A root of a paused DAG (`held`) waits for the DAG's resume, whoever asks.
            condition=(
                "#status = :pending AND attribute_not_exists(held)"
                " AND (attribute_not_exists(direct) OR (created_at < :stale"
                " AND (attribute_not_exists(resumed_at) OR resumed_at < :stale)"
                " AND (attribute_not_exists(retried_at) OR retried_at < :stale)))"
            ),
            values={
                ":pending": str_attr(Status.PENDING),
                ":true": {"BOOL": True},
                ":now": num_attr(now_ms),
                ":stale": num_attr(stale_before_ms),
            },
        )

    def new_job_write(self, job: Job) -> Item:
        """A brand-new job, as one TransactWriteItems entry."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": job_to_item(job),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def replace_write(self, key: JobKey, *, now_ms: int, expires_at_s: int) -> Item:
        """A schedule's occurrence that an update replaces before anything decided it, as one
        entry: cancelled, and `chained` (the update names its successor), only while pending,
        paused or already cancelled; a claimed one has been decided and keeps running."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": key_item(key),
                "UpdateExpression": "SET #status = :cancelled, chained = :true,"
                " cancelled_at = if_not_exists(cancelled_at, :now), expires_at = :expires",
                "ConditionExpression": "#status IN (:pending, :paused, :cancelled)",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":cancelled": str_attr(Status.CANCELLED),
                    ":pending": str_attr(Status.PENDING),
                    ":paused": str_attr(Status.PAUSED),
                    ":true": {"BOOL": True},
                    ":now": num_attr(now_ms),
                    ":expires": num_attr(expires_at_s),
                },
            }
        }

    def resume_write(self, key: JobKey, *, now_ms: int) -> Item:
        """paused -> pending, not direct (its queue's catch-up sends it), as one entry."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": key_item(key),
                "UpdateExpression": "SET #status = :pending, resumed_at = :now REMOVE paused_at",
                "ConditionExpression": "#status = :paused",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":pending": str_attr(Status.PENDING),
                    ":paused": str_attr(Status.PAUSED),
                    ":now": num_attr(now_ms),
                },
            }
        }

    def park_write(self, key: JobKey, *, now_ms: int) -> Item:
        """A paused schedule's occurrence, pending or queued with its first attempt not yet
        run -> paused (and no longer direct), as one entry (ScheduleStore.park). A queued one's
        message still arrives; the consumer's fence skips a paused job."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": key_item(key),
                "UpdateExpression": "SET #status = :paused, paused_at = :now REMOVE direct",
                "ConditionExpression": "#status IN (:pending, :queued) AND attempts = :zero",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":paused": str_attr(Status.PAUSED),
                    ":pending": str_attr(Status.PENDING),
                    ":queued": str_attr(Status.QUEUED),
                    ":zero": num_attr(0),
                    ":now": num_attr(now_ms),
                },
            }
        }

    def hand_back_write(self, key: JobKey) -> Item:
        """A direct job its caller will not send after all (its queue is paused): no longer
        direct, so the queue's catch-up may take it at once, as one entry."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": key_item(key),
                "UpdateExpression": "REMOVE direct, resumed_at",
                "ConditionExpression": "#status = :pending AND direct = :true",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":pending": str_attr(Status.PENDING),
                    ":true": {"BOOL": True},
                },
            }
        }

    def put_or_existing(self, job: Job) -> tuple[bool, Job]:
        """Write a job unless its key exists. Returns (created, the job as stored): a failed
        condition returns the existing item at no extra cost."""
        written, old = self._write_if(
            "put", Item=job_to_item(job), ConditionExpression="attribute_not_exists(pk)"
        )
        if written or not old:
            return written, job
        return False, item_to_job(old)

    def mark_poisoned(
        self,
        key: JobKey,
        *,
        error_type: str,
        reason: str,
        now_ms: int,
        expires_at_s: int,
        swept: bool = False,
    ) -> bool:
        """A job that can never be dispatched as it is (its queue is not configured, its item
        is malformed, SQS rejected it as the sender's fault) -> dead, with the reason in its
        history, so it is visible on GET /jobs/{id} and no sweep stops at it again. `swept`:
        a sweep's, only while the job still waits for a sweep (pending, not direct); without,
        only while no one may be sending or running it."""
        error = AttemptError(
            attempt=0, at_ms=now_ms, error_type=error_type, message=reason, traceback_head=""
        )
        values: Item = {
            ":dead": str_attr(Status.DEAD),
            ":now": num_attr(now_ms),
            ":expires": num_attr(expires_at_s),
            **appended_error(error),
        }
        if not swept:
            # A malformed item may lack a status or hold an unknown one: any but these.
            condition = (
                "attribute_exists(pk) AND (attribute_not_exists(#status)"
                " OR NOT #status IN (:queued, :running, :ok, :dead, :cancelled, :moved))"
            )
            values |= {
                ":moved": str_attr(MOVED),  # a moved job's pointer is not a job
                ":queued": str_attr(Status.QUEUED),
                ":running": str_attr(Status.RUNNING),
                ":ok": str_attr(Status.SUCCEEDED),
                ":cancelled": str_attr(Status.CANCELLED),
            }
        else:
            condition = "#status = :pending AND attribute_not_exists(direct)"
            values |= {":pending": str_attr(Status.PENDING)}
        written, _ = self._update_job(
            key,
            update=MARK_DEAD,
            condition=condition,
            values=values,
            returns=None,
        )
        return written

    # -- moves (PATCH /jobs/{id}, sundial.services.moves) ------------------------------------

    def move_writes(self, current: Job, moved: Job) -> list[Item]:
        """The TransactWriteItems entries that replace `current` (as read) by `moved`: at its
        key (its time did not change), or at a new key with the pointer at its origin naming it
        and the job's previous item gone (sundial.store.job_items). Each entry is conditional
        on what it replaces being exactly as read, so a racing claim, cancel, pause, resume or
        second move fails the whole transaction instead of leaving zero or two copies."""
        origin = current.origin or current.key
        as_read = self._as_read(current)
        if moved.key == current.key:
            return [self._put(moved, as_read)]
        pointer = pointer_item(origin, to=moved.key, revision=moved.revision)
        still_pointing = _condition("moved_to = :at", {":at": str_attr(current.key.sk)}, names={})
        if current.key == origin:  # its first move: the job's item becomes the pointer
            return [
                self._put(moved, _condition("attribute_not_exists(pk)", {}, names={})),
                self._put_item(pointer, as_read),
            ]
        delete = {"Delete": {"TableName": self._table, "Key": key_item(current.key), **as_read}}
        if moved.key == origin:  # back to where its id points: the job replaces the pointer
            return [self._put(moved, still_pointing), delete]
        return [
            self._put(moved, _condition("attribute_not_exists(pk)", {}, names={})),
            delete,
            self._put_item(pointer, still_pointing),
        ]

    def move(self, current: Job, moved: Job) -> bool:
        """Replace `current` by `moved` (move_writes), all or nothing. False if anything changed
        since `current` was read (nothing is written then)."""
        writes = self.move_writes(current, moved)
        if len(writes) == 1:  # a change in place: one conditional PutItem (1 WCU, not 2)
            put = writes[0]["Put"]
            written, _ = self._write_if(
                "put",
                Item=put["Item"],
                ConditionExpression=put["ConditionExpression"],
                ExpressionAttributeNames=put["ExpressionAttributeNames"],
                ExpressionAttributeValues=put["ExpressionAttributeValues"],
            )
            return written
        return not transact(self._db, writes)

    def _as_read(self, job: Job) -> Item:
        """A condition that the job's item is still in the state `job` was read in: the same
        status, revision, claim and direct owner (the fields every racing write changes)."""
        parts = ["#status = :status"]
        values: Item = {":status": str_attr(job.status)}
        if job.revision:
            parts.append("revision = :revision")
            values[":revision"] = num_attr(job.revision)
        else:
            parts.append("attribute_not_exists(revision)")
        if job.claim_token is not None:
            parts.append("claim_token = :token")
            values[":token"] = str_attr(job.claim_token)
        else:
            parts.append("attribute_not_exists(claim_token)")
        if job.direct:
            parts.append("direct = :true")
            values[":true"] = {"BOOL": True}
            if job.resumed_at_ms is not None:  # a take (resume, catch-up) renews resumed_at
                parts.append("resumed_at = :resumed")
                values[":resumed"] = num_attr(job.resumed_at_ms)
        else:
            parts.append("attribute_not_exists(direct)")
        return _condition(" AND ".join(parts), values, names={"#status": "status"})

    def _put(self, job: Job, condition: Item) -> Item:
        return self._put_item(job_to_item(job), condition)

    def _put_item(self, item: Item, condition: Item) -> Item:
        return {"Put": {"TableName": self._table, "Item": item, **condition}}


def _condition(expression: str, values: Item, *, names: dict[str, str]) -> Item:
    """A transaction entry's condition: expression, names and values (DynamoDB refuses empty
    maps, so they are left out when empty)."""
    condition: Item = {"ConditionExpression": expression}
    if names:
        condition["ExpressionAttributeNames"] = names
    if values:
        condition["ExpressionAttributeValues"] = values
    return condition
