"""Write-back throughput: the real handler vs a naive per-record loop vs COPY (the limit), one run,
for records of both kinds of writer; then what settling costs against a replay.

Stream batches of 1,000 and 10,000 real records (orders and their lines, written to DynamoDB Local
and read back from its stream) go into embedded PostgreSQL three ways, each from empty tables:

  handler  hybridsync/functions/write_back.py as Lambda calls it (its Truth: the stack's DynamoDB
           client and tables): decode, place by keys, coalesce, per table one merge guarded by
           the rows' stream positions
  naive    the same decoding, then one INSERT ... ON CONFLICT and one commit per record
  copy     the limit: the same decoding, then COPY into temp tables + one INSERT ... SELECT ... ON
           CONFLICT per table, guarded by stream position as the handler's merge is (the fastest
           way PostgreSQL ingests rows; no coalescing, no bisect)

Each batch is measured twice, side by side: `engine` records (the items as hybridsync's writers
make them: an `Entity` tag and a `Version`) and `plain` records (the same items written as an
existing service writes them: no tag, no version), so the handler's ratio to COPY is compared
for both. Every path starts from the same stream records and must decode them; the table also shows
the SQL-only figures (rows already decoded) for the handler's statement vs COPY.

Then settling (`writeback.write_back` with `Truth(stack client, stack tables)`, the plain records):

  replay   the same records again once they applied: each row at the record's position, nothing
           read, nothing written
  settle   the rows' stream_position NULL, as `hybridsync load` or SQL leaves them: each row locked,
           its item read with one consistent BatchGetItem per 100 keys, written as the table holds it
  verify   `verify=True` (a redrive): every change settled from the table, rows at their positions

with records/s, the items read per record and the read units that implies (a consistent read of
an item up to 4 KB is one unit: hybridsync.dynamodb.capacity's read_units of each item read, beside the
ConsumedCapacity DynamoDB reports); then whether a settled row keeps a NULL position (and so is
read again by the next record of its key).

Usage: python bench/write_back.py [--quick | --smoke]   (--quick: the 1,000-record batch only;
--smoke: a 60-record batch, seconds, the same code path and JSON keys)
example: python bench/write_back.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.dynamodb.capacity import Meter, item_size, read_units  # noqa: E402
from hybridsync.local.dynamodb import streams  # noqa: E402
from hybridsync.model.convert import marshal  # noqa: E402
from hybridsync.sql.schema import table_of  # noqa: E402
from hybridsync.sync import writeback  # noqa: E402
from hybridsync.workloads import scratch  # noqa: E402
from shop.model import MODEL  # noqa: E402
from tests.handlers import LambdaContext, load  # noqa: E402

TABLES = ("orders", "order_lines")
POSITION = writeback.POSITION
KINDS = ("engine", "plain")  # items as hybridsync writes them; as a service knowing nothing of it does


def make_records(stack: local.LocalStack, count: int, run: str, plain: bool = False) -> list[dict]:
    """`count` real stream records: each order followed by its two lines. `plain`: the same items
    without the entity tag and the version, as an existing service's PutItem writes them."""
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
    if plain:
        for item in items:
            item.pop(MODEL.names.entity)
            item.pop(MODEL.names.version)
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
            assert isinstance(change, writeback.Change)
            table = table_of(change.entity)
            row = change.row | {"version": change.version, "deleted": change.deleted,
                                POSITION: change.position}  # fmt: skip
            jsonb = {f.column for f in change.entity.fields if f.type.sql == "jsonb"}
            values = ", ".join(f"CAST(:{c} AS jsonb)" if c in jsonb else f":{c}" for c in row)
            key = [change.entity.field(a).column for a in change.entity.sql_key]
            updates = ", ".join(f"{c} = excluded.{c}" for c in row if c not in key)
            conn.execute(
                sa.text(f"INSERT INTO {table.name} ({', '.join(row)}) VALUES ({values}) "
                        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates} "
                        f"WHERE {table.name}.{POSITION} < excluded.{POSITION}"), row,
            )  # fmt: skip
            conn.commit()


def copy_limit(engine: sa.Engine, rows: dict[str, list[tuple]]) -> None:
    raw = engine.raw_connection()
    try:
        with raw.cursor() as cur:
            for name, table_rows in rows.items():
                entity = next(e for e in MODEL.synced() if e.sql_table == name)
                columns = [f.column for f in entity.fields] + ["version", "deleted", POSITION]
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
                    f"WHERE {name}.{POSITION} < excluded.{POSITION}"
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
        assert isinstance(change, writeback.Change) and change.entity.sql_table
        rows[change.entity.sql_table].append((*change.row.values(), change.version, change.deleted,
                                              change.position))  # fmt: skip
    return rows


def count_rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return sum(conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES)


def timed(engine: sa.Engine, run: Callable[[], None], expected: int, repeats: int,
          prepare: Callable[[], None] | None = None) -> float:  # fmt: skip
    """Best of `repeats` runs, each after `prepare` (default: empty tables); checks every row is there."""
    best = float("inf")
    for _ in range(repeats):
        (prepare or (lambda: truncate(engine)))()
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
        assert count_rows(engine) == expected
    return best


def measure(stack: local.LocalStack, handler: Any, engine: sa.Engine, size: int, kind: str) -> dict[str, Any]:
    records = make_records(stack, size, f"{kind[0]}{size}", plain=kind == "plain")
    changes = writeback.coalesce(writeback.decode(r, MODEL) for r in records)  # type: ignore[misc]
    assert all(isinstance(c, writeback.Change) for c in changes) and len(changes) == size
    assert (kind == "plain") == all(c.version is None for c in changes), kind  # the writer's version, or none
    rows = decoded_rows(records)
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
        "sql_only_vs_copy_ratio": round(sql_limit / sql_ours, 2),
    }
    print(f"{kind:<7} {size:>7} {result['records_per_s']:>14,} {result['naive_records_per_s']:>12,} "
          f"{result['copy_records_per_s']:>11,} {result['vs_copy_ratio']:>7}x {result['vs_naive_ratio']:>8}x"
          f"   (SQL only: {round(size / sql_ours):,} vs COPY {round(size / sql_limit):,} rows/s, "
          f"{sql_limit / sql_ours:.2f}x)", flush=True)  # fmt: skip
    return {"records": records, **result}


def forget_positions(engine: sa.Engine) -> None:
    """The rows as a load (or SQL) leaves them: no stream position."""
    with engine.begin() as conn:
        for table in TABLES:
            conn.execute(sa.text(f"UPDATE {table} SET {POSITION} = NULL"))


def null_positions(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return sum(conn.execute(sa.text(f"SELECT count(*) FROM {t} WHERE {POSITION} IS NULL")).scalar_one()
                   for t in TABLES)  # fmt: skip


@dataclass(frozen=True)
class CountedTruth(writeback.Truth):
    """The engine's Truth, counting the read units of the items it read (consistent: one per
    started 4 KB of each item, hybridsync.dynamodb.capacity)."""

    units: list[float] = field(default_factory=list)

    def current(self, changes: Sequence[writeback.Change]) -> list[dict[str, Any] | None]:
        items = super().current(changes)
        self.units.extend(read_units(item_size(i), consistent=True) for i in items if i is not None)
        return items


def settling(stack: local.LocalStack, engine: sa.Engine, records: list[dict], repeats: int) -> dict[str, Any]:
    """Replay vs settle vs verify over the same applied records: records/s, items read, read units."""
    meter = Meter()  # for the requests and DynamoDB's own ConsumedCapacity
    truth = CountedTruth(meter.attach(stack.client()), stack.table_names)
    size = len(records)
    truncate(engine)
    first = writeback.write_back(records, engine, MODEL, truth=truth)
    assert (first.changed, first.read) == (size, 0), first
    modes = {
        "replay": (lambda: None, False),
        "settle": (lambda: forget_positions(engine), False),
        "verify": (lambda: None, True),
    }
    out: dict[str, Any] = {}
    print(f"\nsettling {size:,} plain records already applied (best of {repeats}):")
    print(f"{'':<8} {'rec/s':>9} {'items read/rec':>15} {'read units/rec':>15} {'DynamoDB says':>14}"
          f" {'rows changed':>13}")  # fmt: skip
    for mode, (prepare, verify) in modes.items():
        best, outcome = float("inf"), None
        for _ in range(repeats):
            prepare()
            meter.reset()
            truth.units.clear()
            started = time.perf_counter()
            outcome = writeback.write_back(records, engine, MODEL, truth=truth, verify=verify)
            best = min(best, time.perf_counter() - started)
            assert count_rows(engine) == size and not outcome.rejected, outcome
        assert outcome is not None
        spent = meter.cost
        per = {
            "records_per_s": round(size / best),
            "items_read_per_record": round(outcome.read / size, 3),
            "read_units_per_record": round(sum(truth.units) / size, 3),
            "consumed_units_per_record": None if spent.consumed is None else round(spent.consumed / size, 3),
            "requests": spent.requests,
            "changed": outcome.changed,
        }
        out |= {f"{mode}_{k}": v for k, v in per.items()}
        shown = "-" if per["consumed_units_per_record"] is None else per["consumed_units_per_record"]
        print(f"{mode:<8} {per['records_per_s']:>9,} {per['items_read_per_record']:>15} "
              f"{per['read_units_per_record']:>15} {shown!s:>14} {per['changed']:>13}"
              f"   ({spent.requests} BatchGetItem requests)", flush=True)  # fmt: skip
    # a settled row the item already holds keeps its NULL position: what the next record of its key meets
    forget_positions(engine)
    writeback.write_back(records, engine, MODEL, truth=truth)
    out["null_positions_after_settle"] = null_positions(engine)
    again = writeback.write_back(records, engine, MODEL, truth=truth)
    out["settle_again_items_read_per_record"] = round(again.read / size, 3)
    out["settle_vs_replay_ratio"] = round(out["replay_records_per_s"] / out["settle_records_per_s"], 2)
    print(f"settle costs {out['settle_vs_replay_ratio']}x a replay's time; after it, "
          f"{out['null_positions_after_settle']:,} of {size:,} rows still without a position (the "
          f"next replay reads {out['settle_again_items_read_per_record']} items per record)")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="only the 1,000-record batch")
    parser.add_argument("--smoke", action="store_true", help="a 60-record batch: seconds")
    args = parser.parse_args()
    sizes = [60] if args.smoke else [1000] if args.quick else [1000, 10000]

    with local.start(scratch("bench-"), prefix="bench") as stack:
        os.environ.update(stack.environment())
        os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "hybridsync-bench")
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # keep EMF lines out of the table
        handler = load("write_back")  # its Truth: runtime.dynamodb() and tables() of this environment
        engine = handler.engine()
        results: dict[tuple[int, str], dict[str, Any]] = {}
        print(f"{'kind':<7} {'records':>7} {'handler rec/s':>14} {'naive rec/s':>12} {'copy rec/s':>11} "
              f"{'vs copy':>8} {'vs naive':>9}")  # fmt: skip
        for size in sizes:
            for kind in KINDS:
                results[(size, kind)] = measure(stack, handler, engine, size, kind)
        for size in sizes:
            engine_ratio = results[(size, "engine")]["vs_copy_ratio"]
            plain_ratio = results[(size, "plain")]["vs_copy_ratio"]
            print(f"{size:,} records: handler/COPY {engine_ratio}x for engine-written records, "
                  f"{plain_ratio}x for plain ones ({plain_ratio / engine_ratio:.2f} of it)")  # fmt: skip
        settle = settling(stack, engine, results[(sizes[0], "plain")]["records"], 3 if args.smoke else 5)
        engine.dispose()
    figures: dict[str, Any] = {"records": sizes[0]}
    for (size, kind), result in results.items():
        suffix = "" if size == sizes[0] else f"_{size}"
        prefix = "" if kind == "engine" else "plain_"
        figures |= {f"{prefix}{key}{suffix}": v for key, v in result.items() if key != "records"}
    for size in sizes:
        suffix = "" if size == sizes[0] else f"_{size}"
        figures[f"plain_vs_engine_copy_ratio{suffix}"] = round(
            figures[f"plain_vs_copy_ratio{suffix}"] / figures[f"vs_copy_ratio{suffix}"], 3
        )
    print(json.dumps(figures | settle))


if __name__ == "__main__":
    main()
