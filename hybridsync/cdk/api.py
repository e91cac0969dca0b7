"""API stack: the HTTP API in front of the API function (IAM-authorized unless `-c public_api=true`)."""

from __future__ import annotations

import json
from typing import Any

import jsii
from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync.truth import context

ACCESS_LOG = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationError": "$context.integrationErrorMessage",
}


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    def __init__(self, group: logs.ILogGroup):
        self._destination = apigwv2.LogGroupLogDestination(group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigateway.AccessLogFormat:
        """JSON lines, each with the request id the response's `apigw-requestid` header carries (and
        the function's log names): one id across the gateway, the function and its trace."""
        return apigateway.AccessLogFormat.custom(json.dumps(ACCESS_LOG))


class ApiStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function: lambda_.IFunction,
        public: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=f"{context.names(self)}-api",
            description="hybridsync API: cache-aside entities, order views, rankings, and the write path",
            create_default_stage=False,
            default_authorizer=None if public else authorizers.HttpIamAuthorizer(),
        )
        self.api.add_routes(
            path="/{proxy+}",
            # every method reaches the function, which answers a wrong one with 405 and Allow
            methods=[apigwv2.HttpMethod.ANY],
            integration=integrations.HttpLambdaIntegration("ApiFunction", function),
        )
        group = logs.LogGroup(self, "AccessLogs", retention=context.log_retention(self),
                              removal_policy=RemovalPolicy.DESTROY)  # fmt: skip
        stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            access_log_settings=_AccessLogs(group),
            throttle=apigwv2.ThrottleSettings(rate_limit=500, burst_limit=1000),
        )
        CfnOutput(self, "ApiUrl", value=stage.url or "")
        if public:
            NagSuppressions.add_resource_suppressions(
                self.api,
                [{"id": "AwsSolutions-APIG4",
                  "reason": "Deployed with -c public_api=true: the operator chose an open API."}],
                apply_to_children=True,
            )  # fmt: skip
