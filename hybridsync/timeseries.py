"""Time series, a table per period (pattern 22): rotation (create ahead, cool down, archive, drop),
writes into the period's table and reads spanning periods.

Rotation is idempotent, so the scheduled function and `hybridsync timeseries rotate` can run it as
often as they like: each run brings the tables to what the declaration says for `now`. A table is
dropped only after its archive object is in S3 and holds as many items as the scan read.
"""

from __future__ import annotations

import gzip
import io
import json
from base64 import b64encode
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hybridsync.convert import marshal, unmarshal
from hybridsync.declare import TimeSeries
from hybridsync.errors import Invalid
from hybridsync.keys import HIGHEST, parse_iso
from hybridsync.scans import Scanner

ARCHIVE_PREFIX = "timeseries"


@dataclass
class Rotation:
    created: list[str] = field(default_factory=list)
    lowered: list[str] = field(default_factory=list)
    archived: dict[str, str] = field(default_factory=dict)  # table -> s3 key
    dropped: list[str] = field(default_factory=list)
    items_archived: int = 0

    def add(self, other: Rotation) -> None:
        """Fold another series' rotation into this one (one report for every series)."""
        self.created += other.created
        self.lowered += other.lowered
        self.archived |= other.archived
        self.dropped += other.dropped
        self.items_archived += other.items_archived


class MissingPeriod(Invalid):
    """A write for a period whose table does not exist (not created yet, or already dropped)."""


def tables(client: Any, prefix: str, series: TimeSeries) -> dict[str, str]:
    """The series' tables that exist: period label -> table name."""
    found = {}
    for page in client.get_paginator("list_tables").paginate():
        for name in page["TableNames"]:
            label = series.label_of(name, prefix)
            if label:
                found[label] = name
    return found


def rotate(client: Any, s3: Any, bucket: str, prefix: str, now: datetime, series: TimeSeries) -> Rotation:
    """Create the current and the next `ahead` periods' tables, lower the capacity of past ones,
    archive to `s3://bucket/timeseries/<table>.jsonl.gz` and drop those older than `keep`."""
    done = Rotation()
    existing = tables(client, prefix, series)
    current = series.start_of(now)
    for ahead in range(series.ahead + 1):
        start = series.step(current, ahead)
        if series.label(start) not in existing:
            name = series.table_name(prefix, start)
            client.create_table(**series.table.create_request(name, series.current_capacity))
            done.created.append(name)
    oldest_kept = series.label(series.step(current, -series.keep))
    for label, name in sorted(existing.items()):
        if label >= series.label(current):
            continue
        if label < oldest_kept:
            key, count = archive(client, s3, bucket, name)
            done.archived[name], done.items_archived = key, done.items_archived + count
            client.delete_table(TableName=name)
            done.dropped.append(name)
        elif _capacity(client, name) != series.past_capacity:
            read, write = series.past_capacity
            client.update_table(TableName=name, ProvisionedThroughput={
                "ReadCapacityUnits": read, "WriteCapacityUnits": write})  # fmt: skip
            done.lowered.append(name)
    return done


def _capacity(client: Any, name: str) -> tuple[int, int]:
    throughput = client.describe_table(TableName=name)["Table"].get("ProvisionedThroughput", {})
    return int(throughput.get("ReadCapacityUnits", 0)), int(throughput.get("WriteCapacityUnits", 0))


def archive(client: Any, s3: Any, bucket: str, name: str) -> tuple[str, int]:
    """Copy every item of a table to one gzip object of DynamoDB-JSON lines (`{"Item": ...}`, the
    export format) and check the object is there with that many items."""
    buffer, count = io.BytesIO(), 0
    with gzip.GzipFile(fileobj=buffer, mode="wb") as out:
        for item in Scanner(client, name).items():
            out.write(json.dumps({"Item": marshal(item)}, default=_bytes).encode() + b"\n")
            count += 1
    key = f"{ARCHIVE_PREFIX}/{name}.jsonl.gz"
    s3.put_object(Bucket=bucket, Key=key, Body=buffer.getvalue(), Metadata={"items": str(count)})
    stored = s3.head_object(Bucket=bucket, Key=key)
    if stored["Metadata"].get("items") != str(count) or stored["ContentLength"] != buffer.tell():
        raise RuntimeError(f"archive of {name} did not land whole in s3://{bucket}/{key}; table kept")
    return key, count


def _moment(prefix: str) -> datetime:
    """A time or a bare date (its midnight, UTC)."""
    if len(prefix) == 10:
        return datetime.strptime(prefix, "%Y-%m-%d").replace(tzinfo=UTC)
    return parse_iso(prefix)


def _bytes(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return b64encode(value).decode()
    raise TypeError(f"not JSON: {type(value).__name__}")


def put(client: Any, prefix: str, values: dict[str, Any], series: TimeSeries) -> str:
    """Write one item into its period's table (a repeat of the same item is a no-op); the table."""
    at = parse_iso(values[series.time_attribute])
    name = series.table_name(prefix, at)
    item = series.entity.item(values)
    try:
        client.put_item(
            TableName=name,
            Item=marshal(item),
            ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": series.table.partition.name},
        )
    except client.exceptions.ConditionalCheckFailedException:
        pass  # the same event again: at-least-once delivery from the caller
    except client.exceptions.ResourceNotFoundException:
        raise MissingPeriod(series.time_attribute, f"no table {name} for {series.label(at)}: too old "
                            "(dropped) or too far ahead; rotation creates each period's table "
                            "ahead (`hybridsync timeseries rotate`)") from None  # fmt: skip
    return name


def query(client: Any, prefix: str, partition: dict[str, Any], start: str, end: str,
          series: TimeSeries) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    """Items of one partition with sort keys in [start, end] (ISO-8601 prefixes), oldest first:
    one Query per period table the range touches. Also the periods whose tables are gone."""
    entity = series.entity
    pk = entity.key_value(entity.table.partition.name, partition)
    sort = entity.table.sort
    assert sort is not None
    found, missing = [], []
    for period in series.starts(_moment(start), _moment(end)):
        name = series.table_name(prefix, period)
        pages = client.get_paginator("query").paginate(
            TableName=name,
            KeyConditionExpression="#pk = :pk AND #sk BETWEEN :low AND :high",
            ExpressionAttributeNames={"#pk": entity.table.partition.name, "#sk": sort.name},
            ExpressionAttributeValues=marshal({":pk": pk, ":low": start, ":high": end + HIGHEST}),
        )
        try:
            found += [unmarshal(i) for page in pages for i in page["Items"]]
        except client.exceptions.ResourceNotFoundException:
            missing.append(series.label(period))
    return found, missing
