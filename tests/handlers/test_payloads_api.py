"""Large payloads over the API (issue 17, item 5): the 5 MiB limit answered 413 naming the field,
GET /jobs/{id} with the reference, and a worker lease's presigned URL fetched over real HTTP
from moto's S3 server by sundial.worker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from pydantic import JsonValue

from sundial.client import SundialClient
from sundial.clock import ManualClock
from sundial.ids import JobKey
from sundial.model.job import Priority, Status
from sundial.model.payloads import (
    MAX_STORED_PAYLOAD_BYTES,
    PayloadRef,
    PayloadStorage,
    PayloadUnavailable,
)
from sundial.model.submission import SubmitJob
from sundial.transport.envelope import Envelope, PayloadRefView, envelope_body
from sundial.wiring import Dependencies, configure
from sundial.worker import Worker, fetch_payload
from tests.conftest import PAYLOAD_BUCKET
from tests.inprocess_api import InProcessApi
from tests.support import FakeLambdaContext, call_api, http_api_event, load_handler

submit_lambda = load_handler("submit")
jobs_lambda = load_handler("jobs")
workers_lambda = load_handler("workers")


def _text_of(size: int) -> str:
    return "x" * (size - 2)


def test_a_payload_over_5_mib_is_a_413_naming_the_field(deps: Dependencies) -> None:
    too_large = _text_of(MAX_STORED_PAYLOAD_BYTES + 1)
    one = {"queue": "default", "delay_seconds": 60, "payload": too_large}
    status, body = call_api(submit_lambda, "POST", "/jobs", body=one)
    assert status == 413
    assert body["errors"][0]["field"] == "payload"
    assert str(MAX_STORED_PAYLOAD_BYTES) in body["errors"][0]["reason"]
    batch = {"jobs": [{"queue": "default", "delay_seconds": 60}, one]}
    status, body = call_api(submit_lambda, "POST", "/jobs/batch", body=batch)
    assert status == 413 and body["errors"][0]["field"] == "jobs[1].payload"
    # And nothing was written
    assert boto3.client("dynamodb").scan(TableName=deps.settings.table_name)["Count"] == 0


def test_a_large_payload_is_accepted_and_get_returns_its_reference(deps: Dependencies) -> None:
    payload = {"blob": _text_of(1_000_000)}
    body = {"queue": "default", "delay_seconds": 60, "payload": payload}
    status, job = call_api(submit_lambda, "POST", "/jobs", body=body)
    assert status == 201, job
    status, detail = call_api(jobs_lambda, "GET", f"/jobs/{job['id']}", route="/jobs/{job_id}")
    assert status == 200
    compact = json.dumps(payload, separators=(",", ":")).encode()
    assert detail["payload"] is None
    ulid = JobKey.from_job_id(job["id"]).ulid
    expected = PayloadRef.of("default", ulid, compact.decode())
    assert detail["payload_ref"] == {
        "key": expected.key,
        "sha256": expected.sha256,
        "bytes": len(compact),
    }
    # The object is the job's own (its key names the job), and the job is written: referenced
    tags = boto3.client("s3").get_object_tagging(Bucket=PAYLOAD_BUCKET, Key=expected.key)
    assert tags["TagSet"] == [{"Key": "sundial-payload", "Value": "referenced"}]


def test_a_lease_carries_a_presigned_url_expiring_with_the_lease(deps: Dependencies) -> None:
    request = SubmitJob(
        queue="email", delay_seconds=0, payload={"n": 1}, payload_storage=PayloadStorage.S3
    )
    job = deps.jobs.submit(request).job
    event = http_api_event(
        "POST",
        "/queues/email/lease",
        body=json.dumps({"wait": 0, "lease_seconds": 120}),
        route="/queues/{queue}/lease",
    )
    response = workers_lambda.handler(event, FakeLambdaContext())
    [leased] = json.loads(response["body"])["jobs"]
    assert leased["job"]["payload_ref"]["key"] == job.payload_ref.key  # type: ignore[union-attr]
    url = urlsplit(leased["payload_url"])
    assert url.scheme == "https" and url.path.endswith(job.payload_ref.key)  # type: ignore[union-attr]
    query = parse_qs(url.query)
    assert query["X-Amz-Expires"] == ["120"] and query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]


def test_a_lease_presigns_only_the_payload_its_job_references(deps: Dependencies) -> None:
    # Given a default job whose payload is stored in S3, and an email job with an inline one
    stored = deps.jobs.submit(
        SubmitJob(
            queue="default",
            delay_seconds=600,
            payload={"secret": 1},
            payload_storage=PayloadStorage.S3,
        )
    ).job
    assert stored.payload_ref is not None
    mine = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=0, payload={"n": 1})).job
    # And a message a worker of email put on its own queue: its job's envelope, naming the
    # default job's object (found by a review: the lease presigned whatever key the message
    # named, under any queue's prefix)
    forged = json.loads(envelope_body(mine, attempt=1))
    forged["payload_ref"] = stored.payload_ref.as_json()
    sqs = boto3.client("sqs")
    url = deps.settings.queue_urls["email"]
    for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(forged))
    # When it leases the message
    event = http_api_event(
        "POST", "/queues/email/lease", body=json.dumps({"wait": 0}), route="/queues/{queue}/lease"
    )
    [leased] = json.loads(workers_lambda.handler(event, FakeLambdaContext())["body"])["jobs"]
    # Then no URL is presigned (its job references no stored payload), and the envelope
    # carries the job's own reference, none
    assert leased["job"]["id"] == mine.id
    assert leased["payload_url"] is None and leased["job"].get("payload_ref") is None


# -- a worker, with the payload bucket on a real HTTP endpoint (moto's server) ----------------


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 over HTTP, for the presigned GETs a worker makes with plain urllib3; the
    functions' S3 client is pointed at it (AWS_ENDPOINT_URL_S3), the rest stays in-process."""
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=PAYLOAD_BUCKET)
    try:
        yield endpoint
    finally:
        server.stop()


def _envelope(ref: PayloadRef) -> Envelope:
    return Envelope(
        id="AQ",
        queue="email",
        payload=None,
        payload_ref=PayloadRefView(**ref.as_json()),
        run_at="2026-11-21T12:00:00.000Z",
        attempt=1,
        max_attempts=1,
        priority=Priority.NORMAL,
        created_at="2026-11-21T12:00:00.000Z",
    )


def test_a_worker_runs_a_5_mib_payload_from_its_lease(
    environ: dict[str, str], clock: ManualClock, s3_server: str
) -> None:
    deps = configure(clock=clock, environ=environ)
    payload: JsonValue = {"blob": "y" * (MAX_STORED_PAYLOAD_BYTES - len('{"blob":""}'))}
    job_id = deps.jobs.submit(SubmitJob(queue="email", delay_seconds=0, payload=payload)).job.id
    seen: list[Any] = []

    def run(job: Envelope) -> int:
        seen.append(job.payload)
        return 1

    client = SundialClient(transport=InProcessApi())
    Worker(run, queue="email", client=client, burst=True, wait_seconds=0).run()
    assert seen == [payload]
    assert deps.jobs.get(job_id).status is Status.SUCCEEDED


def test_a_worker_refuses_an_altered_or_missing_payload(
    environ: dict[str, str], clock: ManualClock, s3_server: str
) -> None:
    deps = configure(clock=clock, environ=environ)
    assert deps.payloads is not None
    ref = deps.payloads.put("email", "01KAM3AAAAAAAAAAAAAAAAAAAA", '{"v":1}')
    url = deps.payloads.presigned_get(ref, expires_s=60)
    assert fetch_payload(_envelope(ref), url).payload == {"v": 1}
    s3 = boto3.client("s3", endpoint_url=s3_server)
    s3.put_object(Bucket=PAYLOAD_BUCKET, Key=ref.key, Body=b'{"v":2}')
    with pytest.raises(PayloadUnavailable, match="does not match"):
        fetch_payload(_envelope(ref), url)
    s3.delete_object(Bucket=PAYLOAD_BUCKET, Key=ref.key)
    with pytest.raises(PayloadUnavailable, match="missing"):
        fetch_payload(_envelope(ref), url)
    with pytest.raises(PayloadUnavailable, match="no payload_url"):
        fetch_payload(_envelope(ref), None)
