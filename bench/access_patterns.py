"""Reading at scale: each access pattern against its naive alternative on one generated dataset,
same run, on moto server. Read units are the capacity model's (moto reports placeholders), counted
from the items each request really read; requests and items are counted on the wire; ms is wall time
against the local emulator (it shows the shape, not DynamoDB's latency).

Dataset: 1,000 customers (`--quick`: 120), each an item collection of 50 orders and lines of
~400 bytes plus its #static item (51,000 items); orders spread over 90 days, a third open.

  distinct keys   the DistinctKeys index (#static items, KEYS_ONLY) / skip-scan / full scan
  time range      the last 30 days' orders: the sharded constant partition (OrdersByTime, one
                  Query per shard) / a full scan filtered on the client; and the per-day design
                  (a partition per day, here a table keyed by day: one Query per day)
  open orders     open orders of the last 7 days: the sparse sharded index / a full scan
  any status      shipped orders of the last 30 days: OrdersByStatus (`SHIPPED#0..3`) / a full scan
  one order       20 orders' entries in the time index, by id and time: its shard computed from the
                  id (one Query) / a random suffix (here a table keyed by a random shard: every
                  shard's Query)
  customer range  20 customers' orders of the last 30 days: the headers' copies in the Inverted
                  index / the customer's collection, where each order's lines sort beside it
  seeds           the model's three figures for the seeds' 2 M keys x 1,000 items scenario

Prints a table, then one JSON line. Usage: python bench/access_patterns.py [--quick | --smoke]
(--smoke: 12 customers, seconds: the same code path and JSON keys)
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table as RichTable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.dynamodb import capacity, scans  # noqa: E402
from hybridsync.dynamodb.capacity import Cost, Meter  # noqa: E402
from hybridsync.dynamodb.scans import Scanner  # noqa: E402
from hybridsync.local.dynamodb import server as dynamodb_local  # noqa: E402
from hybridsync.model.convert import marshal, unmarshal  # noqa: E402
from hybridsync.model.declare import KeyAttribute, Table  # noqa: E402
from hybridsync.model.keys import HIGHEST, iso_ms  # noqa: E402
from hybridsync.runtime import aws  # noqa: E402
from hybridsync.sizing import costs  # noqa: E402
from hybridsync.workloads import scratch  # noqa: E402
from shop import order_reads as orders  # noqa: E402
from shop.model import COLLECTION, MAIN, ORDER, ORDER_LINE, ORDER_TIME_SHARDS  # noqa: E402

NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)
DAYS, RANGE_DAYS, OPEN_DAYS, ITEMS_PER_CUSTOMER = 90, 30, 7, 50
BY_DAY = Table("orders-by-day", KeyAttribute("Day"), KeyAttribute("At"))  # the per-day design
RANDOM = Table("orders-random-shard", KeyAttribute("RandomShard"), KeyAttribute("CreatedAt"))  # random suffix
SAMPLE = 20  # orders looked up one by one, customers whose range is read


def generate(client: Any, table: str, by_day: str, by_random: str, customers: int,
             progress: Progress) -> tuple[int, list[dict[str, Any]]]:  # fmt: skip
    """Orders (a third open) with lines, in each customer's collection with its #static item; each
    order also into the per-day table and the random-suffix table. Returns the number of items
    written to the main table and the orders."""
    rng, items, day_items, random_items, placed = random.Random(7), [], [], [], []
    for c in range(customers):
        customer = f"c{c:05d}"
        collection = ORDER.key_value("PK", {"CustomerId": customer})
        items.append(
            COLLECTION.item({"CollectionPK": collection, "Members": ITEMS_PER_CUSTOMER, "Version": 1})
        )
        n = 0
        while n < ITEMS_PER_CUSTOMER:
            at = iso_ms(NOW - timedelta(seconds=rng.uniform(0, DAYS * 86400)))
            order_id = f"o{c:05d}{n:03d}"
            status = "OPEN" if rng.random() < 1 / 3 else rng.choice(["SHIPPED", "CANCELLED"])
            order = ORDER.item({"OrderId": order_id, "CustomerId": customer, "Status": status,
                                "Total": rng.randint(5, 500), "CreatedAt": at, "Version": 1})  # fmt: skip
            items.append(order)
            placed.append(order)
            # the entry a per-day GSI would hold: what OrdersByTime projects, partitioned by day
            entry = capacity.index_entry(MAIN, "OrdersByTime", order) or {}
            shard = entry.pop("TimeShard")
            day_items.append(entry | {"Day": at[:10], "At": f"{at}#{order_id}"})
            # ... and OrdersByTime with a random suffix: the same shards, drawn, not calculated
            random_items.append(
                entry | {"RandomShard": shard.rsplit("#", 1)[0] + f"#{rng.randrange(ORDER_TIME_SHARDS)}"}
            )
            for line in range(min(3, ITEMS_PER_CUSTOMER - n - 1)):
                items.append(
                    ORDER_LINE.item(
                        {
                            "OrderId": order_id,
                            "LineNo": line + 1,
                            "CustomerId": customer,
                            "CreatedAt": at,
                            "ProductId": f"p{rng.randint(1, 500):04d}",
                            "Quantity": rng.randint(1, 4),
                            "UnitPrice": rng.randint(1, 100),
                            "Status": status,
                            "Version": 1,
                        }
                    )
                    | {"Note": "".join(rng.choices("abcdefghij ", k=250))}
                )  # fmt: skip (gift notes: ~400 B)
            n += 1 + min(3, ITEMS_PER_CUSTOMER - n - 1)
    task = progress.add_task("writing the dataset", total=len(items) + len(day_items) + len(random_items))
    for target, batch_items in ((table, items), (by_day, day_items), (by_random, random_items)):
        for start in range(0, len(batch_items), 25):
            chunk = batch_items[start : start + 25]
            request = {target: [{"PutRequest": {"Item": marshal(i)}} for i in chunk]}
            while request:
                request = client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
            progress.advance(task, len(chunk))
    return len(items), placed


def by_random_shard(client: Any, table: str, order_id: str, created_at: str) -> dict[str, Any] | None:
    """One order in the random-suffix design: nothing says its shard, so every shard is queried."""
    found = None
    for partition in ORDER.partitions("TimeShard"):
        page = client.query(
            TableName=table, KeyConditionExpression="RandomShard = :p AND CreatedAt = :at",
            ExpressionAttributeValues=marshal({":p": partition, ":at": created_at}),
        )  # fmt: skip
        found = found or next((i for i in page["Items"] if i["OrderId"]["S"] == order_id), None)
    return found


def collection_range(client: Any, table: str, customer: str, since: str, until: str) -> list[dict[str, Any]]:
    """A customer's orders in a range from the base collection: every line in the range is read
    (and paid for) with its order, then dropped."""
    prefix = ORDER.key_prefix("SK")
    pages = client.get_paginator("query").paginate(
        TableName=table, KeyConditionExpression="PK = :pk AND SK BETWEEN :low AND :high",
        ExpressionAttributeValues=marshal({
            ":pk": ORDER.key_value("PK", {"CustomerId": customer}),
            ":low": prefix + since, ":high": prefix + until + HIGHEST,
        }),
    )  # fmt: skip
    return [unmarshal(i) for page in pages for i in page["Items"]]


def measured(client: Any, run: Callable[[], Any],
             scanner: Scanner | None = None) -> tuple[Cost, float, Any, list[tuple[str, Cost]]]:  # fmt: skip
    """What `run` cost: a Scanner's own figures, else the Meter's over every call it made; and each
    request with the model's read units beside the ConsumedCapacity DynamoDB reported."""
    meter = Meter()
    meter.attach(client)
    started = time.perf_counter()
    result = run()
    took = (time.perf_counter() - started) * 1000
    calls = meter.calls
    spent = meter.reset()
    meter.detach(client)
    return (scanner.cost if scanner else spent), took, result, calls


def capacity_check(requests: list[tuple[str, str, str, Cost]], work: Path) -> int:
    """Every request's units, the model's beside DynamoDB Local's, in a CSV; per pattern a line;
    the requests where they differ, listed. Returns how many differ."""
    differ = [r for r in requests if r[3].consumed is None or abs(r[3].read_units - r[3].consumed) > 1e-9]
    path = work / "capacity-per-request.csv"
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["pattern", "design", "operation", "items_read", "model_read_units", "consumed_units"]
        )
        for pattern, design, operation, cost in requests:
            writer.writerow([pattern, design, operation, cost.items_read, cost.read_units, cost.consumed])
    print(
        f"capacity, request by request ({len(requests):,} requests; all in {path}): the model's read units "
        f"beside the ConsumedCapacity DynamoDB Local reported; {len(differ)} differ"
    )
    for pattern, design, operation, cost in differ[:10]:
        print(f"  differs: {pattern} / {design}: {operation} of {cost.items_read} items: "
              f"model {cost.read_units}, DynamoDB Local {cost.consumed}")  # fmt: skip
    return len(differ)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="120 customers (6,120 items) instead of 1,000")
    parser.add_argument("--smoke", action="store_true", help="12 customers (612 items): seconds")
    args = parser.parse_args()
    customers = 12 if args.smoke else 120 if args.quick else 1000
    work = scratch("bench-access-")
    endpoint, process = local.start_dynamodb()
    client = aws.client("dynamodb", endpoint, "us-east-1")
    table, by_day, by_random = "bench-main", "bench-orders-by-day", "bench-orders-random"
    client.create_table(**MAIN.create_request(table))
    client.create_table(**BY_DAY.create_request(by_day))
    client.create_table(**RANDOM.create_request(by_random))
    rows: list[tuple[str, str, Cost, float]] = []
    requests: list[tuple[str, str, str, Cost]] = []  # (pattern, design, operation, its cost)
    try:
        with Progress(transient=True) as progress:
            written, placed = generate(client, table, by_day, by_random, customers, progress)
            task = progress.add_task("reading", total=15)

            def row(pattern: str, design: str, run: Callable[[], Any], scanner: Scanner | None = None) -> Any:
                cost, ms, result, calls = measured(client, run, scanner)
                rows.append((pattern, design, cost, ms))
                requests.extend((pattern, design, operation, call) for operation, call in calls)
                progress.advance(task)
                return result

            index = Scanner(client, table, "DistinctKeys")
            listed = row("distinct keys", "DistinctKeys index", lambda: sorted(
                scans.distinct_keys_by_index(index, "StaticPK")), index)  # fmt: skip
            skip = Scanner(client, table)
            skipped = row("distinct keys", "skip-scan", lambda: sorted(
                scans.skip_scan(skip, MAIN.partition, scans.table_sort_key(MAIN))), skip)  # fmt: skip
            full = Scanner(client, table)
            scanned = row("distinct keys", "naive: full scan", lambda: sorted(
                scans.distinct_keys_by_scan(full, "PK")), full)  # fmt: skip
            since = iso_ms(NOW - timedelta(days=RANGE_DAYS))
            ranged = row("orders, last 30 days", "sharded constant partition", lambda: orders.recent_orders(
                client, table, since, 10**9, until=iso_ms(NOW)))  # fmt: skip
            days = [(NOW - timedelta(days=d)).strftime("%Y-%m-%d") for d in range(RANGE_DAYS, -1, -1)]
            per_day = row("orders, last 30 days", "naive: partition per day", lambda: [
                item for day in days for page in client.get_paginator("query").paginate(
                    TableName=by_day, KeyConditionExpression="#d = :d AND #a >= :since",
                    ExpressionAttributeNames={"#d": "Day", "#a": "At"},
                    ExpressionAttributeValues=marshal({":d": day, ":since": since}))
                for item in page["Items"]])  # fmt: skip
            table_scan = Scanner(client, table)
            scanned_range = row("orders, last 30 days", "naive: full scan", lambda: [
                i for i in table_scan.items() if i.get("Entity") == "Order" and i["CreatedAt"] >= since],
                table_scan)  # fmt: skip
            opened_since = iso_ms(NOW - timedelta(days=OPEN_DAYS))
            open_index = row("open orders, last 7 days", "sparse sharded index", lambda: orders.open_orders(
                client, table, 10**9, since=opened_since))  # fmt: skip
            open_scan = Scanner(client, table)
            open_scanned = row("open orders, last 7 days", "naive: full scan", lambda: [
                i for i in open_scan.items() if i.get("Entity") == "Order" and i["Status"] == "OPEN"
                and i["CreatedAt"] >= opened_since], open_scan)  # fmt: skip
            shipped, until = "shipped orders, last 30 days", iso_ms(NOW)
            by_status = row(shipped, "OrdersByStatus, 4 shards", lambda: orders.orders_with_status(
                client, table, "SHIPPED", 10**9, since=since, until=until))  # fmt: skip
            status_scan = Scanner(client, table)
            status_scanned = row(shipped, "naive: full scan", lambda: [
                i for i in status_scan.items() if i.get("Entity") == "Order" and i["Status"] == "SHIPPED"
                and i["CreatedAt"] >= since], status_scan)  # fmt: skip
            sample = random.Random(11).sample(placed, min(SAMPLE, len(placed)))
            one, random_one = f"{len(sample)} orders, one by one", "naive: random suffix"
            calculated = row(one, "calculated suffix", lambda: [orders.order_in_time_index(
                client, table, o["OrderId"], o["CreatedAt"]) for o in sample])  # fmt: skip
            drawn = row(one, random_one, lambda: [by_random_shard(
                client, by_random, o["OrderId"], o["CreatedAt"]) for o in sample])  # fmt: skip
            customers_read = sorted({o["CustomerId"] for o in sample})
            ranges, collection = f"{len(customers_read)} customers' orders, 30 days", "naive: the collection"
            headers = row(ranges, "headers in the Inverted index", lambda: [o for c in customers_read
                          for o in orders.customer_orders(client, table, c, since, until)])  # fmt: skip
            with_lines = row(ranges, collection, lambda: [i for c in customers_read
                             for i in collection_range(client, table, c, since, until)])  # fmt: skip
    finally:
        dynamodb_local.stop(process)
    assert listed == skipped == scanned, "the three ways disagree on the distinct keys"
    assert len(ranged) == len(per_day) == len(scanned_range), "the time-range designs disagree"
    assert {o["OrderId"] for o in open_index} == {o["OrderId"] for o in open_scanned}, "open orders disagree"
    assert {o["OrderId"] for o in by_status} == {o["OrderId"] for o in status_scanned}, "statuses disagree"
    found = [o and o["OrderId"] for o in calculated], [o and o["OrderId"]["S"] for o in drawn]
    assert found[0] == found[1] == [o["OrderId"] for o in sample], "one-order lookups disagree"
    headers_read = [i for i in with_lines if i["Entity"] == "Order"]
    assert [o["OrderId"] for o in headers] == [o["OrderId"] for o in headers_read], "ranges disagree"

    table_view = RichTable(title=f"access patterns on {written:,} items ({customers:,} collections)")
    for column in ("pattern", "design", "requests", "items read", "read units", "ms"):
        table_view.add_column(column, justify="left" if column in ("pattern", "design") else "right")
    for pattern, design, cost, ms in rows:
        table_view.add_row(pattern, design, f"{cost.requests:,}", f"{cost.items_read:,}",
                           f"{cost.read_units:,.1f}", f"{ms:,.0f}")  # fmt: skip
    Console(width=None if sys.stdout.isatty() else 120).print(table_view)
    by = {(p, d): c for p, d, c, _ in rows}

    def ratio(pattern: str, design: str, naive: str, field: str = "read_units", digits: int = 4) -> float:
        return round(getattr(by[(pattern, design)], field) / getattr(by[(pattern, naive)], field), digits)

    seeds = costs.distinct_keys(2_000_000, 1000, 500, index_entry_size=150)
    month, opened, keys = "orders, last 30 days", "open orders, last 7 days", "distinct keys"
    mismatches = capacity_check(requests, work)
    figures = {
        "items": written,
        "requests_checked": len(requests),
        "capacity_model_mismatches": mismatches,
        "collections": customers,
        "distinct_index_vs_scan_ru_ratio": ratio(keys, "DistinctKeys index", "naive: full scan"),
        "skip_scan_vs_scan_ru_ratio": ratio(keys, "skip-scan", "naive: full scan"),
        "time_range_vs_scan_ru_ratio": ratio(month, "sharded constant partition", "naive: full scan"),
        "per_day_vs_sharded_requests_ratio": ratio(
            month, "naive: partition per day", "sharded constant partition", "requests", 3
        ),
        "open_range_vs_scan_ru_ratio": ratio(opened, "sparse sharded index", "naive: full scan"),
        "status_range_vs_scan_ru_ratio": ratio(shipped, "OrdersByStatus, 4 shards", "naive: full scan"),
        "random_vs_calculated_one_item_requests_ratio": ratio(
            one, random_one, "calculated suffix", "requests", 2
        ),
        "range_header_only_lines_read": by[(ranges, "headers in the Inverted index")].items_read
        - len(headers),
        "range_lines_read_before": by[(ranges, collection)].items_read - len(headers_read),
        "range_header_only_vs_collection_ru_ratio": ratio(
            ranges, "headers in the Inverted index", collection
        ),
        "seed_distinct_keys": {
            "full_scan_ru": seeds[0].cost.read_units,
            "index_ru": seeds[1].cost.read_units,
            "skip_scan_ru": seeds[2].cost.read_units,
        },
        "ms": {f"{p} / {d}": round(ms) for p, d, _, ms in rows},
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
