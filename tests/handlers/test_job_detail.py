"""GET /jobs/{id} names what it shows (issue 26: it answered `"history": []` for a job that ran,
and the README called that field the whole history). The failed attempts are `failed_attempts`;
`history` is the same list under its first name, kept for existing clients and marked
deprecated in openapi.json; the whole history of a job is the job history in S3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sundial.client.models import JobDetail
from sundial.clock import ManualClock
from sundial.consumer import NonRetryableError
from sundial.model.job import Status
from sundial.transport.envelope import Envelope
from sundial.wiring import Dependencies
from tests.harness import Harness, delayed_job
from tests.support import FakeLambdaContext, http_api_event, load_handler

jobs_lambda = load_handler("jobs")
OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"


class BadAddressError(NonRetryableError):
    pass


def _fails_when_asked(job: Envelope) -> None:
    if isinstance(job.payload, dict) and job.payload.get("fail"):
        raise BadAddressError("no such mailbox")


def _get(job_id: str) -> dict[str, Any]:
    event = http_api_event("GET", f"/jobs/{job_id}", route="/jobs/{job_id}")
    response = jobs_lambda.handler(event, FakeLambdaContext())
    assert response["statusCode"] == 200, response
    body: dict[str, Any] = json.loads(response["body"])
    return body


@pytest.fixture
def harness(deps: Dependencies, clock: ManualClock) -> Harness:
    return Harness(deps, clock, _fails_when_asked)


def test_a_job_that_ran_shows_its_failed_attempts_by_that_name(
    deps: Dependencies, clock: ManualClock, harness: Harness
) -> None:
    # Given a job that succeeded and one whose only attempt failed
    succeeded = delayed_job(deps, clock, harness, payload={})
    harness.poll()
    died = delayed_job(deps, clock, harness, payload={"fail": True}, max_attempts=1)
    harness.poll()
    assert deps.jobs.get(died).status is Status.DEAD
    # When each is read
    ok, dead = _get(succeeded), _get(died)
    # Then the one that succeeded had no failed attempt, and says so by name
    assert ok["status"] == "succeeded" and ok["failed_attempts"] == []
    # And the dead one shows its failed attempt; `history` is the same list, as before
    [failure] = dead["failed_attempts"]
    assert (failure["attempt"], failure["error_type"]) == (1, "BadAddressError")
    assert dead["history"] == dead["failed_attempts"]


def test_the_api_document_says_what_history_is() -> None:
    fields = json.loads(OPENAPI.read_text())["components"]["schemas"]["JobDetail"]["properties"]
    assert fields["history"]["deprecated"] is True
    assert "not the job's whole history" in fields["history"]["description"]
    assert "Every failed attempt's error" in fields["failed_attempts"]["description"]


def test_the_client_reads_failed_attempts_from_an_api_that_only_sent_history() -> None:
    older = {
        "id": "j", "queue": "default", "status": "dead", "run_at": "2026-11-21T09:00:00Z",
        "priority": "normal", "created_at": "2026-11-21T08:00:00Z", "attempts": 1,
        "max_attempts": 1, "payload": None, "due_at": "2026-11-21T09:00:00Z",
        "history": [
            {
                "attempt": 1, "at": "2026-11-21T09:00:01Z", "error_type": "BadAddressError",
                "message": "no such mailbox", "traceback_head": "",
            }
        ],
    }  # fmt: skip
    job = JobDetail.model_validate(older)
    assert [e.error_type for e in job.failed_attempts] == ["BadAddressError"]
