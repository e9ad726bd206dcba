"""The local runtime's stream reader (sundial.local.streams) on moto's DynamoDB Streams: it
reads on when its iterator goes stale, and it is never silent when it stops or keeps failing
(issue 26: the history function once stopped writing and nothing said so)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

import boto3
import pytest
from moto import mock_aws

from sundial.local import streams as streams_module
from sundial.local.functions import FunctionHost
from sundial.local.streams import STUCK_AFTER_S, StreamHealth, StreamPoller
from sundial.local.template import EventSourceSpec

TABLE = "jobs"


class Recorder:
    """The function the mapping invokes: keeps the keys it was given."""

    def __init__(self) -> None:
        self.spec = type("Spec", (), {"arn": "arn:aws:lambda:us-east-1:1:function:history"})()
        self.keys: list[str] = []

    def invoke(self, event: Any) -> Any:
        self.keys += [r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]]
        return {"batchItemFailures": []}


@pytest.fixture
def table() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        db = session.client("dynamodb")
        db.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        streams = session.client(
            "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
        )
        yield db, streams


def _poller(db: Any, streams: Any, function: Recorder, stop: threading.Event) -> StreamPoller:
    spec = EventSourceSpec(
        kind="dynamodb", source="Table", function="History", batch_size=100,
        batching_window_s=0, report_batch_item_failures=True, max_concurrency=None,
        max_retries=2,
    )  # fmt: skip
    return StreamPoller(
        spec,
        stream_arn=db.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"],
        target=cast("FunctionHost", function),
        streams=streams,
        s3=None,
        stop=stop,
        counts=Counter(),
        name="stream:history",
    )


def _until(condition: Any, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)  # waiting for the reader's thread, not for a due time
    return bool(condition())


def test_a_reader_whose_iterator_went_stale_reads_on_and_says_so(
    table: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a reader on moto's own DynamoDB (its cancelled transactions leave a reader's
    # iterator reading a shard that gets no more records), checking every 0.2 s
    monkeypatch.setattr(streams_module, "VERIFY_EVERY_S", 0.2)
    db, streams = table
    function, stop = Recorder(), threading.Event()
    db.put_item(TableName=TABLE, Item={"pk": {"S": "before"}})
    reader = _poller(db, streams, function, stop)
    reader.start()
    try:
        assert _until(lambda: function.keys == ["before"])
        # When a transaction is cancelled and the table is written after it
        with pytest.raises(db.exceptions.TransactionCanceledException):
            db.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": TABLE,
                            "Key": {"pk": {"S": "missing"}},
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    }
                ]
            )
        with caplog.at_level(logging.ERROR, logger="sundial.local"):
            db.put_item(TableName=TABLE, Item={"pk": {"S": "after"}})
            # Then the function gets the later record, and the log says what happened
            assert _until(lambda: function.keys == ["before", "after"])
    finally:
        stop.set()
        reader.join(5)
    assert reader.health.resyncs == 1
    assert "its shard iterator returned nothing while the stream holds more" in caplog.text
    assert reader.health.problem() is None


class Dying:
    """The stream client, until the reader's third call: then its thread is killed."""

    def __init__(self, client: Any) -> None:
        self._client, self._calls = client, 0

    def __getattr__(self, name: str) -> Any:
        self._calls += 1
        if self._calls == 3:
            raise SystemExit("killed")
        return getattr(self._client, name)


def test_a_reader_that_stops_is_reported_as_stopped(
    table: tuple[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    db, streams = table
    reader = _poller(db, Dying(streams), Recorder(), threading.Event())
    with caplog.at_level(logging.CRITICAL, logger="sundial.local"):
        reader.start()
        reader.join(10)
    assert not reader.is_alive()
    assert (
        reader.health.problem() == "STOPPED (SystemExit: killed): nothing is read from the stream"
    )
    assert "stream event source mapping stream:history stopped" in caplog.text


def test_a_batch_failing_for_long_is_a_problem_with_its_error() -> None:
    health = StreamHealth(read=10, delivered=4)
    health.failing, health.failing_since = 6, 100.0
    health.last_error = "Runtime.ExitError: the function's process exited"
    assert health.problem(now=100.0 + STUCK_AFTER_S - 1) is None
    assert health.problem(now=100.0 + STUCK_AFTER_S) == (
        "a batch of 6 records has failed for 30 s: Runtime.ExitError: the function's process exited"
    )
    health.failing_since = None
    health.to_destination = 6
    assert health.problem() == "6 records went to the on-failure destination"
