"""The job table: one DynamoDB table keyed by (random shard, due time + unique suffix)."""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.settings import TableCapacitySettings
from sundial.ids import SHARD_PREFIX
from sundial.store.queue_states import QUEUES_PK
from sundial.store.runner_writes import RUNNER_UPDATED, TIMER_ATTRIBUTES

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"


def grant_read_queue_states(table: dynamodb.ITable, grantee: iam.IGrantable) -> iam.Grant:
    """Query the queue states (which queues are paused: one partition, sundial.store.queue_states)
    and nothing else: the query is allowed only on that partition key. For a function that
    releases DAG nodes, whose queue's pause must hold them, and needs no other query."""
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["dynamodb:Query"],
        resource_arns=[table.table_arn],
        conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [QUEUES_PK]}},
    )


# Job items (and the sweep cursors and markers beside them) live in the shard partitions
# "shard#<n>"; everything else has a partition of its own kind: the queue states ("queues"),
# submission windows ("quota#<queue>#<lane>"), schedules ("sched#<id>") and the indexes
# ("schedules#<queue>", "dags#<queue>", "dead#<queue>", "idem#<hash>", "meta").
JOB_PARTITIONS = f"{SHARD_PREFIX}*"
# What fine-grained access control asks of a writer bounded by dynamodb:Attributes: it reads
# back no attribute beyond those it writes (the DynamoDB developer guide, "Using IAM policy
# conditions for fine-grained access control"). UpdateItem and PutItem always carry the key.
_WRITES_RETURN = {"dynamodb:ReturnValues": ["NONE", "UPDATED_OLD", "UPDATED_NEW"]}


def grant_runner_items(table: dynamodb.ITable, grantee: iam.IGrantable) -> None:
    """A consumer Lambda's access to the job table, as narrow as its SDK allows: get a job item
    (the fence; DAG parents' results), update the attempt's and the DAG's bookkeeping
    attributes (RUNNER_UPDATED) and put retry timers (TIMER_ATTRIBUTES, and `retry_of`
    always), all on the shard partitions only (dynamodb:LeadingKeys "shard#*"). No partition
    key of a queue state, submission window, schedule or index matches, so none of those can
    be read or written. The partition key names no queue, so IAM cannot keep a consumer to
    its own queue's jobs: what that leaves open is written in docs (the access section).
    Each statement also requires its keys to be present (`Null`): a `ForAllValues` condition
    holds for a request that lacks the key altogether."""
    leading = {"dynamodb:LeadingKeys": [JOB_PARTITIONS]}
    present = {"dynamodb:LeadingKeys": "false", "dynamodb:Attributes": "false"}
    statements: list[tuple[str, dict[str, Any]]] = [
        (
            "dynamodb:GetItem",
            {
                "ForAllValues:StringLike": leading,
                "Null": {"dynamodb:LeadingKeys": "false"},
            },
        ),
        (
            "dynamodb:UpdateItem",
            {
                "ForAllValues:StringLike": leading,
                "ForAllValues:StringEquals": {"dynamodb:Attributes": sorted(RUNNER_UPDATED)},
                "StringEqualsIfExists": _WRITES_RETURN,
                "Null": present,
            },
        ),
        (
            "dynamodb:PutItem",
            {
                "ForAllValues:StringLike": leading,
                "ForAllValues:StringEquals": {"dynamodb:Attributes": sorted(TIMER_ATTRIBUTES)},
                "ForAnyValue:StringEquals": {"dynamodb:Attributes": ["retry_of"]},
                "StringEqualsIfExists": _WRITES_RETURN,
                "Null": present,
            },
        ),
    ]
    for action, conditions in statements:
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=[action],
            resource_arns=[table.table_arn],
            conditions=conditions,
        )


class JobTable(Construct):
    """Holds every job. Get and cancel address an item directly from the job id (no index).

    The stream (new and old images) feeds job history to S3; a later issue consumes it.
    A plain `AWS::DynamoDB::Table` (not TableV2/GlobalTable) so the moto-based local runtime
    can create it from the synthesized template.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        capacity: TableCapacitySettings | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        capacity = capacity or TableCapacitySettings()
        provisioned = capacity.mode == "provisioned"
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(
                name=PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=(
                dynamodb.BillingMode.PROVISIONED
                if provisioned
                else dynamodb.BillingMode.PAY_PER_REQUEST
            ),
            read_capacity=capacity.min_read_units if provisioned else None,
            write_capacity=capacity.min_write_units if provisioned else None,
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True,
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            removal_policy=removal_policy,
            # A retained table is also protected from a direct delete (console, CLI).
            deletion_protection=removal_policy == RemovalPolicy.RETAIN,
        )
        if provisioned:
            self._auto_scale(capacity)

    def _auto_scale(self, capacity: TableCapacitySettings) -> None:
        """Provisioned capacity follows the load between its bounds (target tracking)."""
        target = capacity.target_utilization_percent
        self.table.auto_scale_write_capacity(
            min_capacity=capacity.min_write_units, max_capacity=capacity.max_write_units
        ).scale_on_utilization(target_utilization_percent=target)
        self.table.auto_scale_read_capacity(
            min_capacity=capacity.min_read_units, max_capacity=capacity.max_read_units
        ).scale_on_utilization(target_utilization_percent=target)
