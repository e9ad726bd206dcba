"""Job history infrastructure: buckets, the stream capture, the Glue catalog, jobs and
schedule, and what each role may do."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks.paths import locked_version
from stacks.settings import SundialSettings
from sundial_history.columns import ALL_TABLES, JOB_HISTORY
from tests.infrastructure.synthesis import Synthesized, allowed_actions, cdk_json_context

pytestmark = pytest.mark.infra

BUCKETS = ("Raw", "Curated", "Reports")


def _settings() -> SundialSettings:
    return SundialSettings.from_context(cdk_json_context()["sundial"])


def _bucket(synthesized: Synthesized, name: str) -> dict[str, Any]:
    properties: dict[str, Any] = synthesized.resources("AWS::S3::Bucket")[
        synthesized.logical_id(f"HistoryBuckets/{name}")
    ]["Properties"]
    return properties


def _role_allowed(synthesized: Synthesized, role_path: str) -> dict[str, list[Any]]:
    role_id = synthesized.logical_id(role_path)
    return allowed_actions(
        p
        for p in synthesized.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    )


@pytest.mark.parametrize("name", [*BUCKETS, "AccessLogs"])
def test_buckets_are_encrypted_private_and_expire(synthesized: Synthesized, name: str) -> None:
    properties = _bucket(synthesized, name)
    [rule] = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert all("ExpirationInDays" in r for r in properties["LifecycleConfiguration"]["Rules"][:1])
    if name != "AccessLogs":
        assert properties["LoggingConfiguration"]["LogFilePrefix"] == f"{name.lower()}/"


@pytest.mark.parametrize("name", [*BUCKETS, "AccessLogs"])
def test_buckets_refuse_plain_http(synthesized: Synthesized, name: str) -> None:
    bucket_id = synthesized.logical_id(f"HistoryBuckets/{name}")
    [policy] = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synthesized.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy
    )


def test_raw_history_expires_after_its_retention(synthesized: Synthesized) -> None:
    rules = {r["Id"]: r for r in _bucket(synthesized, "Raw")["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-raw-history"]["Prefix"] == "history/"
    assert rules["expire-raw-history"]["ExpirationInDays"] == _settings().history.raw_retention_days
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 7
    }


def test_the_stream_feeds_the_history_function(synthesized: Synthesized) -> None:
    function_id = synthesized.logical_id("HistoryCapture/Function/Function")
    [mapping] = [
        m["Properties"]
        for m in synthesized.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    settings = _settings().history
    raw = synthesized.logical_id("HistoryBuckets/Raw")
    assert mapping["EventSourceArn"] == {
        "Fn::GetAtt": [synthesized.logical_id("JobTable/Table"), "StreamArn"]
    }
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["BatchSize"] == settings.stream_batch_size
    assert mapping["MaximumBatchingWindowInSeconds"] == settings.stream_batching_window_seconds
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == 10
    assert mapping["MaximumRecordAgeInSeconds"] == 12 * 3600  # inside the stream's 24 h
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [raw, "Arn"]}}
    }
    [pattern] = mapping["FilterCriteria"]["Filters"]
    assert json.loads(pattern["Pattern"]) == {
        "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "shard#"}]}}}
    }


def test_the_history_function_may_write_history_and_remove_what_expired_jobs_owned_only(
    synthesized: Synthesized,
) -> None:
    properties = synthesized.resources("AWS::Lambda::Function")[
        synthesized.logical_id("HistoryCapture/Function/Function")
    ]["Properties"]
    raw = synthesized.logical_id("HistoryBuckets/Raw")
    assert properties["Environment"]["Variables"]["SUNDIAL_HISTORY_BUCKET"] == {"Ref": raw}
    assert properties["Environment"]["Variables"]["SUNDIAL_HISTORY_PREFIX"] == "history"
    allowed = _role_allowed(synthesized, "HistoryCapture/Function/Role")
    assert set(allowed) == {
        "s3:PutObject",
        "s3:GetObject",
        "s3:ListBucket",
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
        "dynamodb:DeleteItem",
        "dynamodb:Query",
        "s3:PutObjectTagging",
        "s3:DeleteObject",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }
    prefixes = sorted(resource["Fn::Join"][1][1] for resource in allowed["s3:PutObject"])
    assert prefixes == ["/aws/lambda/*", "/history/*", "/replayed/*"]
    # In the payload bucket it tags and deletes objects (sundial.services.job_retention)
    payloads = synthesized.logical_id("Payloads/Bucket")
    for action in ("s3:PutObjectTagging", "s3:DeleteObject"):
        assert allowed[action] == [
            {"Fn::Join": ["", [{"Fn::GetAtt": [payloads, "Arn"]}, "/payloads/*"]]}
        ]
    assert properties["Environment"]["Variables"]["SUNDIAL_PAYLOAD_BUCKET"] == {"Ref": payloads}
    # The replay reads failed batches and nothing else
    assert [r["Fn::Join"][1][1] for r in allowed["s3:GetObject"]] == ["/aws/lambda/*"]
    # And it deletes items of the job table only (what an expired job owned: its pointer,
    # idempotency record and DAG entry, each delete conditional or after a Query of the DAG)
    table = synthesized.logical_id("JobTable/Table")
    assert allowed["dynamodb:DeleteItem"] == [{"Fn::GetAtt": [table, "Arn"]}]
    assert allowed["dynamodb:Query"] == [{"Fn::GetAtt": [table, "Arn"]}]
    assert properties["Environment"]["Variables"]["SUNDIAL_TABLE_NAME"] == {"Ref": table}


def test_failed_history_batches_are_replayed_every_hour(synthesized: Synthesized) -> None:
    rule = synthesized.resources("AWS::Events::Rule")[
        synthesized.logical_id("HistoryCapture/ReplayFailedBatches")
    ]["Properties"]
    assert rule["ScheduleExpression"] == "rate(1 hour)"
    [target] = rule["Targets"]
    function = synthesized.logical_id("HistoryCapture/Function/Function")
    assert target["Arn"] == {"Fn::GetAtt": [function, "Arn"]}
    assert json.loads(target["Input"]) == {"replay_failed_batches": True}
    # And the markers expire with the failed batches they mark
    raw = synthesized.resources("AWS::S3::Bucket")[synthesized.logical_id("HistoryBuckets/Raw")]
    rules = {r["Id"]: r for r in raw["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-replay-markers"]["Prefix"] == "replayed/"
    assert (
        rules["expire-replay-markers"]["ExpirationInDays"]
        == rules["expire-failed-batches"]["ExpirationInDays"]
    )


def test_glue_tables_declare_the_jobs_columns(synthesized: Synthesized) -> None:
    tables = {
        t["Properties"]["TableInput"]["Name"]: t["Properties"]["TableInput"]
        for t in synthesized.resources("AWS::Glue::Table").values()
    }
    assert set(tables) == {spec.name for spec in ALL_TABLES}
    for spec in ALL_TABLES:
        table = tables[spec.name]
        columns = [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]]
        assert columns == list(spec.columns), spec.name
        assert [(c["Name"], c["Type"]) for c in table["PartitionKeys"]] == [("dt", "string")]
        assert table["Parameters"]["projection.enabled"] == "true"
        assert table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"].endswith(
            "ParquetHiveSerDe"
        )


def test_two_glue_5_jobs_sized_by_settings(synthesized: Synthesized) -> None:
    jobs = {
        path: synthesized.resources("AWS::Glue::Job")[
            synthesized.logical_id(f"HistoryAnalytics/{path}")
        ]["Properties"]
        for path in ("Compaction", "Report")
    }
    settings = _settings().history
    for job in jobs.values():
        assert job["GlueVersion"] == "5.0"
        assert job["Command"]["Name"] == "glueetl"
        assert job["WorkerType"] == settings.glue_worker_type
        assert job["NumberOfWorkers"] == settings.glue_workers
        assert job["DefaultArguments"]["--job-bookmark-option"] == "job-bookmark-disable"
        assert job["DefaultArguments"]["--extra-py-files"]["Fn::Sub"].endswith(".zip")
        assert "SecurityConfiguration" in job
    assert jobs["Compaction"]["DefaultArguments"]["--dates"] == "auto"
    assert jobs["Report"]["DefaultArguments"]["--additional-python-modules"] == (
        f"matplotlib=={locked_version('matplotlib')}"
    )
    curated = jobs["Compaction"]["DefaultArguments"]["--curated_path"]["Fn::Join"][1]
    assert curated[-1] == f"/{JOB_HISTORY.name}/"


def test_the_daily_workflow_runs_the_report_after_a_successful_compaction(
    synthesized: Synthesized,
) -> None:
    triggers = synthesized.resources("AWS::Glue::Trigger")
    compaction = {"Ref": synthesized.logical_id("HistoryAnalytics/Compaction")}
    report = {"Ref": synthesized.logical_id("HistoryAnalytics/Report")}
    daily = triggers[synthesized.logical_id("HistoryAnalytics/Daily")]["Properties"]
    after = triggers[synthesized.logical_id("HistoryAnalytics/AfterCompaction")]["Properties"]
    assert (daily["Type"], daily["Schedule"]) == ("SCHEDULED", _settings().history.schedule)
    assert daily["Actions"] == [{"JobName": compaction}]
    assert after["Type"] == "CONDITIONAL"
    assert after["Predicate"]["Conditions"] == [
        {"JobName": compaction, "LogicalOperator": "EQUALS", "State": "SUCCEEDED"}
    ]
    assert after["Actions"] == [{"JobName": report}]
    assert daily["WorkflowName"] == after["WorkflowName"]


def test_glue_roles_reach_their_own_data_only(synthesized: Synthesized) -> None:
    raw, curated, reports = (synthesized.logical_id(f"HistoryBuckets/{name}") for name in BUCKETS)

    def objects(role: str, action: str) -> list[str]:
        resources = _role_allowed(synthesized, f"HistoryAnalytics/{role}")[action]
        return sorted(
            f"{r['Fn::Join'][1][0]['Fn::GetAtt'][0]}{r['Fn::Join'][1][1]}"
            for r in resources
            if "Fn::Join" in r and "Fn::GetAtt" in r["Fn::Join"][1][0]
        )

    # Compaction: reads raw history, writes the job_history table
    assert objects("CompactionRole", "s3:GetObject") == sorted(
        [f"{raw}/history/*", f"{curated}/job_history*"]
    )
    assert objects("CompactionRole", "s3:PutObject") == [f"{curated}/job_history*"]
    # Report: reads job_history; writes (and Spark's commit reads back and deletes) each report
    # table's folder and the human report's, by prefix, and nothing else in the reports bucket
    report_prefixes = sorted(
        f"{reports}/{prefix}*"
        for prefix in ("daily_queue_stats", "top_errors", "dag_runs", "schedule_runs", "human")
    )
    assert objects("ReportRole", "s3:GetObject") == sorted(
        [f"{curated}/job_history*", *report_prefixes]
    )
    for action in ("s3:PutObject", "s3:DeleteObject"):
        assert objects("ReportRole", action) == report_prefixes
    assert objects("CompactionRole", "s3:DeleteObject") == [f"{curated}/job_history*"]
    # Listing (Spark finds partitions and part files): the role's own buckets only
    for role, buckets in (("CompactionRole", [raw, curated]), ("ReportRole", [curated, reports])):
        listed = _role_allowed(synthesized, f"HistoryAnalytics/{role}")["s3:ListBucket"]
        assert sorted(r["Fn::GetAtt"][0] for r in listed) == sorted(buckets)
    for role in ("CompactionRole", "ReportRole"):
        allowed = _role_allowed(synthesized, f"HistoryAnalytics/{role}")
        assert not [a for a in allowed if a.startswith(("glue:", "iam:", "dynamodb:"))]
