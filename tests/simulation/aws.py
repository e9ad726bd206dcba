"""The simulated world's AWS side: each actor's slot (a boto3 session whose hooks interleave,
trace, fault and check its calls) and moto on the manual clock."""

from __future__ import annotations

import dataclasses
import importlib
import json
import random
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from unittest import mock

import boto3
import moto.core.utils
from botocore.exceptions import ClientError
from moto import mock_aws

import sundial.dispatch.sweeper
from sundial.clock import ManualClock
from sundial.consumer import JobConsumer
from sundial.local.emulator import atomic_writes
from sundial.wiring import configure
from tests.simulation.scheduler import Crash, InlineExecutor

if TYPE_CHECKING:
    from tests.simulation.world import WorldBase


class Slot:
    """One actor's own wiring: a session (its hooks see only its calls) and its clients."""

    def __init__(self, world: WorldBase, name: str) -> None:
        self.world = world
        self.name = name
        self.session = boto3.Session()
        self.withheld: list[dict[str, Any]] = []
        self.params: dict[str, Any] = {}
        # The queues whose items this slot's calls may change, when the tenants profile checks
        # it: its tenant's (Tenant.queues), or while the dead-letter indexer indexes one
        # letter, that letter's queue (None: Sundial's own actors, unrestricted).
        self.acting_for: tuple[str, ...] | None = None
        # Faults planned for this slot's next calls of an operation: {"SendMessageBatch":
        # "crash_before" | "crash_after" | "refuse"} (the move limit's crashes around a send).
        self.planned: dict[str, str] = {}
        for event, handler in (
            # First: a crash injected after the call (below) must not hide what SQS accepted.
            ("after-call.*.*", self._record_sent),
            ("before-call.*.*", self._before),
            ("after-call.*.*", self._after),
            ("provide-client-params.*.*", self._remember),
            ("provide-client-params.sqs.SendMessageBatch", self._withhold),
            ("after-call.sqs.SendMessageBatch", self._report_withheld),
        ):
            self.session.events.register(event, handler)
        self.deps = configure(
            clock=world.clock,
            environ=world.environ,
            session=self.session,
            rng=random.Random(world.rng.random()),
        )
        self.sqs = self.session.client("sqs")
        # Wired as sundial.consumer wires a consumer Lambda (its role's limits: services.deferral)
        self.consumer = JobConsumer(
            world.effect,
            visibility_timeout_s=None,
            deps=lambda: dataclasses.replace(
                self.deps.consumer_lifecycle, rng=random.Random(world.rng.random())
            ),
        )

    def _record_sent(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        """When each message SQS accepted becomes visible (the clock stands still in a tick)."""
        if model.name == "SendMessageBatch":
            record_visible(self.world, self.params, parsed)

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        self.params = params  # the call's API parameters, for the trace

    def _before(self, model: Any, **_: Any) -> None:
        world = self.world
        world.scheduler.pause_point()
        call = f"{model.service_model.service_name}.{model.name}{_brief(self.params)}"
        world.trace(f"  {self._actor()} -> {call}")
        world.check_call(self, model.service_model.service_name, model.name, self.params)
        if self.planned.get(model.name) == "crash_before":
            self._planned_crash(model.name, "before")
        if self.planned.get(model.name) == "refuse":
            del self.planned[model.name]
            world.ledger.faults["planned_refusal"] += 1
            world.trace(f"     FAULT (planned) {model.name} refused: 503")
            raise ClientError(
                {"Error": {"Code": "ServiceUnavailable", "Message": "(simulated, planned)"}},
                model.name,
            )
        if not world.faults_on:
            return
        roll = world.rng.random()
        faults = world.config.faults
        if roll < faults.crash / 2:
            world.ledger.faults["crash_before"] += 1
            world.trace("     FAULT crash before the call")
            raise Crash(f"before {model.name}")
        if roll < faults.crash / 2 + faults.throttle:
            world.ledger.faults["throttle"] += 1
            world.trace("     FAULT throttled")
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded (simulated)"}},
                model.name,
            )

    def _planned_crash(self, operation: str, when: str) -> None:
        del self.planned[operation]
        self.world.ledger.faults["planned_crash"] += 1
        self.world.trace(f"     FAULT (planned) crash {when} {operation}")
        raise Crash(f"{when} {operation} (planned)")

    def _after(self, model: Any, **_: Any) -> None:
        world = self.world
        if self.planned.get(model.name) == "crash_after":
            self._planned_crash(model.name, "after")
        if world.faults_on and world.rng.random() < world.config.faults.crash / 2:
            world.ledger.faults["crash_after"] += 1
            world.trace(f"     FAULT crash after {model.name}")
            raise Crash(f"after {model.name}")

    def _withhold(self, params: dict[str, Any], **_: Any) -> None:
        self.withheld = []
        world = self.world
        entries = params.get("Entries", [])
        if world.faults_on and entries and world.rng.random() < world.config.faults.partial_batch:
            refused = entries[world.rng.randrange(len(entries))]
            self.withheld = [refused]
            params["Entries"] = [e for e in entries if e is not refused]
            world.ledger.faults["partial_batch"] += 1
            world.trace(f"     FAULT SQS refuses entry {refused['Id']}")

    def _report_withheld(self, parsed: dict[str, Any], **_: Any) -> None:
        if self.withheld:
            parsed.setdefault("Failed", []).extend(
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError"}
                for e in self.withheld
            )
            self.withheld = []

    def _actor(self) -> str:
        actor = self.world.scheduler.current()
        return actor.name if actor else self.name


def record_visible(world: WorldBase, params: dict[str, Any], parsed: dict[str, Any]) -> None:
    now = world.clock.now_ms()
    entries = {entry["Id"]: entry for entry in params.get("Entries", [])}
    visible = world.ledger.visible
    for accepted in parsed.get("Successful", []):
        entry = entries[accepted["Id"]]
        body = json.loads(entry["MessageBody"])
        key = (body["id"], body["attempt"])
        at = now + entry.get("DelaySeconds", 0) * 1000
        visible[key] = min(at, visible.get(key, at))


def _brief(params: dict[str, Any]) -> str:
    """The parameters that say what a call touches, for the trace."""
    key = params.get("Key")
    if isinstance(key, str):  # an S3 object (a payload stored in S3)
        return f" {key[:40]}"
    if key:
        update = params.get("UpdateExpression", "")[:28]
        return f" {key.get('pk', {}).get('S', '')}/{key.get('sk', {}).get('S', '')} {update}"
    if "Entries" in params:
        return f" {len(params['Entries'])} entries"
    values = params.get("ExpressionAttributeValues", {})
    shown = [v.get("S", "")[:24] for k, v in sorted(values.items()) if k in (":pk", ":from")]
    return f" {' '.join(shown)}" if shown else ""


@contextmanager
def moto_at(clock: ManualClock, *, long_time: bool = False, seed: int = 0) -> Iterator[None]:
    """moto reads the manual clock (SQS delays and visibility follow it). With `long_time`,
    so do S3's object times (the payload lifecycle's ages) and DynamoDB's stream records, and
    moto's own generator is seeded (stream records' event ids name the history's objects):
    those moto modules are imported, which draws on os.urandom, only then, so the other
    profiles' seeds replay as they did."""
    now = lambda: datetime.fromtimestamp(clock.now_ms() / 1000, tz=UTC).replace(tzinfo=None)  # noqa: E731
    environ = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }
    with ExitStack() as stack:
        stack.enter_context(mock_aws())
        # moto's cancelled transactions replace the table, stream shard and all: a stream reader
        # then reads phantom records and misses real ones (sundial.local.emulator).
        stack.enter_context(atomic_writes())
        stack.enter_context(mock.patch.object(moto.core.utils, "utcnow", now))
        stack.enter_context(
            mock.patch.object(sundial.dispatch.sweeper, "ThreadPoolExecutor", InlineExecutor)
        )
        stack.enter_context(mock.patch.dict("os.environ", environ))
        if long_time:
            stack.enter_context(mock.patch("moto.s3.models.utcnow", now))
            stack.enter_context(mock.patch("moto.dynamodb.models.table.utcnow", now))
            importlib.import_module("moto.moto_api._internal").mock_random.seed(seed)
        yield
