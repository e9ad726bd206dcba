"""The payload bucket (issue 17, item 5): encrypted, TLS-only, private, logged, retained,
expiring after the horizon and the retention; and who may put and get its objects."""

from __future__ import annotations

from typing import Any

import pytest

from stacks.payload_bucket import ENV_PAYLOAD_BUCKET, payload_expiry_days
from stacks.settings import SundialSettings
from tests.infrastructure.synthesis import Synthesized, cdk_json_context

pytestmark = pytest.mark.infra


def _bucket(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    bucket_id = synthesized.logical_id("Payloads/Bucket")
    resource: dict[str, Any] = synthesized.resources("AWS::S3::Bucket")[bucket_id]
    return bucket_id, resource


def test_the_payload_bucket_is_encrypted_private_logged_and_retained(
    synthesized: Synthesized,
) -> None:
    bucket_id, resource = _bucket(synthesized)
    properties = resource["Properties"]
    [rule] = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert set(properties["PublicAccessBlockConfiguration"].values()) == {True}
    assert properties["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]
    }
    assert properties["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": synthesized.logical_id("HistoryBuckets/AccessLogs")},
        "LogFilePrefix": "payloads/",
    }
    assert resource["DeletionPolicy"] == "Retain"
    [policy] = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synthesized.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy
    )


def test_payloads_outlive_the_horizon_and_the_retention(synthesized: Synthesized) -> None:
    retention = SundialSettings.from_context(cdk_json_context()["sundial"]).retention_days
    _, resource = _bucket(synthesized)
    rules = {r["Id"]: r for r in resource["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-payloads"]["Prefix"] == "payloads/"
    # A job may wait 366 days, then be retried or replayed for its retention
    assert rules["expire-payloads"]["ExpirationInDays"] == payload_expiry_days(retention)
    assert payload_expiry_days(retention) >= 366 + retention
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 1
    }


def test_only_the_functions_that_store_or_read_payloads_may(synthesized: Synthesized) -> None:
    bucket_id, _ = _bucket(synthesized)

    def objects(pattern: str) -> dict[str, Any]:
        return {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, f"/{pattern}"]]}

    s3_grants = {
        name: {a: r for a, r in synthesized.allowed(name).items() if a.startswith("s3:")}
        for name in (
            "submit",
            "jobs",
            "dags",
            "schedules",
            "workers",
            "sweeper",
            "fanout",
            "example_consumer",
        )
    }
    every, demo = [objects("payloads/*")], [objects("payloads/demo/*")]
    assert s3_grants == {
        "submit": {"s3:PutObject": every},
        # PATCH with a new payload (put), or a later time (a copy onto itself: get and put)
        "jobs": {"s3:PutObject": every, "s3:GetObject": every},
        "dags": {},
        "schedules": {},
        # presigns for any queue; a retry far out copies the payload onto itself
        "workers": {"s3:GetObject": every, "s3:PutObject": every},
        "sweeper": {},
        "fanout": {},
        "example_consumer": {"s3:GetObject": demo, "s3:PutObject": demo},  # its queue's only
    }
    # And each of them is told the bucket
    for name in ("submit", "jobs", "workers", "example_consumer"):
        variables = synthesized.function_properties(name)["Environment"]["Variables"]
        assert variables[ENV_PAYLOAD_BUCKET] == {"Ref": bucket_id}
