"""A change's trail in the functions' logs. Every function that takes a batch of changes logs the
identity of each (its item's key, its event, its place in its shard; the table and the stream on
the line), lines of at most `LINE` changes and `LINE_BYTES`, so `hybridsync trace` finds the
invocations that read one change by a substring of their lines: in the local app's log files, and
with CloudWatch Logs Insights deployed (`filter @message like "..."`, hybridsync.sync.trace).
Lines are logged at INFO only: `POWERTOOLS_LOG_LEVEL=WARNING` turns them off (and their cost)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from hybridsync.streams.changes import StreamChange

LINE = 100  # changes per log line
LINE_BYTES = 200_000  # a CloudWatch Logs event holds at most 256 KB: a line of large keys is cut
ESCAPED = str.maketrans({"\\": "\\\\", ",": "\\,", "=": "\\="})


def item(keys: Mapping[str, Any]) -> str:
    """An item's key as the trail names it, its attributes by name: `PK=CUSTOMER#c-1,SK=INFO`. Each
    value as DynamoDB JSON gives it (a number's digits, a binary's base64) or as given plainly;
    `\\`, `,` and `=` in a value escaped with `\\`, so no two items share a name."""
    return ",".join(f"{name}={_text(keys[name]).translate(ESCAPED)}" for name in sorted(keys))


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


def stream(arn: str | None) -> str | None:
    """A stream's label (the last part of its ARN): two streams of one table number alike."""
    return arn.rsplit("/", 1)[-1] if arn and "/stream/" in arn else None


def entries(changes: Iterable[Any]) -> list[dict[str, Any]]:
    """Each change's identity (a batch's dead letters carry none: they are logged as such)."""
    return [
        {"item": item(c.keys), "event": c.event, "sequence": str(c.sequence),
         "created_ms": c.created_micros // 1000 if c.created_micros is not None else None}
        for c in changes if isinstance(c, StreamChange) and c.keys
    ]  # fmt: skip


def log(logger: Any, message: str, changes: Any, **outcome: Any) -> None:
    """`message` with the batch's changes (a batch is one shard's: one table, one stream), each line
    with the batch's outcome; nothing is built when INFO is off."""
    if not logger.isEnabledFor(logging.INFO):
        return
    try:
        _log(logger, message, list(changes), outcome)
    except Exception:  # the trail is a diagnosis: the batch it tells of was applied, whatever this did
        logger.warning("the batch's trail could not be logged", exc_info=True)


def _log(logger: Any, message: str, taken: list[Any], outcome: dict[str, Any]) -> None:
    read = [c for c in taken if isinstance(c, StreamChange) and c.keys]
    if read:
        where = {"table": read[0].table, "stream": stream(read[0].record.get("eventSourceARN"))}
        # the batch as delivered: a retry shows the same records again, a bisected one fewer of them
        span = sorted(c.sequence for c in read if c.sequence is not None)
        taken_in = {"records": len(taken), "first": str(span[0]) if span else None,
                    "last": str(span[-1]) if span else None}  # fmt: skip
        log_entries(logger, message, entries(read), **where, **taken_in, **outcome)


def log_entries(logger: Any, message: str, listed: list[dict[str, Any]], **outcome: Any) -> None:
    """`message` with `listed`, in lines of at most `LINE` entries and `LINE_BYTES`."""
    line: list[dict[str, Any]] = []
    size = 0
    for entry in listed:
        length = len(json.dumps(entry, ensure_ascii=False, default=str))
        if line and (len(line) == LINE or size + length > LINE_BYTES):
            logger.info(message, extra={"changes": line, **outcome})
            line, size = [], 0
        line.append(entry)
        size += length
    if line:
        logger.info(message, extra={"changes": line, **outcome})
