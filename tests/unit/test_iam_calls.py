"""The least-privilege check's own parts (tests/iam_calls.py): AWS calls as IAM requests, and
the evaluator of role statements, so a pass of that check means what it says."""

from __future__ import annotations

import pytest

from tests.iam_calls import Call, Statement, calls_of

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/email"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:email"
QUEUES_ONLY = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["queues"]}}


def test_a_transaction_is_one_request_per_entry_as_iam_authorizes_it() -> None:
    # Given a transaction that puts a job and checks a queue's pause
    params = {
        "TransactItems": [
            {"Put": {"TableName": "jobs", "Item": {"pk": {"S": "shard#3"}, "sk": {"S": "1"}}}},
            {"ConditionCheck": {"TableName": "jobs", "Key": {"pk": {"S": "queues"}}}},
        ]
    }
    # When it is read as IAM requests
    calls = calls_of("submit", "dynamodb", "TransactWriteItems", params)
    # Then each entry needs its own item action (there is no dynamodb:TransactWriteItems)
    assert [(c.action, c.resource, sorted(c.leading_keys)) for c in calls] == [
        ("dynamodb:PutItem", TABLE, ["shard#3"]),
        ("dynamodb:ConditionCheckItem", TABLE, ["queues"]),
    ]


def test_batch_and_renamed_operations_map_to_their_iam_actions() -> None:
    [send] = calls_of("sweeper", "sqs", "SendMessageBatch", {"QueueUrl": QUEUE_URL})
    assert (send.action, send.resource) == ("sqs:SendMessage", QUEUE)
    [invoke] = calls_of("fanout", "lambda", "Invoke", {"FunctionName": "sweeper"})
    assert invoke.action == "lambda:InvokeFunction"
    assert invoke.resource == "arn:aws:lambda:us-east-1:123456789012:function:sweeper"
    [put] = calls_of("history", "s3", "PutObject", {"Bucket": "raw", "Key": "history/a.gz"})
    assert (put.action, put.resource) == ("s3:PutObject", "arn:aws:s3:::raw/history/a.gz")


def test_a_query_is_on_the_partition_of_its_key_condition() -> None:
    params = {
        "TableName": "jobs",
        "KeyConditionExpression": "#p = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeNames": {"#p": "pk"},
        "ExpressionAttributeValues": {":p": {"S": "queues"}, ":a": {"S": "a"}, ":b": {"S": "b"}},
    }
    [query] = calls_of("workers", "dynamodb", "Query", params)
    assert query.leading_keys == {"queues"}


def test_a_statement_allows_its_actions_on_its_resources_only() -> None:
    statement = Statement.parse(
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [QUEUE]}
    )
    send = Call("submit", "sqs:SendMessage", QUEUE, "sqs.SendMessage")
    assert statement.allows(send)
    assert not statement.allows(Call("submit", "sqs:SendMessage", QUEUE + "-dlq", "sqs.X"))
    assert not statement.allows(Call("submit", "sqs:ReceiveMessage", QUEUE, "sqs.X"))


def test_wildcards_match_as_iam_matches_them() -> None:
    statement = Statement.parse(
        {
            "Effect": "Allow",
            "Action": "lambda:InvokeFunction",
            "Resource": "arn:aws:lambda:us-east-1:123456789012:function:sweeper:*",
        }
    )
    qualified = "arn:aws:lambda:us-east-1:123456789012:function:sweeper:live"
    assert statement.allows(Call("fanout", "lambda:InvokeFunction", qualified, "lambda.Invoke"))
    other = "arn:aws:lambda:us-east-1:123456789012:function:submit"
    assert not statement.allows(Call("fanout", "lambda:InvokeFunction", other, "lambda.Invoke"))


def test_the_leading_keys_condition_limits_a_query_to_its_partitions() -> None:
    statement = Statement.parse(
        {"Effect": "Allow", "Action": "dynamodb:Query", "Resource": TABLE, "Condition": QUEUES_ONLY}
    )
    queues = Call("workers", "dynamodb:Query", TABLE, "dynamodb.Query", frozenset({"queues"}))
    shard = Call("workers", "dynamodb:Query", TABLE, "dynamodb.Query", frozenset({"shard#1"}))
    assert statement.allows(queues)
    assert not statement.allows(shard)
    # And without the resource check (the handler tests' own tables) the condition still holds
    assert not statement.allows(shard, check_resource=False)


def test_an_unknown_condition_or_statement_form_is_refused_not_ignored() -> None:
    statement = Statement.parse(
        {
            "Effect": "Allow",
            "Action": "s3:PutObject",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:SourceVpc": "vpc-1"}},
        }
    )
    with pytest.raises(AssertionError, match="teach the evaluator"):
        statement.allows(Call("history", "s3:PutObject", "arn:aws:s3:::b/k", "s3.PutObject"))
    with pytest.raises(AssertionError, match="unsupported statement"):
        Statement.parse({"Effect": "Deny", "Action": "s3:*", "Resource": "*"})


def test_a_writes_attributes_are_the_names_of_its_key_item_update_and_condition() -> None:
    update = {
        "TableName": "jobs",
        "Key": {"pk": {"S": "shard#1"}, "sk": {"S": "1#A"}},
        "UpdateExpression": "SET #s = :s, history = list_append(if_not_exists(history, :e), :h)"
        " REMOVE lease_until ADD done_parents :p",
        "ConditionExpression": "attempts = :a AND NOT contains(done_parents, :d) AND #d.#n = :n",
        "ExpressionAttributeNames": {"#s": "status", "#d": "dag", "#n": "node"},
        "ReturnValues": "UPDATED_NEW",
    }
    [call] = calls_of("example_consumer", "dynamodb", "UpdateItem", update)
    assert call.attributes == frozenset(
        {
            "pk",
            "sk",
            "status",
            "history",
            "lease_until",
            "done_parents",
            "attempts",
            "dag",
        }
    )
    assert call.return_values == "UPDATED_NEW"
    put = {"TableName": "jobs", "Item": {"pk": {"S": "q"}, "x": {"N": "1"}}}
    [put_call] = calls_of("x", "dynamodb", "PutItem", put)
    assert (put_call.attributes, put_call.return_values) == (frozenset({"pk", "x"}), "NONE")
    # A read without a projection has no Attributes key, and no ReturnValues
    [get] = calls_of("x", "dynamodb", "GetItem", {"TableName": "jobs", "Key": {"pk": {"S": "q"}}})
    assert (get.attributes, get.return_values) == (None, None)
    # In a transaction an entry has no ReturnValues of its own
    [entry] = calls_of("x", "dynamodb", "TransactWriteItems", {"TransactItems": [{"Put": put}]})
    assert entry.return_values is None


def test_for_all_values_holds_for_a_request_without_the_key_unless_null_guards_it() -> None:
    allowed = {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["pk", "sk", "status"]}}
    guarded = allowed | {"Null": {"dynamodb:Attributes": "false"}}
    within = Call("c", "dynamodb:UpdateItem", TABLE, "u", frozenset({"shard#1"}), frozenset({"pk"}))
    beyond = Call("c", "dynamodb:UpdateItem", TABLE, "u", frozenset(), frozenset({"queue"}))
    absent = Call("c", "dynamodb:UpdateItem", TABLE, "u")
    for condition, absent_allowed in ((allowed, True), (guarded, False)):
        statement = Statement.parse(
            {"Effect": "Allow", "Action": "dynamodb:*", "Resource": TABLE, "Condition": condition}
        )
        assert statement.allows(within) and not statement.allows(beyond)
        assert statement.allows(absent) is absent_allowed


def test_for_any_value_needs_one_match_and_fails_without_the_key() -> None:
    statement = Statement.parse(
        {
            "Effect": "Allow",
            "Action": "dynamodb:PutItem",
            "Resource": TABLE,
            "Condition": {"ForAnyValue:StringEquals": {"dynamodb:Attributes": ["retry_of"]}},
        }
    )
    timer = Call("c", "dynamodb:PutItem", TABLE, "p", attributes=frozenset({"pk", "retry_of"}))
    job = Call("c", "dynamodb:PutItem", TABLE, "p", attributes=frozenset({"pk", "queue"}))
    assert statement.allows(timer)
    assert not statement.allows(job)
    assert not statement.allows(Call("c", "dynamodb:PutItem", TABLE, "p"))


def test_string_like_leading_keys_and_return_values_if_exists() -> None:
    statement = Statement.parse(
        {
            "Effect": "Allow",
            "Action": "dynamodb:UpdateItem",
            "Resource": TABLE,
            "Condition": {
                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["shard#*"]},
                "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE", "UPDATED_NEW"]},
            },
        }
    )

    def update(pk: str, returns: str | None) -> Call:
        return Call("c", "dynamodb:UpdateItem", TABLE, "u", frozenset({pk}), None, returns)

    assert statement.allows(update("shard#12", "NONE"))
    assert statement.allows(update("shard#12", None))  # ...IfExists: no ReturnValues in it
    assert not statement.allows(update("shard#12", "ALL_NEW"))
    assert not statement.allows(update("queues", "NONE"))
    assert not statement.allows(update("quota#email#0", "NONE"))
