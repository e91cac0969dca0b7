"""Real-shaped DynamoDB stream events (Lambda's shape) of the shop's entities, recorded from
DynamoDB Local by examples/shop/fixtures/record.py, where they live."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2] / "examples" / "shop" / "fixtures"


@cache
def _events() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(HERE.glob("*.json"))}


def names(prefix: str = "") -> list[str]:
    return [name for name in _events() if name.startswith(prefix)]


def record(name: str) -> dict[str, Any]:
    """The one record of fixture `name`, a fresh copy the caller may edit."""
    (only,) = _events()[name]["Records"]
    return copy.deepcopy(only)


def window_event(records: list[dict[str, Any]], shard: str, state: dict[str, Any], *,
                 final: bool = False) -> dict[str, Any]:  # fmt: skip
    """A tumbling-window invocation in the shape Lambda's developer guide documents
    (services-ddb-windows, DynamodbTimeWindowEvent)."""
    return {
        "Records": records,
        "window": {"start": "2020-07-30T17:00:00Z", "end": "2020-07-30T17:05:00Z"},
        "state": state,
        "shardId": shard,
        "eventSourceARN": "stream-ARN",
        "isFinalInvokeForWindow": final,
        "isWindowTerminatedEarly": False,
    }


def documented_record() -> dict[str, Any]:
    """The record of that documented event: an item of someone else's table (not an entity of ours)."""
    image = {"Message": {"S": "New item!"}, "Id": {"N": "101"}}
    data = {"Keys": {"Id": {"N": "101"}}, "NewImage": image, "SequenceNumber": "111", "SizeBytes": 26,
            "StreamViewType": "NEW_AND_OLD_IMAGES"}  # fmt: skip
    return {"eventID": "1", "eventName": "INSERT", "eventVersion": "1.0", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1", "dynamodb": data, "eventSourceARN": "stream-ARN"}  # fmt: skip
