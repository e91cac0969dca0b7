"""Aggregation cost: the real handler (exactly once) vs a naive per-record counter loop, one run.

10,000 order-line stream records (orders of 1-4 lines; products drawn from a Zipf distribution
s=1.2 over 500 products, customers Zipf s=1.1 over 2,000; 5% of lines later edited, 3%
cancelled) are written to moto server and read back from its stream. Then:

  handler  hybridsync.sync.aggregate as the aggregate function runs it, in batches of the deployed
           batch size (5,000; also shown at 1,000): deltas summed per aggregate item, one
           TransactWriteItems per 100 items carrying the lane watermarks
  naive    one UpdateItem per aggregate per record (3 per record), the same SET arithmetic
           (counters and rank sort key) without any exactly-once guard

Write units follow DynamoDB's rules: an item write costs ceil(size / 1 KB) units (aggregate items
are ~200 bytes: 1 unit), a transactional write twice that, and a write that changes an item's
Rankings GSI sort key 2 more (delete the old index entry, put the new one). `exact` is true when
the handler's counts equal a clean recount of the lines in the table; the naive loop is then
shown double-counting after one redelivered batch.

Usage: python bench/aggregate.py [--quick | --smoke]
  --quick: the deployed batch size only, and the naive loop timed on the first 300 records
  (its calls and write units are counted for all 10,000 either way: one update per delta).
  --smoke: 400 records, seconds: the same code path and JSON keys.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local, workloads  # noqa: E402
from hybridsync.local.dynamodb import streams  # noqa: E402
from hybridsync.model.convert import marshal, unmarshal  # noqa: E402
from hybridsync.sync import aggregate  # noqa: E402
from shop.model import CANCELLED, MODEL, ORDER_LINE  # noqa: E402

AGGREGATION = aggregate.Aggregation(MODEL)

RECORDS = 10_000
DEPLOYED_BATCH = 5_000
NAIVE_UNITS_PER_UPDATE = 1 + 2  # the item + its Rankings GSI entry moved


def zipf(n: int, s: float, rng: random.Random) -> Any:
    weights = [1 / k**s for k in range(1, n + 1)]
    total, acc, cumulative = sum(weights), 0.0, []
    for w in weights:
        acc += w / total
        cumulative.append(acc)
    return lambda: min(bisect.bisect_left(cumulative, rng.random()), n - 1)


def workload(stack: local.LocalStack, count: int = RECORDS) -> tuple[list[dict[str, Any]], str]:
    rng = random.Random(20261122)
    product, customer = zipf(500, 1.2, rng), zipf(2000, 1.1, rng)
    lines = []
    order = 0
    while len(lines) < count * 0.92:
        order += 1
        who = f"c{customer()}"
        for line_no in range(1, rng.randint(1, 4) + 1):
            lines.append({
                "OrderId": f"o{order}", "CustomerId": who, "LineNo": line_no, "Status": "OPEN",
                "CreatedAt": f"2026-11-22T{order % 24:02d}:00:00.000Z", "ProductId": f"p{product()}",
                "Quantity": rng.randint(1, 3), "UnitPrice": Decimal(rng.randint(100, 9999)) / 100,
                "Version": 1,
            })  # fmt: skip
    edits = count // 20
    changes = [line | {"Quantity": line["Quantity"] + 1, "Version": 2} for line in rng.sample(lines, edits)]
    cancelled = rng.sample(lines, count - edits - len(lines))
    changes += [line | {"Status": CANCELLED, "Version": 3} for line in cancelled]
    client, table = stack.client(), stack.table_names["main"]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
    reader.read()
    for start in range(0, len(lines), 25):
        puts = [
            {"PutRequest": {"Item": marshal(ORDER_LINE.item(line))}} for line in lines[start : start + 25]
        ]
        client.batch_write_item(RequestItems={table: puts})
    for line in changes:  # one by one: an edit and a cancellation may hit the same line
        client.put_item(TableName=table, Item=marshal(ORDER_LINE.item(line)))
    records = reader.read()
    assert len(records) == count, len(records)
    return records, reader.shard


def recount(records: list[dict[str, Any]]) -> dict[tuple, tuple]:
    """Clean answer: the latest image of every line, folded once (the engine's recount)."""
    latest: dict[str, dict] = {}
    for record in records:
        latest[str(record["dynamodb"]["Keys"])] = record
    images = [unmarshal(r["dynamodb"]["NewImage"]) for r in latest.values() if r["dynamodb"].get("NewImage")]
    return AGGREGATION.recount(images)


def stored(client: Any, table: str) -> dict[tuple, tuple]:
    return AGGREGATION.stored(workloads.scan(client, table))


def naive_updates(records: list[dict[str, Any]]) -> list[tuple]:
    """What a per-record counter loop sends: one update per aggregate a record changes."""
    updates = []
    for record in records:
        delta = AGGREGATION.parse(record)
        updates += list((delta.deltas if delta else {}).items())
    return updates


def naive(client: Any, table: str, records: list[dict[str, Any]]) -> None:
    for item, values in naive_updates(records):
        client.update_item(**AGGREGATION._update(table, item[0], item[1:], values)["Update"])


def handler_run(
    client: Any, table: str, records: list[dict[str, Any]], batch: int, shard: str
) -> aggregate.Outcome:
    total = aggregate.Outcome()
    for start in range(0, len(records), batch):
        outcome = AGGREGATION.aggregate(records[start : start + batch], client, table, shard)
        total.calls += outcome.calls
        total.write_units += outcome.write_units
        total.transactions += outcome.transactions
        total.applied += outcome.applied
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="only the deployed batch size")
    parser.add_argument("--smoke", action="store_true", help="400 records: seconds")
    args = parser.parse_args()
    batches = [DEPLOYED_BATCH] if args.quick or args.smoke else [DEPLOYED_BATCH, 1000]
    count = 400 if args.smoke else RECORDS

    with local.start(workloads.scratch("bench-"), prefix="bench") as stack:
        records, shard = workload(stack, count)
        clean = recount(records)
        print(f"{count:,} records, {len(clean):,} aggregate items in the clean recount")
        print(f"{'method':>22} {'calls':>8} {'write units':>12} {'records/s':>10} {'exact':>6}")
        results: dict[str, Any] = {}
        for n, batch in enumerate(batches):
            target = stack.with_tables(f"agg{n}", streams=False)  # each method from empty tables
            client, table = target.client(), target.table_names["main"]
            started = time.perf_counter()
            outcome = handler_run(client, table, records, batch, shard)
            elapsed = time.perf_counter() - started
            exact = stored(client, table) == clean
            replay = handler_run(client, table, records[:batch], batch, shard)  # a redelivered batch
            exact = exact and replay.applied == 0 and stored(client, table) == clean
            results[batch] = (outcome, elapsed, exact)
            print(f"{f'handler, batch {batch:,}':>22} {outcome.calls:>8,} {outcome.write_units:>12,} "
                  f"{count / elapsed:>10,.0f} {exact!s:>6}")  # fmt: skip

        naive_calls = len(naive_updates(records))
        naive_units = naive_calls * NAIVE_UNITS_PER_UPDATE
        sample = records[: 60 if args.smoke else 300] if args.quick or args.smoke else records
        target = stack.with_tables("naive", streams=False)
        client, table = target.client(), target.table_names["main"]
        started = time.perf_counter()
        naive(client, table, sample)
        naive_elapsed = (time.perf_counter() - started) * len(records) / len(sample)
        naive_exact = stored(client, table) == recount(sample)
        naive(client, table, sample[:300])  # one redelivered batch (the whole sample in smoke)
        replayed_exact = stored(client, table) == recount(sample)
        print(f"{'naive loop':>22} {naive_calls:>8,} {naive_units:>12,} {count / naive_elapsed:>10,.0f} "
              f"{naive_exact!s:>6}  (after one redelivered batch: exact={replayed_exact})")  # fmt: skip

    outcome, elapsed, exact = results[DEPLOYED_BATCH]
    for batch, (other, _, _) in results.items():
        print(f"write units ratio at batch {batch:,}: {other.write_units / naive_units:.3f}")
    print(json.dumps({
        "records": count,
        "batch_size": DEPLOYED_BATCH,
        "write_units": outcome.write_units,
        "naive_write_units": naive_units,
        "write_units_ratio": round(outcome.write_units / naive_units, 3),
        "dynamodb_calls": outcome.calls,
        "naive_dynamodb_calls": naive_calls,
        "records_per_s": round(count / elapsed),
        "naive_records_per_s": round(count / naive_elapsed),
        "exact": exact,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
