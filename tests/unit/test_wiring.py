"""The composition root builds every AWS client with the process's one configuration."""

from __future__ import annotations

from typing import Any

import boto3

from sundial.clock import ManualClock
from sundial.runs.leases import LeaseRequest
from sundial.wiring import USER_AGENT, configure


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
