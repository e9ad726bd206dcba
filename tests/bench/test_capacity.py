"""The billing rules the cost ledger applies (bench.capacity), checked against AWS's documented
examples and rules, and the meter applying them to real moto calls."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from bench.capacity import item_size, number_size, read_units, sqs_requests, write_units
from bench.meter import AwsMeter, ClientItemReader
from tests.support import TABLE, create_table


def test_item_size_follows_the_documented_rules() -> None:
    # Strings count their UTF-8 bytes, names included
    assert item_size({"pk": {"S": "shard#1"}}) == 2 + 7
    assert item_size({"név": {"S": "é"}}) == 4 + 2
    # Numbers: 1 byte per two significant digits, plus 1; zeros at either end trimmed
    assert number_size("1795276800000") == 5  # 17952768: 8 significant digits
    assert number_size("0.05") == 2
    assert number_size("123") == 3
    # Booleans and nulls are 1 byte; binary its raw length
    assert item_size({"ok": {"BOOL": True}, "no": {"NULL": True}, "b": {"B": b"abc"}}) == 3 + 3 + 4
    # A list or map: 3 bytes, plus each element and 1 byte per element (a map's keys count)
    assert item_size({"l": {"L": []}}) == 1 + 3
    assert item_size({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}) == 1 + 3 + (2 + 1) + (2 + 1)
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + (1 + 1 + 1)


def test_capacity_units_round_up_per_item_and_per_request() -> None:
    assert write_units(0, 1) == 1
    assert write_units(0, 1024) == 1
    assert write_units(900, 1025) == 2  # the larger of before and after
    assert write_units(3000, 10, written=False) == 3  # a refused write: the item as it stands
    assert write_units(0, 0, written=False) == 1  # at least one
    assert read_units(4096, consistent=True) == 1.0
    assert read_units(4097, consistent=True) == 2.0
    assert read_units(100, consistent=False) == 0.5
    assert read_units(0, consistent=True) == 1.0  # even for an item that does not exist
    assert sqs_requests(0) == 1
    assert sqs_requests(65_536) == 1
    assert sqs_requests(65_537) == 2


@pytest.fixture
def metered(aws: None) -> tuple[AwsMeter, Any]:
    create_table(boto3.client("dynamodb"))
    session = boto3.Session()
    meter = AwsMeter(session, items=ClientItemReader(boto3.client("dynamodb")))
    return meter, session.client("dynamodb")


def test_the_meter_sizes_writes_by_the_larger_image_and_charges_refused_ones(
    metered: tuple[AwsMeter, Any],
) -> None:
    meter, client = metered
    key = {"pk": {"S": "shard#1"}, "sk": {"S": "0000000000001#A"}}
    # Given an item of about 1.5 KB written, then shrunk by an update
    client.put_item(TableName=TABLE, Item={**key, "body": {"S": "x" * 1500}})
    client.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET body = :b",
        ExpressionAttributeValues={":b": {"S": "small"}},
    )
    # And a conditional write that is refused, on a 1.5 KB item
    client.put_item(TableName=TABLE, Item={**key, "body": {"S": "x" * 1500}})
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET body = :b",
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={":b": {"S": "never"}},
        )
    put, shrink, _, refused = meter.calls
    # Then every one costs 2 units (over 1 KB before or after), the refused one included
    assert (put.write_units, shrink.write_units, refused.write_units) == (2, 2, 2)
    assert refused.condition_failed and not refused.ok
    # While moto reports what it always reports for these calls, whatever their size
    assert shrink.reported_units == 0.5
