"""The composition root builds every AWS client with the process's one configuration."""

from __future__ import annotations

from typing import Any

import boto3

from sundial.clock import ManualClock
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
