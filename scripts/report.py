"""`make report`: the job history report on this machine.

1. If `make run` is running, check that its history in the emulator's S3 holds every event
   of the job table's stream (waiting up to SUNDIAL_HISTORY_WAIT_S for the last ones), then copy
   it to a local folder (local Spark reads local paths: the S3A connector cannot be downloaded
   here). If it is not running, say so and use synthetic history instead (clearly marked).
2. Run the two Glue jobs' code (compact_history, history_report) on local Spark.
3. Print where the report is. Exit 0; 3 when the history was partial (the report is still
   written, marked PARTIAL, so what was captured can be read; the exit code says it is not all).

Environment: SUNDIAL_EMULATOR_PORT / SUNDIAL_HOST / SUNDIAL_CDK_OUT as for `make run`;
SUNDIAL_REPORT_DIR (default .sundial/report); SUNDIAL_SYNTHETIC_EVENTS (default 50000);
SUNDIAL_HISTORY_WAIT_S (default 30).
"""

from __future__ import annotations

import os
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from sundial.local.history import (
    Completeness,
    HistoryInS3,
    check_history,
    export_history,
    history_location,
    stream_events,
    table_name,
)
from sundial.local.provision import assign_names
from sundial.local.template import LocalTemplate, TemplateError
from sundial_history.jobs import run_compaction, run_report
from sundial_history.runtime import local_session
from sundial_history.synthetic import write_raw_history

SYNTHETIC_DAYS = 7
ALL_DAYS = 366
PARTIAL_EXIT = 3


def _export_from_emulator(raw: Path) -> tuple[int, str, Completeness]:
    """Check and copy the running local runtime's history; (objects, emulator URL, how
    complete it is). 0 objects if the runtime has none yet; raises ConnectionError if it is
    not running."""
    host = os.environ.get("SUNDIAL_HOST", "127.0.0.1")
    emulator = f"http://{host}:{os.environ.get('SUNDIAL_EMULATOR_PORT', '5000')}"
    try:
        template = LocalTemplate.load(Path(os.environ.get("SUNDIAL_CDK_OUT", "cdk.out")))
    except TemplateError as error:
        raise ConnectionError(str(error)) from error
    assign_names(template, emulator)
    location = history_location(template)
    session = boto3.Session(
        region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local"
    )
    config = Config(connect_timeout=1, read_timeout=30, retries={"max_attempts": 1})
    s3 = session.client("s3", endpoint_url=emulator, config=config)
    dynamodb = session.client("dynamodb", endpoint_url=emulator, config=config)
    streams = session.client("dynamodbstreams", endpoint_url=emulator, config=config)
    try:
        s3.head_bucket(Bucket=location.bucket)
    except (BotoCoreError, ClientError) as error:
        raise ConnectionError(f"no local runtime at {emulator} ({error})") from error
    expected, unreadable = stream_events(dynamodb, streams, table_name(template))
    wait_s = float(os.environ.get("SUNDIAL_HISTORY_WAIT_S", "30"))
    print(f"Checking the history against the table's stream ({len(expected):,} events)…")
    completeness = check_history(expected, unreadable, HistoryInS3(s3, location), wait_s=wait_s)
    return export_history(s3, location, raw), emulator, completeness


def main() -> int:
    root = Path(os.environ.get("SUNDIAL_REPORT_DIR", ".sundial/report"))
    raw, curated, reports = root / "raw", root / "curated", root / "reports"
    for folder in (raw, curated, reports):
        shutil.rmtree(folder, ignore_errors=True)
    notes: list[str] = []
    completeness: Completeness | None = None
    try:
        objects, emulator, completeness = _export_from_emulator(raw)
    except ConnectionError as error:
        events = int(os.environ.get("SUNDIAL_SYNTHETIC_EVENTS", "50000"))
        print(
            f"\n*** The local runtime is not running ({error}).\n"
            f"*** Using {events:,} SYNTHETIC history events instead. For your own jobs' history:"
            "\n***   make run   (one terminal), make demo   (another), then make report again.\n",
            flush=True,
        )
        start = datetime.now(tz=UTC).date() - timedelta(days=SYNTHETIC_DAYS)
        write_raw_history(raw, events, start=start, days=SYNTHETIC_DAYS)
        notes.append("SYNTHETIC DATA: the local runtime was not running when this was made.")
    else:
        if objects == 0:
            print(
                f"The local runtime at {emulator} has no job history yet: submit jobs "
                "(make demo), wait a few seconds, and run make report again."
            )
            return 1
        print(f"Exported {objects} history objects from {emulator} to {raw}", flush=True)
        notes.append(f"History of the local runtime at {emulator}.")
        if completeness.complete:
            print(f"History {completeness.summary()}.", flush=True)
        else:
            print(f"\n*** {completeness.summary()}\n", file=sys.stderr, flush=True)
            notes.append(f"PARTIAL HISTORY: {completeness.summary()}")
    spark = local_session("sundial-report")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        run_compaction(
            spark, raw_path=str(raw.resolve()), curated_path=str(curated.resolve()), dates="all"
        )
        result = run_report(
            spark,
            curated_path=str(curated.resolve()),
            reports_path=str(reports.resolve()),
            dates="all",
            report_days=ALL_DAYS,
            notes=notes,
        )
    finally:
        spark.stop()
    print(
        f"\nReport ({result.dates[0]} to {result.dates[-1]}, {result.events:,} events):\n"
        f"  {result.report_uri}\n  {result.markdown_uri}\n"
        f"Parquet tables (as Athena would query them): {reports}/ and {curated}/"
    )
    if completeness is not None and not completeness.complete:
        print(
            f"\n*** The report above counts a PARTIAL history (exit {PARTIAL_EXIT}): "
            f"{len(completeness.missing):,} of {completeness.expected:,} events are missing.",
            file=sys.stderr,
        )
        return PARTIAL_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
