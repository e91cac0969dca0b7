"""Table exports in DynamoDB's own S3 layout, so big reads stay off the live table (patterns 21, 22).

`start` asks DynamoDB for a point-in-time export (`ExportTableToPointInTime`: read from the
continuous backups, no read capacity spent, the table never touched); `wait` follows it. Where the
endpoint has no exports (DynamoDB Local), `by_scan` writes the same layout from a paced Scan,
streamed a data file at a time, never the whole table in memory. `read` yields the items of either
from S3, and `verify` reads every data file back and checks it against the manifest: the proof an
archive is whole before its table is dropped.

Layout (DynamoDB's, format DYNAMODB_JSON): `<prefix>/AWSDynamoDB/<export id>/manifest-summary.json`,
`manifest-files.json` (a JSON line per data file: its key and item count) and `data/*.json.gz`
(a line `{"Item": {...}}` per item).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from hybridsync.dynamodb.capacity import Cost
from hybridsync.dynamodb.scans import Scanner
from hybridsync.model.convert import marshal, unmarshal

ITEMS_PER_FILE = 10_000  # a scan export's data file: ~5 MB of 500-byte items, one in memory at a time
NO_EXPORTS = {"UnknownOperationException", "UnrecognizedClientException", "UnknownOperation"}


class ExportError(RuntimeError):
    """An export that failed, or whose files do not hold what its manifest says."""


@dataclass(frozen=True)
class Export:
    """Where an export's manifests are: `s3://bucket/<directory>/manifest-summary.json`."""

    bucket: str
    directory: str  # <prefix>/AWSDynamoDB/<export id>

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.directory}/"

    @classmethod
    def parse(cls, url: str) -> Export:
        """`s3://bucket/<prefix>/AWSDynamoDB/<export id>/` (the summary's directory)."""
        if not url.startswith("s3://") or "/" not in url[5:]:
            raise ValueError(f"an export is s3://bucket/.../AWSDynamoDB/<export id>/, got {url!r}")
        bucket, _, directory = url[5:].partition("/")
        directory = directory.strip("/").removesuffix("/manifest-summary.json")
        if not bucket or not directory:
            raise ValueError(f"an export is s3://bucket/.../AWSDynamoDB/<export id>/, got {url!r}")
        return cls(bucket, directory)


def start(client: Any, table_arn: str, bucket: str, prefix: str) -> str | None:
    """Ask DynamoDB for a point-in-time export of a table; the export's ARN, or None where the
    endpoint has no exports (DynamoDB Local). Needs point-in-time recovery on the table."""
    try:
        answer = client.export_table_to_point_in_time(
            TableArn=table_arn, S3Bucket=bucket, S3Prefix=prefix, ExportFormat="DYNAMODB_JSON"
        )
    except ClientError as error:
        if error.response["Error"]["Code"] in NO_EXPORTS:
            return None
        raise
    return answer["ExportDescription"]["ExportArn"]


def status(client: Any, export_arn: str) -> tuple[str, Export | None]:
    """IN_PROGRESS, COMPLETED or FAILED, and where a completed export's manifests are."""
    described = client.describe_export(ExportArn=export_arn)["ExportDescription"]
    state = described["ExportStatus"]
    if state != "COMPLETED":
        return state, None
    directory = described["ExportManifest"].rsplit("/", 1)[0]  # .../manifest-summary.json
    return state, Export(described["S3Bucket"], directory)


def wait(client: Any, export_arn: str, timeout_s: float = 3600, poll_s: float = 20) -> Export:
    """Follow an export until it completes (minutes, whatever the table's size)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state, done = status(client, export_arn)
        if done:
            return done
        if state == "FAILED":
            raise ExportError(f"export {export_arn} failed")
        if time.monotonic() > deadline:
            raise ExportError(f"export {export_arn} still {state} after {timeout_s:.0f} s")
        time.sleep(poll_s)


def by_scan(client: Any, s3: Any, table: str, bucket: str, prefix: str, *, rate: float | None = None,
            items_per_file: int = ITEMS_PER_FILE) -> Export:  # fmt: skip
    """An export in DynamoDB's layout from a Scan paced to `rate` read units/s: a data file is
    written as soon as it is full, so memory holds one file, not the table."""
    arn = client.describe_table(TableName=table)["Table"]["TableArn"]
    started = datetime.now(UTC)
    export_id = f"{int(started.timestamp() * 1000):014d}-{uuid.uuid4().hex[:8]}"
    directory = f"{prefix.strip('/')}/AWSDynamoDB/{export_id}".lstrip("/")
    files, lines, total = [], [], 0

    def flush() -> None:
        body = gzip.compress(b"".join(lines), mtime=0)
        key = f"{directory}/data/{uuid.uuid4().hex}.json.gz"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        digest = hashlib.md5(body, usedforsecurity=False).hexdigest()
        files.append({"itemCount": len(lines), "md5Checksum": digest, "dataFileS3Key": key})
        lines.clear()

    for page in Scanner(client, table, rate=rate).pages():
        for item in page:  # typed JSON as DynamoDB writes it: binary as base64 text
            lines.append(json.dumps({"Item": marshal(item)}, separators=(",", ":"), default=_b64).encode()
                         + b"\n")  # fmt: skip
            total += 1
            if len(lines) >= items_per_file:
                flush()
    if lines or not files:
        flush()
    manifest = "".join(json.dumps(f) + "\n" for f in files).encode()
    s3.put_object(Bucket=bucket, Key=f"{directory}/manifest-files.json", Body=manifest)
    summary = {
        "version": "2020-06-30", "exportArn": f"{arn}/export/{export_id}", "tableArn": arn,
        "startTime": started.isoformat(), "endTime": datetime.now(UTC).isoformat(),
        "exportTime": started.isoformat(), "s3Bucket": bucket, "s3Prefix": prefix,
        "manifestFilesS3Key": f"{directory}/manifest-files.json", "itemCount": total,
        "outputFormat": "DYNAMODB_JSON", "exportType": "FULL_EXPORT", "producer": "hybridsync scan",
    }  # fmt: skip
    s3.put_object(Bucket=bucket, Key=f"{directory}/manifest-summary.json", Body=json.dumps(summary).encode())
    return Export(bucket, directory)


def summary(s3: Any, export: Export) -> dict[str, Any]:
    try:
        body = s3.get_object(Bucket=export.bucket, Key=f"{export.directory}/manifest-summary.json")["Body"]
    except ClientError as error:
        raise ExportError(f"no export at {export.url}: {error.response['Error']['Code']}") from None
    return json.loads(body.read())


def table_name(s3: Any, export: Export) -> str:
    """The table an export is of (its summary's table ARN)."""
    return summary(s3, export)["tableArn"].rsplit("/", 1)[1]


def data_files(s3: Any, export: Export) -> list[dict[str, Any]]:
    key = summary(s3, export)["manifestFilesS3Key"]
    text = s3.get_object(Bucket=export.bucket, Key=key)["Body"].read().decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _items(s3: Any, bucket: str, key: str) -> Iterator[dict[str, Any]]:
    raw = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    for line in gzip.decompress(raw).splitlines():
        if line.strip():
            yield json.loads(line)["Item"]


def read(s3: Any, export: Export) -> Iterator[dict[str, Any]]:
    """Every item of an export, as Python values, a data file at a time."""
    for entry in data_files(s3, export):
        for item in _items(s3, export.bucket, entry["dataFileS3Key"]):
            yield unmarshal(item)


@dataclass
class ExportReader:
    """An export read where a Scanner would read the table (reconcile's `scanner`): `items()` and
    a cost of no read units, since the table is not read."""

    s3: Any
    export: Export
    cost: Cost = field(default_factory=Cost)

    @property
    def table_name(self) -> str:
        return self.export.url

    def snapshot_at(self) -> float:
        """The time the export is a picture of (its summary's `exportTime`), epoch seconds."""
        return datetime.fromisoformat(summary(self.s3, self.export)["exportTime"]).timestamp()

    def items(self) -> Iterator[dict[str, Any]]:
        yield from read(self.s3, self.export)


def verify(s3: Any, export: Export) -> int:
    """Read every data file of an export back and check it against the manifests: each file's
    items as many as its line says, and their total the summary's count. Returns the count."""
    expected = summary(s3, export)["itemCount"]
    total = 0
    for entry in data_files(s3, export):
        found = sum(1 for _ in _items(s3, export.bucket, entry["dataFileS3Key"]))
        if found != entry["itemCount"]:
            raise ExportError(f"{entry['dataFileS3Key']} holds {found} items, its manifest says "
                              f"{entry['itemCount']}")  # fmt: skip
        total += found
    if total != expected:
        raise ExportError(f"{export.url} holds {total} items, its summary says {expected}")
    return total


def _b64(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"not JSON: {type(value).__name__}")
