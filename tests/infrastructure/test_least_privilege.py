"""Least privilege, proven: each Lambda function is driven through its flows with the resource
names and environment of the synthesized template, every AWS call it makes is recorded
(tests/iam_calls.py), and the calls are checked against the function role's policy statements:
each call must be allowed (action, resource ARN, condition), and each granted action must be
used, or be in JUSTIFIED with the reason it is needed only in AWS.

The calls the handler tests make (tests/handlers and every other test that runs a handler
through tests.support.load_handler) are checked too, at the action level: their resources are
the tests' own (table "sundial-jobs", queue "default"), not the template's. conftest.py runs
this module last, so in a whole run it sees every handler test's calls (`make test` runs it in a
process of its own after the others, which leave their calls in a folder for it); run alone it
still drives every function itself and never depends on them.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import moto.core.utils
import pytest
from moto import mock_aws

from app import STACK_NAME
from stacks.functions import construct_name
from sundial.clock import ManualClock, to_rfc3339
from sundial.ids import SHARD_PREFIX
from sundial.local.provision import assign_names, create_resources
from sundial.local.template import LocalTemplate
from sundial.model.schedule import ScheduleState
from sundial.store.job_items import item_to_job
from sundial.store.runner_writes import RUNNER_UPDATED, TIMER_ATTRIBUTES
from sundial.store.schedules import ScheduleStore
from sundial.wiring import configure, history_recorder
from tests.conftest import START
from tests.iam_calls import Call, SessionRecorder, Statement, handler_test_calls
from tests.infrastructure import consumer_attacks
from tests.infrastructure.synthesis import Synthesized
from tests.support import (
    FakeLambdaContext,
    StreamReader,
    call_api,
    load_handler,
    sqs_event,
)
from tests.unit.history.test_replay import failed_batch

pytestmark = pytest.mark.infra

CONSUMER = "example_consumer"
START_MS = int(START.timestamp() * 1000)

# Route templates of the HTTP API.
JOB, DAG, QUEUE, SCHEDULE = (
    "/jobs/{job_id}",
    "/dags/{dag_id}",
    "/queues/{queue}",
    "/schedules/{schedule_id}",
)

# lambdas/<dir> -> the function's construct path under the Sundial construct.
FUNCTIONS = {
    name: f"Functions/{construct_name(name)}/Function"
    for name in (
        "submit",
        "jobs",
        "dags",
        "fanout",
        "sweeper",
        "workers",
        "dead_letters",
        "schedules",
        "queues",
        "example_consumer",
    )
} | {"history": "HistoryCapture/Function/Function"}

_LOGS = "Lambda itself writes the function's logs to its log group with the function's role"
_XRAY = (
    "active tracing: Lambda and the Powertools tracer send segments to X-Ray (tracing is off "
    "in tests: POWERTOOLS_TRACE_DISABLED)"
)
_SQS_POLLER = (
    "the SQS event source mapping polls the queue with the function's role: Lambda needs "
    "sqs:ReceiveMessage, sqs:DeleteMessage and sqs:GetQueueAttributes "
    "(https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html); the handler only gets the "
    "records"
)
_STREAM_POLLER = (
    "the DynamoDB stream event source mapping reads the stream with the function's role "
    "(https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html)"
)
_S3_DESTINATION = (
    "the stream mapping's on-failure destination: Lambda writes a failed batch under "
    "aws/lambda/ with the function's role, which needs s3:PutObject and s3:ListBucket "
    "(https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html)"
)
_ON_FAILURE = (
    "the async invocation's on-failure destination (stacks/dispatch.py): Lambda sends a failed "
    "tick or sweep to the dispatch-failures queue with the function's role "
    "(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html)"
)
# The dispatch-failures queue's logical id (construct path Sundial/Dispatch/Failures).
_DISPATCH_FAILURES = "SundialDispatchFailuresA73C522F"
_EVERY_FUNCTION = {
    "logs:CreateLogStream": _LOGS,
    "logs:PutLogEvents": _LOGS,
    "xray:PutTraceSegments": _XRAY,
    "xray:PutTelemetryRecords": _XRAY,
}
# Granted actions no handler call makes, each with why AWS needs it: {function: {action: why}}.
JUSTIFIED: dict[str, dict[str, str]] = {name: dict(_EVERY_FUNCTION) for name in FUNCTIONS} | {
    "dead_letters": _EVERY_FUNCTION
    | {
        action: _SQS_POLLER
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
    },
    "example_consumer": _EVERY_FUNCTION
    | {
        action: _SQS_POLLER
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
    },
    # (s3:ListBucket, which the S3 destination needs, is used: the hourly replay lists the
    # failed batches with it.)
    "history": _EVERY_FUNCTION
    | {
        action: _STREAM_POLLER
        for action in (
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        )
    },
    "fanout": _EVERY_FUNCTION | {"sqs:SendMessage": _ON_FAILURE},
}

# Granted statements no call reaches although their actions are used elsewhere, each with why
# AWS needs it: {function: {(action, the resource's ending): why}}.
JUSTIFIED_RESOURCES: dict[str, dict[tuple[str, str], str]] = {
    "history": {("s3:PutObject", "/aws/lambda/*"): _S3_DESTINATION},
    "sweeper": {("sqs:SendMessage", _DISPATCH_FAILURES): _ON_FAILURE},
}


@dataclass
class World:
    """moto with the template's resources, one recorded boto3 session per function."""

    template: LocalTemplate
    clock: ManualClock
    environment: dict[str, dict[str, str]]
    recorders: dict[str, SessionRecorder] = field(default_factory=dict)
    handlers: dict[str, Any] = field(default_factory=dict)
    _seed: int = 0

    def __post_init__(self) -> None:
        for name in FUNCTIONS:
            self.recorders[name] = SessionRecorder(name, boto3.Session())
            module = load_handler(name)
            # Unwrapped: these calls are recorded by the function's own session, not as a
            # handler test's (tests.iam_calls.attributed).
            module.handler = module.handler.__wrapped__
            self.handlers[name] = module

    def invoke(self, name: str, event: Mapping[str, Any]) -> Any:
        """Run lambdas/<name> as Lambda would: its environment, its own clients."""
        session = self.recorders[name].session
        if name == "history":
            history_recorder(environ=self.environment[name], session=session)
        else:
            configure(
                clock=self.clock, environ=self.environment[name], session=session, rng=self.rng()
            )
        return self.handlers[name].handler(dict(event), FakeLambdaContext())

    def api(self, name: str, method: str, path: str, route: str, body: Any = None) -> Any:
        configure(
            clock=self.clock,
            environ=self.environment[name],
            session=self.session(name),
            rng=self.rng(),
        )
        status, answer = call_api(self.handlers[name], method, path, route=route, body=body)
        assert status < 300, (name, method, path, status, answer)
        return answer

    def rng(self) -> random.Random:
        """Every random choice (shards, jitter) seeded: the same calls on every run."""
        self._seed += 1
        return random.Random(self._seed)

    def session(self, name: str) -> Any:
        return self.recorders[name].session

    def urls(self, variable: str) -> dict[str, str]:
        urls: dict[str, str] = json.loads(self.environment["submit"][variable])
        return urls

    def take(
        self, url: str, job_ids: set[str] | None = None, *, delete: bool = True
    ) -> list[dict[str, Any]]:
        """Receive every visible message of a queue (the test's own client: not recorded),
        keeping those of `job_ids` (None: all). `delete`: as the mapping does once the handler
        returns; without, they stay in flight (a heartbeat may extend them)."""
        sqs = boto3.client("sqs")
        kept: list[dict[str, Any]] = []
        while True:
            messages = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                break
            for message in messages:
                if job_ids is None or json.loads(message["Body"]).get("id") in job_ids:
                    kept.append(dict(message))
                    if delete:
                        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        # The others come back after their visibility timeout, for a later flow
        return kept

    def calls(self, name: str) -> Counter[Call]:
        return self.recorders[name].calls


def _role_statements(template: LocalTemplate, function_id: str) -> list[Statement]:
    """Every statement of the function role's policies, its intrinsics resolved to ARNs."""
    role_id = template.resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    role = template.resources[role_id]["Properties"]
    assert "ManagedPolicyArns" not in role and "Policies" not in role, role_id
    statements: list[Statement] = []
    for policy in template.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            document = template.resolve(policy["Properties"]["PolicyDocument"])
            statements.extend(Statement.parse(s) for s in document["Statement"])
    return statements


@pytest.fixture(scope="module")
def world(synthesized: Synthesized) -> Iterator[World]:
    clock = ManualClock.at(START)
    with pytest.MonkeyPatch.context() as patch, mock_aws(config={"lambda": {"use_docker": False}}):
        # moto's SQS delays and visibility follow the test's clock, as in tests/conftest.py
        patch.setattr(
            moto.core.utils,
            "utcnow",
            lambda: datetime.fromtimestamp(clock.now_ms() / 1000, tz=UTC).replace(tzinfo=None),
        )
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        patch.delenv("AWS_ENDPOINT_URL", raising=False)
        template = LocalTemplate.load(synthesized.outdir, STACK_NAME)
        assign_names(template, "https://sqs.us-east-1.amazonaws.com")
        # In-process moto answers on AWS's own endpoints: no endpoint override.
        create_resources(template, boto3.Session(), None)  # type: ignore[arg-type]
        _create_sweeper_function(template, synthesized.function_id("sweeper"))
        environment = {
            name: {
                key: str(value)
                for key, value in template.resolve(
                    template.props(synthesized.logical_id(path))["Environment"]["Variables"]
                ).items()
            }
            for name, path in FUNCTIONS.items()
        }
        # cdk.json declares no quota: give `email` a submission limit (never reached here), so
        # the submit and dags functions' counter writes (sundial.store.submission_windows) are
        # driven and checked against their roles too.
        for name in ("submit", "dags"):
            environment[name]["SUNDIAL_QUOTAS"] = json.dumps(
                {"email": {"max_submissions_per_second": 1000}}
            )
        world = World(template=template, clock=clock, environment=environment)
        _drive(world)
        yield world


def _create_sweeper_function(template: LocalTemplate, logical_id: str) -> None:
    """The sweeper, in moto's Lambda (no Docker: it accepts invokes and runs nothing), so the
    fan-out's async invoke reaches a function by the template's name."""
    import io  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    role = boto3.client("iam").create_role(
        RoleName="sweeper", AssumeRolePolicyDocument=json.dumps({"Statement": []})
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    boto3.client("lambda").create_function(
        FunctionName=template.physical[logical_id],
        Runtime="python3.13",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
    )


def _drive(world: World) -> None:
    """A representative flow through every function, each step through its handler. The
    flows share one table and set of queues, in this order."""
    schedule_id = _submit_and_schedules(world)
    _queues_and_dispatch(world)
    _job_control(world, schedule_id)
    chain = _dags(world)
    _workers(world, chain)
    _example_consumer(world)
    _dead_letters(world)
    _lease_everywhere(world)
    _history(world)


def _submit_and_schedules(world: World) -> str:
    """submit: a delayed job, an idempotent repeat, a job due now (sent at once), a batch.
    schedules: one every 5 minutes on default (its first occurrences are sent by the API),
    its runs, pause and resume. Returns its id."""
    for body in (
        {"queue": "default", "delay_seconds": 3600},
        {"queue": "default", "delay_seconds": 3600, "idempotency_key": "once"},
        {"queue": "default", "delay_seconds": 3600, "idempotency_key": "once"},
        {"queue": "demo", "delay_seconds": 0},
        # A payload stored in S3 (issue 17, item 5): the submit puts its object first
        {"queue": "default", "delay_seconds": 3600, "payload": {"n": 1}, "payload_storage": "s3"},
    ):
        world.api("submit", "POST", "/jobs", "/jobs", body)
    batch = [{"queue": "default", "delay_seconds": 60}, {"queue": "email", "delay_seconds": 0}]
    world.api("submit", "POST", "/jobs/batch", "/jobs/batch", {"jobs": batch})

    schedule = world.api(
        "schedules",
        "POST",
        "/schedules",
        "/schedules",
        {"name": "tick", "cron": "*/5 * * * *", "queue": "default", "payload": {"n": 1}},
    )
    path = f"/schedules/{schedule['id']}"
    world.api("schedules", "GET", f"{path}/runs", f"{SCHEDULE}/runs")
    world.api("schedules", "PATCH", path, SCHEDULE, {"cron": "*/10 * * * *", "payload": {"n": 2}})
    world.api("schedules", "POST", f"{path}/pause", f"{SCHEDULE}/pause")
    world.api("schedules", "POST", f"{path}/resume", f"{SCHEDULE}/resume")
    # The queue's schedules listed (the index, then the schedules read in a batch); one
    # deleted (its state and its index item in one transaction)
    world.api("schedules", "GET", "/schedules?queue=default", "/schedules")
    gone = world.api(
        "schedules", "POST", "/schedules", "/schedules", {"queue": "default", "rate": "1 day"}
    )
    world.api("schedules", "DELETE", f"/schedules/{gone['id']}", SCHEDULE)
    return str(schedule["id"])


def _queues_and_dispatch(world: World) -> None:
    """queues: pause default (a job due now submitted meanwhile is held), see it; fanout: a
    tick starts the sweepers; sweeper: dispatches what is due, holds default's, parks the
    occurrence of a schedule whose pause died before parking it; queues: resume default (the
    catch-up releases what it held, schedule occurrences too); the sweeper sweeps again."""
    hourly = world.api(
        "schedules",
        "POST",
        "/schedules",
        "/schedules",
        {"name": "hourly", "cron": "0 * * * *", "queue": "email"},
    )
    # The pause's first step only (the state), as if its function died before parking the
    # occurrence (the test's own client: not recorded); the sweeper then parks it itself.
    table = world.environment["schedules"]["SUNDIAL_TABLE_NAME"]
    ScheduleStore(boto3.client("dynamodb"), table).set_state(
        hourly["id"],
        to=ScheduleState.PAUSED,
        when=[ScheduleState.ACTIVE],
        now_ms=world.clock.now_ms(),
    )
    world.api("queues", "POST", "/queues/default/pause", f"{QUEUE}/pause")
    world.api("queues", "GET", "/queues/default", QUEUE)
    world.api("queues", "GET", "/queues", "/queues")  # every queue's depth (SQS) and dead letters
    world.api("submit", "POST", "/jobs", "/jobs", {"queue": "default", "delay_seconds": 0})
    # A schedule on the paused queue (its occurrence due now is held for the catch-up), then
    # paused itself by its first step only: the resume's catch-up parks that occurrence.
    minutely = world.api(
        "schedules",
        "POST",
        "/schedules",
        "/schedules",
        {"name": "minutely", "cron": "* * * * *", "queue": "default"},
    )
    ScheduleStore(boto3.client("dynamodb"), table).set_state(
        minutely["id"],
        to=ScheduleState.PAUSED,
        when=[ScheduleState.ACTIVE],
        now_ms=world.clock.now_ms(),
    )

    world.invoke("fanout", {"source": "aws.events", "detail-type": "Scheduled Event"})
    shards = list(range(int(world.environment["sweeper"]["SUNDIAL_SHARD_COUNT"])))
    world.clock.advance(seconds=3600 - 600)
    world.invoke("sweeper", {"shards": shards})
    world.api("queues", "POST", "/queues/default/resume", f"{QUEUE}/resume")
    world.clock.advance(seconds=600)
    world.invoke("sweeper", {"shards": shards})


def _job_control(world: World, schedule_id: str) -> None:
    """jobs: get a job; move it twice (a transaction: put, pointer, delete) and back, change its
    payload in place, run it now (sent); pause, resume, cancel and retry another; cancel a
    schedule's pending occurrence and retry it (the schedule moves on past it: its next
    occurrence is put)."""
    moved = world.api("submit", "POST", "/jobs", "/jobs", {"queue": "email", "delay_seconds": 7200})
    path = f"/jobs/{moved['id']}"
    for body in (
        {"delay_seconds": 9000},
        {"delay_seconds": 10800},
        {"payload": {"v": 2}},
        {"payload": {"v": 3}, "payload_storage": "s3"},  # stored in S3 before the write
    ):
        world.api("jobs", "PATCH", path, JOB, body)
    world.api("jobs", "POST", f"{path}/run-now", f"{JOB}/run-now")
    later = world.api("submit", "POST", "/jobs", "/jobs", {"queue": "email", "delay_seconds": 7200})
    path = f"/jobs/{later['id']}"
    world.api("jobs", "GET", path, JOB)
    world.api("jobs", "POST", f"{path}/pause", f"{JOB}/pause")
    world.api("jobs", "POST", f"{path}/resume", f"{JOB}/resume")
    world.api("jobs", "DELETE", path, JOB)
    world.api("jobs", "POST", f"{path}/retry", f"{JOB}/retry")
    occurrence = f"/jobs/{_pending_occurrence(world, schedule_id)}"
    world.api("jobs", "DELETE", occurrence, JOB)
    world.api("jobs", "POST", f"{occurrence}/retry", f"{JOB}/retry")


def _dags(world: World) -> dict[str, Any]:
    """dags: a chain email -> demo -> demo (the example consumer may send only to its own
    queues, stacks/consumers.py), read back; a second DAG paused, resumed and cancelled.
    Returns the chain."""
    chain: dict[str, Any] = world.api(
        "dags",
        "POST",
        "/dags",
        "/dags",
        {
            "name": "chain",
            "nodes": {
                "a": {"queue": "email"},
                "b": {"queue": "demo", "depends_on": ["a"]},
                "c": {"queue": "demo", "depends_on": ["b"]},
            },
        },
    )
    world.api("dags", "GET", f"/dags/{chain['id']}", DAG)
    other = world.api(
        "dags",
        "POST",
        "/dags",
        "/dags",
        {
            "name": "other",
            "nodes": {"x": {"queue": "default"}, "y": {"queue": "email", "depends_on": ["x"]}},
        },
    )
    path = f"/dags/{other['id']}"
    # A DAG whose root is due now on a paused queue: the root waits for the queue's resume
    world.api("queues", "POST", "/queues/email/pause", f"{QUEUE}/pause")
    world.api(
        "dags", "POST", "/dags", "/dags", {"name": "held", "nodes": {"r": {"queue": "email"}}}
    )
    world.api("queues", "POST", "/queues/email/resume", f"{QUEUE}/resume")
    world.api("dags", "POST", f"{path}/pause", f"{DAG}/pause")
    world.api("dags", "POST", f"{path}/resume", f"{DAG}/resume")
    world.api("dags", "DELETE", path, DAG)
    return chain


def _workers(world: World, chain: Mapping[str, Any]) -> None:
    """workers: lease the email queue (the chain's node a among them), heartbeat and ack a
    (releasing b on demo), nack the others: one with a short retry (sent with a delay), one
    with a retry beyond SQS's delay window (a timer item)."""
    # A job whose payload is in S3: its lease presigns a GET of it (signed with the role)
    stored = {"queue": "email", "delay_seconds": 0, "payload": {"w": 1}, "payload_storage": "s3"}
    world.api("submit", "POST", "/jobs", "/jobs", stored)
    world.clock.advance(seconds=1)
    lease = {"wait": 0, "max": 10}
    leased = world.api("workers", "POST", "/queues/email/lease", f"{QUEUE}/lease", lease)["jobs"]
    node_a = chain["nodes"]["a"]["id"]
    [first] = [job for job in leased if job["job"]["id"] == node_a]
    rest = [job for job in leased if job["job"]["id"] != node_a]
    assert len(rest) >= 2, leased  # one of them with its payload in S3
    path = f"/jobs/{node_a}"
    world.api("workers", "POST", f"{path}/heartbeat", f"{JOB}/heartbeat", {"lease": first["lease"]})
    world.api("workers", "POST", f"{path}/ack", f"{JOB}/ack", {"lease": first["lease"]})
    # The job whose payload is in S3 gets the retry beyond SQS's delay window: its payload's
    # lifecycle is restarted (a copy onto itself) before its timer item is put
    [stored, *_] = [job for job in rest if job["job"].get("payload_ref")]
    [inline, *_] = [job for job in rest if not job["job"].get("payload_ref")]
    for job, retry_after in ((inline, 30), (stored, 3600)):
        body = {"lease": job["lease"], "retry_after_seconds": retry_after}
        world.api("workers", "POST", f"/jobs/{job['job']['id']}/nack", f"{JOB}/nack", body)


def _example_consumer(world: World) -> None:
    """example_consumer on demo: what is there (the chain's node b succeeds and releases c
    while demo is paused: c is deferred with a timer, services.deferral), a job that fails
    with a retry a day out (beyond SQS's 15-minute delay: a timer item), one with a retry
    within it (sent to demo), one that dies at once (to the DLQ), a DAG node that dies and
    cancels its descendant, and one long enough for the SDK's heartbeat."""
    queues = world.urls("SUNDIAL_QUEUE_URLS")
    priority = world.urls("SUNDIAL_PRIORITY_QUEUE_URLS")
    day = {"initial_delay_seconds": 86_400, "max_delay_seconds": 86_400}
    for attempts in (2, 1):
        body = {"queue": "demo", "delay_seconds": 0, "payload": {"fail": True}, "retry": day}
        world.api("submit", "POST", "/jobs", "/jobs", body | {"max_attempts": attempts})
    # A retry within SQS's delay window: sent back to demo
    soon = {"queue": "demo", "delay_seconds": 0, "payload": {"fail": True}, "max_attempts": 2}
    world.api("submit", "POST", "/jobs", "/jobs", soon)
    # A payload stored in S3: the consumer SDK reads its object (its own queue's prefix), and
    # its failure's retry a day out restarts the object's lifecycle (a copy onto itself)
    stored = {"queue": "demo", "delay_seconds": 0, "payload": {"fail": True}, "retry": day}
    stored |= {"payload_storage": "s3", "max_attempts": 2}
    world.api("submit", "POST", "/jobs", "/jobs", stored)
    doomed = {
        "name": "doomed",
        "nodes": {
            "x": {"queue": "demo", "payload": {"fail": True}, "max_attempts": 1},
            "y": {"queue": "demo", "depends_on": ["x"]},
        },
    }
    world.api("dags", "POST", "/dags", "/dags", doomed)
    world.api("queues", "POST", "/queues/demo/pause", f"{QUEUE}/pause")
    demo_arn = world.template.get_att(_queue_id(world, queues["demo"]), "Arn")
    for _ in range(3):  # node b, then the c it released
        messages = world.take(queues["demo"]) + world.take(priority["demo"])
        if messages:
            world.invoke("example_consumer", sqs_event(messages, demo_arn))
        world.clock.advance(seconds=1)
    world.api("queues", "POST", "/queues/demo/resume", f"{QUEUE}/resume")
    # A critical job goes to the priority queue, fed by the mapping on it
    body = {"queue": "demo", "delay_seconds": 0, "priority": "critical"}
    world.api("submit", "POST", "/jobs", "/jobs", body)
    priority_arn = world.template.get_att(_queue_id(world, priority["demo"]), "Arn")
    consumer = world.handlers["example_consumer"]
    consumer.clock = _SlowJobClock(world.clock, consumer.job_consumer)
    running = world.take(priority["demo"], delete=False)
    world.invoke("example_consumer", sqs_event(running, priority_arn))
    consumer.clock = world.clock


def _dead_letters(world: World) -> None:
    """dead_letters: a DAG node whose message SQS redrove (on_failure continue: its child is
    released); jobs: the default queue's dead letters listed, replayed and purged; queues and
    dags: the queue's jobs by status and its DAGs listed."""
    queues = world.urls("SUNDIAL_QUEUE_URLS")
    dead = world.urls("SUNDIAL_DEAD_LETTER_URLS")
    dag = world.api(
        "dags",
        "POST",
        "/dags",
        "/dags",
        {
            "name": "redriven",
            "on_failure": "continue",
            "nodes": {"x": {"queue": "default"}, "y": {"queue": "email", "depends_on": ["x"]}},
        },
    )
    # SQS's redrive, played by the test: the node's message moves to the DLQ
    [redriven] = world.take(queues["default"], {dag["nodes"]["x"]["id"]})
    boto3.client("sqs").send_message(QueueUrl=dead["default"], MessageBody=redriven["Body"])
    dlq_arn = world.template.get_att(_queue_id(world, dead["default"]), "Arn")
    world.invoke("dead_letters", sqs_event(world.take(dead["default"]), dlq_arn))

    world.api("jobs", "GET", "/queues/default/dead", f"{QUEUE}/dead")
    # queues: the queue's jobs of a status (the shards' due ranges; dead: the index)
    for status in ("pending", "dead"):
        world.api("queues", "GET", f"/queues/default/jobs?status={status}", f"{QUEUE}/jobs")
    world.api("dags", "GET", "/dags?queue=default", "/dags")
    world.api("jobs", "POST", "/queues/default/dead/replay", f"{QUEUE}/dead/replay", {})
    before = to_rfc3339(world.clock.now_ms() + 86_400_000)
    world.api("jobs", "DELETE", f"/queues/default/dead?older_than={before}", f"{QUEUE}/dead")


def _lease_everywhere(world: World) -> None:
    """workers: a lease on every other queue (a queue with a priority queue leases from both),
    now that the other flows are done with their messages."""
    for queue in sorted(set(world.urls("SUNDIAL_QUEUE_URLS")) - {"email"}):
        lease = {"wait": 0, "max": 1}
        world.api("workers", "POST", f"/queues/{queue}/lease", f"{QUEUE}/lease", lease)


def _history(world: World) -> None:
    """history: the table's stream so far, as the stream's event source mapping delivers it."""
    table_id = next(iter(world.template.of_type("AWS::DynamoDB::Table")))
    # moto answers DynamoDB Streams on the legacy endpoint only (as tests/unit/history does)
    streams = boto3.client(
        "dynamodbstreams", endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"
    )
    reader = StreamReader(streams, world.template.get_att(table_id, "StreamArn"))
    event = reader.next_event()
    assert event["Records"]
    world.invoke("history", event)
    # And DynamoDB's TTL removing a moved job's item (played by the test: moto runs no TTL):
    # the history function deletes the job's pointer
    table = world.template.physical[table_id]
    dynamodb = boto3.client("dynamodb")
    [moved] = [
        item
        for page in dynamodb.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
        if "origin" in item and "moved_to" not in item
    ]
    dynamodb.delete_item(TableName=table, Key={"pk": moved["pk"], "sk": moved["sk"]})
    ttl = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    [removal] = reader.next_event()["Records"]
    assert world.invoke("history", {"Records": [removal | {"userIdentity": ttl}]}) == {
        "batchItemFailures": []
    }
    pointer = {"pk": moved["pk"], "sk": moved["origin"]}
    assert "Item" not in dynamodb.get_item(TableName=table, Key=pointer)
    # And TTL removing what else an expired job owns (sundial.services.job_retention): a DAG
    # node's (a Query of its DAG's nodes, then its listing entry), a stored payload's object,
    # a keyed job's idempotency record
    jobs = [
        item
        for page in dynamodb.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
        if item["pk"]["S"].startswith("shard#")
        and "moved_to" not in item
        and "retry_of" not in item
    ]
    expiring = {
        kind: next(item for item in jobs if kind in item)
        for kind in ("dag_id", "payload_ref", "idempotency_key")
    }
    removed = set()
    for item in expiring.values():
        if (item["pk"]["S"], item["sk"]["S"]) not in removed:
            dynamodb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
            removed.add((item["pk"]["S"], item["sk"]["S"]))
    removals = reader.next_event(ttl_removed=removed)["Records"]
    assert world.invoke("history", {"Records": removals}) == {"batchItemFailures": []}
    # And the hourly replay of a batch Lambda gave up on (written as Lambda's S3 destination
    # writes it, with a client of the test's own: that write is Lambda's, not the handler's)
    bucket = world.environment["history"]["SUNDIAL_HISTORY_BUCKET"]
    boto3.client("s3").put_object(
        Bucket=bucket, Key="aws/lambda/mapping/shard/failed", Body=failed_batch(event)
    )
    assert world.invoke("history", {"replay_failed_batches": True})["replayed"] == 1


class _SlowJobClock:
    """The example consumer's clock for one job: reading it (as the job starts) moves the
    shared clock past a heartbeat interval and waits for the beat, as a long job would."""

    def __init__(self, clock: ManualClock, job_consumer: Any) -> None:
        self._clock = clock
        self._consumer = job_consumer

    def now_ms(self) -> int:
        self._clock.advance(seconds=11)  # a third of the demo queue's 30 s visibility, and more
        heartbeat = self._consumer.current_heartbeat
        assert heartbeat is not None and heartbeat.wait_for_beats(1, timeout_s=10)
        return self._clock.now_ms()


def _pending_occurrence(world: World, schedule_id: str) -> str:
    """The job id of a schedule's pending occurrence (the test's own scan: not recorded)."""
    table = world.environment["jobs"]["SUNDIAL_TABLE_NAME"]
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    for item in items:
        in_a_shard = item["pk"]["S"].startswith(SHARD_PREFIX)  # not an index item
        is_job = in_a_shard and item["sk"]["S"][:1].isdigit() and "moved_to" not in item
        job = item_to_job(item) if is_job else None
        if job is not None and job.schedule_id == schedule_id and str(job.status) == "pending":
            return job.id
    raise AssertionError(f"schedule {schedule_id} has no pending occurrence")


def _queue_id(world: World, url: str) -> str:
    return next(lid for lid, value in world.template.physical.items() if value == url)


def test_every_function_of_the_template_is_checked(synthesized: Synthesized) -> None:
    # Given every Lambda function the template declares
    declared = set(synthesized.resources("AWS::Lambda::Function"))
    # Then each is one of FUNCTIONS, so none escapes this check
    assert declared == {synthesized.logical_id(path) for path in FUNCTIONS.values()}


def test_every_function_was_driven(world: World) -> None:
    # Then each function made AWS calls of its own
    assert {name for name in FUNCTIONS if not world.calls(name)} == set()


def test_the_submission_counters_were_driven(world: World) -> None:
    # Given `email`'s submission limit, the submits and DAGs touching it counted their jobs:
    # an UpdateItem on a submission window item, checked below with the function's other calls
    for name in ("submit", "dags"):
        assert any(
            call.operation == "dynamodb.UpdateItem"
            and any(key.startswith("quota#email#") for key in call.leading_keys)
            for call in world.calls(name)
        ), name


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_call_is_allowed_by_the_function_role(
    world: World, synthesized: Synthesized, name: str
) -> None:
    # Given the function's role statements and the calls its flows made
    statements = _role_statements(world.template, synthesized.logical_id(FUNCTIONS[name]))
    # Then IAM allows each call: action, resource and condition
    denied = sorted(
        f"{call.operation} {call.resource} {sorted(call.leading_keys)}"
        for call in world.calls(name)
        if not any(statement.allows(call) for statement in statements)
    )
    assert denied == []


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_granted_action_is_used_or_justified(
    world: World, synthesized: Synthesized, name: str
) -> None:
    # Given the actions the function's role grants and those its calls used
    statements = _role_statements(world.template, synthesized.logical_id(FUNCTIONS[name]))
    granted = {action for statement in statements for action in statement.actions}
    used = {call.action for call in world.calls(name)}
    justified = JUSTIFIED[name]
    # Then each granted action is used, or needed by AWS for a reason written down
    assert sorted(granted - used - set(justified)) == []
    # And each justification still names a granted action no call uses (no stale entry)
    assert sorted(set(justified) - (granted - used)) == []


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_granted_statement_is_reached_or_justified(
    world: World, synthesized: Synthesized, name: str
) -> None:
    # Given the function's role statements (a resource each action is granted on)
    statements = _role_statements(world.template, synthesized.logical_id(FUNCTIONS[name]))
    calls = world.calls(name)
    # Then each statement allows some call, or each of its grants is justified
    unreached = sorted(
        f"{action} {resource}"
        for statement in statements
        if not any(statement.allows(call) for call in calls)
        for action in statement.actions
        for resource in statement.resources
        if action not in JUSTIFIED[name]
        and not any(
            action == justified and resource.endswith(ending)
            for justified, ending in JUSTIFIED_RESOURCES.get(name, {})
        )
    )
    assert unreached == []


def test_the_consumer_role_is_these_statements(world: World, synthesized: Synthesized) -> None:
    # Given the example consumer's role (a QueueConsumer's, as every team's consumer has it)
    statements = _role_statements(world.template, synthesized.logical_id(FUNCTIONS[CONSUMER]))
    table = next(iter(world.template.of_type("AWS::DynamoDB::Table")))
    table_arn = world.template.get_att(table, "Arn")
    on_table = {
        s.actions: s.condition
        for s in statements
        if any(a.startswith("dynamodb:") for a in s.actions)
    }
    # Then on the table it may do exactly this: get a job item; update the attempt's and the
    # DAG's bookkeeping attributes of one; put a retry timer (it must carry retry_of); each on
    # the shard partitions only, naming its keys; and query the queue states
    shards = {"dynamodb:LeadingKeys": ["shard#*"]}
    present = {"dynamodb:LeadingKeys": "false", "dynamodb:Attributes": "false"}
    returns = {"dynamodb:ReturnValues": ["NONE", "UPDATED_OLD", "UPDATED_NEW"]}
    assert on_table == {
        ("dynamodb:GetItem",): {
            "ForAllValues:StringLike": shards,
            "Null": {"dynamodb:LeadingKeys": "false"},
        },
        ("dynamodb:UpdateItem",): {
            "ForAllValues:StringLike": shards,
            "ForAllValues:StringEquals": {"dynamodb:Attributes": sorted(RUNNER_UPDATED)},
            "StringEqualsIfExists": returns,
            "Null": present,
        },
        ("dynamodb:PutItem",): {
            "ForAllValues:StringLike": shards,
            "ForAllValues:StringEquals": {"dynamodb:Attributes": sorted(TIMER_ATTRIBUTES)},
            "ForAnyValue:StringEquals": {"dynamodb:Attributes": ["retry_of"]},
            "StringEqualsIfExists": returns,
            "Null": present,
        },
        ("dynamodb:Query",): {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["queues"]}},
    }
    assert {r for s in statements if s.actions in on_table for r in s.resources} == {table_arn}
    # And none of the job's queue, payload or definition is among the attributes it may update
    fixed = {"queue", "payload", "payload_ref", "priority", "dag", "retry_of", "schedule_id"}
    assert not fixed & RUNNER_UPDATED


def test_the_consumer_sdk_stays_within_its_role_through_a_dags_pause_and_cascade(
    world: World, synthesized: Synthesized
) -> None:
    # Given what the example consumer did: DAG nodes run, one released onto its paused queue
    # (deferred: a timer put), one that died and cancelled its descendant
    calls = world.calls(CONSUMER)
    statements = _role_statements(world.template, synthesized.logical_id(FUNCTIONS[CONSUMER]))
    table_calls = [c for c in calls if c.action.startswith("dynamodb:")]
    puts = [c for c in table_calls if c.action == "dynamodb:PutItem"]
    assert any(c.attributes and "dag" in c.attributes for c in puts), "no deferred DAG node"
    assert any(
        c.attributes and "cancelled_at" in c.attributes
        for c in table_calls
        if c.action == "dynamodb:UpdateItem"
    ), "no cascade"
    # Then each of its table calls is allowed, and none touches another kind of partition
    assert [c for c in table_calls if not any(s.allows(c) for s in statements)] == []
    keys = {key for c in table_calls for key in c.leading_keys}
    assert {key.split("#")[0] for key in keys} == {"shard", "queues"}


def test_a_consumer_role_cannot_pause_count_plant_or_schedule_on_another_queue(
    world: World, synthesized: Synthesized
) -> None:
    statements = _role_statements(world.template, synthesized.logical_id(FUNCTIONS[CONSUMER]))
    table = world.environment[CONSUMER]["SUNDIAL_TABLE_NAME"]

    def allowed(attack: consumer_attacks.Attack) -> bool:
        """Whether the role allows every request the attack makes (then it succeeds)."""
        recorder = SessionRecorder("attacker", boto3.Session())
        consumer_attacks.attempt(attack, recorder.session.client("dynamodb"), table, START_MS)
        assert recorder.calls, "the attack made no request"
        return all(any(s.allows(call) for s in statements) for call in recorder.calls)

    # When a consumer's code tries, with its own role, to write or read what is not a job item,
    # or a job item's queue, payload or whole image
    # Then IAM refuses each
    assert {name for name, attack in consumer_attacks.ATTACKS.items() if allowed(attack)} == set()
    # And what it still may do to a job item whose key it knows is exactly this (the partition
    # key names no queue; docs, the access section)
    assert {name for name, attack in consumer_attacks.RESIDUAL.items() if allowed(attack)} == set(
        consumer_attacks.RESIDUAL
    )


def test_the_handler_tests_calls_are_allowed(world: World, synthesized: Synthesized) -> None:
    # Given the calls every earlier test's handlers made (their own resource names), in this
    # process or, under `make test`, in the test processes that ran before this one
    recorded = handler_test_calls()
    if not recorded:
        pytest.skip("no handler test ran before this one in this session (run with tests/)")
    # Then each function's role allows each of its calls' actions (and conditions)
    denied = []
    for name, calls in sorted(recorded.items()):
        statements = _role_statements(world.template, synthesized.logical_id(FUNCTIONS[name]))
        denied += sorted(
            {
                f"{name}: {call.operation} {sorted(call.leading_keys)}"
                for call in calls
                if not any(s.allows(call, check_resource=False) for s in statements)
            }
        )
    assert denied == []
