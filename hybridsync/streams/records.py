"""The vocabulary every stream consumer shares: what a record is, what it asks for, and how a record
that can never be applied is turned away (`Rejected` -> `DeadLetter`) without stopping the others."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

# Rejected's home is the model's errors; importable from here for old code
from hybridsync.model.errors import Rejected as Rejected

EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")
DYNAMODB_SERVICE = "dynamodb.amazonaws.com"  # the principal of TTL deletions


@dataclass(frozen=True)
class DeadLetter:
    record: dict[str, Any]
    reason: str
    # what names the record in the store, when not its eventID: a change's identity across its
    # copies (`hybridsync.streams.changes.StreamChange.identity`)
    identity: str | None = None


T = TypeVar("T")


def triage(
    records: Iterable[dict[str, Any]], parse: Callable[[dict[str, Any]], T | None]
) -> tuple[list[T], list[DeadLetter], int]:
    """Parse each record: (what parsed, dead letters for the rejected ones, how many were not for
    this consumer). One bad record never stops the others."""
    parsed: list[T] = []
    rejected: list[DeadLetter] = []
    skipped = 0
    for record in records:
        try:
            result = parse(record)
        except Rejected as error:
            rejected.append(DeadLetter(record, error.reason))
            continue
        if result is None:
            skipped += 1
        else:
            parsed.append(result)
    return parsed, rejected, skipped


def is_ttl_expiry(record: dict[str, Any]) -> bool:
    """A REMOVE made by DynamoDB's TTL sweeper, not by a user or application."""
    identity = record.get("userIdentity") or {}
    return identity.get("type") == "Service" and identity.get("principalId") == DYNAMODB_SERVICE


def stream_data(record: dict[str, Any]) -> dict[str, Any]:
    """The record's `dynamodb` section; Rejected without one."""
    data = record.get("dynamodb")
    if not isinstance(data, dict):
        raise Rejected("record has no dynamodb section")
    return data


def json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A DynamoDB Streams API record in the shape a Lambda event source mapping delivers: with its
    `eventSourceARN`, epoch-second times, base64 binary, and the identity of a TTL deletion as
    `{"type", "principalId"}` (the Streams API spells it `{"Type", "PrincipalId"}`)."""
    shaped: dict[str, Any] = as_json(record | {"eventSourceARN": stream_arn})
    if identity := shaped.get("userIdentity"):
        shaped["userIdentity"] = {key[0].lower() + key[1:]: value for key, value in identity.items()}
    data = shaped.get("dynamodb")
    if isinstance(data, dict) and isinstance(data.get("ApproximateCreationDateTime"), float):
        data["ApproximateCreationDateTime"] = int(data["ApproximateCreationDateTime"])  # whole seconds
    return shaped


def as_json(record: dict[str, Any]) -> Any:
    """The record as JSON-safe data in the Lambda event shape, whatever produced it (a Lambda event,
    or boto3's streams client with datetimes and raw bytes)."""
    return json.loads(json.dumps(record, default=json_default))


def table_of_arn(arn: str) -> str:
    """The table a stream (or table) ARN names: `arn:aws:dynamodb:r:a:table/NAME/stream/...`."""
    resource = arn.split(":", 5)[-1]
    if not resource.startswith("table/"):
        raise ValueError(f"not a DynamoDB table or stream ARN: {arn!r}")
    return resource.split("/")[1]


def sequence(record: dict[str, Any]) -> int:
    """A stream record's sequence number, as a number (the stream spells it as zero-padded text)."""
    return int(record["dynamodb"]["SequenceNumber"])


def created(record: dict[str, Any]) -> float:
    """When the change was made (`ApproximateCreationDateTime`, epoch seconds); now if unknown."""
    return float(record["dynamodb"].get("ApproximateCreationDateTime") or time.time())
