"""Write-back throughput: the real handler vs a naive per-record loop vs COPY (the limit), one run.

Stream batches of 1,000 and 10,000 real records (orders and their lines, written to moto server and
read back from its stream) go into embedded PostgreSQL three ways, each from empty tables:

  handler  hybridsync/functions/write_back.py as Lambda calls it: decode, coalesce, per table one COPY
           into the session's staging table and one version-guarded merge
  naive    the same decoding, then one INSERT ... ON CONFLICT and one commit per record
  copy     the limit: the same decoding, then COPY into temp tables + one INSERT ... SELECT ... ON
           CONFLICT per table (the fastest way PostgreSQL ingests rows; no coalescing, no bisect)

Every path starts from the same stream records and must decode them; the table also shows the
SQL-only figures (rows already decoded) for the handler's statement vs COPY.

Usage: python bench/write_back.py [--quick | --smoke]   (--quick: the 1,000-record batch only;
--smoke: a 60-record batch, seconds, the same code path and JSON keys)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.convert import marshal  # noqa: E402
from hybridsync.local import streams  # noqa: E402
from hybridsync.schema import table_of  # noqa: E402
from hybridsync.sync import writeback  # noqa: E402
from shop.model import MODEL  # noqa: E402
from tests.handlers import LambdaContext, load  # noqa: E402

TABLES = ("orders", "order_lines")


def make_records(stack: local.LocalStack, count: int, run: str) -> list[dict]:
    """`count` real stream records: each order followed by its two lines."""
    client = stack.client()
    table = stack.table_names["main"]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
    reader.read()
    order, line = MODEL.entity("Order"), MODEL.entity("OrderLine")
    items = []
    n = 0
    while len(items) < count:
        oid = f"{run}-{n:06d}"
        created = f"2026-11-22T07:{n % 60:02d}:00.000Z"
        common = {"OrderId": oid, "CustomerId": f"c-{n % 500}", "Status": "OPEN", "CreatedAt": created,
                  "Version": 1_795_000_000_000 + n}  # fmt: skip
        items.append(order.item(common | {"Total": Decimal("59.97"), "ShippingAddress": {"city": "Zürich"}}))
        for line_no in (1, 2):
            product = f"p-{(n * 7 + line_no) % 300}"
            line_values = {
                "LineNo": line_no,
                "ProductId": product,
                "Quantity": line_no,
                "UnitPrice": Decimal("19.99"),
            }
            items.append(line.item(common | line_values))
        n += 1
    items = items[:count]
    for start in range(0, len(items), 25):
        client.batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": marshal(i)}} for i in items[start : start + 25]]}
        )
    records = reader.read()
    assert len(records) == count, (len(records), count)
    return records


def truncate(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {', '.join(TABLES)}"))


def naive(engine: sa.Engine, records: list[dict]) -> None:
    with engine.connect() as conn:
        for record in records:
            change = writeback.decode(record, MODEL)
            assert change is not None
            table = table_of(change.entity)
            row = change.row | {"version": change.version, "deleted": change.deleted}
            jsonb = {f.column for f in change.entity.fields if f.type.sql == "jsonb"}
            values = ", ".join(f"CAST(:{c} AS jsonb)" if c in jsonb else f":{c}" for c in row)
            key = [change.entity.field(a).column for a in change.entity.sql_key]
            updates = ", ".join(f"{c} = excluded.{c}" for c in row if c not in key)
            conn.execute(
                sa.text(f"INSERT INTO {table.name} ({', '.join(row)}) VALUES ({values}) "
                        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates} "
                        f"WHERE {table.name}.version < excluded.version"), row,
            )  # fmt: skip
            conn.commit()


def copy_limit(engine: sa.Engine, rows: dict[str, list[tuple]]) -> None:
    raw = engine.raw_connection()
    try:
        with raw.cursor() as cur:
            for name, table_rows in rows.items():
                entity = next(e for e in MODEL.synced() if e.sql_table == name)
                columns = [f.column for f in entity.fields] + ["version", "deleted"]
                key = [entity.field(a).column for a in entity.sql_key]
                cur.execute(f"CREATE TEMP TABLE limit_{name} (LIKE {name} INCLUDING DEFAULTS) ON COMMIT DROP")
                with cur.copy(f"COPY limit_{name} ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in table_rows:
                        copy.write_row(row)
                updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
                cur.execute(
                    f"INSERT INTO {name} ({', '.join(columns)}) "
                    f"SELECT {', '.join(columns)} FROM limit_{name} "
                    f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates} "
                    f"WHERE {name}.version < excluded.version"
                )
        raw.commit()
    finally:
        raw.close()


def copy_records(engine: sa.Engine, records: list[dict]) -> None:
    copy_limit(engine, decoded_rows(records))


def handler_sql_only(engine: sa.Engine, changes: list) -> None:
    with engine.begin() as conn:
        writeback.apply_changes(conn, changes)


def decoded_rows(records: list[dict]) -> dict[str, list[tuple]]:
    rows: dict[str, list[tuple]] = {name: [] for name in TABLES}
    for record in records:
        change = writeback.decode(record, MODEL)
        assert change is not None and change.entity.sql_table
        rows[change.entity.sql_table].append((*change.row.values(), change.version, change.deleted))
    return rows


def count_rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return sum(conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES)


def timed(engine: sa.Engine, run: Callable[[], None], expected: int, repeats: int) -> float:
    """Best of `repeats` runs, each from empty tables; checks every row landed."""
    best = float("inf")
    for _ in range(repeats):
        truncate(engine)
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
        assert count_rows(engine) == expected
    return best


def measure(stack: local.LocalStack, handler: Any, engine: sa.Engine, size: int) -> dict[str, Any]:
    records = make_records(stack, size, f"b{size}")
    rows = decoded_rows(records)
    changes = writeback.coalesce(writeback.decode(r, MODEL) for r in records)
    repeats = 5 if size <= 1000 else 3
    ours = timed(engine, lambda: handler.handler({"Records": records}, LambdaContext()), size, repeats)
    loop = timed(engine, lambda: naive(engine, records), size, 1 if size > 1000 else 2)
    limit = timed(engine, lambda: copy_records(engine, records), size, repeats)
    sql_ours = timed(engine, lambda: handler_sql_only(engine, changes), size, repeats)
    sql_limit = timed(engine, lambda: copy_limit(engine, rows), size, repeats)
    result = {
        "records_per_s": round(size / ours),
        "naive_records_per_s": round(size / loop),
        "copy_records_per_s": round(size / limit),
        "vs_copy_ratio": round(limit / ours, 3),
        "vs_naive_ratio": round(loop / ours, 2),
    }
    print(f"{size:>8} {result['records_per_s']:>14,} {result['naive_records_per_s']:>12,} "
          f"{result['copy_records_per_s']:>11,} {result['vs_copy_ratio']:>7}x {result['vs_naive_ratio']:>8}x"
          f"   (SQL only: {round(size / sql_ours):,} vs COPY {round(size / sql_limit):,} rows/s, "
          f"{sql_limit / sql_ours:.2f}x)")  # fmt: skip
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="only the 1,000-record batch")
    parser.add_argument("--smoke", action="store_true", help="a 60-record batch: seconds")
    args = parser.parse_args()
    sizes = [60] if args.smoke else [1000] if args.quick else [1000, 10000]

    with local.start(Path(tempfile.mkdtemp(prefix="bench-")), prefix="bench") as stack:
        os.environ.update(stack.environment())
        os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "hybridsync-bench")
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # keep EMF lines out of the table
        handler = load("write_back")
        engine = handler.engine()
        results = {}
        print(f"{'records':>8} {'handler rec/s':>14} {'naive rec/s':>12} {'copy rec/s':>11} "
              f"{'vs copy':>8} {'vs naive':>9}")  # fmt: skip
        for size in sizes:
            results[size] = measure(stack, handler, engine, size)
        engine.dispose()
    figures = {"records": sizes[0], **results[sizes[0]]}
    for size in sizes[1:]:
        figures |= {f"{key}_{size}": value for key, value in results[size].items()}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
