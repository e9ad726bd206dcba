"""The composition root builds every AWS client with the process's one configuration."""

from __future__ import annotations

from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.runs.consumer import ConsumerCollaborators
from sundial.runs.leases import LeaseRequest
from sundial.settings import USER_AGENT
from sundial.transport.receiver import SQS_MAX_WAIT_S
from sundial.wiring import configure


def test_every_request_carries_the_fixed_user_agent(
    environ: dict[str, str], clock: ManualClock
) -> None:
    # Given Sundial wired on a session whose every request we can see
    session = boto3.Session()
    agents: list[str] = []

    def record(request: Any, **_: Any) -> None:
        agents.append(request.headers["User-Agent"].decode())

    session.events.register("before-send", record)
    deps = configure(clock=clock, environ=environ, session=session)

    # When it reads the table and polls a queue through its own clients
    deps.sweeps.recorded_shard_count()
    assert deps.leases.lease("email", LeaseRequest(wait=0)) == []

    # Then each request's User-Agent is the fixed one (botocore builds no default one per call)
    assert len(agents) >= 2  # the table read and the poll (a priority queue is polled too)
    assert all(agent.startswith(USER_AGENT) for agent in agents), agents


def test_the_lease_client_reads_longer_than_the_longest_long_poll(
    environ: dict[str, str], clock: ManualClock
) -> None:
    # Given Sundial wired as a Lambda wires it
    deps = configure(clock=clock, environ=environ)
    # Then the lease's SQS client waits for a 20 s long poll (the other clients fail fast)
    read_timeout = "read_timeout"  # botocore's Config sets its options as attributes at run time
    assert getattr(deps.leases._receiver._sqs.meta.config, read_timeout) > SQS_MAX_WAIT_S
    assert getattr(deps.sender._sqs.meta.config, read_timeout) < SQS_MAX_WAIT_S


def test_a_consumer_lambdas_own_collaborators_use_the_one_client_configuration(
    environ: dict[str, str],
) -> None:
    # Given a consumer Lambda's environment (a payload bucket among it)
    # When the consumer SDK builds its collaborators from it, as on its first record
    consumer = ConsumerCollaborators.from_environment(environ)
    lifecycle = consumer.lifecycle
    # Then its clients are configured as every Sundial function's: the fixed User-Agent, the
    # short read timeout, and SigV4 for the payload bucket with time for a large object
    # (botocore's Config sets its options as attributes at run time)
    user_agent, read_timeout = "user_agent", "read_timeout"
    dynamodb, sqs = lifecycle.store._db.meta.config, lifecycle.queues._sqs.meta.config
    for config in (dynamodb, sqs):
        assert getattr(config, user_agent).startswith(USER_AGENT)
        assert getattr(config, read_timeout) == 5
    assert lifecycle.payloads is not None
    s3 = lifecycle.payloads._s3.meta.config
    assert (s3.signature_version, getattr(s3, read_timeout)) == ("s3v4", 30)
    # And its table writes read back only what they wrote (its role's limits)
    assert lifecycle.store._read_back and lifecycle.attempt_store._read_back
