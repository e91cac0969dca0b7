"""Time series, a table per period (pattern 22): rotation (create ahead, cool down, archive, drop),
writes into the period's table and reads spanning periods.

Rotation is idempotent, so the scheduled function and `hybridsync timeseries rotate` can run it as
often as they like: each run brings the tables to what the declaration says for `now`. A table is
archived by a point-in-time export (no read capacity, whatever its size; tables are created with
point-in-time recovery for it): one run starts the export, a later one finds it complete. It is
dropped only after every data file of its archive has been read back from S3 and holds what the
export's manifests say. Where there are no exports (DynamoDB Local) the archive is a Scan in the
export's layout, streamed a file at a time, after the table's read capacity is raised back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from hybridsync.dynamodb import exports
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import TimeSeries
from hybridsync.model.errors import Invalid
from hybridsync.model.keys import HIGHEST, parse_iso

ARCHIVE_PREFIX = "timeseries"


@dataclass
class Rotation:
    created: list[str] = field(default_factory=list)
    lowered: list[str] = field(default_factory=list)
    archived: dict[str, str] = field(default_factory=dict)  # table -> its export's s3:// directory
    exporting: list[str] = field(default_factory=list)  # exports started or running: dropped later
    dropped: list[str] = field(default_factory=list)
    items_archived: int = 0

    def add(self, other: Rotation) -> None:
        """Fold another series' rotation into this one (one report for every series)."""
        self.created += other.created
        self.lowered += other.lowered
        self.archived |= other.archived
        self.exporting += other.exporting
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


def rotate(
    client: Any,
    s3: Any,
    bucket: str,
    prefix: str,
    now: datetime,
    series: TimeSeries,
    kms_key: str | None = None,
) -> Rotation:
    """Create the current and the next `ahead` periods' tables (under the customer-managed `kms_key`
    when given, as the stacks' own tables are), lower the capacity of past ones, archive those older
    than `keep` to `s3://bucket/timeseries/<table>/AWSDynamoDB/<export id>/` and drop them once
    their archive reads back whole."""
    encryption = {"SSESpecification": {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": kms_key}}
    done = Rotation()
    existing = tables(client, prefix, series)
    current = series.start_of(now)
    for ahead in range(series.ahead + 1):
        start = series.step(current, ahead)
        if series.label(start) not in existing:
            name = series.table_name(prefix, start)
            request = series.table.create_request(name, series.current_capacity)
            client.create_table(**request | (encryption if kms_key else {}))
            _recoverable(client, name)
            done.created.append(name)
    oldest_kept = series.label(series.step(current, -series.keep))
    for label, name in sorted(existing.items()):
        if label >= series.label(current):
            continue
        if label < oldest_kept:
            export = archive(client, s3, bucket, name, series)
            if export is None:
                done.exporting.append(name)
                continue
            count = exports.verify(s3, export)  # every file read back: only then is the table dropped
            done.archived[name], done.items_archived = export.url, done.items_archived + count
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


def _recoverable(client: Any, name: str) -> None:
    """Point-in-time recovery on, so the table can be exported when it is archived."""
    try:
        client.update_continuous_backups(
            TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
        )
    except ClientError as error:
        if error.response["Error"]["Code"] not in exports.NO_EXPORTS:
            raise


def archive(client: Any, s3: Any, bucket: str, name: str, series: TimeSeries) -> exports.Export | None:
    """The table's archive, complete in S3; None while DynamoDB is still exporting it (a later
    rotation finds it done). Exported at a point in time where the endpoint can (no read units,
    no time limit of the function); elsewhere a Scan in the export's layout at the read capacity of
    a current table, raised back first (a cooled table's 5 units would take hours)."""
    prefix = f"{ARCHIVE_PREFIX}/{name}"
    try:
        arn = client.describe_table(TableName=name)["Table"]["TableArn"]
        for page in _pages(client, "list_exports", TableArn=arn):
            for summary in page.get("ExportSummaries", []):
                if summary["ExportStatus"] == "COMPLETED":
                    _, export = exports.status(client, summary["ExportArn"])
                    if export and export.directory.startswith(prefix + "/"):
                        return export
                elif summary["ExportStatus"] == "IN_PROGRESS":
                    return None
        try:
            exports.start(client, arn, bucket, prefix)
        except ClientError as error:
            if error.response["Error"]["Code"] != "PointInTimeRecoveryUnavailableException":
                raise
            _recoverable(client, name)  # a table made before recovery was turned on: next time
        return None
    except ClientError as error:
        if error.response["Error"]["Code"] not in exports.NO_EXPORTS:
            raise
    read, write = series.current_capacity
    if _capacity(client, name)[0] < read:
        client.update_table(TableName=name, ProvisionedThroughput={
            "ReadCapacityUnits": read, "WriteCapacityUnits": write})  # fmt: skip
    return exports.by_scan(client, s3, name, bucket, prefix, rate=read)


def _pages(client: Any, operation: str, **request: Any) -> Any:
    while True:
        page = getattr(client, operation)(**request)
        yield page
        if not page.get("NextToken"):
            return
        request["NextToken"] = page["NextToken"]


def _moment(prefix: str) -> datetime:
    """A time or a bare date (its midnight, UTC)."""
    if len(prefix) == 10:
        return datetime.strptime(prefix, "%Y-%m-%d").replace(tzinfo=UTC)
    return parse_iso(prefix)


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
