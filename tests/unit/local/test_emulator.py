"""The local runtime's emulator patch (sundial.local.emulator): DynamoDB transactions that keep
the table (and its stream) in place, on moto's own DynamoDB and DynamoDB Streams."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sundial.local.emulator import atomic_writes

TABLE = "jobs"


@pytest.fixture
def clients() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        db = session.client("dynamodb")
        # moto's own endpoint name: in-process moto does not route the account-specific one
        streams = session.client(
            "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
        )
        db.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        yield db, streams


def _item(pk: str, **attributes: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "x"}} | {k: {"S": v} for k, v in attributes.items()}


def _key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "x"}}


def _reader(db: Any, streams: Any) -> tuple[str, Any]:
    """An iterator at the stream's start, as a poller holds one."""
    arn = db.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    [shard] = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    return streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"], streams


def _read(iterator: str, streams: Any) -> tuple[list[str], str]:
    response = streams.get_records(ShardIterator=iterator, Limit=1000)
    keys = [r["dynamodb"]["Keys"]["pk"]["S"] for r in response["Records"]]
    return keys, response["NextShardIterator"]


def _cancelled_transaction(db: Any) -> list[dict[str, Any]]:
    """A park-like transaction whose check fails; its cancellation reasons."""
    with pytest.raises(ClientError) as raised:
        db.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("schedule"),
                        "ConditionExpression": "#s = :paused",
                        "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": {":paused": {"S": "paused"}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {"Put": {"TableName": TABLE, "Item": _item("occurrence", status="paused")}},
            ]
        )
    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"
    reasons: list[dict[str, Any]] = raised.value.response["CancellationReasons"]  # type: ignore[assignment]
    return reasons


def test_a_stream_reader_sees_the_writes_after_a_cancelled_transaction(
    clients: tuple[Any, Any],
) -> None:
    # Issue 26: on moto's own transactions a cancelled one replaced the table, and a reader's
    # iterator (into the old table's stream) never returned another record: history stopped.
    db, _ = clients
    with atomic_writes():
        db.put_item(TableName=TABLE, Item=_item("schedule", state="active"))
        iterator, streams = _reader(db, clients[1])
        assert _read(iterator, streams)[0] == ["schedule"]
        iterator = _read(iterator, streams)[1]
        # When a transaction is cancelled, and the table is written after it
        _cancelled_transaction(db)
        db.put_item(TableName=TABLE, Item=_item("later"))
        # Then the reader's next GetRecords returns the later write
        assert _read(iterator, streams)[0] == ["later"]


def test_a_cancelled_transaction_writes_nothing_and_gives_each_entrys_reason(
    clients: tuple[Any, Any],
) -> None:
    db, streams = clients
    with atomic_writes():
        db.put_item(TableName=TABLE, Item=_item("schedule", state="active"))
        iterator, streams = _reader(db, streams)
        iterator = _read(iterator, streams)[1]
        reasons = _cancelled_transaction(db)
        # The check names its failure (with the item, as asked); the put has none
        assert [r["Code"] for r in reasons] == ["ConditionalCheckFailed", "None"]
        assert reasons[0]["Item"]["state"] == {"S": "active"}
        assert "Item" not in db.get_item(TableName=TABLE, Key=_key("occurrence"))
        assert _read(iterator, streams)[0] == []


def test_a_transaction_writes_every_entry_once(clients: tuple[Any, Any]) -> None:
    db, streams = clients
    with atomic_writes():
        db.put_item(TableName=TABLE, Item=_item("a", status="pending"))
        db.put_item(TableName=TABLE, Item=_item("gone"))
        iterator, streams = _reader(db, streams)
        iterator = _read(iterator, streams)[1]
        db.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _key("a"),
                        "UpdateExpression": "SET #s = :paused",
                        "ConditionExpression": "#s = :pending",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": {
                            ":paused": {"S": "paused"},
                            ":pending": {"S": "pending"},
                        },
                    }
                },
                {"Put": {"TableName": TABLE, "Item": _item("b")}},
                {"Delete": {"TableName": TABLE, "Key": _key("gone")}},
            ]
        )
        assert db.get_item(TableName=TABLE, Key=_key("a"))["Item"]["status"] == {"S": "paused"}
        assert "Item" in db.get_item(TableName=TABLE, Key=_key("b"))
        assert "Item" not in db.get_item(TableName=TABLE, Key=_key("gone"))
        assert _read(iterator, streams)[0] == ["a", "b", "gone"]


def test_an_entry_failing_while_written_undoes_the_entries_before_it(
    clients: tuple[Any, Any],
) -> None:
    db, streams = clients
    with atomic_writes():
        db.put_item(TableName=TABLE, Item=_item("text", value="not a number"))
        iterator, streams = _reader(db, streams)
        iterator = _read(iterator, streams)[1]
        # When the second entry fails only as it is applied (a number added to a string)
        with pytest.raises(ClientError):
            db.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": _item("first")}},
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": _key("text"),
                            "UpdateExpression": "SET #v = #v + :one",
                            "ExpressionAttributeNames": {"#v": "value"},
                            "ExpressionAttributeValues": {":one": {"N": "1"}},
                        }
                    },
                ]
            )
        # Then the first entry is undone, in the table and in the stream
        assert "Item" not in db.get_item(TableName=TABLE, Key=_key("first"))
        assert db.get_item(TableName=TABLE, Key=_key("text"))["Item"]["value"] == {
            "S": "not a number"
        }
        db.put_item(TableName=TABLE, Item=_item("after"))
        assert _read(iterator, streams)[0] == ["after"]


def test_the_tests_own_moto_keeps_the_stream_whole_after_a_cancelled_transaction(
    aws: None, clients: tuple[Any, Any]
) -> None:
    # The `aws` fixture (tests/conftest.py) and the simulation (tests/simulation/aws.py) run
    # moto with this patch. Without it, a reader read the cancelled transaction's put as an
    # INSERT and missed every write after it: the simulation's history function tagged a
    # move's rejected payload referenced, an orphan (make chaos, seed 54, the long profile).
    db, streams = clients
    db.put_item(TableName=TABLE, Item=_item("schedule", state="active"))
    iterator, streams = _reader(db, streams)
    iterator = _read(iterator, streams)[1]
    _cancelled_transaction(db)
    db.put_item(TableName=TABLE, Item=_item("later"))
    assert _read(iterator, streams)[0] == ["later"]
