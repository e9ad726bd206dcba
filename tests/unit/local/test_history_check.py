"""`make report` checks the local history against the table's stream (sundial.local.history):
a history missing events is reported as PARTIAL, naming what is missing, and the report exits
3 (issue 26: it counted 242 events of the stream's 1,826 and said nothing)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from sundial.clock import ManualClock
from sundial.history.capture import HistoryEvent
from sundial.local.history import (
    Completeness,
    HistoryInS3,
    HistoryLocation,
    check_history,
    stream_events,
)
from sundial.model.submission import SubmitJob
from sundial.wiring import Dependencies, history_recorder
from tests.support import TABLE, FakeLambdaContext, StreamReader, create_table

BUCKET, PREFIX = "sundial-history-raw", "history"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def streams(deps: Dependencies) -> Any:
    """The job table made anew with its stream, and the raw history bucket."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.delete_table(TableName=TABLE)
    create_table(dynamodb, stream=True)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return boto3.client(
        "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
    )


def _record(event: dict[str, Any]) -> None:
    recorder = history_recorder(
        environ={"SUNDIAL_HISTORY_BUCKET": BUCKET, "SUNDIAL_HISTORY_PREFIX": PREFIX}
    )
    assert recorder.handle(event, FakeLambdaContext()) == {"batchItemFailures": []}


def test_a_history_missing_events_is_partial_and_says_which(
    deps: Dependencies, clock: ManualClock, streams: Any
) -> None:
    dynamodb = boto3.client("dynamodb")
    arn = dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    reader = StreamReader(streams, arn)
    # Given two jobs recorded in S3, and then a third that the history never received (its
    # reader stopped)
    for _ in range(2):
        deps.jobs.submit(SubmitJob(queue="default", delay_seconds=3600))
    _record(reader.next_event())
    lost = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=3600)).job
    # When the history is checked against the stream
    expected, unreadable = stream_events(dynamodb, streams, TABLE)
    in_s3 = HistoryInS3(boto3.client("s3"), HistoryLocation(BUCKET, PREFIX))
    checked = check_history(expected, unreadable, in_s3, wait_s=0)
    # Then it is partial, and says how much and which event is missing
    assert not checked.complete
    assert (checked.expected, checked.found, unreadable) == (3, 2, 0)
    assert [e.job_id for e in checked.missing] == [lost.id]
    assert checked.summary().startswith(
        "PARTIAL: S3 holds 2 of the 3 history events the table's stream holds; 1 are missing "
        f"(the first: job {lost.id} -> pending"
    )
    # And once the rest arrives, it is complete
    _record(reader.next_event())
    assert check_history(expected, unreadable, in_s3, wait_s=0).complete


def _report_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_script", ROOT / "scripts" / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_report_on_a_partial_history_exits_3_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a runtime whose history lacks events of its stream (the Glue jobs are not run
    # here: tests/glue and the local runtime's tests run them)
    script = _report_script()
    partial = Completeness(expected=1826, found=242, missing=(_an_event(),), unreadable=0)
    monkeypatch.setattr(
        script, "_export_from_emulator", lambda raw: (15, "http://127.0.0.1:5000", partial)
    )
    monkeypatch.setattr(script, "local_session", lambda name: _NoSpark())
    monkeypatch.setattr(script, "run_compaction", lambda *args, **kwargs: None)
    reported = type("Reported", (), {"dates": ["2026-11-26"], "events": 242,
                                     "report_uri": "r.html", "markdown_uri": "r.md"})  # fmt: skip
    monkeypatch.setattr(script, "run_report", lambda *args, **kwargs: reported)
    monkeypatch.setenv("SUNDIAL_REPORT_DIR", str(tmp_path))
    # When make report runs
    status = script.main()
    # Then it exits 3, and says the history is partial, before and after the report
    err = capsys.readouterr().err
    assert status == 3
    assert "*** PARTIAL: S3 holds 242 of the 1,826 history events" in err
    assert "The report above counts a PARTIAL history (exit 3)" in err


class _NoSpark:
    sparkContext = type("Context", (), {"setLogLevel": staticmethod(lambda level: None)})()  # noqa: N815 - Spark's name

    def stop(self) -> None:
        pass


def _an_event() -> HistoryEvent:
    return HistoryEvent(
        event_id="e", job_id="j", queue="demo", priority="normal", from_status=None,
        to_status="pending", attempt=0, due_at_ms=0, event_at_ms=1_795_000_000_000,
    )  # fmt: skip
