"""Shared fixtures: moto (in-process), one ManualClock that moto also reads, and a Sundial
wired to them exactly as the Lambdas wire it (through sundial.wiring)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3
import botocore.handlers
import moto.core.utils
import pytest
from moto import mock_aws

from sundial.clock import ManualClock
from sundial.local.emulator import atomic_writes
from sundial.wiring import Dependencies, configure
from tests.botocore_models import share_one_loader
from tests.iam_calls import handler_call_hook, save_handler_calls
from tests.parallel import SharedFixtureScheduling, check_groups
from tests.support import TABLE, create_priority_queues, create_queues, create_table

PAYLOAD_BUCKET = "sundial-payloads"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling

    from tests.infrastructure.synthesis import Synthesized

START = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)

# The Lambda environment Powertools reads at import time, before any fixture runs.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "sundial")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Sundial")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
# pyspark.testing imports pandas-on-Spark, which wants this set before any Spark starts.
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")

# Every botocore session made from now on records the calls a handler makes while it runs
# (tests/iam_calls.py), for the least-privilege check. moto hooks every session the same way.
botocore.handlers.BUILTIN_HANDLERS.append(("before-parameter-build", handler_call_hook))
# Parse each AWS service model once per process, not once per boto3 Session.
share_one_loader()

LEAST_PRIVILEGE = "tests/infrastructure/test_least_privilege.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The least-privilege check runs last, so it also checks the calls every earlier test's
    handlers made (it drives each function itself too, so it never depends on them)."""
    items.sort(key=lambda item: item.nodeid.startswith(LEAST_PRIVILEGE))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker (`make test`)
        check_groups(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    """`--dist loadgroup` (`make test`): the tests sharing a slow session fixture run in one
    worker (tests/parallel.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return SharedFixtureScheduling(config, log)


def pytest_sessionfinish() -> None:
    """Under `make test`, leave this process's handler calls for the least-privilege check,
    which runs in a process of its own after this one (tests/iam_calls.py)."""
    save_handler_calls()


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never let a test reach a real account."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """The one clock. moto reads it too, so SQS DelaySeconds and visibility follow it."""
    manual = ManualClock.at(START)
    monkeypatch.setattr(
        moto.core.utils,
        "utcnow",
        lambda: datetime.fromtimestamp(manual.now_ms() / 1000, tz=UTC).replace(tzinfo=None),
    )
    return manual


@pytest.fixture
def aws() -> Iterator[None]:
    # With moto's TransactWriteItems fixed as the local runtime runs it: a cancelled
    # transaction otherwise swaps the table for a copy, and a stream reader then sees phantom
    # records and misses real ones (sundial.local.emulator).
    with mock_aws(), atomic_writes():
        yield


@pytest.fixture
def environ(aws: None) -> dict[str, str]:
    """Creates the table and queues, and returns the SUNDIAL_* environment the stack would set."""
    create_table(boto3.client("dynamodb"))
    urls, dead_letter_urls = create_queues(boto3.client("sqs"))
    boto3.client("s3").create_bucket(Bucket=PAYLOAD_BUCKET)
    return {
        "SUNDIAL_TABLE_NAME": TABLE,
        "SUNDIAL_QUEUE_URLS": json.dumps(urls),
        "SUNDIAL_DEAD_LETTER_URLS": json.dumps(dead_letter_urls),
        "SUNDIAL_PRIORITY_QUEUE_URLS": json.dumps(create_priority_queues(boto3.client("sqs"))),
        "SUNDIAL_RETRY_DEFAULTS": json.dumps(
            {
                "default": {
                    "max_attempts": 3,
                    "initial_delay_seconds": 10,
                    "factor": 2.0,
                    "max_delay_seconds": 3600,
                },
                "email": {
                    "max_attempts": 5,
                    "initial_delay_seconds": 30,
                    "factor": 3.0,
                    "max_delay_seconds": 7200,
                },
            }
        ),
        "SUNDIAL_SHARD_COUNT": "8",
        "SUNDIAL_RETENTION_DAYS": "30",
        "SUNDIAL_SWEEPER_FUNCTION": "sundial-sweeper",
        "SUNDIAL_SHARDS_PER_SWEEPER": "4",
        "SUNDIAL_PAYLOAD_BUCKET": PAYLOAD_BUCKET,
    }


@pytest.fixture
def deps(
    environ: dict[str, str], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> Dependencies:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return configure(clock=clock, environ=dict(os.environ))


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The CDK app synthesized once per session (starting jsii is slow), as `make synth` does."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from tests.infrastructure.synthesis import synthesize  # noqa: PLC0415 - starts jsii: only on demand

    return synthesize(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for every Spark test (starting the JVM takes seconds): one core,
    one shuffle partition, no UI, configured as the Glue jobs configure theirs."""
    from sundial_history.runtime import local_session  # noqa: PLC0415 - only Spark tests need it

    # PySpark turns TIMESTAMPs into naive datetimes in the Python process's time zone; pinning
    # it to UTC (the sessions' time zone) makes collected rows compare with UTC wall times.
    os.environ["TZ"] = "UTC"
    time.tzset()
    session = local_session("sundial-tests", master="local[1]", shuffle_partitions=1)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
