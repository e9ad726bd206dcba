"""The local runtime's AWS emulator: moto's server, with DynamoDB's writes made atomic.

moto (5.2.5, and its main branch when this was written) runs TransactWriteItems by deep-copying
every table the transaction names before it starts and, when the transaction is cancelled (a
condition failed), putting the COPIES in place of the tables. In a server that runs for hours
that has three effects:

- A DynamoDB Streams reader stops for good, without an error: its shard iterator points into
  the replaced table's stream shard, which never gets another record. The local history
  function then wrote nothing more after the first cancelled transaction (a schedule's park that
  lost to a run, an idempotent repeat): issue 26, "history capture stops without a word".
- A write another request made while the transaction ran is undone by the rollback.
- Every transaction copies the whole table and every stream record it ever held, so each costs
  more as the runtime lives on: pausing a 15-second schedule (about 60 transactions) took 11 to
  22 s on a runtime a few minutes old.

`install()` (for the process's life; `atomic_writes()` for a block) replaces the backend's
transact_write_items with one that checks every entry first and writes only when all hold (the
same checks, cancellation reasons and errors as moto's), and that undoes a write failing
part-way from copies of the items it touched (not of the tables). It also serialises every
DynamoDB write of the process (PutItem, UpdateItem, DeleteItem, BatchWriteItem's, transactions)
on one lock: moto checks a condition and then writes without one, so two racing conditional
writes could both succeed, which DynamoDB never allows and Sundial's claims rely on. Reads take
no lock (a read may see a transaction half applied: moto's own behaviour, no worse than before).
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

_WRITES = threading.RLock()
_OPERATIONS = ("ConditionCheck", "Put", "Delete", "Update")
_MAX_ENTRIES = 100
_INSTALLED = "_sundial_atomic_writes"  # on the class: moto's own methods, while patched
_LOCKED = ("put_item", "update_item", "delete_item")

Error = tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]


def install() -> None:
    """Patch moto's DynamoDB backend in this process (idempotent)."""
    if getattr(DynamoDBBackend, _INSTALLED, None) is not None:
        return
    originals = {
        name: getattr(DynamoDBBackend, name) for name in (*_LOCKED, "transact_write_items")
    }
    for name in _LOCKED:
        setattr(DynamoDBBackend, name, _locked(originals[name]))
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    setattr(DynamoDBBackend, _INSTALLED, originals)


def uninstall() -> None:
    """Give moto its own methods back."""
    originals = getattr(DynamoDBBackend, _INSTALLED, None)
    if originals is None:
        return
    for name, method in originals.items():
        setattr(DynamoDBBackend, name, method)
    delattr(DynamoDBBackend, _INSTALLED)


@contextmanager
def atomic_writes() -> Iterator[None]:
    """The patch for the length of a block (tests; the runtime installs it for good)."""
    installed_before = getattr(DynamoDBBackend, _INSTALLED, None) is not None
    install()
    try:
        yield
    finally:
        if not installed_before:
            uninstall()


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _WRITES:
            return method(*args, **kwargs)

    return locked


@dataclass
class _Entry:
    kind: str
    op: dict[str, Any]
    table: Table
    key: dict[str, Any]  # the item's key attributes, as in the request

    @property
    def hash_and_range(self) -> tuple[DynamoType, DynamoType | None]:
        range_name = self.table.range_key_attr
        range_value = DynamoType(self.key[range_name]) if range_name else None
        return DynamoType(self.key[self.table.hash_key_attr]), range_value


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """TransactWriteItems: every entry's condition is checked before anything is written."""
    with _WRITES:
        if len(transact_items) > _MAX_ENTRIES:
            raise TooManyTransactionsException()
        entries, errors = _check(self, transact_items)
        if any(code is not None for code, _, _ in errors):
            raise TransactionCanceledException(errors)
        _write(self, entries)


def _check(
    backend: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> tuple[list[_Entry], list[Error]]:
    """Each entry with its outcome, as moto reports them (None: its condition holds)."""
    seen: set[tuple[str, str]] = set()
    entries: list[_Entry] = []
    errors: list[Error] = []
    for request in transact_items:
        if len(request) > 1:
            raise TransactWriteSingleOpException
        kind, op = next(iter(request.items()))
        try:
            if kind not in _OPERATIONS:
                raise MockValidationException(f"Unsupported transaction operation {kind}")
            table = backend.get_table(op["TableName"])
            key = op["Key"] if kind != "Put" else _key_of(table, op["Item"])
            unique = (str(op["TableName"]), str(dict(sorted(key.items()))))
            if unique in seen:
                raise MultipleTransactionsException()
            seen.add(unique)
            entries.append(_Entry(kind, op, table, key))
            errors.append(_condition(backend, op, key))
        except (MultipleTransactionsException, MockValidationException):
            raise
        except Exception as error:
            errors.append((type(error).__name__, str(error), None))
    return entries, errors


def _key_of(table: Table, item: dict[str, Any]) -> dict[str, Any]:
    key = {table.hash_key_attr: item[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = item[table.range_key_attr]
    return key


def _condition(backend: DynamoDBBackend, op: dict[str, Any], key: dict[str, Any]) -> Error:
    """The entry's cancellation reason: (None, None, None) when its condition holds."""
    expression = op.get("ConditionExpression")
    if expression is None:
        return (None, None, None)
    current = backend.get_item(op["TableName"], key)
    condition = get_filter_expression(
        expression, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
    )
    if condition.expr(current):
        return (None, None, None)
    wants_item = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
    item = current.to_json()["Attributes"] if wants_item and current else None
    return ("ConditionalCheckFailed", str(ConditionalCheckFailed().message), item)


def _write(backend: DynamoDBBackend, entries: list[_Entry]) -> None:
    """Apply every entry (their conditions held); if one fails part-way (a validation moto
    makes only while writing), put back what was written and cancel, as moto would."""
    items = [
        (entry, copy.deepcopy(entry.table.get_item(*entry.hash_and_range))) for entry in entries
    ]
    streams = {
        id(entry.table): (shard, len(shard.items))
        for entry in entries
        if (shard := entry.table.stream_shard) is not None
    }
    for index, entry in enumerate(entries):
        try:
            _apply(backend, entry)
        except Exception as error:
            for written, before in items[: index + 1]:
                _restore(written, before)
            for shard, length in streams.values():
                del shard.items[length:]
            if isinstance(error, MultipleTransactionsException | MockValidationException):
                raise
            reasons: list[Error] = [(None, None, None)] * len(entries)
            reasons[index] = (type(error).__name__, str(error), None)
            raise TransactionCanceledException(reasons) from error


def _apply(backend: DynamoDBBackend, entry: _Entry) -> None:
    op, name = entry.op, entry.op["TableName"]
    names = op.get("ExpressionAttributeNames") or {}
    values = op.get("ExpressionAttributeValues") or {}
    if entry.kind == "Put":
        backend.put_item(name, op["Item"], expression_attribute_names=names,
                         expression_attribute_values=values)  # fmt: skip
    elif entry.kind == "Delete":
        backend.delete_item(name, entry.key, expression_attribute_names=names,
                            expression_attribute_values=values)  # fmt: skip
    elif entry.kind == "Update":
        backend.update_item(name, entry.key, update_expression=op["UpdateExpression"],
                            expression_attribute_names=names,
                            expression_attribute_values=values)  # fmt: skip


def _restore(entry: _Entry, before: Item | None) -> None:
    """Put one item back as it was (no stream record: the caller trims the stream)."""
    hash_value, range_value = entry.hash_and_range
    table = entry.table
    if range_value is None:
        if before is None:
            table.items.pop(hash_value, None)
        else:
            table.items[hash_value] = before  # type: ignore[assignment]
    elif before is None:
        table.items[hash_value].pop(range_value, None)
    else:
        table.items[hash_value][range_value] = before
