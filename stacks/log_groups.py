"""Operational log groups (function and API access logs, not job history): one retention."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.settings import LOG_RETENTION


def operational_log_group(scope: Construct, construct_id: str) -> logs.LogGroup:
    """Kept LOG_RETENTION; deleted with the stack (the job history lives elsewhere)."""
    return logs.LogGroup(
        scope, construct_id, retention=LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY
    )
