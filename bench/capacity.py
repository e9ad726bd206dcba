"""What AWS bills a request for, computed from the request and the items it touches.

moto reports DynamoDB ConsumedCapacity, but not by size: every UpdateItem reports 0.5 units and
every BatchWriteItem 1.0 per call, whatever the items weigh. So the ledger computes capacity
units itself, from item sizes, by the rules AWS documents, and shows moto's figure beside it.

DynamoDB item size (developer guide, "DynamoDB item sizes and formats"): the sum over attributes
of the name's UTF-8 length plus the value's size, where
- a string is its UTF-8 length; a binary its raw length;
- a number is 1 byte per two significant digits, plus 1 (leading/trailing zeros trimmed);
- a boolean or null is 1 byte;
- a list or map is 3 bytes plus its elements, plus 1 byte per element (a map element also
  counts its key); a set is the sum of its members.

Capacity units (developer guide, "Read/write capacity units" and "Capacity unit consumption"):
- a write is 1 write unit per started 1 KB of the larger of the item before and after it;
  a write whose condition fails still consumes units for the existing item (at least 1);
  BatchWriteItem rounds each item separately;
- GetItem is 1 read unit per started 4 KB when strongly consistent, half when eventually
  consistent, and the minimum even when the item does not exist; Query rounds the sum of the
  items it returns per page; BatchGetItem rounds each item separately.

SQS (pricing page): every request is billed per started 64 KB chunk of its payload.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
SQS_CHUNK_BYTES = 65_536

AttributeValue = Mapping[str, Any]
Item = Mapping[str, AttributeValue]


def number_size(text: str) -> int:
    """Bytes DynamoDB counts for a number: 1 per two significant digits, plus 1."""
    significant = len(Decimal(text).normalize().as_tuple().digits)
    return math.ceil(significant / 2) + 1


def _utf8_size(text: Any) -> int:
    return len(str(text).encode())


_SCALAR_SIZE: dict[str, Callable[[Any], int]] = {
    "S": _utf8_size,
    "N": lambda text: number_size(str(text)),
    "B": len,
    "BOOL": lambda _: 1,
    "NULL": lambda _: 1,
    "SS": lambda members: sum(_utf8_size(m) for m in members),
    "NS": lambda members: sum(number_size(str(m)) for m in members),
    "BS": lambda members: sum(len(m) for m in members),
}


def value_size(value: AttributeValue) -> int:
    ((kind, content),) = value.items()
    if kind == "L":
        return 3 + sum(value_size(element) + 1 for element in content)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in content.items())
    if kind not in _SCALAR_SIZE:
        raise ValueError(f"unknown DynamoDB attribute type {kind!r}")
    return _SCALAR_SIZE[kind](content)


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(before_bytes: int, after_bytes: int, *, written: bool = True) -> int:
    """Write units of one item write. A write refused by its condition is charged for the item
    as it stands (`before_bytes`), at least 1 unit."""
    size = max(before_bytes, after_bytes) if written else before_bytes
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(total_bytes: int, *, consistent: bool) -> float:
    """Read units of one read of `total_bytes` (an item, or a Query page's items together)."""
    units = max(1, math.ceil(total_bytes / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


def sqs_requests(payload_bytes: int) -> int:
    """Billed SQS requests for one API call carrying `payload_bytes`."""
    return max(1, math.ceil(payload_bytes / SQS_CHUNK_BYTES))


def batch_read_units(sizes: Iterable[int], *, consistent: bool) -> float:
    return sum(read_units(size, consistent=consistent) for size in sizes)
