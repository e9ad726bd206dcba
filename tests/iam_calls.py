"""Least privilege, proven: every AWS call a Lambda function makes, as the IAM request AWS would
authorize (action, resource ARN, and the DynamoDB condition keys a role policy may test:
dynamodb:LeadingKeys, dynamodb:Attributes, dynamodb:ReturnValues), and a small evaluator of the
synthesized role policies that says whether a call is allowed.

The DynamoDB keys, as the developer guide ("Using IAM policy conditions for fine-grained access
control") describes them: LeadingKeys, the partition key values a request touches;
Attributes, the top-level attribute names a write request uses (the key's, the item's or the
update expression's, and the condition's; a read without a projection returns every
attribute and is left without the key here, as no policy of Sundial's bounds reads by
attribute); ReturnValues, an UpdateItem's, PutItem's or DeleteItem's (NONE unless given).
(Over 450 lines: the request model, the two recorders and the evaluator belong together, each
the other's reason.)

Calls are recorded with a botocore `before-parameter-build` hook (it sees the caller's own
parameters, once per call, before retries). Two recorders:
- `SessionRecorder`: on a boto3 Session of one function's own, so every call from it (its worker
  threads included) is that function's. tests/infrastructure/test_least_privilege.py drives each
  function this way, with the template's own resource names.
- `HANDLER_CALLS`: registered for every botocore session during the pytest run
  (tests/conftest.py); a call counts for the function whose handler is running in the calling
  thread (`running`, which `tests.support.load_handler` wraps around every handler).
  `make test` runs the tests in several processes (pytest-xdist) and the least-privilege check
  in one of its own after them: each process then saves its calls into the folder named by
  HANDLER_CALLS_FOLDER (tests/conftest.py), and the check reads them all (`handler_test_calls`).
"""

from __future__ import annotations

import contextvars
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from sundial.local.template import ACCOUNT_ID, REGION

# The job table's partition key (stacks/job_table.py): IAM's dynamodb:LeadingKeys are its values.
PARTITION_KEY = "pk"

# (service, operation) -> IAM action, where the names differ (otherwise "<service>:<operation>").
# https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html
IAM_ACTION: Mapping[tuple[str, str], str] = {
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
    ("lambda", "Invoke"): "lambda:InvokeFunction",
    ("lambda", "InvokeAsync"): "lambda:InvokeFunction",
    ("s3", "ListObjects"): "s3:ListBucket",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "CreateMultipartUpload"): "s3:PutObject",
    ("s3", "UploadPart"): "s3:PutObject",
    ("s3", "CompleteMultipartUpload"): "s3:PutObject",
    ("s3", "AbortMultipartUpload"): "s3:AbortMultipartUpload",
    ("s3", "DeleteObjects"): "s3:DeleteObject",
}
# botocore's service names whose IAM prefix differs.
IAM_PREFIX: Mapping[str, str] = {"dynamodbstreams": "dynamodb"}


@dataclass(frozen=True)
class Call:
    """One AWS request as IAM authorizes it."""

    function: str  # the lambdas/ directory of the function that made it
    action: str  # e.g. "dynamodb:UpdateItem"
    resource: str  # the resource ARN
    operation: str  # the API call, e.g. "sqs.SendMessageBatch"
    leading_keys: frozenset[str] = frozenset()  # DynamoDB partition keys the request touches
    # dynamodb:Attributes (None: not in the request context) and dynamodb:ReturnValues
    attributes: frozenset[str] | None = None
    return_values: str | None = None

    def context(self) -> dict[str, frozenset[str]]:
        """The request context's condition keys, each a set of values (absent: not present)."""
        found = {
            "dynamodb:LeadingKeys": self.leading_keys or None,
            "dynamodb:Attributes": self.attributes,
            "dynamodb:ReturnValues": (
                frozenset({self.return_values}) if self.return_values else None
            ),
        }
        return {key: values for key, values in found.items() if values is not None}


def iam_action(service: str, operation: str) -> str:
    return IAM_ACTION.get((service, operation), f"{IAM_PREFIX.get(service, service)}:{operation}")


# A DynamoDB transaction is authorized item by item, as the single-item action of each entry
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
TRANSACT_ITEM_ACTIONS: Mapping[str, str] = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def calls_of(
    function: str,
    service: str,
    operation: str,
    params: Mapping[str, Any],
    *,
    in_transaction: bool = False,
) -> list[Call]:
    """The IAM requests one API call makes (a batch across tables is one per table; a
    transaction one per entry, with no ReturnValues of its own)."""
    op = f"{service}.{operation}"
    if service == "dynamodb" and operation in ("TransactWriteItems", "TransactGetItems"):
        return [
            call
            for entry in params["TransactItems"]
            for kind, request in entry.items()
            for call in calls_of(
                function, service, TRANSACT_ITEM_ACTIONS[kind], request, in_transaction=True
            )
        ]
    if service == "s3" and operation == "CopyObject":
        # IAM authorizes a copy as s3:GetObject of the source and s3:PutObject of the copy
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html).
        # (botocore has made a {"Bucket", "Key"} source its "bucket/key" form by now)
        source = params["CopySource"]
        if isinstance(source, str):
            bucket, _, key = unquote(source).partition("/")
            source = {"Bucket": bucket, "Key": key}
        read = {"Bucket": source["Bucket"], "Key": source["Key"]}
        return [
            Call(function, "s3:GetObject", _resources(service, operation, read)[0][0], op),
            Call(function, "s3:PutObject", _resources(service, operation, params)[0][0], op),
        ]
    action = iam_action(service, operation)
    attributes, returns = None, None
    if service == "dynamodb":
        attributes = written_attributes(operation, params)
        if operation in _RETURNING and not in_transaction:
            returns = str(params.get("ReturnValues", "NONE"))
    return [
        Call(function, action, resource, op, frozenset(keys), attributes, returns)
        for resource, keys in _resources(service, operation, params)
    ]


# The writes whose request has a ReturnValues (NONE unless given).
_RETURNING = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
# Words of DynamoDB's expression grammar that are not attribute names.
_KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "SET", "REMOVE", "ADD", "DELETE"})
# An attribute path (its first element is the top-level name), a value placeholder (":x"), or a
# function name (followed by "(").
_TOKEN = re.compile(r"(:?)([#A-Za-z_][\w#]*)((?:\[\d+\]|\.[#\w]+)*)(\s*\()?")


def written_attributes(operation: str, params: Mapping[str, Any]) -> frozenset[str] | None:
    """dynamodb:Attributes of a write: the top-level names its key or item, update expression
    and condition use (None for a read, see the module docstring)."""
    names: set[str] = set()
    if operation == "PutItem":
        names |= set(params["Item"])
    elif operation in ("UpdateItem", "DeleteItem", "ConditionCheckItem"):
        names |= set(params["Key"])
    elif operation == "BatchWriteItem":
        for requests in params["RequestItems"].values():
            for request in requests:
                put = request.get("PutRequest", {}).get("Item")
                names |= set(put or request["DeleteRequest"]["Key"])
    else:
        return None
    aliases = params.get("ExpressionAttributeNames", {})
    for field in ("UpdateExpression", "ConditionExpression"):
        names |= expression_attributes(params.get(field, ""), aliases)
    return frozenset(names)


def expression_attributes(expression: str, aliases: Mapping[str, str]) -> set[str]:
    """The top-level attribute names an expression uses (aliases resolved)."""
    found: set[str] = set()
    for value, name, _, call in _TOKEN.findall(expression):
        if value or call or name.upper() in _KEYWORDS:
            continue
        found.add(aliases.get(name, name))
    return found


def _resources(
    service: str, operation: str, params: Mapping[str, Any]
) -> list[tuple[str, Iterable[str]]]:
    if service == "dynamodb":
        return _dynamodb_resources(operation, params)
    if service == "sqs":
        if "QueueUrl" in params:
            return [(queue_arn(params["QueueUrl"]), ())]
        return [(f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{params['QueueName']}", ())]
    if service == "lambda":
        return [(function_arn(params["FunctionName"]), ())]
    if service == "s3":
        bucket = f"arn:aws:s3:::{params['Bucket']}"
        return [(f"{bucket}/{params['Key']}" if "Key" in params else bucket, ())]
    raise AssertionError(f"no IAM resource mapping for {service}.{operation}: add one")


def _dynamodb_resources(
    operation: str, params: Mapping[str, Any]
) -> list[tuple[str, Iterable[str]]]:
    if operation in ("BatchWriteItem", "BatchGetItem"):
        found: list[tuple[str, Iterable[str]]] = []
        for table, requests in params["RequestItems"].items():
            if operation == "BatchGetItem":
                keys = [key[PARTITION_KEY]["S"] for key in requests["Keys"]]
            else:
                keys = [
                    (r.get("PutRequest", {}).get("Item") or r["DeleteRequest"]["Key"])[
                        PARTITION_KEY
                    ]["S"]
                    for r in requests
                ]
            found.append((table_arn(table), keys))
        return found
    arn = table_arn(params["TableName"])
    if "IndexName" in params:
        arn += f"/index/{params['IndexName']}"
    if operation == "Query":
        return [(arn, [_queried_partition(params)])]
    item = params.get("Key") or params.get("Item")
    return [(arn, [item[PARTITION_KEY]["S"]] if item else [])]


def _queried_partition(params: Mapping[str, Any]) -> str:
    """The partition key value of a Query: the `<pk> = :value` term of its key condition."""
    names = params.get("ExpressionAttributeNames", {})
    for name, value in re.findall(r"([#\w]+)\s*=\s*(:\w+)", params["KeyConditionExpression"]):
        if names.get(name, name) == PARTITION_KEY:
            return str(params["ExpressionAttributeValues"][value]["S"])
    raise AssertionError(f"no partition key term in {params['KeyConditionExpression']!r}")


def table_arn(name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{name}"


def queue_arn(url: str) -> str:
    """A queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>) -> its ARN."""
    account, name = urlparse(url).path.strip("/").split("/")[-2:]
    return f"arn:aws:sqs:{REGION}:{account}:{name}"


def function_arn(name_or_arn: str) -> str:
    if name_or_arn.startswith("arn:"):
        return name_or_arn
    return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name_or_arn}"


class CallLog:
    """Calls by count, thread-safe (a sweeper claims from a pool of threads)."""

    def __init__(self) -> None:
        self.calls: Counter[Call] = Counter()
        self._lock = threading.Lock()

    def add(self, calls: Iterable[Call]) -> None:
        with self._lock:
            self.calls.update(calls)

    def save(self, path: Path) -> None:
        """Writes the calls with their counts as JSON (`load` reads them back)."""
        with self._lock:
            rows = [
                [
                    c.function,
                    c.action,
                    c.resource,
                    c.operation,
                    sorted(c.leading_keys),
                    None if c.attributes is None else sorted(c.attributes),
                    c.return_values,
                    count,
                ]
                for c, count in self.calls.items()
            ]
        path.write_text(json.dumps(rows))

    def load(self, path: Path) -> None:
        """Adds the calls another process saved."""
        counts: Counter[Call] = Counter()
        for row in json.loads(path.read_text()):
            function, action, resource, operation, keys, attributes, returns, count = row
            names = None if attributes is None else frozenset(attributes)
            call = Call(function, action, resource, operation, frozenset(keys), names, returns)
            counts[call] += count
        with self._lock:
            self.calls.update(counts)

    def by_function(self) -> dict[str, Counter[Call]]:
        with self._lock:
            grouped: dict[str, Counter[Call]] = {}
            for call, count in self.calls.items():
                grouped.setdefault(call.function, Counter())[call] += count
            return grouped

    def hook(self, function: Callable[[], str | None]) -> Callable[..., None]:
        """A `before-parameter-build` handler recording each call for `function()` (None: skip)."""

        def record(params: Mapping[str, Any], model: Any, **_: Any) -> None:
            name = function()
            if name is not None:
                service = model.service_model.service_name
                self.add(calls_of(name, service, model.name, params))

        return record


class SessionRecorder(CallLog):
    """Records every call of the clients made from one function's own session."""

    def __init__(self, function: str, session: Any) -> None:
        super().__init__()
        self.session = session
        session.events.register("before-parameter-build", self.hook(lambda: function))


# -- the handler tests ----------------------------------------------------------------------

# The folder where each test process saves its handler calls at its end (set by `make test`).
HANDLER_CALLS_FOLDER = "SUNDIAL_HANDLER_CALLS"

_RUNNING: contextvars.ContextVar[str | None] = contextvars.ContextVar("running", default=None)
HANDLER_CALLS = CallLog()
handler_call_hook = HANDLER_CALLS.hook(_RUNNING.get)


def save_handler_calls() -> None:
    """Leaves this process's handler calls in HANDLER_CALLS_FOLDER, if it is set."""
    folder = os.environ.get(HANDLER_CALLS_FOLDER)
    if folder and HANDLER_CALLS.calls:
        HANDLER_CALLS.save(Path(folder) / f"{os.getpid()}.json")


def handler_test_calls() -> dict[str, Counter[Call]]:
    """Every handler call of this process and of the processes that saved theirs before it."""
    every = CallLog()
    every.calls.update(HANDLER_CALLS.calls)
    folder = os.environ.get(HANDLER_CALLS_FOLDER)
    for path in sorted(Path(folder).glob("*.json")) if folder else []:
        every.load(path)
    return every.by_function()


@contextmanager
def running(function: str) -> Iterator[None]:
    """Calls made in this thread meanwhile are `function`'s (lambdas/<function>)."""
    token = _RUNNING.set(function)
    try:
        yield
    finally:
        _RUNNING.reset(token)


def attributed(function: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler`, recording its calls as `function`'s while it runs."""

    def invoke(*args: Any, **kwargs: Any) -> Any:
        with running(function):
            return handler(*args, **kwargs)

    invoke.__wrapped__ = handler  # type: ignore[attr-defined]
    return invoke


# -- the policies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One Allow statement of a role policy, its intrinsics resolved to ARNs."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    condition: Mapping[str, Any]

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Statement:
        unsupported = set(raw) - {"Effect", "Action", "Resource", "Condition", "Sid"}
        assert raw["Effect"] == "Allow" and not unsupported, f"unsupported statement: {raw}"
        return cls(
            actions=tuple(_listed(raw["Action"])),
            resources=tuple(_listed(raw["Resource"])),
            condition=raw.get("Condition", {}),
        )

    def grants_action(self, action: str) -> bool:
        return any(_matches(pattern, action, ignore_case=True) for pattern in self.actions)

    def allows(self, call: Call, *, check_resource: bool = True) -> bool:
        """IAM's answer for `call` (`check_resource=False`: on some resource of this statement)."""
        return (
            self.grants_action(call.action)
            and (
                not check_resource
                or any(_matches(pattern, call.resource) for pattern in self.resources)
            )
            and self._condition_holds(call)
        )

    def _condition_holds(self, call: Call) -> bool:
        """Every operator of the block holds for every key it names (IAM ANDs them)."""
        context = call.context()
        for operator, keys in self.condition.items():
            for key, values in keys.items():
                if key not in _CONDITION_KEYS or operator not in _OPERATORS:
                    raise AssertionError(f"condition {operator} {key}: teach the evaluator it")
                if not _OPERATORS[operator](context.get(key), _listed(values)):
                    return False
        return True


_CONDITION_KEYS = frozenset(
    {"dynamodb:LeadingKeys", "dynamodb:Attributes", "dynamodb:ReturnValues"}
)


def _any_matches(value: str, patterns: Sequence[str], *, like: bool) -> bool:
    return any(_matches(p, value) if like else p == value for p in patterns)


def _for_all(like: bool) -> Callable[[frozenset[str] | None, Sequence[str]], bool]:
    """ForAllValues: every value of the key matches one of the policy's. A key absent from the
    request, or empty, makes it hold: why Sundial's statements pair it with Null."""
    return lambda found, patterns: all(_any_matches(v, patterns, like=like) for v in found or ())


def _for_any(found: frozenset[str] | None, patterns: Sequence[str]) -> bool:
    """ForAnyValue: some value of the key matches; an absent key makes it fail."""
    return any(_any_matches(v, patterns, like=False) for v in found or ())


def _equals(if_exists: bool) -> Callable[[frozenset[str] | None, Sequence[str]], bool]:
    """StringEquals on a single-valued key (absent: false; ...IfExists: true)."""
    return lambda found, patterns: if_exists if found is None else all(v in patterns for v in found)


def _null(found: frozenset[str] | None, values: Sequence[str]) -> bool:
    """Null: "true" holds when the key is absent, "false" when it is present."""
    [value] = values
    return (found is None) is (value == "true")


_OPERATORS: Mapping[str, Callable[[frozenset[str] | None, Sequence[str]], bool]] = {
    "ForAllValues:StringEquals": _for_all(like=False),
    "ForAllValues:StringLike": _for_all(like=True),
    "ForAnyValue:StringEquals": _for_any,
    "StringEquals": _equals(if_exists=False),
    "StringEqualsIfExists": _equals(if_exists=True),
    "Null": _null,
}


def _listed(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _matches(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcards: `*` any run of characters, `?` any one."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE if ignore_case else 0) is not None
