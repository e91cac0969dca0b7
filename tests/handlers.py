"""Load a function's handler module the way Lambda does, and a Lambda context to call it with."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> ModuleType:
    """`lambdas/<name>/handler.py` as its own module (every function's module is named handler),
    with its folder first on the path for the modules beside it, each loaded afresh."""
    folder = ROOT / "lambdas" / name
    for sibling in folder.glob("*.py"):
        sys.modules.pop(sibling.stem, None)
    spec = importlib.util.spec_from_file_location(f"lambdas_{name}_handler", folder / "handler.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module


@dataclass
class LambdaContext:
    function_name: str = "local"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:local"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "local-request"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def http(api: ModuleType, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
         **query: str) -> tuple[int, Any, dict[str, str]]:  # fmt: skip
    """Call an HTTP API handler with an API Gateway v2 event; (status, JSON body or None, headers)."""
    event = {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": urlencode(query),
        "queryStringParameters": query or None, "headers": {"host": "local", **(headers or {})},
        "isBase64Encoded": False,
        "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                                    "sourceIp": "127.0.0.1", "userAgent": "test"},
                           "requestId": "r", "routeKey": "$default", "stage": "$default", "accountId": "1",
                           "apiId": "local", "domainName": "local", "domainPrefix": "local", "timeEpoch": 0},
    }  # fmt: skip
    if body is not None:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    response = api.handler(event, LambdaContext())
    text = response.get("body")
    return response["statusCode"], json.loads(text) if text else None, response.get("headers", {})
