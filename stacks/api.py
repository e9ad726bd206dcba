"""The public HTTPS API: an API Gateway HTTP API with IAM (SigV4) auth on every route."""

from __future__ import annotations

import json

import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.log_groups import operational_log_group
from stacks.settings import ApiSettings

# One JSON object per request. HTTP APIs require $context.requestId (or extendedRequestId).
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "requestTime": "$context.requestTime",
        "sourceIp": "$context.identity.sourceIp",
        "caller": "$context.identity.caller",
        "userArn": "$context.identity.userArn",
        "routeKey": "$context.routeKey",
        "path": "$context.path",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "responseLatency": "$context.responseLatency",
        "integrationLatency": "$context.integration.latency",
        "integrationError": "$context.integrationErrorMessage",
        "error": "$context.error.message",
    },
    separators=(",", ":"),
)

# Stage-wide defaults (cdk.json "api" sets them: stacks.settings.ApiSettings). Each request
# costs a Lambda invoke and DynamoDB writes, so keep a ceiling below the account's quota.
DEFAULT_RATE_LIMIT = ApiSettings().throttle_rate_limit
DEFAULT_BURST_LIMIT = ApiSettings().throttle_burst_limit


class JobsApi(Construct):
    """Routes `/jobs` and `/queues` to the submit, jobs and workers functions, and `/dags` to
    the dags function. Callers sign requests with SigV4 and need `execute-api:Invoke` on the
    route."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        submit: lambda_.IFunction,
        jobs: lambda_.IFunction,
        workers: lambda_.IFunction,
        dags: lambda_.IFunction,
        schedules: lambda_.IFunction | None = None,
        queues: lambda_.IFunction | None = None,
        rate_limit: int = DEFAULT_RATE_LIMIT,
        burst_limit: int = DEFAULT_BURST_LIMIT,
    ) -> None:
        super().__init__(scope, construct_id)
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="Sundial jobs API",
            default_authorizer=authorizers.HttpIamAuthorizer(),
            create_default_stage=False,
        )
        self.access_logs = operational_log_group(self, "AccessLogs")
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=rate_limit, burst_limit=burst_limit),
            access_log_settings=_AccessLogSettings(self.access_logs),
        )
        self._add_job_routes(submit=submit, jobs=jobs, workers=workers, dags=dags)
        get, post, delete = (
            apigwv2.HttpMethod.GET,
            apigwv2.HttpMethod.POST,
            apigwv2.HttpMethod.DELETE,
        )
        if schedules is not None:
            self._add_routes(
                integrations.HttpLambdaIntegration("Schedules", schedules),
                {
                    "/schedules": [get, post],
                    "/schedules/{schedule_id}": [get, delete, apigwv2.HttpMethod.PATCH],
                    "/schedules/{schedule_id}/runs": [get],
                    "/schedules/{schedule_id}/pause": [post],
                    "/schedules/{schedule_id}/resume": [post],
                },
            )
        if queues is not None:
            self._add_routes(
                integrations.HttpLambdaIntegration("Queues", queues),
                {
                    "/queues": [get],
                    "/queues/{queue}": [get],
                    "/queues/{queue}/jobs": [get],
                    "/queues/{queue}/pause": [post],
                    "/queues/{queue}/resume": [post],
                },
            )

    def _add_job_routes(
        self,
        *,
        submit: lambda_.IFunction,
        jobs: lambda_.IFunction,
        workers: lambda_.IFunction,
        dags: lambda_.IFunction,
    ) -> None:
        """/jobs, /queues/{queue}/dead and /lease, /dags: one integration per function."""
        get, post, delete = (
            apigwv2.HttpMethod.GET,
            apigwv2.HttpMethod.POST,
            apigwv2.HttpMethod.DELETE,
        )
        self._add_routes(
            integrations.HttpLambdaIntegration("Submit", submit),
            {"/jobs": [post], "/jobs/batch": [post]},
        )
        self._add_routes(
            integrations.HttpLambdaIntegration("Jobs", jobs),
            {
                "/jobs/{job_id}": [get, delete, apigwv2.HttpMethod.PATCH],
                "/jobs/{job_id}/run-now": [post],
                "/jobs/{job_id}/retry": [post],
                "/jobs/{job_id}/pause": [post],
                "/jobs/{job_id}/resume": [post],
                "/queues/{queue}/dead": [get, delete],
                "/queues/{queue}/dead/replay": [post],
            },
        )
        self._add_routes(
            integrations.HttpLambdaIntegration("Workers", workers),
            {
                "/queues/{queue}/lease": [post],
                "/jobs/{job_id}/heartbeat": [post],
                "/jobs/{job_id}/ack": [post],
                "/jobs/{job_id}/nack": [post],
            },
        )
        self._add_routes(
            integrations.HttpLambdaIntegration("Dags", dags),
            {
                "/dags": [get, post],
                "/dags/{dag_id}": [get, delete],
                "/dags/{dag_id}/pause": [post],
                "/dags/{dag_id}/resume": [post],
            },
        )

    def _add_routes(
        self,
        integration: integrations.HttpLambdaIntegration,
        routes: dict[str, list[apigwv2.HttpMethod]],
    ) -> None:
        for path, methods in routes.items():
            self.http_api.add_routes(path=path, methods=methods, integration=integration)

    @property
    def url(self) -> str:
        """The base URL of the default stage, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com/."""
        return self.stage.url


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """JSON access logs into a CloudWatch log group (IAccessLogSettings is a jsii interface)."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT)
