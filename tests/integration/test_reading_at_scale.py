"""Reading a lot, on moto server with known answers: distinct keys three ways, skip-scan over every
sort-key type (keys at the type's largest value included), paced and parallel scans with
throttling injected, order time ranges with both bounds, and time-series rotation across days."""

from __future__ import annotations

import gzip
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hybridsync.dynamodb import capacity, exports, scans, store, timeseries
from hybridsync.dynamodb.scans import Scanner
from hybridsync.model.convert import marshal
from hybridsync.model.declare import KeyAttribute, Table
from hybridsync.model.keys import iso_ms
from shop import order_reads as orders
from shop.model import COLLECTION, EVENT_SERIES, MAIN, ORDER

pytestmark = pytest.mark.integration

LARGEST = {
    "S": "\U0010ffff" * 256,
    "N": Decimal("9.9999999999999999999999999999999999999E+125"),
    "B": b"\xff" * 1024,
}


def small_table(client: Any, sort_type: str) -> str:
    name = f"skip-{sort_type}-{uuid.uuid4().hex[:6]}"
    shape = Table(name, KeyAttribute("pk"), KeyAttribute("sk", sort_type))
    client.create_table(**shape.create_request(name))
    return name


def sort_values(sort_type: str, count: int) -> list[Any]:
    """`count` distinct sort keys of a type, the type's largest value among them."""
    ordinary = {
        "S": [f"item#{n:03d}" for n in range(count)],
        "N": [Decimal(n) - 5 for n in range(count)],
        "B": [bytes([n * 37 % 256, 0xFF - n]) for n in range(count)],
    }[sort_type]
    return [*ordinary[: count - 1], LARGEST[sort_type]]


@pytest.mark.parametrize("sort_type", ["S", "N", "B"])
@pytest.mark.parametrize("segments", [1, 3])
def test_skip_scan_finds_every_collection_once_reading_one_item_each(dynamodb, sort_type, segments):
    table = small_table(dynamodb, sort_type)
    sizes = {f"k{n:02d}": 1 + n % 4 for n in range(25)}  # collections of 1 to 4 items
    for key, size in sizes.items():
        for value in sort_values(sort_type, size):
            dynamodb.put_item(TableName=table, Item=marshal({"pk": key, "sk": value}))
    scanner = Scanner(dynamodb, table, segments=segments)
    found = list(scans.skip_scan(scanner, KeyAttribute("pk"), KeyAttribute("sk", sort_type)))
    assert sorted(found) == sorted(sizes)  # each once, none lost after a largest-value key
    assert scanner.cost.items_read == len(sizes)  # one item per collection, never the rest
    # half a unit per request; at most one empty closing page per segment
    assert scanner.cost.read_units == 0.5 * scanner.cost.requests <= 0.5 * (len(sizes) + segments)
    full = Scanner(dynamodb, table)
    assert sorted(scans.distinct_keys_by_scan(full, "pk")) == sorted(sizes)
    assert full.cost.items_read == sum(sizes.values())


def test_skip_scan_of_an_empty_table_reads_one_empty_page(dynamodb):
    scanner = Scanner(dynamodb, small_table(dynamodb, "S"))
    assert list(scans.skip_scan(scanner, KeyAttribute("pk"), KeyAttribute("sk", "S"))) == []
    assert (scanner.cost.requests, scanner.cost.read_units) == (1, 0.5)


class Throttled:
    """A client whose first `failures` Scan calls are throttled, as DynamoDB does past capacity."""

    def __init__(self, client: Any, failures: int):
        self.client, self.failures, self.throttled = client, failures, 0

    def scan(self, **request: Any) -> dict[str, Any]:
        if self.throttled < self.failures:
            self.throttled += 1
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}}, "Scan"
            )
        return self.client.scan(**request)


def test_scans_retry_throttling_and_give_up_past_their_retries(dynamodb):
    table = small_table(dynamodb, "S")
    for n in range(10):
        dynamodb.put_item(TableName=table, Item=marshal({"pk": f"k{n}", "sk": "a"}))
    throttled = Throttled(dynamodb, failures=3)
    keys = scans.skip_scan(Scanner(throttled, table), KeyAttribute("pk"), KeyAttribute("sk", "S"))
    assert len(list(keys)) == 10 and throttled.throttled == 3
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        list(Scanner(Throttled(dynamodb, failures=99), table, retries=2).items())


def test_a_paged_parallel_paced_scan_reads_everything_once_at_its_rate(dynamodb):
    table = small_table(dynamodb, "S")
    for n in range(60):
        dynamodb.put_item(
            TableName=table, Item=marshal({"pk": f"k{n % 20}", "sk": f"s{n}", "pad": "x" * 300})
        )
    seen: list[capacity.Cost] = []
    rate = 8.0  # read units per second, across the segments
    scanner = Scanner(dynamodb, table, segments=4, page_limit=7, rate=rate, progress=seen.append)
    started = time.monotonic()
    items = list(scanner.items())
    took = time.monotonic() - started
    assert sorted((i["pk"], i["sk"]) for i in items) == sorted((f"k{n % 20}", f"s{n}") for n in range(60))
    assert scanner.cost.requests >= 60 // 7 and len(seen) == scanner.cost.requests  # one report a page
    assert seen[-1].items_read == 60 and max(c.read_units for c in seen) == scanner.cost.read_units
    # each page's units are owed before the next request: the scan cannot outrun its rate
    assert scanner.cost.read_units >= 5 and took >= scanner.cost.read_units / rate * 0.95


@pytest.fixture
def main_table(dynamodb) -> str:
    name = f"scale-{uuid.uuid4().hex[:6]}"
    dynamodb.create_table(**MAIN.create_request(name))
    return name


def test_index_listing_equals_skip_scan_equals_a_full_scan(dynamodb, main_table):
    collections = [f"CUSTOMER#c{n:02d}" for n in range(12)]
    for n, collection in enumerate(collections):
        dynamodb.put_item(
            TableName=main_table,
            Item=marshal(COLLECTION.item({"CollectionPK": collection, "Members": n + 1, "Version": 1})),
        )
        for member in range(n + 1):
            member_item = {"PK": collection, "SK": f"ORDER#{member:04d}", "Entity": "Order", "Pad": "x" * 200}
            dynamodb.put_item(TableName=main_table, Item=marshal(member_item))
    by_index = Scanner(dynamodb, main_table, "DistinctKeys")
    by_skip, by_scan = Scanner(dynamodb, main_table), Scanner(dynamodb, main_table)
    listed = sorted(scans.distinct_keys_by_index(by_index, "StaticPK"))
    skipped = sorted(scans.skip_scan(by_skip, MAIN.partition, scans.table_sort_key(MAIN)))
    scanned = sorted(scans.distinct_keys_by_scan(by_scan, "PK"))
    assert listed == skipped == scanned == collections
    assert by_index.cost.read_units == 0.5  # 12 tiny KEYS_ONLY entries: one page
    assert by_skip.cost.read_units == 0.5 * by_skip.cost.requests and by_skip.cost.items_read == 12
    # these collections are small (under 4 KB each), where a full scan still beats the skip-scan
    assert by_index.cost.read_units < by_scan.cost.read_units < by_skip.cost.read_units
    assert by_scan.cost.items_read == 12 + sum(range(1, 13))


def test_past_4_kb_a_collection_the_skip_scan_beats_a_full_scan(dynamodb, main_table):
    """The other side of the crossover: a skip-scan pays half a unit per collection whatever its
    size; a full scan pays for every item, 8 KB to the unit, so it loses from 4 KB a collection."""
    collections = [f"CUSTOMER#c{n:02d}" for n in range(12)]
    for collection in collections:
        for member in range(6):  # ~6 KB a collection
            member_item = {
                "PK": collection,
                "SK": f"ORDER#{member:04d}",
                "Entity": "Order",
                "Pad": "x" * 1000,
            }
            dynamodb.put_item(TableName=main_table, Item=marshal(member_item))
    by_skip, by_scan = Scanner(dynamodb, main_table), Scanner(dynamodb, main_table)
    skipped = sorted(scans.skip_scan(by_skip, MAIN.partition, scans.table_sort_key(MAIN)))
    scanned = sorted(scans.distinct_keys_by_scan(by_scan, "PK"))
    assert skipped == scanned == collections
    assert by_skip.cost.read_units == 0.5 * by_skip.cost.requests <= 0.5 * (len(collections) + 1)
    assert by_scan.cost.items_read == 6 * len(collections)
    assert by_skip.cost.read_units < by_scan.cost.read_units


def order(n: int, at: datetime, status: str = "OPEN") -> dict[str, Any]:
    return ORDER.item(
        {
            "OrderId": f"o{n:03d}",
            "CustomerId": f"c{n % 5}",
            "Status": status,
            "Total": n,
            "CreatedAt": iso_ms(at),
            "Version": 1,
        }
    )


def test_orders_in_a_time_range_newest_or_oldest_and_open_orders_by_range(dynamodb, main_table):
    start = datetime(2026, 11, 1, tzinfo=UTC)
    placed = [order(n, start + timedelta(hours=n), "OPEN" if n % 3 else "SHIPPED") for n in range(48)]
    for item in placed:
        dynamodb.put_item(TableName=main_table, Item=marshal(item))
    since, until = "2026-11-01T10:00:00.000Z", "2026-11-01T20"  # an hour prefix: all of 20:xx counts
    inside = [o for o in placed if since <= o["CreatedAt"] <= "2026-11-01T20:59:59.999Z"]
    assert len(inside) == 11
    newest = orders.recent_orders(dynamodb, main_table, since, 5, until=until)
    assert [o["OrderId"] for o in newest] == [o["OrderId"] for o in inside[::-1][:5]]
    oldest = orders.recent_orders(dynamodb, main_table, since, 5, until=until, oldest_first=True)
    assert [o["OrderId"] for o in oldest] == [o["OrderId"] for o in inside[:5]]
    open_inside = [o["OrderId"] for o in inside if o["Status"] == "OPEN"]
    got = orders.open_orders(dynamodb, main_table, 100, since=since, until=until)
    assert [o["OrderId"] for o in got] == open_inside
    meter = capacity.Meter()
    meter.attach(dynamodb)
    try:
        orders.open_orders(dynamodb, main_table, 100, since=since, until=until)
    finally:
        meter.detach(dynamodb)
    shards = len(ORDER.partitions("OpenShard"))
    assert (meter.cost.requests, meter.cost.items_read) == (shards, len(open_inside))
    assert meter.cost.read_units == 0.5 * shards  # small entries: one half unit per shard's Query


class LosingS3:
    """An S3 client whose data files land empty: what a verification that reads back must catch."""

    def __init__(self, client: Any):
        self._client = client

    def put_object(self, **request: Any) -> Any:
        if "/data/" in request["Key"]:
            request["Body"] = gzip.compress(b"")
        return self._client.put_object(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_time_series_rotation_across_days_archives_before_it_drops(dynamodb, stack):
    s3 = stack.client("s3")
    bucket = f"archive-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    prefix = f"ts{uuid.uuid4().hex[:6]}"
    series = EVENT_SERIES
    day0 = datetime(2026, 11, 1, 23, 30, tzinfo=UTC)
    first = timeseries.rotate(dynamodb, s3, bucket, prefix, day0, series)
    assert first.created == [f"{prefix}-events-2026-11-01", f"{prefix}-events-2026-11-02"]
    assert timeseries.rotate(dynamodb, s3, bucket, prefix, day0, series).created == []  # idempotent
    # an event late on day 0 and one just after midnight land in their own days' tables
    for minutes in (10, 40):
        at = day0 + timedelta(minutes=minutes)
        timeseries.put(
            dynamodb,
            prefix,
            {
                "Source": "dev-1",
                "At": iso_ms(at),
                "EventId": f"e{minutes}",
                "Kind": "ping",
                "Data": {"bytes": b"\x00\xff".hex()},
            },
            series,
        )
    timeseries.put(  # the same event again (a client retry): still one item
        dynamodb,
        prefix,
        {"Source": "dev-1", "At": iso_ms(day0 + timedelta(minutes=10)), "EventId": "e10", "Kind": "ping"},
        series,
    )
    items, missing = timeseries.query(
        dynamodb, prefix, {"Source": "dev-1"}, "2026-11-01", "2026-11-02", series
    )
    assert [i["EventId"] for i in items] == ["e10", "e40"] and missing == []
    with pytest.raises(timeseries.MissingPeriod, match="2026-11-09"):
        timeseries.put(
            dynamodb,
            prefix,
            {"Source": "d", "At": "2026-11-09T00:00:00.000Z", "EventId": "x", "Kind": "k"},
            series,
        )
    next_day = timeseries.rotate(dynamodb, s3, bucket, prefix, day0 + timedelta(hours=1), series)
    assert next_day.created == [f"{prefix}-events-2026-11-03"]
    assert next_day.lowered == [f"{prefix}-events-2026-11-01"]
    described = dynamodb.describe_table(TableName=f"{prefix}-events-2026-11-01")["Table"]
    assert described["ProvisionedThroughput"]["WriteCapacityUnits"] == series.past_capacity[1]
    # an archive that does not read back whole keeps its table
    gone = day0 + timedelta(days=series.keep + 1)
    with pytest.raises(exports.ExportError, match="holds 0 items, its manifest says 1"):
        timeseries.rotate(dynamodb, LosingS3(s3), bucket, prefix, gone, series)
    assert f"{prefix}-events-2026-11-01" in timeseries.tables(dynamodb, prefix, series).values()
    later = timeseries.rotate(dynamodb, s3, bucket, prefix, gone, series)
    assert f"{prefix}-events-2026-11-01" in later.dropped and later.items_archived == 1
    assert later.exporting == []  # DynamoDB Local has no exports: a scan in their layout, at once
    archive = exports.Export.parse(later.archived[f"{prefix}-events-2026-11-01"])
    assert archive.directory.startswith(f"timeseries/{prefix}-events-2026-11-01/AWSDynamoDB/")
    archived = list(exports.read(s3, archive))
    assert [i["EventId"] for i in archived] == ["e10"] and archived[0]["SK"].endswith("#e10")
    items, missing = timeseries.query(
        dynamodb, prefix, {"Source": "dev-1"}, "2026-11-01", "2026-11-02", series
    )
    assert [i["EventId"] for i in items] == ["e40"] and missing == ["2026-11-01"]
    assert min(timeseries.tables(dynamodb, prefix, series)) == "2026-11-02"  # keep: the 14 days before 11-16


def test_a_consistent_batch_get_is_priced_as_dynamodb_reports_it(stack, dynamodb, workload):
    """BatchGetItem asks for consistency per table (inside RequestItems): a strongly consistent read
    is a whole unit per 4 KB, as DynamoDB's ConsumedCapacity says."""
    table = stack.table_names["main"]
    keys = [ORDER.key(workload.order(workload.id("o"))) for _ in range(3)]
    meter = capacity.Meter()
    meter.attach(dynamodb)
    try:
        store.batch_get(dynamodb, table, keys)
    finally:
        meter.detach(dynamodb)
    assert meter.cost.read_units == meter.cost.consumed == 3
