"""A change's trail in the functions' logs. Every function that takes a batch of changes logs the
identity of each (its table, its item's key, its event and its place in its shard), a line per
`LINE` changes, so `hybridsync trace` finds the invocations that read one change by a substring of
their lines: in the local app's log files, and with CloudWatch Logs Insights deployed
(`filter @message like "..."`, hybridsync.sync.trace)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from hybridsync.streams.changes import StreamChange

LINE = 100  # changes per log line: a CloudWatch Logs event holds at most 256 KB


def item(keys: Mapping[str, Any]) -> str:
    """An item's key as the trail names it, its attributes by name: `PK=CUSTOMER#c-1,SK=INFO`. Each
    value as DynamoDB JSON gives it (a number's digits, a binary's base64) or as given plainly."""
    return ",".join(f"{name}={_text(keys[name])}" for name in sorted(keys))


def _text(value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, given),) = value.items()
        if kind in ("S", "N"):
            return str(given)
        if kind == "B":
            return given if isinstance(given, str) else base64.b64encode(given).decode()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    return str(value)


def entries(changes: Iterable[Any]) -> list[dict[str, Any]]:
    """Each change's identity (a batch's dead letters carry none: they are logged as such)."""
    return [
        {"table": c.table, "item": item(c.keys), "event": c.event, "sequence": str(c.sequence),
         "created_ms": c.created_micros // 1000 if c.created_micros is not None else None}
        for c in changes if isinstance(c, StreamChange) and c.keys
    ]  # fmt: skip


def log(logger: Any, message: str, changes: Iterable[Any], **outcome: Any) -> None:
    """`message` with the batch's changes, `LINE` to a line, each line with the batch's outcome."""
    listed = entries(changes)
    for start in range(0, len(listed), LINE):
        logger.info(message, extra={"changes": listed[start : start + LINE], **outcome})
