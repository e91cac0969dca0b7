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
import tempfile
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

from hybridsync import aws, capacity, costs, local, scans  # noqa: E402
from hybridsync.capacity import Cost, Meter  # noqa: E402
from hybridsync.convert import marshal  # noqa: E402
from hybridsync.declare import KeyAttribute, Table  # noqa: E402
from hybridsync.keys import iso_ms  # noqa: E402
from hybridsync.local import dynamodb_local  # noqa: E402
from hybridsync.scans import Scanner  # noqa: E402
from shop import order_reads as orders  # noqa: E402
from shop.model import COLLECTION, MAIN, ORDER, ORDER_LINE  # noqa: E402

NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)
DAYS, RANGE_DAYS, OPEN_DAYS, ITEMS_PER_CUSTOMER = 90, 30, 7, 50
BY_DAY = Table("orders-by-day", KeyAttribute("Day"), KeyAttribute("At"))  # the per-day design


def generate(client: Any, table: str, by_day: str, customers: int, progress: Progress) -> int:
    """Orders (a third open) with lines, in each customer's collection with its #static item; each
    order also into the per-day table. Returns the number of items written to the main table."""
    rng, items, day_items = random.Random(7), [], []
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
            # the entry a per-day GSI would hold: what OrdersByTime projects, partitioned by day
            entry = capacity.index_entry(MAIN, "OrdersByTime", order) or {}
            entry.pop("TimeShard")
            day_items.append(entry | {"Day": at[:10], "At": f"{at}#{order_id}"})
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
    task = progress.add_task("writing the dataset", total=len(items) + len(day_items))
    for target, batch_items in ((table, items), (by_day, day_items)):
        for start in range(0, len(batch_items), 25):
            chunk = batch_items[start : start + 25]
            request = {target: [{"PutRequest": {"Item": marshal(i)}} for i in chunk]}
            while request:
                request = client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
            progress.advance(task, len(chunk))
    return len(items)


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
    work = Path(tempfile.mkdtemp(prefix="bench-access-"))
    endpoint, process = local.start_dynamodb()
    client = aws.client("dynamodb", endpoint, "us-east-1")
    table, by_day = "bench-main", "bench-orders-by-day"
    client.create_table(**MAIN.create_request(table))
    client.create_table(**BY_DAY.create_request(by_day))
    rows: list[tuple[str, str, Cost, float]] = []
    requests: list[tuple[str, str, str, Cost]] = []  # (pattern, design, operation, its cost)
    try:
        with Progress(transient=True) as progress:
            written = generate(client, table, by_day, customers, progress)
            task = progress.add_task("reading", total=9)

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
    finally:
        dynamodb_local.stop(process)
    assert listed == skipped == scanned, "the three ways disagree on the distinct keys"
    assert len(ranged) == len(per_day) == len(scanned_range), "the time-range designs disagree"
    assert {o["OrderId"] for o in open_index} == {o["OrderId"] for o in open_scanned}, "open orders disagree"

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
