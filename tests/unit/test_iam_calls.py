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
