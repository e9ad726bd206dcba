"""A job as one DynamoDB item and back: the job item's layout (key, attributes, the DAG map).

A job moved in time (PATCH /jobs/{id}, sundial.services.moves) lives at a new key, at its new
due time, so the sweeps find it there as any job; the item at the key its id names (its
`origin`) becomes a POINTER: {status: "moved", moved_to: <the job's sort key>, revision}. Every
read and conditional update by key follows a pointer (at most one hop: a move rewrites the
pointer and deletes the job's previous item in one transaction), so every path addressed by id
(get, cancel, pause, resume, retry, a consumer's fence and attempt writes) works unchanged. A
pointer matches no condition on a job's status, so it is never taken for a job; due-range
queries leave pointers out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError

from sundial.errors import Unavailable
from sundial.ids import JobKey
from sundial.model.job import (
    AttemptError,
    DagLink,
    Job,
    Move,
    OnFailure,
    ParentResults,
    Priority,
    Status,
)
from sundial.model.payloads import PayloadRef
from sundial.retry import RetryPolicy

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
from sundial.store.table import (
    Item,
    TableAdapter,
    is_condition_failure,
    key_item,
    num_attr,
    opt_int,
    str_attr,
)


def job_to_item(job: Job) -> Item:
    item: Item = {
        "pk": str_attr(job.key.pk),
        "sk": str_attr(job.key.sk),
        "queue": str_attr(job.queue),
        "payload": str_attr(job.payload_json),
        "priority": str_attr(str(job.priority)),
        "status": str_attr(str(job.status)),
        "attempts": num_attr(job.attempts),
        "max_attempts": num_attr(job.max_attempts),
        "created_at": num_attr(job.created_at_ms),
        # A payload stored in S3: its reference (sundial.model.payloads), a few hundred bytes.
        **({"payload_ref": {"M": _payload_ref_to_map(job.payload_ref)}} if job.payload_ref else {}),
    }
    for flag, is_set in (("direct", job.direct), ("chained", job.chained)):
        if is_set:
            item[flag] = {"BOOL": True}
    for name, text in (
        ("idempotency_key", job.idempotency_key),
        ("claim_token", job.claim_token),
        ("schedule_id", job.schedule_id),
        ("result", job.result_json),
        ("correlation_id", job.correlation_id),
        ("runner", job.runner),
    ):
        if text is not None:
            item[name] = str_attr(text)
    for name, value in (
        ("queued_at", job.queued_at_ms),
        ("cancelled_at", job.cancelled_at_ms),
        ("lease_until", job.lease_until_ms),
        ("expires_at", job.expires_at_s),
        ("runner_until", job.runner_until_ms),
    ):
        if value is not None:
            item[name] = num_attr(value)
    for name, value in (
        ("started_at", job.started_at_ms),
        ("finished_at", job.finished_at_ms),
        ("next_attempt_at", job.next_attempt_at_ms),
        ("retry_attempt", job.retry_attempt),
        ("paused_at", job.paused_at_ms),
        ("resumed_at", job.resumed_at_ms),
        ("retried_at", job.retried_at_ms),
    ):
        if value is not None:
            item[name] = num_attr(value)
    if job.retry is not None:
        item["retry"] = {"M": _retry_to_map(job.retry)}
    if job.history:
        item["history"] = {"L": [{"M": error_to_map(e)} for e in job.history]}
    if job.retry_of is not None:
        item["retry_of"] = str_attr(job.retry_of.job_id)
    if job.dag is not None:
        item |= _dag_to_item(job.dag)
    return item | _moves_to_item(job)


def _moves_to_item(job: Job) -> Item:
    """A moved job's attributes: its origin, revision and moves (none for a job never moved)."""
    item: Item = {}
    if job.origin is not None:
        item["origin"] = str_attr(job.origin.sk)
    if job.revision:
        item["revision"] = num_attr(job.revision)
    if job.moves:
        item["moves"] = {"L": [{"M": move_to_map(m)} for m in job.moves]}
    return item


# A pointer's status: the job moved to another key (see the module docstring).
MOVED = "moved"


def pointer_item(origin: JobKey, *, to: JobKey, revision: int) -> Item:
    """The item left at a moved job's origin: where the job is now. It has no expiry of its
    own: it must resolve the id as long as the job's item lives, which a paused or retried job
    can do for any time; it is deleted once the job's item expires (MovedJobPointers)."""
    return {
        **key_item(origin),
        "status": str_attr(MOVED),
        "moved_to": str_attr(to.sk),
        "revision": num_attr(revision),
    }


def pointer_target(item: Item) -> JobKey | None:
    """The job's current key, if `item` is a moved job's pointer; else None."""
    if "moved_to" not in item:
        return None
    return JobKey.from_item_keys(item["pk"]["S"], item["moved_to"]["S"])


def move_to_map(move: Move) -> Item:
    return {
        "at": num_attr(move.at_ms),
        "from": num_attr(move.from_run_at_ms),
        "to": num_attr(move.to_run_at_ms),
        "changed": {"L": [str_attr(name) for name in move.changed]},
        **({"request": str_attr(move.request)} if move.request is not None else {}),
    }


def _move_from_map(value: Item) -> Move:
    return Move(
        at_ms=int(value["at"]["N"]),
        from_run_at_ms=int(value["from"]["N"]),
        to_run_at_ms=int(value["to"]["N"]),
        changed=tuple(name["S"] for name in value["changed"]["L"]),
        request=value["request"]["S"] if "request" in value else None,
    )


def _dag_to_item(dag: DagLink) -> Item:
    item: Item = {
        # Top level, as the job history reads it (sundial.history.capture); the rest in one map.
        "dag_id": str_attr(dag.dag_id),
        "dag": {
            "M": {
                "name": str_attr(dag.dag_name),
                "node": str_attr(dag.node),
                "index": num_attr(dag.index),
                # A map, not a list of pairs: half the bytes, and a wide fan-in's item (which
                # every parent's count rewrites) stays under 1 KB up to about 60 parents.
                "parents": {"M": {name: num_attr(i) for name, i in dag.parents}},
                "children": {"L": [{"L": [num_attr(i), num_attr(n)]} for i, n in dag.children]},
                "on_failure": str_attr(dag.on_failure),
                "parent_results": str_attr(dag.parent_results),
            }
        },
        "waiting_on": num_attr(dag.waiting_on),
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
            item[name] = num_attr(value)
    if dag.results_json is not None:
        item["parent_results"] = str_attr(dag.results_json)
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
        released_by=opt_int(item, "released_by"),
        released_at_ms=opt_int(item, "released_at"),
        results_json=item["parent_results"]["S"] if "parent_results" in item else None,
        held=item.get("held", {}).get("BOOL", False),
    )


def _retry_to_map(policy: RetryPolicy) -> Item:
    return {
        "initial": num_attr(policy.initial_delay_seconds),
        "factor": {"N": repr(policy.factor)},
        "max": num_attr(policy.max_delay_seconds),
    }


def error_to_map(error: AttemptError) -> Item:
    return {
        "attempt": num_attr(error.attempt),
        "at": num_attr(error.at_ms),
        "type": str_attr(error.error_type),
        "message": str_attr(error.message),
        "traceback": str_attr(error.traceback_head),
    }


def _payload_ref_to_map(ref: PayloadRef) -> Item:
    return {
        "key": str_attr(ref.key),
        "sha256": str_attr(ref.sha256),
        "bytes": num_attr(ref.bytes),
    }


def _payload_ref_from_item(item: Item) -> PayloadRef | None:
    if "payload_ref" not in item:
        return None
    value = item["payload_ref"]["M"]
    return PayloadRef(
        key=value["key"]["S"], sha256=value["sha256"]["S"], bytes=int(value["bytes"]["N"])
    )


def _error_from_map(value: Item) -> AttemptError:
    return AttemptError(
        attempt=int(value["attempt"]["N"]),
        at_ms=int(value["at"]["N"]),
        error_type=value["type"]["S"],
        message=value["message"]["S"],
        traceback_head=value["traceback"]["S"],
    )


def item_to_job(item: Item) -> Job:
    key = JobKey.from_item_keys(item["pk"]["S"], item["sk"]["S"])
    return Job(
        key=key,
        queue=item["queue"]["S"],
        payload_json=item["payload"]["S"],
        payload_ref=_payload_ref_from_item(item),
        priority=Priority(item["priority"]["S"]),
        max_attempts=int(item["max_attempts"]["N"]),
        created_at_ms=int(item["created_at"]["N"]),
        status=Status(item["status"]["S"]),
        attempts=int(item["attempts"]["N"]),
        direct=item.get("direct", {}).get("BOOL", False),
        idempotency_key=item["idempotency_key"]["S"] if "idempotency_key" in item else None,
        queued_at_ms=opt_int(item, "queued_at"),
        cancelled_at_ms=opt_int(item, "cancelled_at"),
        claim_token=item["claim_token"]["S"] if "claim_token" in item else None,
        lease_until_ms=opt_int(item, "lease_until"),
        expires_at_s=opt_int(item, "expires_at"),
        retry=RetryPolicy(
            initial_delay_seconds=int(item["retry"]["M"]["initial"]["N"]),
            factor=float(item["retry"]["M"]["factor"]["N"]),
            max_delay_seconds=int(item["retry"]["M"]["max"]["N"]),
        )
        if "retry" in item
        else None,
        started_at_ms=opt_int(item, "started_at"),
        finished_at_ms=opt_int(item, "finished_at"),
        next_attempt_at_ms=opt_int(item, "next_attempt_at"),
        result_json=item["result"]["S"] if "result" in item else None,
        history=[_error_from_map(e["M"]) for e in item.get("history", {}).get("L", [])],
        retry_of=JobKey.from_job_id(item["retry_of"]["S"]) if "retry_of" in item else None,
        retry_attempt=opt_int(item, "retry_attempt"),
        dag=_dag_from_item(item),
        paused_at_ms=opt_int(item, "paused_at"),
        resumed_at_ms=opt_int(item, "resumed_at"),
        retried_at_ms=opt_int(item, "retried_at"),
        schedule_id=item["schedule_id"]["S"] if "schedule_id" in item else None,
        chained=item.get("chained", {}).get("BOOL", False),
        correlation_id=item["correlation_id"]["S"] if "correlation_id" in item else None,
        origin=JobKey.from_item_keys(item["pk"]["S"], item["origin"]["S"])
        if "origin" in item
        else None,
        revision=opt_int(item, "revision") or 0,
        moves=[_move_from_map(m["M"]) for m in item.get("moves", {}).get("L", [])],
        runner=item["runner"]["S"] if "runner" in item else None,
        runner_until_ms=opt_int(item, "runner_until"),
    )


def appended_error(error: AttemptError) -> Item:
    """The values (`:empty`, `:error`) that append `error` to a job's history."""
    return {":empty": {"L": []}, ":error": {"L": [{"M": error_to_map(error)}]}}


# A job ends dead with an error appended to its history: values :dead, :now, :expires, and
# those of `appended_error`.
MARK_DEAD = (
    "SET #status = :dead, finished_at = :now, expires_at = :expires,"
    " history = list_append(if_not_exists(history, :empty), :error)"
    " REMOVE next_attempt_at, claim_token, lease_until"
)


# How many times a read or update by key follows a pointer before giving up (503): each extra
# time means the job was moved again during the call.
_FOLLOWS = 4


class JobItemStore(TableAdapter):
    """The base of the stores that change job items: one conditional update of one job.

    `read_back`: for a runner whose role may write only some attributes of a job item (a
    consumer Lambda: its role's writes are bounded by dynamodb:Attributes, stacks/consumers.py).
    AWS's fine-grained access control expects such a writer to ask for no more than the
    attributes it writes back (ReturnValues NONE, UPDATED_OLD or UPDATED_NEW, never ALL_NEW),
    so an update that hands back the job as written asks for UPDATED_NEW and reads the item
    after (one consistent GetItem, which the role may do), with this write's values over it:
    the attributes the write set are as it left them (a count's `waiting_on` is its own, never
    a later count's), the others as read, possibly a later state of the job, which every caller
    of such an update tolerates (each next step is a conditional write of its own)."""

    def __init__(self, client: DynamoDBClient, table_name: str, *, read_back: bool = False) -> None:
        super().__init__(client, table_name)
        self._read_back = read_back

    def _update_job(
        self,
        key: JobKey,
        *,
        update: str,
        condition: str,
        values: Item,
        names: dict[str, str] | None = None,
        returns: Literal["ALL_NEW"] | None = "ALL_NEW",
        follow: bool = False,
    ) -> tuple[bool, Job | None]:
        """Returns (written, the job after the write, or as it was if the condition failed;
        None after a write with `returns=None`, which reads nothing back). `#status` names the
        status attribute wherever the expressions use it.

        `follow`: `key` comes from a job id, so a condition that fails on a moved job's pointer
        is tried again at the job's current key. Without it (`key` is where a job was read: a
        claim, a consumer's attempt), a moved job counts as gone (False, None): a claim
        must never reach a job at another due time."""
        expressions = update + condition
        all_names = {"#status": "status", **(names or {})}
        request: dict[str, Any] = {
            "Key": key_item(key),
            "UpdateExpression": update,
            "ConditionExpression": condition,
        }
        used = {name: value for name, value in all_names.items() if name in expressions}
        if used:
            request["ExpressionAttributeNames"] = used
        if values:  # DynamoDB refuses an empty map
            request["ExpressionAttributeValues"] = values
        read_back = returns is not None and self._read_back
        if returns is not None:
            request["ReturnValues"] = "UPDATED_NEW" if read_back else returns
        at = key
        for _ in range(_FOLLOWS):
            request["Key"] = key_item(at)
            written, item = self._write_if("update", **request)
            if written and read_back:
                read = self._get_item(request["Key"])
                item = {**read, **(item or {})} if read is not None else None
            target = pointer_target(item) if item is not None and not written else None
            if target is None:
                if written or item is not None or at == key or not follow:
                    return written, item_to_job(item) if item else None
                target = key  # gone from where the pointer said: moved on, read it again
            elif not follow:
                return False, None  # the job is no longer at this key: it was moved
            at = target
        raise Unavailable(f"job {key.job_id} kept moving while it was being changed; retry")

    def _get_job(self, key: JobKey) -> Job | None:
        """The job whose id names `key` (following a moved job's pointer), read consistently."""
        for _ in range(_FOLLOWS):
            item = self._get_item(key_item(key))
            target = pointer_target(item) if item is not None else None
            if target is None:
                return item_to_job(item) if item else None
            item = self._get_item(key_item(target))
            if item is not None:
                return item_to_job(item)
            # Moved on again between the two reads: read the pointer again.
        raise Unavailable(f"job {key.job_id} kept moving while it was being read; retry")


class MovedJobPointers(TableAdapter):
    """Deletes a moved job's pointer once the job's item has expired (DynamoDB's TTL removed
    it): the history Lambda sees that removal in the table's stream and calls `forget`."""

    def forget(self, origin: JobKey, *, moved_to: JobKey) -> bool:
        """Delete the pointer at `origin` if it still points at `moved_to` (a pointer the job
        moved on from names another key and stays). Repeating it is harmless."""
        try:
            self._db.delete_item(
                TableName=self._table,
                Key=key_item(origin),
                ConditionExpression="moved_to = :to",
                ExpressionAttributeValues={":to": str_attr(moved_to.sk)},
            )
        except ClientError as error:
            if is_condition_failure(error):
                return False
            raise
        return True
