"""Call an engine function's handler directly, as Lambda does: its module loaded afresh, with the
local app's Lambda context and its HTTP API event builder (one of each, for the app and the tests)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

from hybridsync.local.apigateway.responses import http_event
from hybridsync.local.awslambda.context import Context as LambdaContext
from shop_workloads.chaos import body_bytes

__all__ = ["LambdaContext", "cold_start", "http", "load"]
ROOT = Path(__file__).resolve().parent.parent


def cold_start(code: str) -> str:
    """What `code` prints in a fresh interpreter set up as a function's container: the repository
    and the shop first on its path, started outside the repository, with only the environment a
    handler needs (a cold start's imports, seen from `sys.modules`)."""
    probe = "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n" + code
    out = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT), str(ROOT / "examples" / "shop")],
        capture_output=True, text=True, check=True, cwd="/",
        env={"PATH": "", "POWERTOOLS_METRICS_NAMESPACE": "hybridsync", "AWS_REGION": "us-east-1",
             "HYBRIDSYNC_MODEL": "shop.model:MODEL"},
    )  # fmt: skip
    return out.stdout


def load(name: str) -> ModuleType:
    """`hybridsync.functions.<name>` imported afresh, as a new container imports it: its module-level
    state, the HTTP layer and the project's route modules, and the clients, built again from the
    environment as it is now."""
    from hybridsync.model import config

    fresh = (f"hybridsync.functions.{name}", "hybridsync.api.web", *config.setting_list("routes"))
    for module in [m for m in sys.modules if m in fresh or m.startswith(tuple(f"{r}." for r in fresh))]:
        del sys.modules[module]
    from hybridsync.runtime import clients

    for cached in (clients.model, clients.tables, clients.dynamodb, clients.s3, clients.engine):
        cached.cache_clear()
    return importlib.import_module(f"hybridsync.functions.{name}")


def http(api: ModuleType, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
         **query: str) -> tuple[int, Any, dict[str, str]]:  # fmt: skip
    """Call an HTTP API handler with an API Gateway v2 event; (status, JSON body or None, headers)."""
    data = body_bytes(body)
    given = [("host", "local"), *((headers or {}).items())]
    if data is not None and not any(name.lower() == "content-type" for name, _ in given):
        given.append(("content-type", "application/json"))
    event = http_event(method, path + (f"?{urlencode(query)}" if query else ""), given, data)
    response = api.handler(event, LambdaContext())
    text = response.get("body")
    return response["statusCode"], json.loads(text) if text else None, response.get("headers", {})
