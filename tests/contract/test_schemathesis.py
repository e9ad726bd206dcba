"""The committed openapi.json against the real handlers (issue 15, item 8): schemathesis
generates requests for every operation from the document, each is sent to the Lambda the stack
routes it to (in-process, on moto), and every response passes schemathesis' checks: no 5xx, a
documented status code, content type and body schema, and no schema-valid request refused
(positive_data_acceptance: a 400 for data the document allows fails the run).

JSON Schema cannot state every rule the API enforces; those are documented in the document's
descriptions and custom `format`s, and drawn here by generators that follow them (schemathesis'
documented remedy: "extend generators to match runtime rules"):
- `date-time`: the RFC 3339 grammar, but at most 366 days after the test clock (the horizon is
  relative to now);
- `sundial-job-id`, `sundial-dag-id`: well-formed ids (the checksum), of jobs that may or may not
  exist, so 200/404/409;
- `cron`, `sundial-rate`: expressions that fire at most every 10 seconds;
- cross-field rules, applied to each generated case: a DAG's depends_on name earlier nodes of
  the same DAG; a lease token is this job's and a page cursor this queue's; a schedule's
  end_at leaves room for an occurrence; a retry policy's cap is at least its first delay; a
  lease's long poll does not wait (moto's wait runs on the frozen test clock).
Every other value is schemathesis' own.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core import NotSet
from schemathesis.core.transport import Response
from schemathesis.generation.case import Case
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_schema_conformance,
    status_code_conformance,
)

from sundial.api.openapi import (
    CRON_FORMAT,
    CURSOR_FORMAT,
    DAG_ID_FORMAT,
    JOB_ID_FORMAT,
    LEASE_FORMAT,
    RATE_FORMAT,
    configured_queues,
)
from sundial.clock import ManualClock, to_rfc3339
from sundial.ids import MAX_SHARDS, DagKey, JobKey
from sundial.model.submission import MAX_HORIZON_S, parse_rfc3339
from sundial.runs.leases import Lease
from sundial.services.cursors import encode_cursor
from sundial.services.dead_letters import DeadLetterFilter
from sundial.store.dead_letters import time_sk
from sundial.wiring import Dependencies, configure
from tests.conftest import PAYLOAD_BUCKET, START
from tests.support import (
    TABLE,
    FakeLambdaContext,
    create_queues,
    create_table,
    http_api_event,
    load_handler,
)

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "openapi.json"
QUEUES = configured_queues(ROOT / "cdk.json")
API_FUNCTIONS = ("submit", "jobs", "workers", "dags", "schedules", "queues")
# Examples per operation: bounded so the whole run stays near a minute on 2 cores.
EXAMPLES = 25
NEGATIVE_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

schema = schemathesis.openapi.from_path(DOCUMENT)
AnyCase = Case[Any]


def _routes() -> dict[tuple[str, str], Any]:
    """(METHOD, /path/{template}) -> the handler module that serves it, from each function's
    own resolver (so a route the stack sends elsewhere shows up as a missing key)."""
    routes = {}
    for name in API_FUNCTIONS:
        module = load_handler(name)
        for path, operations in module.app.get_openapi_schema().paths.items():
            for method in ("get", "post", "delete", "patch"):
                if getattr(operations, method) is not None:
                    routes[(method.upper(), path)] = module
    return routes


def _rfc3339(moment: datetime, offset_minutes: int, digits: int) -> str:
    tz = timezone(timedelta(minutes=offset_minutes))
    local = moment.astimezone(tz)
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if digits:
        text += "." + f"{local.microsecond:06d}"[:digits]
    if offset_minutes == 0 and digits % 2 == 0:
        return text + "Z"
    sign = "+" if offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


# Up to a year before the test clock (a past time means now) and up to the horizon after it.
_times = st.builds(
    _rfc3339,
    st.datetimes(
        min_value=(START - timedelta(days=365)).replace(tzinfo=None),
        max_value=(START + timedelta(seconds=MAX_HORIZON_S - 60)).replace(tzinfo=None),
        timezones=st.just(UTC),
    ),
    st.integers(-(23 * 60 + 59), 23 * 60 + 59),
    st.integers(0, 6),
)
_ulids = st.integers(0, 2**128 - 1).map(lambda n: str(__import__("ulid").ULID.from_int(n)))
_due = st.integers(0, 10**13 - 1)
_job_ids = st.builds(
    lambda shard, due, ulid: JobKey(shard, due, ulid).job_id,
    st.integers(0, MAX_SHARDS - 1),
    _due,
    _ulids,
)
_dag_ids = st.builds(
    lambda shard, due, base, count: DagKey(shard, due, str(base), count).dag_id,
    st.integers(0, MAX_SHARDS - 1),
    _due,
    st.integers(0, 2**112 - 1).map(
        lambda n: __import__("ulid").ULID.from_int(n << 16)  # a base ULID ends in 16 zero bits
    ),
    st.integers(1, 100),
)
_crons = st.builds(
    " ".join,
    st.tuples(
        st.sampled_from(["*", "0", "*/5", "15,45", "0-30/10"]),
        st.sampled_from(["*", "9", "0-23/2", "6,18"]),
        st.sampled_from(["*", "1", "1-28/7"]),
        st.sampled_from(["*", "1", "3-9", "*/2"]),
        st.sampled_from(["*", "1-5", "0", "6"]),
    ),
)
_rates = st.one_of(
    st.builds("{} seconds".format, st.integers(10, 86_400)),
    st.builds("{} minutes".format, st.integers(1, 1_440)),
    st.builds("{} hours".format, st.integers(1, 8_760)),
    st.builds("{} days".format, st.integers(1, 365)),
    st.just("1 day"),
)
FORMATS = {
    "date-time": _times,
    JOB_ID_FORMAT: _job_ids,
    DAG_ID_FORMAT: _dag_ids,
    CRON_FORMAT: _crons,
    RATE_FORMAT: _rates,
    # Replaced per case by the job's own token (below); any token shape until then.
    LEASE_FORMAT: st.just("e30"),
    CURSOR_FORMAT: st.just("e30"),
}


def _retry_caps(value: Any) -> None:
    """A retry policy's cap is at least its first delay, wherever a policy is in the body."""
    if isinstance(value, dict):
        first, cap = value.get("initial_delay_seconds", 10), value.get("max_delay_seconds", 3600)
        if isinstance(first, int | float) and isinstance(cap, int | float) and cap < first:
            value["max_delay_seconds"] = first
        for inner in value.values():
            _retry_caps(inner)
    elif isinstance(value, list):
        for inner in value:
            _retry_caps(inner)


def _cursor(path: str, query: dict[str, Any], path_parameters: dict[str, Any]) -> str:
    """A cursor each listing accepts: its own listing and queue, after some sort key."""
    if path in ("/schedules", "/dags"):
        return encode_cursor(str(query.get("queue")), "1795267200000#x", listing=path[1:])
    queue = path_parameters["queue"]
    if path == "/queues/{queue}/jobs":
        status = query.get("status")
        after = "1795267200000#x" if status == "dead" else "1795267200000#x@0"
        return encode_cursor(queue, after, listing=f"jobs:{status}")
    # A dead letters' cursor: of the query's time window, after a sort key inside it
    since, until = query.get("since"), query.get("until")
    window = DeadLetterFilter(
        since_ms=parse_rfc3339(since) if isinstance(since, str) else None,
        until_ms=parse_rfc3339(until) if isinstance(until, str) else None,
    )
    after = f"{time_sk(window.since_ms or 1795267200000)}#x"
    return encode_cursor(queue, after, listing=window.listing)


def _follow_cross_field_rules(case: AnyCase) -> AnyCase:
    path = case.operation.path
    if isinstance(case.query, dict) and "cursor" in case.query:
        case.query["cursor"] = _cursor(path, case.query, case.path_parameters or {})
    if path == "/queues/{queue}/jobs" and isinstance(case.query, dict):
        # A window ends after it starts, at most 7 days later.
        since, until = case.query.get("from"), case.query.get("to")
        if isinstance(since, str) and isinstance(until, str):
            case.query["to"] = to_rfc3339(parse_rfc3339(since) + 3_600_000)
    body: Any = case.body
    if not isinstance(body, dict):
        return case
    _retry_caps(body)
    if path == "/dags" and isinstance(body.get("nodes"), dict):
        # Each node may depend only on nodes before it: every name known, and no cycle.
        names = list(body["nodes"])
        for index, node in enumerate(body["nodes"].values()):
            if isinstance(node, dict) and "depends_on" in node:
                node["depends_on"] = [n for n in node["depends_on"] if n in names[:index]]
    elif path == "/schedules" and isinstance(body.get("end_at"), str):
        # An end leaves room for an occurrence: a year after the start and after now (the
        # longest rate is 365 days, and every generated cron fires within a year).
        start = body.get("start_at")
        start_ms = parse_rfc3339(start) if isinstance(start, str) else 0
        end_ms = max(start_ms, int(START.timestamp() * 1000)) + 367 * 86_400_000
        body["end_at"] = to_rfc3339(end_ms)
    elif path == "/queues/{queue}/lease":
        body["wait"] = 0
    elif "lease" in body:
        job_id = case.path_parameters["job_id"]
        body["lease"] = Lease(job_id, QUEUES[0], 1, "receipt", "runner").token()
    return case


@pytest.fixture
def api(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dependencies]:
    """The table and every queue in cdk.json (one with a priority queue, as `demo` has), on
    moto, and Sundial wired to them as the API functions wire it."""
    from moto import mock_aws  # noqa: PLC0415 - entered here so the mock spans the whole run

    with mock_aws():
        create_table(boto3.client("dynamodb"))
        sqs = boto3.client("sqs")
        urls, dead_letter_urls = create_queues(sqs, QUEUES)
        priority, _ = create_queues(sqs, [f"{q}-priority" for q in QUEUES[:1]])
        retry = {"max_attempts": 3, "initial_delay_seconds": 10, "factor": 2.0}
        environ = {
            "SUNDIAL_TABLE_NAME": TABLE,
            "SUNDIAL_QUEUE_URLS": json.dumps(urls),
            "SUNDIAL_DEAD_LETTER_URLS": json.dumps(dead_letter_urls),
            "SUNDIAL_PRIORITY_QUEUE_URLS": json.dumps(
                {name.removesuffix("-priority"): url for name, url in priority.items()}
            ),
            "SUNDIAL_RETRY_DEFAULTS": json.dumps(
                {q: {**retry, "max_delay_seconds": 3600} for q in QUEUES}
            ),
            "SUNDIAL_SHARD_COUNT": "8",
            "SUNDIAL_RETENTION_DAYS": "30",
            "SUNDIAL_SWEEPER_FUNCTION": "sundial-sweeper",
            "SUNDIAL_SHARDS_PER_SWEEPER": "4",
            # As the stack configures every API function: payloads may be stored in S3.
            "SUNDIAL_PAYLOAD_BUCKET": PAYLOAD_BUCKET,
        }
        boto3.client("s3").create_bucket(Bucket=PAYLOAD_BUCKET)
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        yield configure(clock=clock, environ=dict(os.environ))


@pytest.fixture
def formats() -> Iterator[None]:
    for name, strategy in FORMATS.items():
        schemathesis.openapi.format(name, strategy)
    yield
    from schemathesis.specs.openapi.formats import unregister_string_format  # noqa: PLC0415

    for name in FORMATS:
        unregister_string_format(name)


def _query_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _call(routes: dict[tuple[str, str], Any], case: AnyCase) -> Response:
    """Send the case to its function as API Gateway would, and wrap the answer for checks."""
    module = routes[(case.method, case.operation.path)]
    raw = case.body if isinstance(case.body, bytes) else None
    # A body that is bytes (negative cases: not JSON, maybe not UTF-8) arrives base64-encoded,
    # as API Gateway passes a body it does not take for text.
    body = (
        None
        # NotSet: an optional body left out (POST /queues/{queue}/dead/replay)
        if case.body is None or isinstance(case.body, NotSet) or not case.operation.body
        else base64.b64encode(raw).decode()
        if raw is not None
        else json.dumps(case.body)
    )
    query = {
        k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (case.query or {}).items()
    }
    event = http_api_event(
        case.method, case.formatted_path, body=body, route=case.operation.path, query=query or None
    )
    event["isBase64Encoded"] = raw is not None
    started = time.perf_counter()
    answer = module.handler(event, FakeLambdaContext())
    elapsed = time.perf_counter() - started
    headers = {k.lower(): [v] for k, v in (answer.get("headers") or {}).items()}
    request = requests.Request(
        case.method, f"https://api.example{case.formatted_path}", params=query, data=raw or body
    ).prepare()
    content = (answer.get("body") or "").encode()
    return Response(
        status_code=answer["statusCode"],
        headers=headers,
        content=content,
        request=request,
        elapsed=elapsed,
        verify=True,
    )


def _checker(
    routes: dict[tuple[str, str], Any], operation: Any, seen: list[int], mode: GenerationMode
) -> Any:
    strategy = operation.as_strategy(mode)
    if mode is GenerationMode.POSITIVE:
        # The rules above complete schema-valid data; schema-invalid data is sent as generated.
        strategy = strategy.map(_follow_cross_field_rules)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(case=strategy)
    def check(case: AnyCase) -> None:
        assert case.meta is not None  # positive_data_acceptance needs to know it is positive
        response = _call(routes, case)
        seen.append(int(response.status_code))
        # ignored_auth sends each request again without credentials and expects a 401/403: IAM
        # auth is API Gateway's (the stack's routes, tests/infrastructure), never the function's,
        # and there is no gateway in-process to refuse it. Every other check runs.
        if mode is GenerationMode.POSITIVE:
            case.validate_response(response, excluded_checks=[ignored_auth])
        else:
            # Schema-invalid requests: never a 5xx, and always a documented, well-formed answer.
            # (negative_data_rejection is not asked for: the API is lenient where that is
            # harmless, e.g. null for an optional field the document lists without null.)
            case.validate_response(response, checks=NEGATIVE_CHECKS)

    return check


def test_every_operation_conforms_to_openapi_json(api: Dependencies, formats: None) -> None:
    # Given every operation of the committed document, and the function that serves each
    routes = _routes()
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert {(o.method.upper(), o.path) for o in operations} == set(routes)
    statuses: dict[str, list[int]] = {}
    failures: dict[str, str] = {}
    # When schemathesis generates requests for each and the handlers answer them
    for mode, operation in itertools.product(GenerationMode, operations):
        label = f"{operation.method.upper()} {operation.path} ({mode.value})"
        seen = statuses.setdefault(label, [])
        try:
            _checker(routes, operation, seen, mode)()
        except (Exception, BaseExceptionGroup) as error:
            failures[label] = f"{type(error).__name__}: {str(error)[:3000]}"
    # Then every check passed on every operation
    assert not failures, "\n\n".join(f"{k}\n{v}" for k, v in failures.items())
    # (the figures, for the record: requests per operation and the statuses they got)
    print(f"{len(operations)} operations, {sum(map(len, statuses.values()))} requests")
    for label, codes in statuses.items():
        print(f"  {label}: {len(codes)} requests, statuses {sorted(set(codes))}")
    assert all(statuses.values()), "an operation got no request"
