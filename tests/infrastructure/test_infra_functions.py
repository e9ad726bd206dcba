"""The Lambda functions: runtime, architecture, handler, tracing, layers, environment."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks.functions import dispatch_json, retry_defaults_json
from stacks.settings import SundialSettings
from sundial.quotas import QueueQuota, quotas_json
from sundial.settings import Settings
from tests.infrastructure.synthesis import REPO_ROOT, Synthesized, cdk_json_context

pytestmark = pytest.mark.infra

FUNCTIONS = [
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
]
TIMEOUTS = {
    "submit": 10,
    "jobs": 10,
    "dags": 10,
    "fanout": 30,
    "sweeper": 60,
    "workers": 29,
    "dead_letters": 10,
    "schedules": 29,
    "queues": 29,
    "example_consumer": 5,
}
# CPU-bound paths get more memory, so more CPU (stacks/functions.py; BENCHMARKS.md).
MEMORY_MB = {"submit": 512, "sweeper": 1769}
COMMON_ENVIRONMENT = {
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_LOG_LEVEL",
    "SUNDIAL_TABLE_NAME",
    "SUNDIAL_QUEUE_URLS",
    "SUNDIAL_DEAD_LETTER_URLS",
    "SUNDIAL_PRIORITY_QUEUE_URLS",
    "SUNDIAL_RETRY_DEFAULTS",
    "SUNDIAL_SHARD_COUNT",
    "SUNDIAL_RETENTION_DAYS",
}
FANOUT_ONLY_ENVIRONMENT = {"SUNDIAL_SWEEPER_FUNCTION", "SUNDIAL_SHARDS_PER_SWEEPER"}
# The API functions read the queues' access lists (stacks/access.py) and their quotas (a
# payload limit binds every route that takes a payload: test_every_function_serving_a_route_
# that_takes_a_payload_gets_the_quotas).
API_FUNCTIONS = {"submit", "jobs", "dags", "workers", "schedules", "queues"}
QUOTA_FUNCTIONS = API_FUNCTIONS
# Those that store, read or presign payloads stored in S3 (stacks/payload_bucket.py).
PAYLOAD_FUNCTIONS = {"submit", "jobs", "workers", "example_consumer"}
SWEEPER_ONLY_ENVIRONMENT = {"SUNDIAL_DISPATCH"}
QUEUE_NAMES = ["default", "demo", "email"]
RETRY_KEYS = {"max_attempts", "initial_delay_seconds", "factor", "max_delay_seconds"}


def _render_urls(value: dict[str, Any]) -> dict[str, str]:
    """A {name: URL} JSON variable (a CloudFormation Fn::Join), with a placeholder URL in place
    of each queue Ref, parsed."""
    parts = value["Fn::Join"][1]
    rendered = "".join(
        part if isinstance(part, str) else f"https://sqs/{part['Ref']}" for part in parts
    )
    urls: dict[str, str] = json.loads(rendered)
    return urls


def test_exactly_the_sundial_functions(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    # When we count Lambda functions
    # Then there are the nine Sundial handlers, the history recorder and the example consumer,
    # and no helper functions
    # (custom resources, log retention)
    synthesized.template.resource_count_is("AWS::Lambda::Function", len(FUNCTIONS) + 1)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_runtime_handler_and_tracing(synthesized: Synthesized, name: str) -> None:
    # Given one of the Sundial functions
    # When we read its properties
    properties = synthesized.function_properties(name)

    # Then it runs on the runtime and architecture the dependencies layer is built for
    assert properties["Runtime"] == "python3.13"
    assert properties["Architectures"] == ["arm64"]
    assert properties["Handler"] == "handler.handler"
    assert properties["Timeout"] == TIMEOUTS[name]
    assert properties["MemorySize"] == MEMORY_MB.get(name, 256)
    assert properties["TracingConfig"] == {"Mode": "Active"}
    # And it logs to its own log group, and loads the deps and domain layers
    assert "LogGroup" in properties["LoggingConfig"]
    assert properties["Layers"] == [
        {"Ref": synthesized.logical_id("Layers/Deps")},
        {"Ref": synthesized.logical_id("Layers/Domain")},
    ]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_environment_names(synthesized: Synthesized, name: str) -> None:
    # Given one of the Sundial functions
    # When we read its environment
    variables = synthesized.function_properties(name)["Environment"]["Variables"]

    # Then it has exactly the variables its handler reads
    only = {"fanout": FANOUT_ONLY_ENVIRONMENT, "sweeper": SWEEPER_ONLY_ENVIRONMENT}
    expected = COMMON_ENVIRONMENT | only.get(name, set())
    expected |= {"SUNDIAL_QUOTAS"} if name in QUOTA_FUNCTIONS else set()
    expected |= {"SUNDIAL_ACCESS"} if name in API_FUNCTIONS else set()
    expected |= {"SUNDIAL_PAYLOAD_BUCKET"} if name in PAYLOAD_FUNCTIONS else set()
    assert set(variables) == expected
    assert variables["POWERTOOLS_SERVICE_NAME"] == "sundial"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Sundial"
    assert variables["POWERTOOLS_LOG_LEVEL"] == "INFO"
    assert variables["SUNDIAL_SHARD_COUNT"] == "64"
    assert variables["SUNDIAL_RETENTION_DAYS"] == "30"


def test_queue_urls_variable_is_a_json_object_of_every_queue(synthesized: Synthesized) -> None:
    # Given the submit function's SUNDIAL_QUEUE_URLS, a CloudFormation Fn::Join
    variables = synthesized.function_properties("submit")["Environment"]["Variables"]

    # When we put a placeholder URL in place of each queue Ref
    urls = _render_urls(variables["SUNDIAL_QUEUE_URLS"])

    # Then it parses as {queue name: URL of that queue}
    assert urls == {
        name: f"https://sqs/{synthesized.logical_id(f'JobQueues/{name}')}" for name in QUEUE_NAMES
    }


def test_priority_queue_urls_variable_maps_the_queues_that_have_one(
    synthesized: Synthesized,
) -> None:
    # Given the submit function's SUNDIAL_PRIORITY_QUEUE_URLS
    variables = synthesized.function_properties("submit")["Environment"]["Variables"]

    # When we put a placeholder URL in place of each queue Ref
    urls = _render_urls(variables["SUNDIAL_PRIORITY_QUEUE_URLS"])

    # Then it maps each queue configured with priority_queue to its priority queue
    configured = cdk_json_context()["sundial"]["queues"]
    with_priority = sorted(n for n, q in configured.items() if q.get("priority_queue"))
    assert with_priority == ["demo"]
    assert urls == {
        name: f"https://sqs/{synthesized.logical_id(f'JobQueues/{name}-priority')}"
        for name in with_priority
    }


@pytest.mark.parametrize("name", FUNCTIONS)
def test_dead_letter_urls_variable_maps_every_queue_to_its_dlq(
    synthesized: Synthesized, name: str
) -> None:
    # Given one of the Sundial functions' SUNDIAL_DEAD_LETTER_URLS, a CloudFormation Fn::Join
    variables = synthesized.function_properties(name)["Environment"]["Variables"]

    # When we put a placeholder URL in place of each queue Ref
    urls = _render_urls(variables["SUNDIAL_DEAD_LETTER_URLS"])

    # Then it parses as {queue name: URL of that queue's DLQ}, never of a job queue
    assert urls == {
        queue: f"https://sqs/{synthesized.logical_id(f'JobQueues/{queue}-dlq')}"
        for queue in QUEUE_NAMES
    }


@pytest.mark.parametrize("name", FUNCTIONS)
def test_retry_defaults_variable_is_compact_json_per_queue(
    synthesized: Synthesized, name: str
) -> None:
    # Given one of the Sundial functions' SUNDIAL_RETRY_DEFAULTS
    value = synthesized.function_properties(name)["Environment"]["Variables"][
        "SUNDIAL_RETRY_DEFAULTS"
    ]

    # When we parse it
    defaults = json.loads(value)

    # Then it is a plain string (no tokens), compact with sorted keys
    assert value == json.dumps(defaults, sort_keys=True, separators=(",", ":"))
    # And it holds every queue's four retry settings (the defaults: cdk.json sets none)
    assert sorted(defaults) == QUEUE_NAMES
    for queue, retry in defaults.items():
        assert set(retry) == RETRY_KEYS, queue
        assert retry == {
            "max_attempts": 3,
            "initial_delay_seconds": 10,
            "factor": 2.0,
            "max_delay_seconds": 3600,
        }, queue
    assert not any("retry" in queue for queue in cdk_json_context()["sundial"]["queues"].values())


def test_fanout_knows_the_sweeper_and_the_group_size(synthesized: Synthesized) -> None:
    # Given the fanout function
    variables = synthesized.function_properties("fanout")["Environment"]["Variables"]

    # Then it is told which function to start, and how many shards each sweeper takes
    assert variables["SUNDIAL_SWEEPER_FUNCTION"] == {"Ref": synthesized.function_id("sweeper")}
    assert variables["SUNDIAL_SHARDS_PER_SWEEPER"] == "8"


def _routes_by_function(synthesized: Synthesized) -> dict[str, set[str]]:
    """{function logical id: the route keys ("PATCH /jobs/{job_id}") the API sends it}, read
    from the synthesized routes and their Lambda integrations."""
    integrations = {
        logical_id: resource["Properties"]["IntegrationUri"]["Fn::GetAtt"][0]
        for logical_id, resource in synthesized.resources("AWS::ApiGatewayV2::Integration").items()
    }
    served: dict[str, set[str]] = {}
    for route in synthesized.resources("AWS::ApiGatewayV2::Route").values():
        target = route["Properties"]["Target"]["Fn::Join"][1][1]["Ref"]
        served.setdefault(integrations[target], set()).add(route["Properties"]["RouteKey"])
    return served


def _takes_a_payload(schema: Any, components: dict[str, Any]) -> bool:
    """Whether a request body schema has a `payload` anywhere (a batch's jobs, a DAG's nodes)."""
    pending, seen = [schema], set()
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending += node
        elif isinstance(node, dict):
            ref = node.get("$ref")
            if ref is not None:
                if ref not in seen:
                    seen.add(ref)
                    pending.append(components[ref.rsplit("/", 1)[-1]])
                continue
            if "payload" in node.get("properties", {}):
                return True
            pending += node.values()
    return False


def test_every_function_serving_a_route_that_takes_a_payload_gets_the_quotas(
    synthesized: Synthesized,
) -> None:
    """Issue 25, item 9: PATCH /jobs/{id} (the jobs function) wrote a payload over its queue's
    max_payload_bytes, because only the submit, dags and schedules functions had the quotas."""
    # Given each route of the synthesized API, the function it invokes, and whether its
    # request body (openapi.json, generated from the code) carries a payload
    document = json.loads((REPO_ROOT / "openapi.json").read_text())
    components = document["components"]["schemas"]
    takes_payload = {
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if _takes_a_payload(operation.get("requestBody", {}), components)
    }
    served = _routes_by_function(synthesized)
    assert {"PATCH /jobs/{job_id}", "POST /jobs"} <= takes_payload
    assert takes_payload <= set().union(*served.values()), "a payload route is not deployed"
    # Then every function that serves one knows the queues' quotas, as the stack declares them
    expected = quotas_json(synthesized.stack.sundial.settings.queues)
    functions = synthesized.resources("AWS::Lambda::Function")
    missing = sorted(
        f"{function_id} ({', '.join(sorted(routes & takes_payload))})"
        for function_id, routes in served.items()
        if routes & takes_payload
        and functions[function_id]["Properties"]["Environment"]["Variables"].get("SUNDIAL_QUOTAS")
        != expected
    )
    assert missing == []


@pytest.mark.parametrize("name", sorted(QUOTA_FUNCTIONS))
def test_quotas_reach_the_functions_that_create_jobs(synthesized: Synthesized, name: str) -> None:
    # Given cdk.json, whose queues declare no quota
    variables = synthesized.function_properties(name)["Environment"]["Variables"]
    # Then the function is told so (an empty object: no queue is limited)
    assert variables["SUNDIAL_QUOTAS"] == "{}"
    # And with a queue that declares quotas, the variable carries just its limits, as plain
    # JSON the runtime's Settings read back
    raw = cdk_json_context()["sundial"]
    raw["queues"]["email"] |= {"max_submissions_per_second": 200, "max_payload_bytes": 4096}
    value = quotas_json(SundialSettings.from_context(raw).queues)
    assert json.loads(value) == {
        "email": {"max_submissions_per_second": 200, "max_payload_bytes": 4096}
    }
    assert Settings.model_validate(
        {"table_name": "jobs", "queue_urls": {"email": "u"}, "quotas": value}
    ).quotas["email"] == QueueQuota(max_submissions_per_second=200, max_payload_bytes=4096)


def test_retry_defaults_carry_each_queues_own_retry_settings() -> None:
    # Given settings where the email queue overrides its retry defaults
    raw = cdk_json_context()["sundial"]
    raw["queues"]["email"] = raw["queues"]["email"] | {
        "retry": {"max_attempts": 7, "initial_delay_seconds": 30, "factor": 3}
    }
    settings = SundialSettings.from_context(raw)

    # When the SUNDIAL_RETRY_DEFAULTS value is built from them
    defaults = json.loads(retry_defaults_json(settings.queues))

    # Then the email queue has its own values (defaults for what it leaves out)
    assert defaults["email"] == {
        "max_attempts": 7,
        "initial_delay_seconds": 30,
        "factor": 3.0,
        "max_delay_seconds": 3600,
    }
    # And the other queues keep the defaults
    assert defaults["demo"]["max_attempts"] == 3


def test_the_sweeper_gets_each_queues_dispatch_cap_and_weight() -> None:
    # Given settings where `email` is capped at 50 jobs a second with weight 3, and `demo`
    # only has a weight
    raw = cdk_json_context()["sundial"]
    raw["queues"]["email"] |= {"max_dispatch_per_second": 50, "dispatch_weight": 3}
    raw["queues"]["demo"] |= {"dispatch_weight": 2}
    settings = SundialSettings.from_context(raw)

    # When the sweeper's SUNDIAL_DISPATCH is built from them
    value = dispatch_json(settings.queues)

    # Then it names only the queues that differ from the defaults (uncapped, weight 1), and
    # the runtime reads it back as configured
    assert json.loads(value) == {
        "demo": {"max_per_second": None, "weight": 2},
        "email": {"max_per_second": 50, "weight": 3},
    }
    runtime = Settings.model_validate(
        {"table_name": "jobs", "queue_urls": {"email": "u"}, "dispatch": value}
    )
    assert runtime.dispatch["email"].max_per_second == 50
    assert runtime.dispatch["demo"].weight == 2


def test_the_synthesized_sweeper_has_no_caps_by_default(synthesized: Synthesized) -> None:
    variables = synthesized.function_properties("sweeper")["Environment"]["Variables"]
    assert variables["SUNDIAL_DISPATCH"] == "{}"
