"""The payload bucket (issue 17, item 5): encrypted, TLS-only, private, logged, retained,
expiring after the horizon and the retention; and who may put and get its objects."""

from __future__ import annotations

from typing import Any

import pytest

from stacks.payload_bucket import ENV_PAYLOAD_BUCKET
from sundial.model.payloads import REFERENCE_TAG, UNREFERENCED, UNREFERENCED_DAYS
from tests.infrastructure.synthesis import Synthesized

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


def test_the_lifecycle_expires_only_objects_no_job_references(synthesized: Synthesized) -> None:
    """An object a job references lives as long as the job, however long a pause or retries
    make it: the lifecycle's only expiry is for objects still tagged unreferenced (a crash
    between the put and the job's write); the job's expiry deletes its object."""
    _, resource = _bucket(synthesized)
    rules = {r["Id"]: r for r in resource["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert set(rules) == {"expire-unreferenced-payloads", "abort-incomplete-uploads"}
    unreferenced = rules["expire-unreferenced-payloads"]
    assert unreferenced["Prefix"] == "payloads/"
    assert unreferenced["TagFilters"] == [{"Key": REFERENCE_TAG, "Value": UNREFERENCED}]
    assert unreferenced["ExpirationInDays"] == UNREFERENCED_DAYS
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 1
    }
    # Nothing else expires objects by age (an object's age says nothing of its job's life)
    assert all("ExpirationInDays" not in r for r in rules.values() if r is not unreferenced)


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
        # a payload stored (tagged unreferenced), then tagged referenced once its job is written
        "submit": {"s3:PutObject": every, "s3:PutObjectTagging": every},
        # PATCH with a new payload: the same, and the replaced one tagged unreferenced
        "jobs": {"s3:PutObject": every, "s3:PutObjectTagging": every},
        "dags": {},
        "schedules": {},
        "workers": {"s3:GetObject": every},  # presigns for any queue
        "sweeper": {},
        "fanout": {},
        "example_consumer": {"s3:GetObject": demo},  # its queue's only, and only reads
    }
    # And each of them is told the bucket
    for name in ("submit", "jobs", "workers", "example_consumer"):
        variables = synthesized.function_properties(name)["Environment"]["Variables"]
        assert variables[ENV_PAYLOAD_BUCKET] == {"Ref": bucket_id}
