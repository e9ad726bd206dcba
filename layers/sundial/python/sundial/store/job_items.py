"""A job as one DynamoDB item and back: the job item's layout (key, attributes, the DAG map)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from sundial.ids import JobKey
from sundial.model.job import (
    AttemptError,
    DagLink,
    Job,
    OnFailure,
    ParentResults,
    Priority,
    Status,
)
from sundial.retry import RetryPolicy

if TYPE_CHECKING:
    pass
from sundial.store.table import Item, TableAdapter, key_item, num_attr, opt_int, str_attr


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
    ):
        if text is not None:
            item[name] = str_attr(text)
    for name, value in (
        ("queued_at", job.queued_at_ms),
        ("cancelled_at", job.cancelled_at_ms),
        ("lease_until", job.lease_until_ms),
        ("expires_at", job.expires_at_s),
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
    return item


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


def _error_from_map(value: Item) -> AttemptError:
    return AttemptError(
        attempt=int(value["attempt"]["N"]),
        at_ms=int(value["at"]["N"]),
        error_type=value["type"]["S"],
        message=value["message"]["S"],
        traceback_head=value["traceback"]["S"],
    )


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


class JobItemStore(TableAdapter):
    """The base of the stores that change job items: one conditional update of one job."""

    def _update_job(
        self,
        key: JobKey,
        *,
        update: str,
        condition: str,
        values: Item,
        names: dict[str, str] | None = None,
        returns: Literal["ALL_NEW"] | None = "ALL_NEW",
    ) -> tuple[bool, Job | None]:
        """Returns (written, the job after the write, or as it was if the condition failed;
        None after a write with `returns=None`, which reads nothing back). `#status` names the
        status attribute wherever the expressions use it."""
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
        if returns is not None:
            request["ReturnValues"] = returns
        written, item = self._write_if("update", **request)
        return written, item_to_job(item) if item else None
