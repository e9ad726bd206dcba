"""Sundial in one process on moto (mock_aws): the real Lambda handlers, wired as in AWS through
sundial.wiring, with one ManualClock that moto reads too, and every AWS call metered.

What stands in for AWS's own machinery is kept to what the product relies on:
- API Gateway: each request becomes the HTTP API (payload 2.0) event of its route;
- EventBridge: `tick()` runs the fan-out, then each sweeper it launched (async invokes run after
  the fan-out returns, as Lambda's would, so no duration nests inside another);
- the SQS event source mapping: `consume()` receives up to 10 messages per ReceiveMessage,
  invokes the consumer with them and deletes what succeeded (DeleteMessageBatch), as Lambda's
  pollers do and bill to the account.
Each invocation's wall time is recorded (billed in whole milliseconds, as Lambda bills).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import moto.core.utils
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType

from bench import POWERTOOLS_SERVICE
from bench.config import BenchConfig
from bench.latency import ONE_VCPU_MB, modelled_ms, vcpu_share
from bench.logs import LogMeter
from bench.meter import AwsMeter, Call, emulator_wall_s
from sundial.clock import ManualClock
from sundial.consumer import JobConsumer
from sundial.dispatch.sweeper import CLAIM_CONCURRENCY
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies, configure
from tests.support import (
    TABLE,
    FakeLambdaContext,
    create_queues,
    create_table,
    http_api_event,
    load_handler,
    sqs_event,
)

START = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
REGION = "us-east-1"
POWERTOOLS_ENVIRONMENT = {
    **POWERTOOLS_SERVICE,
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# A payload of a realistic size for a reminder-style job (about 200 bytes of JSON).
PAYLOAD = {
    "template": "check-in-reminder",
    "to": "ada@example.com",
    "booking": "HMZ2K4T9QX",
    "locale": "en-GB",
    "listing": {"id": 48213907, "city": "Argyll"},
    "send_after": "2026-11-22T09:00:00Z",
}


@dataclass(frozen=True)
class Invocation:
    function: str
    wall_s: float
    emulator_s: float  # of which: inside the emulator
    aws_calls_ms: float  # the same calls at the modelled AWS latencies (bench.latency)
    log_bytes: int = 0  # what it printed (CloudWatch Logs ingestion; bench.logs)
    info_log_bytes: int = 0  # of which INFO/DEBUG lines

    @property
    def billed_ms(self) -> int:
        """As measured here, moto's time included (Lambda bills whole milliseconds)."""
        return max(1, math.ceil(self.wall_s * 1000))

    @property
    def modelled_ms(self) -> int:
        """Sundial's own time here plus the calls at AWS's documented latencies."""
        return self.modelled_ms_at(ONE_VCPU_MB)

    def modelled_ms_at(self, memory_mb: int) -> int:
        """As modelled_ms, in a function of `memory_mb`: its own time (measured on a full core
        here) stretched by Lambda's CPU share at that memory."""
        own_ms = (self.wall_s - self.emulator_s) * 1000 / vcpu_share(memory_mb)
        return max(1, math.ceil(own_ms + self.aws_calls_ms))


def aws_calls_ms(calls: Sequence[Call]) -> float:
    """The calls' modelled AWS latency on the invocation's critical path: the sweeper's claims
    run CLAIM_CONCURRENCY at a time on their own threads, so their latencies overlap."""
    concurrent = [
        modelled_ms(c.service, c.operation) for c in calls if c.thread.startswith("claim")
    ]
    in_turn = sum(
        modelled_ms(c.service, c.operation) for c in calls if not c.thread.startswith("claim")
    )
    if not concurrent:
        return in_turn
    return in_turn + max(*concurrent, sum(concurrent) / CLAIM_CONCURRENCY)


def set_lambda_environment() -> None:
    for name, value in POWERTOOLS_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)


class BenchClock(ManualClock):
    """A ManualClock whose waits end as soon as `stop` is set. ManualClock rechecks `stop`
    only every 50 ms, which would add up to 50 ms to every consumer invocation here (the
    heartbeat thread is stopped when each job ends); in Lambda the SystemClock wakes at once."""

    def wait_until(self, epoch_ms: int, stop: threading.Event) -> bool:
        while self.now_ms() < epoch_ms:
            if stop.wait(timeout=0.05):
                return False
        return not stop.is_set()


@contextmanager
def moto_follows(clock: ManualClock) -> Iterator[None]:
    """moto reads the injected clock, so SQS delays and visibility follow it (as in tests)."""
    original = moto.core.utils.utcnow
    moto.core.utils.utcnow = lambda: datetime.fromtimestamp(clock.now_ms() / 1000, tz=UTC).replace(
        tzinfo=None
    )
    try:
        yield
    finally:
        moto.core.utils.utcnow = original


class MotoItems:
    """Reads items straight from moto's in-process DynamoDB, to size them: no API call, so
    sizing costs the run almost nothing and is never metered."""

    def _table(self, table: str) -> Any:
        return dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(table)

    def key_names(self, table: str) -> list[str]:
        found = self._table(table)
        return [name for name in (found.hash_key_attr, found.range_key_attr) if name]

    def get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        found = self._table(table)
        range_key = DynamoType(key[found.range_key_attr]) if found.range_key_attr else None
        item = found.get_item(DynamoType(key[found.hash_key_attr]), range_key)
        return None if item is None else dict(item.to_json()["Attributes"])


JobBehaviour = Callable[[Envelope], Any]


class InProcessSundial:
    """Use as a context manager: moto is active inside."""

    def __init__(
        self,
        config: BenchConfig,
        *,
        seed: int = 20261121,
        size_items: bool = True,
        hooks: Sequence[Callable[[boto3.Session], None]] = (),
        quotas: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """`size_items`: size every item a write touches (capacity units); off when only
        counts matter, which halves the work moto does. `hooks`: each is given the session
        the handlers use before any client is made from it (clients copy its event hooks).
        `quotas`: queues' quotas as cdk.json declares them (SUNDIAL_QUOTAS); none by default."""
        self.config = config
        self._quotas = dict(quotas or {})
        self._hooks = hooks
        self._size_items = size_items
        self.clock = BenchClock.at(START)
        self.rng = random.Random(seed)
        self.invocations: list[Invocation] = []
        self.api_requests = 0
        self.behaviour: JobBehaviour = lambda _job: None
        self._mock = mock_aws()
        self._pending_sweeps: list[list[int]] = []
        self._moto_clock = moto_follows(self.clock)

    def __enter__(self) -> InProcessSundial:
        set_lambda_environment()
        self._mock.start()
        self._moto_clock.__enter__()

        admin = boto3.Session()
        create_table(admin.client("dynamodb"))
        self.queue_urls, self.dead_letter_urls = create_queues(admin.client("sqs"))
        self.queue_arns = {
            name: admin.client("sqs").get_queue_attributes(
                QueueUrl=url, AttributeNames=["QueueArn"]
            )["Attributes"]["QueueArn"]
            for name, url in self.queue_urls.items()
        }
        self.session = boto3.Session()
        self.meter = AwsMeter(self.session, items=MotoItems() if self._size_items else None)
        for hook in self._hooks:
            hook(self.session)

        self.table = TABLE
        self.environ = {
            "SUNDIAL_TABLE_NAME": TABLE,
            "SUNDIAL_QUEUE_URLS": json.dumps(self.queue_urls),
            "SUNDIAL_DEAD_LETTER_URLS": json.dumps(self.dead_letter_urls),
            "SUNDIAL_SHARD_COUNT": str(self.config.shard_count),
            "SUNDIAL_RETENTION_DAYS": str(self.config.retention_days),
            "SUNDIAL_SWEEPER_FUNCTION": "sweeper",
            "SUNDIAL_SHARDS_PER_SWEEPER": str(self.config.shards_per_sweeper),
            "SUNDIAL_QUOTAS": json.dumps(self._quotas),
        }
        self.deps: Dependencies = configure(
            clock=self.clock, environ=self.environ, session=self.session, launch=self._launch
        )
        self.handlers = {
            name: load_handler(name)
            for name in ("submit", "jobs", "fanout", "sweeper", "schedules", "dags")
        }
        self.consumer = JobConsumer(self._run_job, visibility_timeout_s=120)
        self._sqs = self.session.client("sqs")
        self._warm_up()
        self.logs = LogMeter(sys.stdout)
        self.logs.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.logs.uninstall()
        self._moto_clock.__exit__(None, None, None)
        self._mock.stop()

    # -- driving the system -----------------------------------------------------------------

    def invoke(self, function: str, call: Callable[[], Any]) -> Any:
        """Run one Lambda invocation of `function`, metered and timed."""
        with self.meter.acting(function):
            first, overhead = len(self.meter.calls), self.meter.overhead_s
            self.logs.take()
            started = time.perf_counter()
            result = call()
            wall = time.perf_counter() - started - (self.meter.overhead_s - overhead)
            calls = self.meter.calls[first:]
            printed = self.logs.take()
        self.invocations.append(
            Invocation(
                function,
                wall_s=wall,
                emulator_s=emulator_wall_s(calls),
                aws_calls_ms=aws_calls_ms(calls),
                log_bytes=printed.total,
                info_log_bytes=printed.info,
            )
        )
        return result

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        function: str | None = None,
        route: str | None = None,
    ) -> tuple[int, Any]:
        """One API Gateway request to `function` (by default the submit or jobs function, as
        the path says), with `route` the route template of a path with parameters."""
        if function is None:
            submits = method == "POST" and path in ("/jobs", "/jobs/batch")
            function = "submit" if submits else "jobs"
            route = route or (None if submits else "/jobs/{job_id}")
        event = http_api_event(
            method, path, body=json.dumps(body) if body is not None else None, route=route
        )
        self.api_requests += 1
        response = self.invoke(
            function, lambda: self.handlers[function].handler(event, FakeLambdaContext())
        )
        return int(response["statusCode"]), json.loads(response["body"])

    def submit(self, jobs: Sequence[dict[str, Any]], *, batch: bool = False) -> list[str]:
        """Submit jobs over the API, one request each or 25 per batch request."""
        ids: list[str] = []
        if not batch:
            for job in jobs:
                status, created = self.api("POST", "/jobs", job)
                assert status == 201, created
                ids.append(created["id"])
            return ids
        for start in range(0, len(jobs), 25):
            status, answer = self.api(
                "POST", "/jobs/batch", {"jobs": list(jobs[start : start + 25])}
            )
            assert status == 200, answer
            for result in answer["results"]:
                assert result["status_code"] == 201, result
                ids.append(result["job"]["id"])
        return ids

    def tick(self) -> None:
        """The EventBridge rule fires: the fan-out, then every sweeper it started."""

        event = {"source": "aws.events", "detail-type": "Scheduled Event"}
        self.invoke("fanout", lambda: self.handlers["fanout"].handler(event, FakeLambdaContext()))
        sweeps, self._pending_sweeps = self._pending_sweeps, []
        for shards in sweeps:
            self.invoke(
                "sweeper",
                lambda shards=shards: self.handlers["sweeper"].handler(  # type: ignore[misc]
                    {"shards": shards}, FakeLambdaContext(remaining_ms=60_000)
                ),
            )

    def consume(
        self, queue: str, handler: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
    ) -> int:
        """One pass of the event source mapping over `queue`: batches of up to 10 until empty,
        each to `handler` (by default the consumer on Sundial's SDK, running `behaviour`).
        Returns how many records the consumer acknowledged."""
        handler = handler or self.consumer.lambda_handler

        url, done = self.queue_urls[queue], 0
        while True:
            with self.meter.acting("sqs poller"):
                messages = self._sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=0,
                    MessageSystemAttributeNames=["All"],
                ).get("Messages", [])
            if not messages:
                return done
            event = sqs_event(messages, self.queue_arns[queue])
            result = self.invoke(
                "consumer",
                lambda event=event: handler(event, FakeLambdaContext()),  # type: ignore[misc]
            )
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            succeeded = [m for m in messages if m["MessageId"] not in failed]
            if succeeded:
                with self.meter.acting("sqs poller"):
                    self._sqs.delete_message_batch(
                        QueueUrl=url,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                            for i, m in enumerate(succeeded)
                        ],
                    )
            done += len(succeeded)

    @contextmanager
    def unmetered(self) -> Iterator[None]:
        """Set-up and checks: nothing done inside is charged (AWS calls, Lambda invocations,
        API requests)."""
        invocations, api_requests = len(self.invocations), self.api_requests
        with self.meter.paused():
            yield
        del self.invocations[invocations:]
        self.api_requests = api_requests

    def purge_queues(self) -> None:
        """Empty every job queue, unmetered."""
        with self.meter.paused():
            for url in self.queue_urls.values():
                self._sqs.purge_queue(QueueUrl=url)

    def queue_depth(self, queue: str) -> int:
        with self.meter.paused():
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self.queue_urls[queue],
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesDelayed"]
        )

    def _run_job(self, job: Envelope) -> Any:
        return self.behaviour(job)  # looked up per job: each path sets its own behaviour

    def _launch(self, shards: Sequence[int]) -> None:
        self._pending_sweeps.append(list(shards))

    def _warm_up(self) -> None:
        """Build clients and import lazily loaded code, as a warm Lambda container has: a
        cold start is a per-container cost, not a per-job one. Nothing here is recorded."""

        with self.meter.paused():
            unknown = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
            self.handlers["jobs"].handler(
                http_api_event("GET", f"/jobs/{unknown}", route="/jobs/{job_id}"),
                FakeLambdaContext(),
            )
            self.handlers["submit"].handler(
                http_api_event("POST", "/jobs", body="{}"), FakeLambdaContext()
            )
            self.deps.sender  # noqa: B018 - builds the SQS client
            self.deps.dead_letter_sender  # noqa: B018


def payload() -> dict[str, Any]:
    return dict(PAYLOAD)
