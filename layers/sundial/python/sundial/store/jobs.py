"""DynamoDB access for jobs, sweep cursors and idempotency keys: the only module that knows
the table's item layout.

Item kinds in the one table (pk, sk):
- job:         ("shard#<n>", "<due ms, 13 digits>#<ULID>")
- sweep cursor ("shard#<n>", "cursor"): sorts after every job key, so due-range queries never see it
- sweep done:  ("shard#<n>", "done#<sweep token>"): that sweep sent all it claimed on the shard
  (written only when it left the cursor held behind jobs it sent; sorts after job keys too)
- shard count: ("meta", "shards"): the highest shard count ever deployed
- idempotency: ("idem#<sha256(queue, key)>", "idem")
A DAG node is a job item with DAG attributes (`dag_id`, `dag`, `waiting_on`, `done_parents`,
...); the nodes of one DAG share a shard and a due time, so their keys are one contiguous
range (ids.DagKey).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from sundial.errors import Unavailable
from sundial.ids import DagKey, JobKey, shard_pk
from sundial.model.job import (
    CANCELLABLE,
    AttemptError,
    DagLink,
    Job,
    OnFailure,
    ParentResults,
    Priority,
    Status,
)
from sundial.retry import RetryPolicy
from sundial.timing import DIRECT_WINDOW_MS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

Item = dict[str, Any]

CURSOR_SK = "cursor"
SWEEP_DONE_PREFIX = "done#"
META_PK, SHARDS_SK = "meta", "shards"
IDEM_SK = "idem"
_BATCH_WRITE_ATTEMPTS = 5
_CANCELLABLE_VALUES = {f":c{i}": {"S": str(s)} for i, s in enumerate(sorted(CANCELLABLE))}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


class UnsafeWrite(RuntimeError):
    """A write that would leave a due-soon pending job that nobody owns: a sweep may already
    have passed its due time, so nothing would ever send it (THE CURSOR RULE, sundial.timing).
    Raised before anything is written; it is a bug in the calling path, never a user error."""


def check_owned(job: Job) -> None:
    """Refuse a new pending job due within the direct window unless it is `direct` (its
    writer sends it). A paused queue's due-soon job is written with its queue's `held` record
    in one transaction instead (QueueStateStore.hold_with), never through here."""
    due_soon = job.due_ms <= job.created_at_ms + DIRECT_WINDOW_MS
    if job.status is Status.PENDING and due_soon and not job.direct:
        raise UnsafeWrite(f"job {job.id} is due within the direct window but nobody sends it")


def job_to_item(job: Job) -> Item:
    item: Item = {
        "pk": _s(job.key.pk),
        "sk": _s(job.key.sk),
        "queue": _s(job.queue),
        "payload": _s(job.payload_json),
        "priority": _s(str(job.priority)),
        "status": _s(str(job.status)),
        "attempts": _n(job.attempts),
        "max_attempts": _n(job.max_attempts),
        "created_at": _n(job.created_at_ms),
    }
    for flag, is_set in (("direct", job.direct), ("chained", job.chained)):
        if is_set:
            item[flag] = {"BOOL": True}
    for name, text in (
        ("idempotency_key", job.idempotency_key),
        ("claim_token", job.claim_token),
        ("schedule_id", job.schedule_id),
        ("result", job.result_json),
    ):
        if text is not None:
            item[name] = _s(text)
    for name, value in (
        ("queued_at", job.queued_at_ms),
        ("cancelled_at", job.cancelled_at_ms),
        ("lease_until", job.lease_until_ms),
        ("expires_at", job.expires_at_s),
    ):
        if value is not None:
            item[name] = _n(value)
    for name, value in (
        ("started_at", job.started_at_ms),
        ("finished_at", job.finished_at_ms),
        ("next_attempt_at", job.next_attempt_at_ms),
        ("retry_attempt", job.retry_attempt),
        ("paused_at", job.paused_at_ms),
        ("resumed_at", job.resumed_at_ms),
    ):
        if value is not None:
            item[name] = _n(value)
    if job.retry is not None:
        item["retry"] = {"M": _retry_to_map(job.retry)}
    if job.history:
        item["history"] = {"L": [{"M": _error_to_map(e)} for e in job.history]}
    if job.retry_of is not None:
        item["retry_of"] = _s(job.retry_of.job_id)
    if job.dag is not None:
        item |= _dag_to_item(job.dag)
    return item


def _dag_to_item(dag: DagLink) -> Item:
    item: Item = {
        # Top level, as the job history reads it (sundial.history.capture); the rest in one map.
        "dag_id": _s(dag.dag_id),
        "dag": {
            "M": {
                "name": _s(dag.dag_name),
                "node": _s(dag.node),
                "index": _n(dag.index),
                # A map, not a list of pairs: half the bytes, and a wide fan-in's item (which
                # every parent's count rewrites) stays under 1 KB up to about 60 parents.
                "parents": {"M": {name: _n(i) for name, i in dag.parents}},
                "children": {"L": [{"L": [_n(i), _n(n)]} for i, n in dag.children]},
                "on_failure": _s(dag.on_failure),
                "parent_results": _s(dag.parent_results),
            }
        },
        "waiting_on": _n(dag.waiting_on),
    }
    # DynamoDB has no empty sets: an absent set is an empty one.
    for name, numbers in (
        ("done_parents", dag.done_parents),
        ("failed_parents", dag.failed_parents),
    ):
        if numbers:
            item[name] = {"NS": [str(i) for i in sorted(numbers)]}
    for name, value in (("released_by", dag.released_by), ("released_at", dag.released_at_ms)):
        if value is not None:
            item[name] = _n(value)
    if dag.results_json is not None:
        item["parent_results"] = _s(dag.results_json)
    if dag.held:
        item["held"] = {"BOOL": True}
    return item


def _second(pair: tuple[str, int]) -> int:
    return pair[1]


def _dag_from_item(item: Item) -> DagLink | None:
    if "dag" not in item:
        return None
    dag = item["dag"]["M"]
    return DagLink(
        dag_id=item["dag_id"]["S"],
        dag_name=dag["name"]["S"],
        node=dag["node"]["S"],
        index=int(dag["index"]["N"]),
        parents=tuple(
            sorted(((name, int(i["N"])) for name, i in dag["parents"]["M"].items()), key=_second)
        ),
        children=tuple((int(c["L"][0]["N"]), int(c["L"][1]["N"])) for c in dag["children"]["L"]),
        on_failure=OnFailure(dag["on_failure"]["S"]),
        parent_results=ParentResults(dag["parent_results"]["S"]),
        waiting_on=int(item.get("waiting_on", {"N": "0"})["N"]),
        done_parents=frozenset(int(i) for i in item.get("done_parents", {}).get("NS", [])),
        failed_parents=frozenset(int(i) for i in item.get("failed_parents", {}).get("NS", [])),
        released_by=_opt_int(item, "released_by"),
        released_at_ms=_opt_int(item, "released_at"),
        results_json=item["parent_results"]["S"] if "parent_results" in item else None,
        held=item.get("held", {}).get("BOOL", False),
    )


def _retry_to_map(policy: RetryPolicy) -> Item:
    return {
        "initial": _n(policy.initial_delay_seconds),
        "factor": {"N": repr(policy.factor)},
        "max": _n(policy.max_delay_seconds),
    }


def _error_to_map(error: AttemptError) -> Item:
    return {
        "attempt": _n(error.attempt),
        "at": _n(error.at_ms),
        "type": _s(error.error_type),
        "message": _s(error.message),
        "traceback": _s(error.traceback_head),
    }


def _error_from_map(value: Item) -> AttemptError:
    return AttemptError(
        attempt=int(value["attempt"]["N"]),
        at_ms=int(value["at"]["N"]),
        error_type=value["type"]["S"],
        message=value["message"]["S"],
        traceback_head=value["traceback"]["S"],
    )


def _opt_int(item: Item, name: str) -> int | None:
    return int(item[name]["N"]) if name in item else None


def item_to_job(item: Item) -> Job:
    return Job(
        key=JobKey.from_item_keys(item["pk"]["S"], item["sk"]["S"]),
        queue=item["queue"]["S"],
        payload_json=item["payload"]["S"],
        priority=Priority(item["priority"]["S"]),
        max_attempts=int(item["max_attempts"]["N"]),
        created_at_ms=int(item["created_at"]["N"]),
        status=Status(item["status"]["S"]),
        attempts=int(item["attempts"]["N"]),
        direct=item.get("direct", {}).get("BOOL", False),
        idempotency_key=item["idempotency_key"]["S"] if "idempotency_key" in item else None,
        queued_at_ms=_opt_int(item, "queued_at"),
        cancelled_at_ms=_opt_int(item, "cancelled_at"),
        claim_token=item["claim_token"]["S"] if "claim_token" in item else None,
        lease_until_ms=_opt_int(item, "lease_until"),
        expires_at_s=_opt_int(item, "expires_at"),
        retry=RetryPolicy(
            initial_delay_seconds=int(item["retry"]["M"]["initial"]["N"]),
            factor=float(item["retry"]["M"]["factor"]["N"]),
            max_delay_seconds=int(item["retry"]["M"]["max"]["N"]),
        )
        if "retry" in item
        else None,
        started_at_ms=_opt_int(item, "started_at"),
        finished_at_ms=_opt_int(item, "finished_at"),
        next_attempt_at_ms=_opt_int(item, "next_attempt_at"),
        result_json=item["result"]["S"] if "result" in item else None,
        history=[_error_from_map(e["M"]) for e in item.get("history", {}).get("L", [])],
        retry_of=JobKey.from_job_id(item["retry_of"]["S"]) if "retry_of" in item else None,
        retry_attempt=_opt_int(item, "retry_attempt"),
        dag=_dag_from_item(item),
        paused_at_ms=_opt_int(item, "paused_at"),
        resumed_at_ms=_opt_int(item, "resumed_at"),
        schedule_id=item["schedule_id"]["S"] if "schedule_id" in item else None,
        chained=item.get("chained", {}).get("BOOL", False),
    )


def _key(key: JobKey) -> Item:
    return {"pk": _s(key.pk), "sk": _s(key.sk)}


def _is_condition_failure(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def query_items(db: DynamoDBClient, request: dict[str, Any]) -> Iterator[Item]:
    """Every item a Query returns, page after page (a page holds at most 1 MB)."""
    request = dict(request)
    while True:
        page = db.query(**request)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


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
        if _is_condition_failure(error):
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


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    won: bool
    current: Job | None  # the item as it was when the claim lost; None if it won or vanished
    job: Job | None = None  # with return_job, the job as claimed (the sweeper reads no payload)


@dataclass(frozen=True, slots=True)
class DueRef:
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

    @property
    def id(self) -> str:
        return self.key.job_id

    @property
    def due_ms(self) -> int:
        return self.key.due_ms


_DUE_REF_ATTRIBUTES = (
    "pk, sk, #queue, priority, #status, direct, claim_token, lease_until, retry_of,"
    " schedule_id, chained, held"
)


def _item_to_due_ref(item: Item) -> DueRef:
    return DueRef(
        key=JobKey.from_item_keys(item["pk"]["S"], item["sk"]["S"]),
        queue=item["queue"]["S"],
        priority=Priority(item["priority"]["S"]),
        status=Status(item["status"]["S"]),
        direct=item.get("direct", {}).get("BOOL", False),
        claim_token=item["claim_token"]["S"] if "claim_token" in item else None,
        lease_until_ms=_opt_int(item, "lease_until"),
        retry_of=JobKey.from_job_id(item["retry_of"]["S"]) if "retry_of" in item else None,
        schedule_id=item["schedule_id"]["S"] if "schedule_id" in item else None,
        chained=item.get("chained", {}).get("BOOL", False),
        held=item.get("held", {}).get("BOOL", False),
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


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    job_id: str
    fingerprint: str
    created_at_ms: int


def idempotency_pk(queue: str, key: str) -> str:
    digest = hashlib.sha256(f"{queue}\n{key}".encode()).hexdigest()
    return f"idem#{digest}"


class JobStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._db = client
        self._table = table_name

    def _write_if(self, operation: str, **request: Any) -> tuple[bool, Item | None]:
        return write_if(self._db, self._table, operation, **request)

    # -- jobs -------------------------------------------------------------------------------

    def put_new(self, jobs: Sequence[Job]) -> None:
        """Write brand-new jobs (fresh ULIDs, so no condition is needed), 25 per request.
        Raises UnsafeWrite, before writing anything, for a due-soon job nobody sends."""
        for job in jobs:
            check_owned(job)
        for start in range(0, len(jobs), 25):
            requests: list[Any] = [
                {"PutRequest": {"Item": job_to_item(job)}} for job in jobs[start : start + 25]
            ]
            for _ in range(_BATCH_WRITE_ATTEMPTS):
                response = self._db.batch_write_item(
                    RequestItems={self._table: requests}, ReturnConsumedCapacity="TOTAL"
                )
                requests = list(response.get("UnprocessedItems", {}).get(self._table, []))
                if not requests:
                    break
            else:
                raise Unavailable(f"DynamoDB left {len(requests)} job writes unprocessed")

    def put_if_absent(self, job: Job) -> bool:
        """Write a job unless an item already has its key. True if this call created it.
        Raises UnsafeWrite for a due-soon job nobody sends."""
        check_owned(job)
        written, _ = self._write_if(
            "put", Item=job_to_item(job), ConditionExpression="attribute_not_exists(pk)"
        )
        return written

    def get(self, key: JobKey) -> Job | None:
        response = self._db.get_item(TableName=self._table, Key=_key(key), ConsistentRead=True)
        item = response.get("Item")
        return item_to_job(item) if item else None

    def claim(
        self,
        key: JobKey,
        *,
        token: str,
        now_ms: int,
        lease_ms: int,
        from_token: str | None = None,
        keep_expiry: bool = False,
        swept: bool = False,
        chained: bool = False,
        return_job: bool = False,
    ) -> ClaimOutcome:
        """pending -> queued, conditionally. With `from_token`, instead take over a queued job whose
        claim by `from_token` has expired (its claimer crashed before confirming the send).
        The claim clears the item's expiry (set only on direct jobs until they are claimed)
        unless `keep_expiry` (retry timers, which expire once their retention ends). A root of
        a paused DAG (`held`) is not claimed: resuming the DAG dispatches it.
        `swept`: a sweeper's claim, which never takes a direct job (another path sends it, and
        the sweeper's read may predate it becoming direct). `chained`: also record that the
        job's schedule has advanced past it."""
        if from_token is None:
            condition = "#status = :pending AND attribute_not_exists(held)"
            if swept:
                condition += " AND attribute_not_exists(direct)"
            values: Item = {":pending": _s(Status.PENDING)}
        else:
            condition = "#status = :queued AND claim_token = :old AND lease_until < :now"
            values = {":old": _s(from_token), ":now": _n(now_ms)}
        values |= {
            ":queued": _s(Status.QUEUED),
            ":token": _s(token),
            ":lease": _n(now_ms + lease_ms),
            ":at": _n(now_ms),
        }
        if chained:
            values[":true"] = {"BOOL": True}
        won, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=(
                "SET #status = :queued, claim_token = :token, lease_until = :lease,"
                " queued_at = :at"
                + (", chained = :true" if chained else "")
                + ("" if keep_expiry else " REMOVE expires_at")
            ),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=values,
            **({"ReturnValues": "ALL_NEW"} if return_job else {}),
        )
        if won:
            return ClaimOutcome(won=True, current=None, job=item_to_job(item) if item else None)
        return ClaimOutcome(won=False, current=item_to_job(item) if item else None)

    def unclaim(self, key: JobKey, *, token: str) -> bool:
        """queued -> pending after a failed send, only if the claim is still ours."""
        written, _ = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression="SET #status = :pending REMOVE claim_token, lease_until, queued_at",
            ConditionExpression="#status = :queued AND claim_token = :token",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":pending": _s(Status.PENDING),
                ":queued": _s(Status.QUEUED),
                ":token": _s(token),
            },
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
        cancelled, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression="SET #status = :cancelled, cancelled_at = :now, expires_at = :expires"
            + (", chained = :true" if chained else ""),
            ConditionExpression=f"#status IN ({', '.join(_CANCELLABLE_VALUES)})",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":cancelled": _s(Status.CANCELLED),
                ":now": _n(now_ms),
                ":expires": _n(expires_at_s),
                **_CANCELLABLE_VALUES,
                **extra,
            },
            ReturnValues="ALL_NEW",
        )
        return cancelled, item_to_job(item) if item else None

    def pause(self, key: JobKey, *, now_ms: int) -> tuple[bool, Job | None]:
        """pending -> paused, in one conditional write. Only a job waiting in the table for the
        sweeper may be paused: not one the submit or resume path is sending (direct) nor one
        already handed to SQS, and not a schedule's occurrence (its schedule parks those:
        park_write). Returns (paused now, the job as written, or as it was if not)."""
        condition = (
            "#status = :pending AND attribute_not_exists(direct)"
            " AND attribute_not_exists(schedule_id)"
        )
        paused, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression="SET #status = :paused, paused_at = :now",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":paused": _s(Status.PAUSED),
                ":pending": _s(Status.PENDING),
                ":now": _n(now_ms),
            },
            ReturnValues="ALL_NEW",
        )
        return paused, item_to_job(item) if item else None

    def resume(
        self, key: JobKey, *, now_ms: int, direct: bool, stale_before_ms: int
    ) -> tuple[bool, Job | None]:
        """paused -> pending. With `direct`, the caller sends the job itself and then claims it
        (as submit does), so the sweeper must leave it alone. A direct resume that died before
        its send left the job pending and direct; once older than `stale_before_ms` it may be
        resumed again. Returns (resumed, the job as written, or as it was if not)."""
        written, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=(
                "SET #status = :pending, resumed_at = :now"
                + (", direct = :true" if direct else "")
                + " REMOVE paused_at"
            ),
            ConditionExpression=(
                "#status = :paused"
                " OR (#status = :pending AND direct = :true AND resumed_at < :stale)"
            ),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":pending": _s(Status.PENDING),
                ":paused": _s(Status.PAUSED),
                ":true": {"BOOL": True},
                ":now": _n(now_ms),
                ":stale": _n(stale_before_ms),
            },
            ReturnValues="ALL_NEW",
        )
        return written, item_to_job(item) if item else None

    def take_direct(
        self, key: JobKey, *, now_ms: int, stale_before_ms: int
    ) -> tuple[bool, Job | None]:
        """Make a pending job this caller's to send (direct), so no sweeper claims it: for jobs
        the cursor may have passed. A job another caller took and abandoned (marked before
        `stale_before_ms`, never sent) may be taken again. Returns (taken, the job as written
        or, if not taken, as it is: not pending, someone else holds it, or its DAG is paused;
        None if there is no such job)."""
        taken, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression="SET direct = :true, resumed_at = :now",
            # A root of a paused DAG (`held`) waits for the DAG's resume, whoever asks.
            ConditionExpression=(
                "#status = :pending AND attribute_not_exists(held)"
                " AND (attribute_not_exists(direct) OR resumed_at < :stale)"
            ),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":pending": _s(Status.PENDING),
                ":true": {"BOOL": True},
                ":now": _n(now_ms),
                ":stale": _n(stale_before_ms),
            },
            ReturnValues="ALL_NEW",
        )
        return taken, item_to_job(item) if item else None

    # -- writes that go into a queue's hold transaction (QueueStateStore.hold_with) ----------

    def new_job_write(self, job: Job) -> Item:
        """A brand-new job, as one TransactWriteItems entry."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": job_to_item(job),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def resume_write(self, key: JobKey, *, now_ms: int) -> Item:
        """paused -> pending, not direct (its queue's catch-up sends it), as one entry."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": _key(key),
                "UpdateExpression": "SET #status = :pending, resumed_at = :now REMOVE paused_at",
                "ConditionExpression": "#status = :paused",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":pending": _s(Status.PENDING),
                    ":paused": _s(Status.PAUSED),
                    ":now": _n(now_ms),
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
                "Key": _key(key),
                "UpdateExpression": "SET #status = :paused, paused_at = :now REMOVE direct",
                "ConditionExpression": "#status IN (:pending, :queued) AND attempts = :zero",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":paused": _s(Status.PAUSED),
                    ":pending": _s(Status.PENDING),
                    ":queued": _s(Status.QUEUED),
                    ":zero": _n(0),
                    ":now": _n(now_ms),
                },
            }
        }

    def hand_back_write(self, key: JobKey) -> Item:
        """A direct job its caller will not send after all (its queue is paused): no longer
        direct, so the queue's catch-up may take it at once, as one entry."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": _key(key),
                "UpdateExpression": "REMOVE direct, resumed_at",
                "ConditionExpression": "#status = :pending AND direct = :true",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":pending": _s(Status.PENDING),
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

    # -- attempts (the consumer side) ------------------------------------------------------

    _RUNNABLE = (
        "(attempts = :prev AND (#status IN (:queued, :failed)"
        " OR (#status = :pending AND direct = :true)))"
    )

    def _attempt_values(self, attempt: int) -> Item:
        return {
            ":prev": _n(attempt - 1),
            ":n": _n(attempt),
            ":queued": _s(Status.QUEUED),
            ":failed": _s(Status.FAILED),
            ":pending": _s(Status.PENDING),
            ":running": _s(Status.RUNNING),
            ":true": {"BOOL": True},
        }

    def mark_running(
        self, key: JobKey, *, attempt: int, now_ms: int, taking_over_from_ms: int | None = None
    ) -> tuple[bool, Job | None]:
        """queued/failed -> running for attempt `attempt`, if that attempt is still due. With
        `taking_over_from_ms`, also running -> running for a runner that went silent, only if
        the attempt still has that start time (so two takers cannot both win)."""
        condition = self._RUNNABLE
        values = {**self._attempt_values(attempt), ":now": _n(now_ms)}
        if taking_over_from_ms is not None:
            condition += " OR (attempts = :n AND #status = :running AND started_at = :seen)"
            values[":seen"] = _n(taking_over_from_ms)
        started, old = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression="SET #status = :running, attempts = :n, started_at = :now",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=values,
        )
        return started, item_to_job(old) if old else None

    def record_attempt(
        self,
        key: JobKey,
        *,
        attempt: int,
        outcome: Status,
        started_at_ms: int,
        now_ms: int,
        result_json: str | None = None,
        error: AttemptError | None = None,
        next_attempt_at_ms: int | None = None,
        expires_at_s: int | None = None,
    ) -> tuple[bool, Job | None]:
        """End attempt `attempt` as succeeded, failed (a retry is due) or dead, in one
        conditional write. Refused if the attempt is no longer this consumer's to end (a
        duplicate delivery, a cancel, or a later attempt)."""
        sets = ["#status = :outcome", "attempts = :n", "started_at = :started"]
        removes = ["claim_token", "lease_until"]
        values: Item = {
            **self._attempt_values(attempt),
            ":outcome": _s(outcome),
            ":started": _n(started_at_ms),
        }
        if outcome is Status.FAILED:
            assert next_attempt_at_ms is not None
            sets.append("next_attempt_at = :next")
            values[":next"] = _n(next_attempt_at_ms)
        else:
            sets += ["finished_at = :now", "expires_at = :expires"]
            removes.append("next_attempt_at")
            values[":now"] = _n(now_ms)
            values[":expires"] = _n(expires_at_s or 0)
        if result_json is not None:
            sets.append("#result = :result")
            values[":result"] = _s(result_json)
        if error is not None:
            sets.append("history = list_append(if_not_exists(history, :empty), :error)")
            values[":empty"] = {"L": []}
            values[":error"] = {"L": [{"M": _error_to_map(error)}]}
        names = {"#status": "status"}
        if result_json is not None:
            names["#result"] = "result"
        written, old = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
            ConditionExpression=f"{self._RUNNABLE} OR (attempts = :n AND #status = :running)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        return written, item_to_job(old) if old else None

    def requeue(
        self,
        key: JobKey,
        *,
        extra_attempts: int,
        now_ms: int,
        stale_before_ms: int,
        only_dead: bool = False,
    ) -> tuple[bool, Job | None]:
        """A manual retry: dead, failed or cancelled -> pending (direct), with `extra_attempts`
        more attempts. The caller then sends the job and claims it, as the submit path does.
        A retry that died before its send left the job pending and direct; once older than
        `stale_before_ms` it may be retried again."""
        written, old = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=(
                "SET #status = :pending, direct = :true, max_attempts = attempts + :extra,"
                " retried_at = :now REMOVE finished_at, next_attempt_at, expires_at,"
                " cancelled_at, claim_token, lease_until"
            ),
            ConditionExpression=(
                ("#status = :dead" if only_dead else "#status IN (:dead, :failed, :cancelled)")
                + " OR (#status = :pending AND direct = :true AND retried_at < :stale)"
            ),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":pending": _s(Status.PENDING),
                ":dead": _s(Status.DEAD),
                **(
                    {}
                    if only_dead
                    else {":failed": _s(Status.FAILED), ":cancelled": _s(Status.CANCELLED)}
                ),
                ":true": {"BOOL": True},
                ":extra": _n(extra_attempts),
                ":now": _n(now_ms),
                ":stale": _n(stale_before_ms),
            },
            ReturnValues="ALL_NEW",
        )
        return written, item_to_job(old) if old else None

    def mark_dead(
        self, key: JobKey, *, error: AttemptError, now_ms: int, expires_at_s: int
    ) -> tuple[bool, Job | None]:
        """Any unfinished status -> dead, with `error` added to the history: for a message that
        SQS redrove to the DLQ because its consumer kept crashing before ending the attempt."""
        written, old = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=(
                "SET #status = :dead, finished_at = :now, expires_at = :expires,"
                " history = list_append(if_not_exists(history, :empty), :error)"
                " REMOVE next_attempt_at, claim_token, lease_until"
            ),
            ConditionExpression="attribute_exists(pk) AND NOT #status IN (:dead, :ok, :cancelled)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":dead": _s(Status.DEAD),
                ":ok": _s(Status.SUCCEEDED),
                ":cancelled": _s(Status.CANCELLED),
                ":now": _n(now_ms),
                ":expires": _n(expires_at_s),
                ":empty": {"L": []},
                ":error": {"L": [{"M": _error_to_map(error)}]},
            },
            ReturnValues="ALL_NEW",
        )
        return written, item_to_job(old) if old else None

    def mark_poisoned(
        self,
        key: JobKey,
        *,
        error_type: str,
        reason: str,
        now_ms: int,
        expires_at_s: int,
        token: str | None = None,
    ) -> bool:
        """A job that can never be dispatched as it is (its queue is not configured, its item
        is malformed, SQS rejected it as the sender's fault) -> dead, with the reason in its
        history, so it is visible on GET /jobs/{id} and no sweep stops at it again. With
        `token`, only while it is still claimed by that sweep; without, only while no one may be
        sending or running it."""
        values: Item = {
            ":dead": _s(Status.DEAD),
            ":now": _n(now_ms),
            ":expires": _n(expires_at_s),
            ":empty": {"L": []},
            ":error": {
                "L": [
                    {
                        "M": _error_to_map(
                            AttemptError(
                                attempt=0,
                                at_ms=now_ms,
                                error_type=error_type,
                                message=reason,
                                traceback_head="",
                            )
                        )
                    }
                ]
            },
        }
        if token is None:
            # A malformed item may lack a status or hold an unknown one: any but these.
            condition = (
                "attribute_exists(pk) AND (attribute_not_exists(#status)"
                " OR NOT #status IN (:queued, :running, :ok, :dead, :cancelled))"
            )
            values |= {
                ":queued": _s(Status.QUEUED),
                ":running": _s(Status.RUNNING),
                ":ok": _s(Status.SUCCEEDED),
                ":cancelled": _s(Status.CANCELLED),
            }
        else:
            condition = "#status = :queued AND claim_token = :token"
            values |= {":queued": _s(Status.QUEUED), ":token": _s(token)}
        written, _ = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=(
                "SET #status = :dead, finished_at = :now, expires_at = :expires,"
                " history = list_append(if_not_exists(history, :empty), :error)"
                " REMOVE claim_token, lease_until"
            ),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=values,
        )
        return written

    def query_due(self, shard: int, *, from_sk: str, to_sk: str) -> Iterator[Job]:
        """Jobs of one shard with from_sk <= sk <= to_sk, in due order, across pages."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": _s(shard_pk(shard)),
                ":from": _s(from_sk),
                ":to": _s(to_sk),
            },
            # A job written just before the sweep must not be missed.
            "ConsistentRead": True,
        }
        for item in query_items(self._db, request):
            yield item_to_job(item)

    # -- DAG nodes --------------------------------------------------------------------------

    def dag_nodes(self, dag: DagKey) -> list[Job]:
        """Every node of a DAG that exists, in node order: one range query on its shard."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
            # A job that happens to share the range is not one of the DAG's nodes.
            "FilterExpression": "dag_id = :dag",
            "ExpressionAttributeValues": {
                ":pk": _s(shard_pk(dag.shard)),
                ":first": _s(dag.node_key(0).sk),
                ":last": _s(dag.node_key(dag.node_count - 1).sk),
                ":dag": _s(dag.dag_id),
            },
            "ConsistentRead": True,
        }
        return [item_to_job(item) for item in query_items(self._db, request)]

    def count_finished_parent(
        self, key: JobKey, *, parent: int, failed: bool, expires_at_s: int
    ) -> tuple[bool, Job | None]:
        """Count a blocked node's parent as finished, once: ADD -1 to its waiting_on, unless the
        parent is already in done_parents. Returns (counted, the node after the write, or as it
        was if not). Exactly one parent's write takes waiting_on to 0. The node's expiry moves
        on: it expires `expires_at_s` unless released before (an abandoned DAG must not linger)."""
        counted, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=(
                "ADD waiting_on :minus_one, done_parents :parents"
                + (", failed_parents :parents" if failed else "")
                + " SET expires_at = :expires"
            ),
            ConditionExpression="#status = :blocked AND NOT contains(done_parents, :parent)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":minus_one": _n(-1),
                ":parents": {"NS": [str(parent)]},
                ":parent": _n(parent),
                ":blocked": _s(Status.BLOCKED),
                ":expires": _n(expires_at_s),
            },
            ReturnValues="ALL_NEW",
        )
        return counted, item_to_job(item) if item else None

    def release_node(
        self,
        key: JobKey,
        *,
        token: str,
        now_ms: int,
        last_parent: int | None = None,
        failed: bool = False,
        released_by: int | None = None,
        results_json: str | None = None,
        unless_queues: Collection[str] = (),
        queue_paused: bool = False,
    ) -> tuple[bool, Job | None]:
        """blocked -> queued, for a node all of whose parents have finished and whose DAG is not
        paused. The caller sends it to SQS next (a crash in between is repaired by the parent's
        redelivery, see services.dags). With `last_parent`, that parent is counted in the same
        write (the node's only remaining parent): a one-parent node costs no extra write.
        `unless_queues`: refuse a node on one of these queues (the paused ones).
        `queue_paused`: the node's queue is paused, so it becomes an ordinary pending job
        instead (not direct, so a queue's catch-up may take it; store.queue_states), which the
        caller records for the catch-up.
        Returns (released, the node after the write, or as it was if not)."""
        values: Item = {
            ":blocked": _s(Status.BLOCKED),
            ":now": _n(now_ms),
            ":zero": _n(0),
        }
        if queue_paused:
            values[":pending"] = _s(Status.PENDING)
            sets = ["#status = :pending", "released_at = :now"]
        else:
            values |= {":queued": _s(Status.QUEUED), ":token": _s(token)}
            sets = [
                "#status = :queued",
                "claim_token = :token",
                "lease_until = :now",
                "queued_at = :now",
                "released_at = :now",
            ]
        adds: list[str] = []
        condition = "#status = :blocked AND attribute_not_exists(held)"
        if unless_queues:
            names = {f":queue{i}": _s(queue) for i, queue in enumerate(sorted(unless_queues))}
            condition += f" AND NOT (#queue IN ({', '.join(names)}))"
            values |= names
        if last_parent is None:
            condition += " AND waiting_on = :zero"
        else:
            condition += " AND waiting_on = :one AND NOT contains(done_parents, :parent)"
            sets.append("waiting_on = :zero")
            adds.append("done_parents :parents" + (", failed_parents :parents" if failed else ""))
            values |= {
                ":one": _n(1),
                ":parent": _n(last_parent),
                ":parents": {"NS": [str(last_parent)]},
            }
        if released_by is not None:
            sets.append("released_by = :by")
            values[":by"] = _n(released_by)
        if results_json is not None:
            sets.append("parent_results = :results")
            values[":results"] = _s(results_json)
        released, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=f"SET {', '.join(sets)}"
            + (f" ADD {', '.join(adds)}" if adds else "")
            + (" REMOVE expires_at, direct" if queue_paused else " REMOVE expires_at"),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#status": "status"}
            | ({"#queue": "queue"} if unless_queues else {}),
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        return released, item_to_job(item) if item else None

    def hold_node(self, key: JobKey) -> tuple[bool, Job | None]:
        """Pause a DAG node that is not yet released: blocked, or a pending root. Returns
        (held now, the node after the write or as it was)."""
        held, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression="SET held = :true",
            ConditionExpression="#status IN (:blocked, :pending)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":true": {"BOOL": True},
                ":blocked": _s(Status.BLOCKED),
                ":pending": _s(Status.PENDING),
            },
            ReturnValues="ALL_NEW",
        )
        return held, item_to_job(item) if item else None

    def unhold_node(self, key: JobKey, *, make_direct: bool) -> tuple[bool, Job | None]:
        """Resume a held DAG node. `make_direct`: a pending root that is due by now (or soon),
        which the caller then sends itself; marking it direct keeps sweepers off it."""
        unheld, item = self._write_if(
            "update",
            Key=_key(key),
            UpdateExpression=("SET direct = :true " if make_direct else "") + "REMOVE held",
            ConditionExpression="attribute_exists(held)",
            **({"ExpressionAttributeValues": {":true": {"BOOL": True}}} if make_direct else {}),
            ReturnValues="ALL_NEW",
        )
        return unheld, item_to_job(item) if item else None

    def query_due_refs(
        self, shard: int, *, from_sk: str, to_sk: str
    ) -> Iterator[DueRef | Malformed]:
        """As query_due, but only what a sweep decides on (no payload), so a whole backlog
        fits in a sweeper's memory."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ProjectionExpression": _DUE_REF_ATTRIBUTES,
            "ExpressionAttributeNames": {"#queue": "queue", "#status": "status"},
            "ExpressionAttributeValues": {
                ":pk": _s(shard_pk(shard)),
                ":from": _s(from_sk),
                ":to": _s(to_sk),
            },
            "ConsistentRead": True,
        }
        for item in query_items(self._db, request):
            try:
                yield _item_to_due_ref(item)
            except (KeyError, ValueError, TypeError) as error:
                # One bad item must not stop the sweep of its shard: hand it over as such.
                yield Malformed(_job_key_or_none(item), f"malformed job item: {error!r}")

    # -- sweep cursors ----------------------------------------------------------------------

    def read_cursors(self, shards: Sequence[int]) -> dict[int, str]:
        """The sweep cursor of each shard that has one: the lowest sort key still to look at."""
        cursors: dict[int, str] = {}
        for start in range(0, len(shards), 100):
            keys: list[Any] = [
                {"pk": _s(shard_pk(s)), "sk": _s(CURSOR_SK)} for s in shards[start : start + 100]
            ]
            request: dict[str, Any] = {
                self._table: {
                    "Keys": keys,
                    "ConsistentRead": True,
                    "ProjectionExpression": "pk, #c",
                }
            }
            request[self._table]["ExpressionAttributeNames"] = {"#c": "cursor"}
            for _ in range(_BATCH_WRITE_ATTEMPTS):
                response = self._db.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    shard = int(item["pk"]["S"].removeprefix("shard#"))
                    cursors[shard] = item["cursor"]["S"]
                request = dict(response.get("UnprocessedKeys", {}))
                if not request:
                    break
            else:
                raise Unavailable("DynamoDB left sweep cursors unread")
        return cursors

    def advance_cursor(self, shard: int, cursor: str) -> bool:
        """Move a shard's cursor forward, never back: concurrent sweepers may race here."""
        moved, _ = self._write_if(
            "update",
            Key={"pk": _s(shard_pk(shard)), "sk": _s(CURSOR_SK)},
            UpdateExpression="SET #c = :c",
            ConditionExpression="attribute_not_exists(#c) OR #c < :c",
            ExpressionAttributeNames={"#c": "cursor"},
            ExpressionAttributeValues={":c": _s(cursor)},
        )
        return moved

    def record_sweep_done(
        self, shard: int, token: str, *, expires_at_s: int, not_sent: Collection[str] = ()
    ) -> None:
        """Record that sweep `token` finished on `shard`: it sent every job it claimed there
        except `not_sent` (ids whose send failed or whose claim's outcome is unknown). A later
        sweep that meets this sweep's claims behind a held cursor takes only the others as sent
        (THE CURSOR RULE, sundial.timing)."""
        item: Item = {
            "pk": _s(shard_pk(shard)),
            "sk": _s(f"{SWEEP_DONE_PREFIX}{token}"),
            "expires_at": _n(expires_at_s),
        }
        if not_sent:  # a string set cannot be empty
            item["not_sent"] = {"SS": sorted(not_sent)}
        self._db.put_item(TableName=self._table, Item=item)

    def sweep_done(self, shard: int, token: str) -> frozenset[str] | None:
        """None if sweep `token` has not finished on `shard`; else the ids it did not send."""
        response = self._db.get_item(
            TableName=self._table,
            Key={"pk": _s(shard_pk(shard)), "sk": _s(f"{SWEEP_DONE_PREFIX}{token}")},
            ConsistentRead=True,
        )
        item = response.get("Item")
        if item is None:
            return None
        return frozenset(item.get("not_sent", {}).get("SS", []))

    # -- shard count ------------------------------------------------------------------------

    def recorded_shard_count(self) -> int:
        response = self._db.get_item(
            TableName=self._table, Key={"pk": _s(META_PK), "sk": _s(SHARDS_SK)}, ConsistentRead=True
        )
        item = response.get("Item")
        return int(item["shard_count"]["N"]) if item else 0

    def record_shard_count(self, shard_count: int) -> None:
        """Raise the recorded shard count; a lower value is ignored (shards only grow)."""
        self._write_if(
            "update",
            Key={"pk": _s(META_PK), "sk": _s(SHARDS_SK)},
            UpdateExpression="SET shard_count = :n",
            ConditionExpression="attribute_not_exists(shard_count) OR shard_count < :n",
            ExpressionAttributeValues={":n": _n(shard_count)},
        )

    # -- idempotency keys -------------------------------------------------------------------

    def remember_idempotency_key(
        self, *, queue: str, key: str, record: IdempotencyRecord, expires_at_s: int
    ) -> IdempotencyRecord | None:
        """Store the key -> job mapping unless the key is taken. Returns the existing record if
        it was taken (it costs no extra read: the failed condition returns it)."""
        written, old = self._write_if(
            "put",
            Item={
                "pk": _s(idempotency_pk(queue, key)),
                "sk": _s(IDEM_SK),
                "job_id": _s(record.job_id),
                "fingerprint": _s(record.fingerprint),
                "created_at": _n(record.created_at_ms),
                "expires_at": _n(expires_at_s),
            },
            ConditionExpression="attribute_not_exists(pk)",
        )
        if written:
            return None
        if not old:
            raise Unavailable("idempotency record changed concurrently; retry")
        return IdempotencyRecord(
            job_id=old["job_id"]["S"],
            fingerprint=old["fingerprint"]["S"],
            created_at_ms=int(old["created_at"]["N"]),
        )
