"""The public HTTPS API: an API Gateway HTTP API with IAM (SigV4) auth on every route."""

from __future__ import annotations

import json

import jsii
from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.settings import LOG_RETENTION

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

# Stage-wide defaults. Each request costs a Lambda invoke and DynamoDB writes, so keep a
# ceiling well below the account's API Gateway quota; raise it for load tests.
DEFAULT_RATE_LIMIT = 1000
DEFAULT_BURST_LIMIT = 500


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
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=rate_limit, burst_limit=burst_limit),
            access_log_settings=_AccessLogSettings(self.access_logs),
        )

        submit_integration = integrations.HttpLambdaIntegration("Submit", submit)
        jobs_integration = integrations.HttpLambdaIntegration("Jobs", jobs)
        self.http_api.add_routes(
            path="/jobs", methods=[apigwv2.HttpMethod.POST], integration=submit_integration
        )
        self.http_api.add_routes(
            path="/jobs/batch", methods=[apigwv2.HttpMethod.POST], integration=submit_integration
        )
        self.http_api.add_routes(
            path="/jobs/{job_id}",
            methods=[apigwv2.HttpMethod.GET, apigwv2.HttpMethod.DELETE],
            integration=jobs_integration,
        )
        self.http_api.add_routes(
            path="/jobs/{job_id}/retry",
            methods=[apigwv2.HttpMethod.POST],
            integration=jobs_integration,
        )
        self.http_api.add_routes(
            path="/queues/{queue}/dead",
            methods=[apigwv2.HttpMethod.GET, apigwv2.HttpMethod.DELETE],
            integration=jobs_integration,
        )
        self.http_api.add_routes(
            path="/queues/{queue}/dead/replay",
            methods=[apigwv2.HttpMethod.POST],
            integration=jobs_integration,
        )
        workers_integration = integrations.HttpLambdaIntegration("Workers", workers)
        self.http_api.add_routes(
            path="/queues/{queue}/lease",
            methods=[apigwv2.HttpMethod.POST],
            integration=workers_integration,
        )
        for action in ("heartbeat", "ack", "nack"):
            self.http_api.add_routes(
                path=f"/jobs/{{job_id}}/{action}",
                methods=[apigwv2.HttpMethod.POST],
                integration=workers_integration,
            )
        dags_integration = integrations.HttpLambdaIntegration("Dags", dags)
        self.http_api.add_routes(
            path="/dags", methods=[apigwv2.HttpMethod.POST], integration=dags_integration
        )
        self.http_api.add_routes(
            path="/dags/{dag_id}",
            methods=[apigwv2.HttpMethod.GET, apigwv2.HttpMethod.DELETE],
            integration=dags_integration,
        )
        for action in ("pause", "resume"):
            self.http_api.add_routes(
                path=f"/dags/{{dag_id}}/{action}",
                methods=[apigwv2.HttpMethod.POST],
                integration=dags_integration,
            )
        for action in ("pause", "resume"):
            self.http_api.add_routes(
                path=f"/jobs/{{job_id}}/{action}",
                methods=[apigwv2.HttpMethod.POST],
                integration=jobs_integration,
            )
        if schedules is not None:
            self._add_routes(
                integrations.HttpLambdaIntegration("Schedules", schedules),
                {
                    "/schedules": [apigwv2.HttpMethod.POST],
                    "/schedules/{schedule_id}": [apigwv2.HttpMethod.GET, apigwv2.HttpMethod.DELETE],
                    "/schedules/{schedule_id}/runs": [apigwv2.HttpMethod.GET],
                    "/schedules/{schedule_id}/pause": [apigwv2.HttpMethod.POST],
                    "/schedules/{schedule_id}/resume": [apigwv2.HttpMethod.POST],
                },
            )
        if queues is not None:
            self._add_routes(
                integrations.HttpLambdaIntegration("Queues", queues),
                {
                    "/queues/{queue}": [apigwv2.HttpMethod.GET],
                    "/queues/{queue}/pause": [apigwv2.HttpMethod.POST],
                    "/queues/{queue}/resume": [apigwv2.HttpMethod.POST],
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
