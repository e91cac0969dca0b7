"""API Gateway (HTTP API), locally: every route of every HTTP API with the function its integration
invokes, served on one port (apigateway/responses.py), with the stage's access log and the metrics
API Gateway counts."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from hybridsync.local.account import Account
from hybridsync.local.apigateway import responses as apigateway
from hybridsync.local.awslambda.functions import FunctionError


class HttpApis:
    """The app's HTTP APIs (`http`: the server, once started)."""

    def __init__(self, account: Account) -> None:
        self.account = account
        self.http: ThreadingHTTPServer | None = None

    def routes(self) -> list[apigateway.Route]:
        """Every route of every HTTP API, with the function its integration invokes."""
        integrations = {
            (i.stack, i.logical_id): i
            for i in self.account.assembly.resources("AWS::ApiGatewayV2::Integration")
        }
        found = []
        for route in self.account.assembly.resources("AWS::ApiGatewayV2::Route"):
            target = self.account.assembly.resolve(
                route.stack, route.properties["Target"]
            )  # integrations/<id>
            integration = integrations[(route.stack, target.split("/")[-1])]
            function = self.account.assembly.function_of(
                integration.stack, integration.properties["IntegrationUri"]
            )
            invoke = self.account.functions[function.construct].invoke
            found.append(apigateway.Route(route.properties["RouteKey"], invoke))
        return found

    def start(self, port: int) -> None:
        apis = [a.logical_id for a in self.account.assembly.resources("AWS::ApiGatewayV2::Api")]
        access = self.account.open_log("api-access.log", buffering=1)
        lock = threading.Lock()

        def access_log(entry: dict[str, Any]) -> None:
            """The stage's JSON access log line, and what API Gateway counts of it."""
            with lock:
                access.write(json.dumps(entry) + "\n")
            for api in apis[:1]:
                status, dimensions = entry["status"], {"ApiId": api}
                self.account.metrics.put("AWS/ApiGateway", "Count", dimensions, 1)
                self.account.metrics.put("AWS/ApiGateway", "4xx", dimensions, int(400 <= status < 500))
                self.account.metrics.put("AWS/ApiGateway", "5xx", dimensions, int(status >= 500))
                self.account.metrics.put("AWS/ApiGateway", "Latency", dimensions, entry["responseLatency"])

        self.http = apigateway.serve(self.routes(), port, FunctionError, access_log)
        self.account.spawn(self.http.serve_forever, name="http")

    def close(self) -> None:
        if self.http is not None:
            self.http.shutdown()
            self.http.server_close()  # its port free again (a failover's app serves on it)
