"""Faults on DynamoDB requests, as DynamoDB answers under load, seeded:

  throttle            answered with a throttle (400) before it is sent
  server_error        answered with an InternalServerError (500) before it is sent
  server_error_after  a write sent and applied, then answered with a 500: the SDK retries a
                      write DynamoDB already made (conditions must turn the retry into a no-op)

The SDK's retries must absorb them all. No imports from hybridsync: a function's worker loads this
file by its path, beside the library its asset ships.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

KINDS = ("throttle", "server_error", "server_error_after")
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_ANSWERS = {
    "throttle": ("ProvisionedThroughputExceededException", 400),
    "server_error": ("InternalServerError", 500),
    "server_error_after": ("InternalServerError", 500),
}


def pairs(spec: str) -> dict[str, str]:
    """`kind=value,kind=value` as text: the one reading of a fault spec (FaultPlan validates it)."""
    found = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        found[name.strip()] = value.strip()
    return found


def parse(spec: str) -> dict[str, float]:
    """A spec FaultPlan wrote: each kind's probability, and the seed."""
    return {name: float(value) for name, value in pairs(spec).items()}


def inject(events: Any, spec: str, injected: Callable[[str], None]) -> None:
    """Register the faults of `spec` on a botocore event system (a session's or a client's);
    `injected(kind)` is told of each one."""
    from botocore.awsrequest import AWSResponse
    from botocore.httpsession import URLLib3Session

    plan = parse(spec)
    rng = random.Random(int(plan.get("seed", 7)))
    http = URLLib3Session()

    class Body:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def stream(self, **_: object) -> object:
            yield self.data

    def before_send(request: Any, **_: object) -> object:
        target = request.headers.get("X-Amz-Target", "")
        operation = (target.decode() if isinstance(target, bytes) else target).rpartition(".")[2]
        roll, edge, kind = rng.random(), 0.0, None
        for candidate in KINDS:
            edge += plan.get(candidate, 0.0)
            if roll < edge:
                kind = candidate
                break
        if kind is None or (kind == "server_error_after" and operation not in WRITES):
            return None
        if kind == "server_error_after":
            http.send(request)  # DynamoDB applies it; the caller never hears so
        injected(kind)
        code, status = _ANSWERS[kind]
        body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": kind})
        headers = {"x-amzn-RequestId": "injected", "Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, status, headers, Body(body.encode()))

    events.register("before-send.dynamodb", before_send)
