"""Test helpers: the table and queues as the CDK stack declares them, and SQS reading."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from moto.dynamodb.responses import DynamoHandler

from sundial.local.triggers import sqs_record
from sundial.store.queue_states import QUEUES_PK
from tests.iam_calls import attributed

if TYPE_CHECKING:
    import pytest
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodbstreams.client import DynamoDBStreamsClient
    from mypy_boto3_sqs.client import SQSClient

TABLE = "sundial-jobs"
QUEUES = ("default", "email")
PRIORITY_QUEUES = ("email",)  # with a priority queue for its critical and high jobs

# The system-design card's DAG (seeds/004): extract → transform → load_warehouse and
# load_cache → notify, on two queues so children are released across queues.
DAILY_REPORT: Mapping[str, Any] = {
    "name": "daily_report",
    "nodes": {
        "extract": {"queue": "default", "payload": {"day": "2026-11-21"}},
        "transform": {"queue": "default", "depends_on": ["extract"]},
        "load_warehouse": {"queue": "default", "depends_on": ["transform"]},
        "load_cache": {"queue": "email", "depends_on": ["transform"]},
        "notify": {"queue": "email", "depends_on": ["load_warehouse", "load_cache"]},
    },
}


def create_table(client: DynamoDBClient, *, stream: bool = False) -> None:
    """The job table; with `stream`, its NEW_AND_OLD_IMAGES stream (the history's source)."""
    extra: dict[str, Any] = (
        {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}}
        if stream
        else {}
    )
    client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        **extra,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
    )
    client.update_time_to_live(
        TableName=TABLE,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )


def create_queues(
    client: SQSClient, names: Sequence[str] = QUEUES
) -> tuple[dict[str, str], dict[str, str]]:
    """Each job queue with its DLQ: ({name: queue URL}, {name: DLQ URL})."""
    urls, dead_letter_urls = {}, {}
    for name in names:
        dlq = client.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dead_letter_urls[name] = dlq
        dlq_arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5})
        urls[name] = client.create_queue(
            QueueName=name, Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": "120"}
        )["QueueUrl"]
    return urls, dead_letter_urls


def create_priority_queues(client: SQSClient) -> dict[str, str]:
    """The priority queue (with its DLQ) of each queue in PRIORITY_QUEUES: {name: URL}."""
    urls, _ = create_queues(client, [f"{name}-priority" for name in PRIORITY_QUEUES])
    return {name.removesuffix("-priority"): url for name, url in urls.items()}


def sqs_event(messages: Sequence[Mapping[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The event an SQS event source mapping sends for received messages."""
    return {"Records": [sqs_record(dict(m), queue_arn) for m in messages]}


class StreamReader:
    """Reads a table's stream from the start, as an event source mapping would: each call of
    `next_event` returns the records written since the last call, as the Lambda event."""

    def __init__(self, client: DynamoDBStreamsClient, stream_arn: str) -> None:
        self._client = client
        self._arn = stream_arn
        [shard] = client.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        self._iterator = client.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]

    def next_event(self, *, ttl_removed: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
        """`ttl_removed`: the (pk, sk) of items expire_by_ttl deleted; their REMOVE records are
        marked as DynamoDB's TTL process marks its own (moto runs no TTL)."""
        response = self._client.get_records(ShardIterator=self._iterator, Limit=1000)
        self._iterator = response["NextShardIterator"]
        # Imported here: the fair dispatch benchmark imports this module beside an older
        # checkout of sundial (bench/fairness.py), whose stream reader lived elsewhere.
        from sundial.local.streams import stream_record  # noqa: PLC0415

        records = [stream_record(dict(r), self._arn) for r in response.get("Records", [])]
        for record in records:
            keys = record["dynamodb"]["Keys"]
            if (
                record["eventName"] == "REMOVE"
                and (keys["pk"]["S"], keys["sk"]["S"]) in ttl_removed
            ):
                record["userIdentity"] = TTL_IDENTITY
        return {"Records": records}


TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def expire_by_ttl(dynamodb: Any, table: str, now_ms: int) -> set[tuple[str, str]]:
    """What DynamoDB's TTL does in the background, which moto does not: delete every item whose
    `expires_at` (epoch seconds, the table's TTL attribute) has passed. Returns their keys."""
    removed: set[tuple[str, str]] = set()
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for item in page.get("Items", []):
            if "expires_at" in item and int(item["expires_at"]["N"]) * 1000 <= now_ms:
                key = {"pk": item["pk"], "sk": item["sk"]}
                dynamodb.delete_item(TableName=table, Key=key)
                removed.add((item["pk"]["S"], item["sk"]["S"]))
    return removed


def item_size(item: Mapping[str, Any]) -> int:
    """An item's size as DynamoDB bills writes (1 write unit per started KB), following the
    rules in the DynamoDB developer guide ("Item sizes and formats"): names and strings in
    UTF-8 bytes, numbers about 1 byte per two significant digits plus 1, lists and maps 3
    bytes plus 1 per element."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _number_size(text: str) -> int:
    return (len(text.lstrip("-").replace(".", "").strip("0")) + 1) // 2 + 1


def _value_size(value: Mapping[str, Any]) -> int:
    [(kind, data)] = value.items()
    sizes: dict[str, Callable[[Any], int]] = {
        "S": lambda text: len(text.encode()),
        "N": _number_size,
        "BOOL": lambda _: 1,
        "NULL": lambda _: 1,
        "SS": lambda strings: sum(len(text.encode()) for text in strings),
        "NS": lambda numbers: sum(_number_size(text) for text in numbers),
        "L": lambda elements: 3 + sum(1 + _value_size(e) for e in elements),
        "M": lambda attributes: (
            3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in attributes.items())
        ),
    }
    return sizes[kind](data)


class WriteMeter:
    """Counts DynamoDB write requests of every client made from `session`, by what they do,
    and the capacity moto reports. Sweep cursors, the shard-count record and sweep "done"
    records are per-shard costs, counted apart from the per-job writes; writes to a queue's
    state item are counted as "queue"."""

    WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
    PER_SHARD = ("cursor", "shards", "done")

    def __init__(self, session: Any) -> None:
        self.requests: Counter[str] = Counter()
        self.reported_units = 0.0
        # Entries of TransactWriteItems requests (each costs two write units, per DynamoDB)
        self.transaction_items = 0
        session.events.register("provide-client-params.dynamodb.*", self._before)
        session.events.register("after-call.dynamodb.*", self._after)

    def job_writes(self) -> int:
        return sum(n for kind, n in self.requests.items() if kind not in self.PER_SHARD)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            self.requests["transaction"] += 1
            self.transaction_items += len(params["TransactItems"])
        elif model.name == "BatchWriteItem":
            self.requests["put"] += sum(len(v) for v in params["RequestItems"].values())
        elif model.name == "PutItem":
            done = params["Item"]["sk"]["S"].startswith("done#")
            self.requests["done" if done else "put"] += 1
        elif model.name == "UpdateItem":
            values = params.get("ExpressionAttributeValues", {})
            if params["Key"]["sk"]["S"] in self.PER_SHARD:
                self.requests[params["Key"]["sk"]["S"]] += 1
            elif params["Key"]["pk"]["S"] == QUEUES_PK:
                self.requests["queue"] += 1  # a queue's state (sundial.store.queue_states)
            elif ":cancelled" in values:
                self.requests["cancel"] += 1
            elif ":token" in values:
                self.requests["claim"] += 1
            else:
                self.requests["other"] += 1
        elif model.name in self.WRITES:
            self.requests["other"] += 1

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name not in self.WRITES:
            return
        consumed = parsed.get("ConsumedCapacity") or []
        for entry in consumed if isinstance(consumed, list) else [consumed]:
            self.reported_units += float(entry.get("CapacityUnits", 0))


class SentMessages:
    """Counts the job ids of every envelope sent to SQS (SendMessage and SendMessageBatch, to
    any queue) by the clients made from `session` after this one is: each client copies the
    session's handlers when it is made."""

    def __init__(self, session: Any) -> None:
        self.ids: Counter[str] = Counter()
        session.events.register("provide-client-params.sqs.SendMessage", self._one)
        session.events.register("provide-client-params.sqs.SendMessageBatch", self._batch)

    def _one(self, params: dict[str, Any], **_: Any) -> None:
        self._count(params["MessageBody"])

    def _batch(self, params: dict[str, Any], **_: Any) -> None:
        for entry in params["Entries"]:
            self._count(entry["MessageBody"])

    def _count(self, body: str) -> None:
        try:
            envelope = json.loads(body)
        except ValueError:
            return  # a test's own malformed message, not an envelope
        if isinstance(envelope, dict) and "id" in envelope:
            self.ids[envelope["id"]] += 1


def receive_all(client: SQSClient, url: str) -> list[dict[str, Any]]:
    """Every message visible now (deleting each), as envelopes."""
    bodies: list[dict[str, Any]] = []
    while True:
        response = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=600
        )
        messages = response.get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def load_handler(name: str) -> Any:
    """Import lambdas/<name>/handler.py as the Lambda runtime would (each is its own module)."""
    path = Path(__file__).resolve().parent.parent / "lambdas" / name / "handler.py"
    spec = importlib.util.spec_from_file_location(f"lambda_{name}_handler", path)
    assert spec is not None and spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The least-privilege check counts the AWS calls made meanwhile as this function's.
    module.handler = attributed(name, module.handler)
    return module


class FakeLambdaContext:
    """The attributes of the Lambda context object that Powertools and Sundial read."""

    function_name = "sundial-test"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:sundial-test"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"
    log_group_name = "/aws/lambda/sundial-test"
    log_stream_name = "2026/11/21/[$LATEST]abcdef"

    def __init__(self, remaining_ms: int = 60_000) -> None:
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


def _caller_iam(caller: str) -> dict[str, Any]:
    """As the local runtime's gateway signs a request. Imported here, not at the top: the fair
    dispatch benchmark imports this module beside an older checkout of sundial (bench/fairness.py,
    its "before" variant), which has no such function."""
    from sundial.local.gateway import caller_iam  # noqa: PLC0415

    return caller_iam(caller)


# The IAM user every test request is signed as unless it says otherwise.
DEFAULT_CALLER = "arn:aws:iam::123456789012:user/platform"


def http_api_event(
    method: str,
    path: str,
    *,
    body: str | None = None,
    route: str | None = None,
    query: Mapping[str, str] | None = None,
    caller: str | None = DEFAULT_CALLER,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, as AWS sends it with IAM auth.
    `route` is the route template, e.g. /queues/{queue}/dead: its {names} become the path
    parameters. `caller`: the role or user ARN (or account id) the request is signed as, as
    API Gateway reports it (a role as a session of it); None: no IAM identity at all."""
    path_parameters = None
    if route and "{" in route:
        path_parameters = {
            name[1:-1]: value
            for name, value in zip(route.split("/"), path.split("/"), strict=True)
            if name.startswith("{")
        }
    return {
        "version": "2.0",
        "routeKey": f"{method} {route or path}",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        **({"queryStringParameters": dict(query)} if query else {}),
        "headers": {
            "accept": "application/json",
            "content-type": "application/json",
            "host": "abc123.execute-api.us-east-1.amazonaws.com",
            "user-agent": "python-requests/2.32",
            "x-amz-date": "20261121T120000Z",
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            **({"authorizer": {"iam": _caller_iam(caller)}} if caller else {}),
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "python-requests/2.32",
            },
            "requestId": "JKJaXmPLvHcESHA=",
            "routeKey": f"{method} {route or path}",
            "stage": "$default",
            "time": "21/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1795267200000,
        },
        "pathParameters": path_parameters,
        "body": body,
        "isBase64Encoded": False,
    }


def serialize_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make moto apply DynamoDB requests one at a time, for tests that write from threads.

    DynamoDB applies each write atomically: a conditional ADD checks, updates and returns the
    item as one step. moto's in-process backend does not: across threads its condition check,
    its update and the item it returns interleave (seen as lost ADDs and two writers reading
    the same counter). Serializing moto's request handling restores exactly the guarantee
    AWS gives; the code under test still runs on concurrent threads between requests."""
    lock = threading.Lock()
    handle = DynamoHandler.call_action

    def one_at_a_time(self: DynamoHandler) -> Any:
        with lock:
            return handle(self)

    monkeypatch.setattr(DynamoHandler, "call_action", one_at_a_time)


def call_api(
    handler: Any,
    method: str,
    path: str,
    *,
    route: str | None = None,
    body: Any = None,
    caller: str | None = DEFAULT_CALLER,
) -> tuple[int, Any]:
    """Invoke an API function with the HTTP API event for `method path` (`path` may end in a
    ?query), signed as `caller`; returns (status, JSON body)."""
    text = json.dumps(body) if body is not None else None
    raw_path, _, query = path.partition("?")
    event = http_api_event(
        method,
        raw_path,
        body=text,
        route=route,
        query=dict(parse_qsl(query)) or None,
        caller=caller,
    )
    response = handler.handler(event, FakeLambdaContext())
    payload = response.get("body")
    return response["statusCode"], json.loads(payload) if payload else None


def payload_lifecycle_rules() -> list[dict[str, Any]]:
    """The payload bucket's lifecycle rules as the stack synthesizes them (CloudFormation's
    LifecycleConfiguration.Rules): the PayloadBucket construct alone, in a stack of its own."""
    import aws_cdk as cdk  # noqa: PLC0415 - the CDK only for the tests that need the rules
    from aws_cdk import aws_s3 as s3  # noqa: PLC0415
    from aws_cdk.assertions import Template  # noqa: PLC0415

    from stacks.payload_bucket import PayloadBucket  # noqa: PLC0415

    stack = cdk.Stack(cdk.App(), "Payloads")
    PayloadBucket(stack, "Payloads", access_logs=s3.Bucket(stack, "Logs"))
    buckets = Template.from_stack(stack).find_resources("AWS::S3::Bucket")
    return [
        rule
        for bucket in buckets.values()
        for rule in bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
    ]


def expire_by_lifecycle(
    s3: Any, bucket: str, rules: list[dict[str, Any]], now_ms: int
) -> list[str]:
    """What S3's lifecycle does in the background, which moto does not: delete every object an
    expiration rule matches (its Prefix and TagFilters) whose last write is at least its
    ExpirationInDays old by `now_ms`. Returns the keys deleted."""
    deleted = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for listed in page.get("Contents", []):
            key = listed["Key"]
            age_days = (now_ms - listed["LastModified"].timestamp() * 1000) / 86_400_000
            tags = {
                t["Key"]: t["Value"]
                for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
            }
            for rule in rules:
                days = rule.get("ExpirationInDays")
                wanted = {t["Key"]: t["Value"] for t in rule.get("TagFilters", [])}
                if (
                    days is not None
                    and key.startswith(rule.get("Prefix", ""))
                    and wanted.items() <= tags.items()
                    and age_days >= days
                ):
                    s3.delete_object(Bucket=bucket, Key=key)
                    deleted.append(key)
                    break
    return deleted
