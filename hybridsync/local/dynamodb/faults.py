"""Faults on DynamoDB requests, as DynamoDB answers under load, seeded:

  throttle            answered with a throttle (400) before it is sent
  server_error        answered with an InternalServerError (500) before it is sent
  server_error_after  a write sent and applied, then answered with a 500: the SDK retries a
                      write DynamoDB already made (conditions must turn the retry into a no-op)
  conflict            a TransactWriteItems that updates an item another process's transaction is
                      writing at that moment is cancelled with TransactionConflict, as DynamoDB
                      cancels it (the processes share the claims directory `conflict_dir`)

The SDK's retries must absorb them all. No imports from hybridsync: a function's worker loads this
file by its path, beside the library its asset ships.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KINDS = ("throttle", "server_error", "server_error_after")
CLAIM_S = 2.0  # a claim older than this is a crashed writer's: ignored
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


def parse(spec: str) -> dict[str, Any]:
    """A spec FaultPlan wrote: each kind's probability, the seed, and the claims directory."""
    return {name: value if name == "conflict_dir" else float(value) for name, value in pairs(spec).items()}


def _cancelled(reasons: list[str]) -> dict[str, Any]:
    """DynamoDB's answer to a transaction it cancels: a reason per item, in order."""
    shown = ", ".join(reasons)
    return {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons [{shown}]",
        "CancellationReasons": [
            {"Code": r, "Message": "Transaction is ongoing for the item"} if r != "None" else {"Code": "None"}
            for r in reasons
        ],
    }


class Claims:
    """Items a transaction of this process is writing, as files any process can see."""

    def __init__(self, directory: str):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.held: dict[int, list[Path]] = {}  # request -> the claims it made

    def _path(self, table: str, key: dict[str, Any]) -> Path:
        text = json.dumps([table, key], sort_keys=True).encode()
        return self.directory / hashlib.md5(text, usedforsecurity=False).hexdigest()

    def taken(self, items: list[dict[str, Any]]) -> list[bool]:
        """Which items another process's transaction holds now."""
        now, out = time.time(), []
        for item in items:
            path = self._path(*item) if item else None
            try:
                out.append(path is not None and now - path.stat().st_mtime < CLAIM_S
                           and path.read_text() != str(os.getpid()))  # fmt: skip
            except OSError:
                out.append(False)
        return out

    def claim(self, request: int, items: list[dict[str, Any]]) -> None:
        paths = [self._path(*item) for item in items if item]
        for path in paths:
            path.write_text(str(os.getpid()))
        self.held[request] = paths

    def release(self, request: int) -> None:
        for path in self.held.pop(request, []):
            try:
                if path.read_text() == str(os.getpid()):
                    path.unlink()
            except OSError:
                pass


def _transaction_items(body: bytes) -> list[Any]:
    """(table, key) of each item a TransactWriteItems request updates (puts name no key: None)."""
    out: list[Any] = []
    for entry in json.loads(body).get("TransactItems", []):
        ((action, request),) = entry.items()
        keyed = "Key" in request and action != "ConditionCheck"
        out.append((request["TableName"], request["Key"]) if keyed else None)
    return out


def inject(events: Any, spec: str, injected: Callable[[str], None]) -> None:
    """Register the faults of `spec` on a botocore event system (a session's or a client's);
    `injected(kind)` is told of each one."""
    from botocore.awsrequest import AWSResponse
    from botocore.httpsession import URLLib3Session

    plan = parse(spec)
    rng = random.Random(int(plan.get("seed", 7)))
    http = URLLib3Session()
    claims = Claims(plan["conflict_dir"]) if plan.get("conflict") and plan.get("conflict_dir") else None

    class Body:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def stream(self, **_: object) -> object:
            yield self.data

    def answer(status: int, body: dict[str, Any], request: Any) -> Any:
        headers = {"x-amzn-RequestId": "injected", "Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, status, headers, Body(json.dumps(body).encode()))

    def conflicted(request: Any) -> object:
        """A transaction touching an item another process's transaction holds: cancelled (with
        the plan's probability); otherwise it claims its items until its answer comes."""
        assert claims is not None
        items = _transaction_items(request.body)
        taken = claims.taken(items)
        if any(taken) and rng.random() < plan["conflict"]:
            injected("conflict")
            reasons = ["TransactionConflict" if t else "None" for t in taken]
            return answer(400, _cancelled(reasons), request)
        claims.claim(id(request), items)
        try:
            response = http.send(request)
        finally:
            claims.release(id(request))
        return response

    def before_send(request: Any, **_: object) -> object:
        target = request.headers.get("X-Amz-Target", "")
        operation = (target.decode() if isinstance(target, bytes) else target).rpartition(".")[2]
        roll, edge, kind = rng.random(), 0.0, None
        for candidate in KINDS:
            edge += plan.get(candidate, 0.0)
            if roll < edge:
                kind = candidate
                break
        if kind is None and claims is not None and operation == "TransactWriteItems":
            return conflicted(request)
        if kind is None or (kind == "server_error_after" and operation not in WRITES):
            return None
        if kind == "server_error_after":
            http.send(request)  # DynamoDB applies it; the caller never hears so
        injected(kind)
        code, status = _ANSWERS[kind]
        return answer(status, {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": kind},
                      request)  # fmt: skip

    events.register("before-send.dynamodb", before_send)
