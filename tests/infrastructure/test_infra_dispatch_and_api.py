"""The one-minute dispatch tick and the IAM-authorized HTTP API."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from tests.infrastructure.synthesis import Synthesized

pytestmark = pytest.mark.infra

ROUTES = {
    "POST /jobs": "submit",
    "POST /jobs/batch": "submit",
    "POST /jobs/{job_id}/retry": "jobs",
    "POST /jobs/{job_id}/pause": "jobs",
    "POST /jobs/{job_id}/resume": "jobs",
    "POST /schedules": "schedules",
    "GET /schedules": "schedules",
    "GET /schedules/{schedule_id}": "schedules",
    "DELETE /schedules/{schedule_id}": "schedules",
    "PATCH /schedules/{schedule_id}": "schedules",
    "GET /schedules/{schedule_id}/runs": "schedules",
    "POST /schedules/{schedule_id}/pause": "schedules",
    "POST /schedules/{schedule_id}/resume": "schedules",
    "GET /queues": "queues",
    "GET /queues/{queue}": "queues",
    "GET /queues/{queue}/jobs": "queues",
    "POST /queues/{queue}/pause": "queues",
    "POST /queues/{queue}/resume": "queues",
    "GET /jobs/{job_id}": "jobs",
    "DELETE /jobs/{job_id}": "jobs",
    "PATCH /jobs/{job_id}": "jobs",
    "POST /jobs/{job_id}/run-now": "jobs",
    "GET /queues/{queue}/dead": "jobs",
    "DELETE /queues/{queue}/dead": "jobs",
    "POST /queues/{queue}/dead/replay": "jobs",
    "POST /queues/{queue}/lease": "workers",
    "POST /jobs/{job_id}/heartbeat": "workers",
    "POST /jobs/{job_id}/ack": "workers",
    "POST /jobs/{job_id}/nack": "workers",
    "POST /dags": "dags",
    "GET /dags": "dags",
    "GET /dags/{dag_id}": "dags",
    "DELETE /dags/{dag_id}": "dags",
    "POST /dags/{dag_id}/pause": "dags",
    "POST /dags/{dag_id}/resume": "dags",
}


def test_rule_ticks_every_minute_into_fanout(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    # When we look at the EventBridge rules
    # Then one rule fires every minute and targets the fanout function (the only other rule
    # is the history's hourly replay of failed batches: test_infra_history.py)
    synthesized.template.resource_count_is("AWS::Events::Rule", 2)
    synthesized.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "State": "ENABLED",
            "Targets": [
                Match.object_like(
                    {"Arn": {"Fn::GetAtt": [synthesized.function_id("fanout"), "Arn"]}}
                )
            ],
        },
    )
    # And EventBridge is allowed to invoke it
    synthesized.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "Principal": "events.amazonaws.com",
            "FunctionName": {"Fn::GetAtt": [synthesized.function_id("fanout"), "Arn"]},
        },
    )


def test_api_is_an_http_api(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    # Then the front door is one API Gateway HTTP API (not a REST API)
    synthesized.template.resource_count_is("AWS::ApiGatewayV2::Api", 1)
    synthesized.template.has_resource_properties("AWS::ApiGatewayV2::Api", {"ProtocolType": "HTTP"})
    synthesized.template.resource_count_is("AWS::ApiGateway::RestApi", 0)


def test_routes_are_exactly_the_job_and_dag_routes_and_all_use_iam(
    synthesized: Synthesized,
) -> None:
    # Given the synthesized Sundial stack
    routes = synthesized.resources("AWS::ApiGatewayV2::Route").values()

    # When we list the routes
    # Then they are the job and DAG routes, each with SigV4 (AWS_IAM) authorization
    assert {route["Properties"]["RouteKey"] for route in routes} == set(ROUTES)
    for route in routes:
        assert route["Properties"]["AuthorizationType"] == "AWS_IAM", route


@pytest.mark.parametrize("route_key", sorted(ROUTES))
def test_route_integrates_its_function(synthesized: Synthesized, route_key: str) -> None:
    # Given a route
    routes = synthesized.resources("AWS::ApiGatewayV2::Route").values()
    route = next(r for r in routes if r["Properties"]["RouteKey"] == route_key)
    integration_id = route["Properties"]["Target"]["Fn::Join"][1][1]["Ref"]

    # When we follow its integration
    integration = synthesized.resources("AWS::ApiGatewayV2::Integration")[integration_id]

    # Then it proxies to the right function
    assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"
    assert integration["Properties"]["IntegrationUri"] == {
        "Fn::GetAtt": [synthesized.function_id(ROUTES[route_key]), "Arn"]
    }


def test_default_stage_deploys_logs_json_and_throttles(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    stages = list(synthesized.resources("AWS::ApiGatewayV2::Stage").values())

    # When we read the one stage
    assert len(stages) == 1
    stage = stages[0]["Properties"]

    # Then it is the auto-deployed $default stage with a throttle
    assert stage["StageName"] == "$default"
    assert stage["AutoDeploy"] is True
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0
    assert stage["DefaultRouteSettings"]["ThrottlingBurstLimit"] > 0
    # And it writes one JSON object per request, with the request id, to a log group
    access_log = stage["AccessLogSettings"]
    assert json.loads(access_log["Format"])["requestId"] == "$context.requestId"
    log_group_id = synthesized.logical_id("Api/AccessLogs")
    assert access_log["DestinationArn"] == {"Fn::GetAtt": [log_group_id, "Arn"]}


def test_stack_outputs(synthesized: Synthesized) -> None:
    # Given the synthesized Sundial stack
    outputs = synthesized.template.to_json()["Outputs"]

    # Then it outputs the API URL, the table name and the queue URLs
    assert {"ApiUrl", "TableName", "QueueUrls"} <= set(outputs)
    assert outputs["TableName"]["Value"] == {"Ref": synthesized.logical_id("JobTable/Table")}
