"""Creates in the emulator what the template declares: tables (keys, TTL, streams), queues
(with their redrive policies), S3 buckets, and schedule rules. Lambda functions are not created
in moto (it would need Docker); the runtime hosts them itself, under the names the template
implies."""

from __future__ import annotations

import json
from typing import Any

import boto3

from sundial.local.template import ACCOUNT_ID, REGION, LocalTemplate

_QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "SqsManagedSseEnabled",
    "FifoQueue",
    "ContentBasedDeduplication",
)


def _physical_name(template: LocalTemplate, logical_id: str, limit: int) -> str:
    return f"{template.stack_name}-{logical_id}"[:limit]


def assign_names(template: LocalTemplate, emulator_url: str) -> None:
    """Give every resource the physical name and ARN that Ref and Fn::GetAtt return."""
    arn = f"{REGION}:{ACCOUNT_ID}"
    for lid, resource in template.resources.items():
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::DynamoDB::Table":
            name = props.get("TableName") or _physical_name(template, lid, 255)
            template.physical[lid] = name
            template.attributes[(lid, "Arn")] = f"arn:aws:dynamodb:{arn}:table/{name}"
        elif kind == "AWS::SQS::Queue":
            name = props.get("QueueName") or _physical_name(template, lid, 80)
            template.physical[lid] = f"{emulator_url}/{ACCOUNT_ID}/{name}"
            template.attributes[(lid, "Arn")] = f"arn:aws:sqs:{arn}:{name}"
            template.attributes[(lid, "QueueName")] = name
            template.attributes[(lid, "QueueUrl")] = template.physical[lid]
        elif kind == "AWS::S3::Bucket":
            name = props.get("BucketName") or _physical_name(template, lid, 63).lower()
            template.physical[lid] = name
            template.attributes[(lid, "Arn")] = f"arn:aws:s3:::{name}"
            template.attributes[(lid, "DomainName")] = f"{name}.s3.amazonaws.com"
        elif kind == "AWS::Lambda::Function":
            name = props.get("FunctionName") or _physical_name(template, lid, 64)
            template.physical[lid] = name
            template.attributes[(lid, "Arn")] = f"arn:aws:lambda:{arn}:function:{name}"
        elif kind == "AWS::Lambda::LayerVersion":
            template.physical[lid] = f"arn:aws:lambda:{arn}:layer:{lid}:1"
        elif kind == "AWS::Events::Rule":
            name = props.get("Name") or _physical_name(template, lid, 64)
            template.physical[lid] = name
            template.attributes[(lid, "Arn")] = f"arn:aws:events:{arn}:rule/{name}"
        elif kind == "AWS::IAM::Role":
            template.physical[lid] = _physical_name(template, lid, 64)
            template.attributes[(lid, "Arn")] = (
                f"arn:aws:iam::{ACCOUNT_ID}:role/{template.physical[lid]}"
            )
        elif kind == "AWS::Logs::LogGroup":
            name = props.get("LogGroupName") or f"/aws/local/{lid}"
            template.physical[lid] = name
            template.attributes[(lid, "Arn")] = f"arn:aws:logs:{arn}:log-group:{name}:*"
        else:
            # Not emulated (IAM policies, permissions, API Gateway objects, ...): a stable id.
            template.physical[lid] = f"{lid.lower()}-local"


def create_resources(template: LocalTemplate, session: boto3.Session, endpoint: str) -> None:
    dynamodb = session.client("dynamodb", endpoint_url=endpoint)
    sqs: Any = session.client("sqs", endpoint_url=endpoint)
    events = session.client("events", endpoint_url=endpoint)
    s3 = session.client("s3", endpoint_url=endpoint)
    for lid in template.of_type("AWS::S3::Bucket"):
        s3.create_bucket(Bucket=template.physical[lid])
    for lid in template.of_type("AWS::DynamoDB::Table"):
        _create_table(dynamodb, template, lid)
    queues = template.of_type("AWS::SQS::Queue")
    for lid in queues:  # first every queue, so each redrive target exists
        props = template.resolve(template.props(lid))
        attributes: dict[str, Any] = {
            k: str(props[k]).lower() if isinstance(props[k], bool) else str(props[k])
            for k in _QUEUE_ATTRIBUTES
            if k in props
        }
        name = template.get_att(lid, "QueueName")
        url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        template.physical[lid] = url
        template.attributes[(lid, "QueueUrl")] = url
    for lid in queues:
        props = template.resolve(template.props(lid))
        if "RedrivePolicy" in props:
            sqs.set_queue_attributes(
                QueueUrl=template.physical[lid],
                Attributes={"RedrivePolicy": json.dumps(props["RedrivePolicy"])},
            )
    for spec in template.schedules():
        events.put_rule(Name=spec.name, ScheduleExpression=spec.expression, State="ENABLED")
        events.put_targets(
            Rule=spec.name,
            Targets=[
                {"Id": f"Target{i}", "Arn": template.get_att(target, "Arn")}
                for i, target in enumerate(spec.targets)
            ],
        )


def _create_table(client: Any, template: LocalTemplate, lid: str) -> None:
    props = template.resolve(template.props(lid))
    request: dict[str, Any] = {
        "TableName": template.physical[lid],
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    if request["BillingMode"] == "PROVISIONED":
        request["ProvisionedThroughput"] = props["ProvisionedThroughput"]
    if "StreamSpecification" in props:
        request["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": props["StreamSpecification"]["StreamViewType"],
        }
    for index_kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if index_kind in props:
            request[index_kind] = props[index_kind]
    description = client.create_table(**request)["TableDescription"]
    if "LatestStreamArn" in description:
        template.attributes[(lid, "StreamArn")] = description["LatestStreamArn"]
    ttl = props.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        client.update_time_to_live(
            TableName=template.physical[lid],
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )
