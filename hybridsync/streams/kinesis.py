"""Kinesis Data Streams for DynamoDB as a change source: a Lambda Kinesis record that carries a
DynamoDB change, read as the DynamoDB stream record the consumers already understand.

Lambda delivers `aws:kinesis` records whose base64 `data` is the change in DynamoDB's own JSON
(`eventID`, `eventName`, `tableName`, `userIdentity`, `dynamodb.{Keys, NewImage, OldImage,
ApproximateCreationDateTime, SizeBytes}`: DynamoDB developer guide, kds.html; Powertools' parser
models it as `DynamoDBStreamToKinesisRecord`). It holds no stream sequence number, and kds.html
says what differs from DynamoDB Streams: records may appear in another order than the item's
modifications were made, and one change may appear more than once; the change's
`ApproximateCreationDateTime` is what tells the order and finds the duplicates, to the microsecond
under `ApproximateCreationDateTimePrecision` MICROSECOND (the default; MILLISECOND otherwise).
A duplicate put by a producer's retry is a record of its own, with its own Kinesis sequence number
(Kinesis developer guide, "Handling duplicate records").

So a change is read as:
- `dynamodb.SequenceNumber`: the Kinesis sequence number, the record's place in its Kinesis shard
  (what Lambda's partial batch responses, failure records and the aggregation's per-shard
  watermark name: a replayed or retried delivery has the same one);
- `kinesis.createdMicros`: `ApproximateCreationDateTime` in whole microseconds, the change's place
  among its item's changes (write-back orders by it; see `position`);
- `eventSourceARN`: the table's, so the record is placed among its own table's entities.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from hybridsync.model.errors import Rejected
from hybridsync.streams.changes import KINESIS, StreamChange, microseconds, read_dynamodb, shaped

EVENT_SOURCE = KINESIS.event_source
# Write-back positions of Kinesis-sourced changes: their microsecond time above this, so a row's
# position tells which source wrote it (the seam's bands: `hybridsync.streams.changes.Source`).
KINESIS_POSITIONS = KINESIS.positions_from


def is_kinesis(record: dict[str, Any]) -> bool:
    """A Lambda Kinesis record, as delivered (not yet read as a change)."""
    return record.get("eventSource") == EVENT_SOURCE


def changed_from_kinesis(record: dict[str, Any]) -> bool:
    """A change read from Kinesis Data Streams for DynamoDB (by `as_change`)."""
    return isinstance(record.get("kinesis"), dict) and "createdMicros" in record["kinesis"]


def read(record: dict[str, Any]) -> StreamChange:
    """The seam's Kinesis entry (`hybridsync.streams.changes.KINESIS`): a Lambda Kinesis record, or
    a change read from one already (a dead letter redriven), as its typed change, read once. Rejected when it
    carries no DynamoDB change."""
    change = as_change(record)
    if not changed_from_kinesis(change):  # a section of that name, but no change read from Kinesis
        return read_dynamodb(change)
    digest = change["kinesis"].get("change")
    identity = f"kinesis:{digest}" if digest else None
    return shaped(KINESIS, change, position=position(change), identity=identity, change_id=digest,
                  created_micros=int(change["kinesis"]["createdMicros"]))  # fmt: skip


def as_change(record: dict[str, Any]) -> dict[str, Any]:
    """The DynamoDB change a Lambda Kinesis record carries, in a DynamoDB stream record's shape
    (see the module); any other record is returned as it is. Rejected when `data` holds no
    DynamoDB change (another producer's record on the stream)."""
    if not is_kinesis(record):
        return record
    kinesis = record.get("kinesis")
    if not isinstance(kinesis, dict):
        raise Rejected("kinesis record without its kinesis section")
    try:
        change = json.loads(base64.b64decode(kinesis.get("data") or "", validate=True))
    except (binascii.Error, ValueError, TypeError):
        raise Rejected("kinesis record whose data is not JSON: not a DynamoDB change") from None
    data = change.get("dynamodb") if isinstance(change, dict) else None
    if change.get("eventSource") != "aws:dynamodb" or not isinstance(data, dict):
        raise Rejected("kinesis record whose data is not a DynamoDB change (eventSource aws:dynamodb)")
    table = change.get("tableName")
    try:
        created = microseconds(data["ApproximateCreationDateTime"])
        number = str(int(kinesis["sequenceNumber"]))
    except (KeyError, TypeError, ValueError):
        raise Rejected("kinesis record without its sequence number or the change's time") from None
    if not isinstance(table, str) or not table:
        raise Rejected("DynamoDB change without its tableName")
    # arn:aws:kinesis:REGION:ACCOUNT:stream/NAME -> the table's ARN in the same account and region
    parts = str(record.get("eventSourceARN", "")).split(":")
    partition, region, account = (parts[1], parts[3], parts[4]) if len(parts) >= 6 else ("aws", "", "")
    rest = {key: value for key, value in change.items() if key not in ("dynamodb", "recordFormat")}
    out = rest | {
        "eventSourceARN": f"arn:{partition}:dynamodb:{region}:{account}:table/{table}",
        "dynamodb": data | {"SequenceNumber": number, "ApproximateCreationDateTime": created / 1_000_000},
        "kinesis": {k: v for k, v in kinesis.items() if k != "data"}
        | {"createdMicros": created, "eventID": record.get("eventID"), "arn": record.get("eventSourceARN")},
    }
    out["kinesis"]["change"] = hashlib.sha256(change_identity(out).encode()).hexdigest()[:40]  # type: ignore[union-attr]
    return out


def position(record: dict[str, Any]) -> int | None:
    """A change's write-back position: its DynamoDB Streams sequence number, or for a change read
    from Kinesis its microsecond time above `KINESIS_POSITIONS`; None without one (a load)."""
    if changed_from_kinesis(record):
        return KINESIS_POSITIONS + int(record["kinesis"]["createdMicros"])
    number = (record.get("dynamodb") or {}).get("SequenceNumber")
    return int(number) if number is not None else None


def change_identity(record: dict[str, Any]) -> str | None:
    """What identifies a change read from Kinesis across its duplicates: its table, item keys,
    `ApproximateCreationDateTime` to the microsecond (kds.html: the attribute that identifies
    duplicate records) and its images, so two different changes of one item within one
    microsecond are never taken for one. None for a DynamoDB Streams record (never duplicated)."""
    if not changed_from_kinesis(record):
        return None
    data = record["dynamodb"]
    parts = [record["eventSourceARN"].rsplit("/", 1)[-1], record.get("eventName"), data.get("Keys"),
             record["kinesis"]["createdMicros"], data.get("OldImage"), data.get("NewImage")]  # fmt: skip
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))
