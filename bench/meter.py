"""Meters every AWS call made through one boto3 session, with botocore event hooks.

For each call it records who made it (the `actor`: which Lambda function or poller), what it
was, what AWS would bill for it (capacity units from item sizes, see bench.capacity; SQS
requests per 64 KB), what moto reported (ReturnConsumedCapacity is switched on for every
DynamoDB call that supports it), and how long the emulator took: from `before-send` (the
request is complete and signed) to `before-parse` (the response is back), which in-process is
moto's own work and over HTTP is moto's work plus the loopback round trip.

Item sizes before and after a write are read outside the metered session (`items`: an
unmetered client, or moto's in-process backend directly), so a write's units follow AWS's rule
(the larger of the two) and a write refused by its condition is charged for the item as it
stands.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.capacity import (
    batch_read_units,
    item_size,
    read_units,
    sqs_requests,
    write_units,
)

_RETURNS_CAPACITY = {
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
}
_SINGLE_WRITES = {"PutItem", "UpdateItem", "DeleteItem"}
# DynamoDB charges a transaction's items twice a plain write's units (each entry, a
# ConditionCheck too, per started KB of its item).
_TRANSACTION_FACTOR = 2
_PER_SHARD_SORT_KEYS = {"cursor": "cursor", "shards": "shard count"}


@dataclass
class Call:
    actor: str
    service: str
    operation: str
    detail: str = ""  # what a DynamoDB write was for: "job", "cursor", "idempotency", ...
    ok: bool = True
    condition_failed: bool = False
    write_units: float = 0.0
    read_units: float = 0.0
    reported_units: float = 0.0  # moto's ConsumedCapacity
    sqs_requests: int = 0
    emulator_s: float = 0.0
    items: int = 0  # items written or read, messages sent or received
    started_s: float = 0.0  # time.perf_counter() when the call began, and when it returned
    ended_s: float = 0.0
    emulator_from_s: float = 0.0  # time.perf_counter() span of the emulator's part
    emulator_to_s: float = 0.0
    thread: str = ""


class ItemReader(Protocol):
    """Reads items for sizing, unmetered."""

    def key_names(self, table: str) -> list[str]: ...

    def get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None: ...


class ClientItemReader:
    """An ItemReader on a DynamoDB client of its own (any emulator, any endpoint)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def key_names(self, table: str) -> list[str]:
        description = self._client.describe_table(TableName=table)["Table"]
        return [k["AttributeName"] for k in description["KeySchema"]]

    def get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._client.get_item(
            TableName=table, Key=key, ConsistentRead=True
        ).get("Item")
        return item


@dataclass
class _Pending:
    key_schema: list[str] = field(default_factory=list)
    before: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)


class AwsMeter:
    def __init__(self, session: Any, *, items: ItemReader | None = None) -> None:
        """`session`: the boto3 session whose clients to meter. `items`: reads items on the
        same emulator to size them; without it, write units are sized from the request alone
        (enough where only counts and times matter)."""
        self.calls: list[Call] = []
        # Time spent in this meter's own hooks (sizing items, recording): not the system's.
        self.overhead_s = 0.0
        self.actor = "unattributed"
        self._shadow = items
        self._key_schemas: dict[str, list[str]] = {}
        self._paused = False
        self._local = threading.local()
        self._lock = threading.Lock()
        events = session.events
        events.register("provide-client-params.*.*", self._before_call)
        events.register_first("before-send.*.*", self._sending)
        events.register("before-parse.*.*", self._received)
        events.register("after-call.*.*", self._after_call)

    @contextmanager
    def acting(self, actor: str) -> Iterator[None]:
        previous, self.actor = self.actor, actor
        try:
            yield
        finally:
            self.actor = previous

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Calls made inside are not recorded (warm-up, set-up, reading results)."""
        previous, self._paused = self._paused, True
        try:
            yield
        finally:
            self._paused = previous

    def reset(self) -> None:
        with self._lock:
            self.calls = []

    # -- hooks ------------------------------------------------------------------------------

    def _before_call(self, params: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        self._local.emulator_s = 0.0
        if self._paused:
            return
        started = time.perf_counter()
        context["bench_started"] = started
        try:
            self._prepare(params, model, context)
        finally:
            self._add_overhead(time.perf_counter() - started)

    def _add_overhead(self, seconds: float) -> None:
        with self._lock:
            self.overhead_s += seconds

    def _prepare(self, params: dict[str, Any], model: Any, context: Any) -> None:
        context["bench_params"] = params
        if model.service_model.service_name != "dynamodb":
            return
        if model.name in _RETURNS_CAPACITY:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")
        if self._shadow is None:
            return
        pending = _Pending()
        if model.name in _SINGLE_WRITES:
            table = params["TableName"]
            key = params.get("Key") or self._key_of(table, params["Item"])
            pending.before.append((table, key, item_size(self._shadow_get(table, key))))
        elif model.name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                ((kind, request),) = entry.items()
                table = request["TableName"]
                key = request["Item"] if kind == "Put" else request["Key"]
                key = self._key_of(table, key)
                pending.before.append((table, key, item_size(self._shadow_get(table, key))))
        elif model.name == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    put = request.get("PutRequest")
                    key = (
                        self._key_of(table, put["Item"]) if put else request["DeleteRequest"]["Key"]
                    )
                    pending.before.append((table, key, item_size(self._shadow_get(table, key))))
        context["bench_pending"] = pending

    def _sending(self, **_: Any) -> None:
        self._local.sent_at = time.perf_counter()
        if getattr(self._local, "emulator_s", 0.0) == 0.0:
            self._local.emulator_from = self._local.sent_at

    def _received(self, **_: Any) -> None:
        sent_at = getattr(self._local, "sent_at", None)
        if sent_at is not None:
            now = time.perf_counter()
            self._local.emulator_s = getattr(self._local, "emulator_s", 0.0) + (now - sent_at)
            self._local.emulator_to = now
            self._local.sent_at = None

    def _after_call(
        self, http_response: Any, parsed: dict[str, Any], model: Any, context: Any, **_: Any
    ) -> None:
        if self._paused:
            return
        started = time.perf_counter()
        try:
            self._record(http_response, parsed, model, context)
        finally:
            self._add_overhead(time.perf_counter() - started)

    def _record(self, http_response: Any, parsed: dict[str, Any], model: Any, context: Any) -> None:
        service = model.service_model.service_name
        params = context.get("bench_params") or {}
        error = parsed.get("Error", {}).get("Code")
        call = Call(
            actor=self.actor,
            service=service,
            operation=model.name,
            ok=http_response.status_code < 300,
            condition_failed=error == "ConditionalCheckFailedException",
            emulator_s=getattr(self._local, "emulator_s", 0.0),
            emulator_from_s=getattr(self._local, "emulator_from", 0.0),
            emulator_to_s=getattr(self._local, "emulator_to", 0.0),
            started_s=context.get("bench_started", 0.0),
            ended_s=time.perf_counter(),
            thread=threading.current_thread().name,
        )
        if service == "dynamodb":
            self._dynamodb(call, params, parsed, context.get("bench_pending"))
        elif service == "sqs":
            self._sqs(call, params, parsed)
        with self._lock:
            self.calls.append(call)

    # -- DynamoDB ---------------------------------------------------------------------------

    def _dynamodb(
        self, call: Call, params: dict[str, Any], parsed: dict[str, Any], pending: _Pending | None
    ) -> None:
        consumed = parsed.get("ConsumedCapacity") or []
        for entry in consumed if isinstance(consumed, list) else [consumed]:
            call.reported_units += float(entry.get("CapacityUnits", 0))
        operation = call.operation
        if operation in _SINGLE_WRITES or operation == "BatchWriteItem":
            call.detail = self._write_detail(params)
            self._write_units(call, params, parsed, pending)
        elif operation == "TransactWriteItems":
            call.detail = "transaction"
            call.items = len(params["TransactItems"])
            for table, key, before in pending.before if pending else []:
                after = item_size(self._shadow_get(table, key)) if call.ok else before
                call.write_units += _TRANSACTION_FACTOR * write_units(
                    before, after, written=call.ok
                )
        elif operation == "GetItem":
            item = parsed.get("Item")
            if item and "ProjectionExpression" in params:
                item = self._shadow_get(params["TableName"], params["Key"])
            call.items = 1 if item else 0
            call.read_units = read_units(
                item_size(item), consistent=bool(params.get("ConsistentRead"))
            )
        elif operation == "Query":
            items = parsed.get("Items", [])
            call.items = len(items)
            call.read_units = read_units(
                sum(item_size(i) for i in items), consistent=bool(params.get("ConsistentRead"))
            )
        elif operation == "BatchGetItem":
            for table, request in params.get("RequestItems", {}).items():
                found = parsed.get("Responses", {}).get(table, [])
                sizes = [item_size(self._full_item(table, item, request["Keys"])) for item in found]
                # a key that names no item still costs the minimum
                sizes += [0] * (len(request["Keys"]) - len(found))
                call.items += len(found)
                call.read_units += batch_read_units(
                    sizes, consistent=bool(request.get("ConsistentRead"))
                )

    def _write_units(
        self, call: Call, params: dict[str, Any], parsed: dict[str, Any], pending: _Pending | None
    ) -> None:
        if pending is None:  # no shadow client: size what the request carries
            items = [params["Item"]] if "Item" in params else []
            for requests in params.get("RequestItems", {}).values():
                items += [r["PutRequest"]["Item"] for r in requests if "PutRequest" in r]
            call.items = max(1, len(items))
            call.write_units = (
                sum(write_units(0, item_size(i)) for i in items) if items else write_units(0, 0)
            )
            return
        unprocessed = {
            (
                table,
                _key_text(
                    self._key_of(table, r["PutRequest"]["Item"])
                    if "PutRequest" in r
                    else r["DeleteRequest"]["Key"]
                ),
            )
            for table, requests in parsed.get("UnprocessedItems", {}).items()
            for r in requests
        }
        for table, key, before in pending.before:
            if (table, _key_text(key)) in unprocessed:
                continue  # not written, not charged
            written = call.ok
            after = item_size(self._shadow_get(table, key)) if written else before
            call.write_units += write_units(before, after, written=written)
            call.items += 1

    def _write_detail(self, params: dict[str, Any]) -> str:
        key = params.get("Key") or params.get("Item") or {}
        sort_key = key.get("sk", {}).get("S", "")
        if sort_key in _PER_SHARD_SORT_KEYS:
            return _PER_SHARD_SORT_KEYS[sort_key]
        if key.get("pk", {}).get("S", "").startswith("idem#"):
            return "idempotency"
        if key.get("pk", {}).get("S", "").startswith("quota#"):
            return "quota"  # a rate-limited queue's submission window (sundial.quotas)
        return "job"

    def _key_of_schema(self, table: str) -> list[str]:
        schema = self._key_schemas.get(table)
        if schema is None:
            assert self._shadow is not None
            schema = self._shadow.key_names(table)
            self._key_schemas[table] = schema
        return schema

    def _key_of(self, table: str, item: dict[str, Any]) -> dict[str, Any]:
        return {name: item[name] for name in self._key_of_schema(table)}

    def _shadow_get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        if self._shadow is None:
            return None
        return self._shadow.get(table, key)

    def _full_item(
        self, table: str, item: dict[str, Any], keys: Sequence[dict[str, Any]] = ()
    ) -> dict[str, Any] | None:
        """Reads are billed on the whole item, whatever the projection returned. A projection
        may leave out part of the key: the item is then the requested key it agrees with."""
        if self._shadow is None:
            return item
        schema = self._key_of_schema(table)
        if all(name in item for name in schema):
            return self._shadow_get(table, self._key_of(table, item))
        matches = [key for key in keys if all(item[n] == v for n, v in key.items() if n in item)]
        assert len(matches) == 1, f"cannot tell which requested key {item} is"
        return self._shadow_get(table, matches[0])

    # -- SQS --------------------------------------------------------------------------------

    def _sqs(self, call: Call, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        if call.operation == "SendMessage":
            call.items = 1
            payload = len(params["MessageBody"].encode())
        elif call.operation == "SendMessageBatch":
            entries = params["Entries"]
            call.items = len(entries) - len(parsed.get("Failed", []))
            payload = sum(len(e["MessageBody"].encode()) for e in entries)
        elif call.operation == "ReceiveMessage":
            messages = parsed.get("Messages", [])
            call.items = len(messages)
            payload = sum(len(m["Body"].encode()) for m in messages)
        else:
            call.items = len(params.get("Entries", [])) or 1
            payload = 0
        call.sqs_requests = sqs_requests(payload)


def emulator_wall_s(calls: Sequence[Call]) -> float:
    """How long the emulator was busy with any of `calls`: the union of their spans (calls made
    concurrently overlap, so their times must not simply be added)."""
    spans = sorted((c.emulator_from_s, c.emulator_to_s) for c in calls if c.emulator_s)
    total, reach = 0.0, float("-inf")
    for start, end in spans:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _key_text(key: dict[str, Any]) -> str:
    """A stable text for an item's key, to match unprocessed batch items."""
    return repr(sorted(key.items()))
