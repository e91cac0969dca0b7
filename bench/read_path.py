"""Read path: cache hit vs cache miss vs a direct SQL read, and the outbox drain rate, one run.

Through the real read API handler (API Gateway v2 events) on moto server + embedded PostgreSQL:

  hit     GET /customers/{id} for ids already cached
  miss    GET /customers/{id} for ids not cached yet: GetItem, SQL read, conditional populate
  sql     the same row read straight from PostgreSQL (the floor a cache has to beat)

Latencies are per request, p50 and p99; calls are counted per request (botocore and SQLAlchemy
hooks). Then 2,000 PostgreSQL updates are drained from the outbox into DynamoDB, beside the raw
rate of unconditional PutItem calls to the same table.

Usage: python bench/read_path.py [--quick | --smoke]   (--quick: 100 requests per case instead of
400; --smoke: 10 requests and 40 changes, seconds, the same code path and JSON keys)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.model.convert import marshal  # noqa: E402
from hybridsync.runtime.clients import dynamodb, engine  # noqa: E402
from hybridsync.sync import outbox  # noqa: E402
from hybridsync.workloads import scratch  # noqa: E402
from shop.model import MODEL, PRODUCT_AVAILABILITY  # noqa: E402
from tests.handlers import LambdaContext, load  # noqa: E402


def event(path: str) -> dict[str, Any]:
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "", "headers": {},
            "isBase64Encoded": False, "requestContext": {"http": {"method": "GET", "path": path,
            "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "bench"}, "requestId": "b",
            "routeKey": "$default", "stage": "$default"}}  # fmt: skip


class Calls:
    """Counts DynamoDB requests and SQL statements."""

    def __init__(self, client: Any, engine: sa.Engine):
        self.dynamodb = self.sql = 0
        client.meta.events.register("before-call.dynamodb.*", self._dynamodb)
        sa.event.listen(engine, "before_cursor_execute", self._sql)

    def _dynamodb(self, **_: Any) -> None:
        self.dynamodb += 1

    def _sql(self, *_: Any) -> None:
        self.sql += 1


def percentile(samples: list[float], p: float) -> float:
    return statistics.quantiles(samples, n=100)[int(p) - 1] if len(samples) > 1 else samples[0]


def measure(run: Any, ids: list[str], calls: Calls) -> dict[str, float]:
    times = []
    before = (calls.dynamodb, calls.sql)
    for cid in ids:
        started = time.perf_counter()
        run(cid)
        times.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p99_ms": round(percentile(times, 99), 3),
        "dynamodb_calls": round((calls.dynamodb - before[0]) / len(ids), 2),
        "sql_calls": round((calls.sql - before[1]) / len(ids), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="100 requests per case")
    parser.add_argument("--smoke", action="store_true", help="10 requests per case, 40 changes: seconds")
    args = parser.parse_args()
    n = 10 if args.smoke else 100 if args.quick else 400

    with local.start(scratch("bench-"), prefix="bench") as stack:
        os.environ.update(stack.environment())
        os.environ.update({"POWERTOOLS_METRICS_NAMESPACE": "bench", "POWERTOOLS_METRICS_DISABLED": "true",
                           "POWERTOOLS_LOG_LEVEL": "WARNING"})  # fmt: skip
        api = load("api")
        database, client = engine(), dynamodb()  # the handler's own clients, built once per container
        ids = [f"c-{i:05d}" for i in range(2 * n)]
        with database.begin() as conn:
            insert = "INSERT INTO customers (customer_id, name, email, tier) VALUES (:c, :n, :e, 'gold')"
            conn.execute(sa.text(insert),
                         [{"c": c, "n": f"Customer {c}", "e": f"{c}@example.com"} for c in ids])  # fmt: skip
            conn.execute(sa.text("DELETE FROM outbox"))
        calls = Calls(client, database)

        def request(cid: str) -> None:
            response = api.handler(event(f"/customers/{cid}"), LambdaContext())
            assert response["statusCode"] == 200, response

        def direct(cid: str) -> None:
            with database.connect() as conn:
                conn.execute(sa.text("SELECT * FROM customers WHERE customer_id = :c"), {"c": cid}).one()

        miss = measure(request, ids[:n], calls)  # first reads: misses that populate
        hit = measure(request, ids[:n], calls)  # the same ids again: hits
        sql = measure(direct, ids[n:], calls)
        print(f"{'case':>6} {'p50 ms':>8} {'p99 ms':>8} {'DynamoDB calls':>15} {'SQL calls':>10}")
        for name, figures in (("hit", hit), ("miss", miss), ("sql", sql)):
            print(f"{name:>6} {figures['p50_ms']:>8} {figures['p99_ms']:>8} {figures['dynamodb_calls']:>15} "
                  f"{figures['sql_calls']:>10}")  # fmt: skip

        changes = 40 if args.smoke else 2000
        products = [f"p-{i:04d}" for i in range(changes // 4)]
        with database.begin() as conn:
            insert = "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1, 0)"
            conn.execute(sa.text(insert),
                         [{"p": p} for p in products])  # fmt: skip
            for stock in range(1, 4):
                conn.execute(sa.text("UPDATE product_availability SET stock = :s"), {"s": stock})
        table = stack.table_names["main"]
        started = time.perf_counter()
        drained = outbox.drain_all(database, client, MODEL, stack.table_names)
        drain_s = time.perf_counter() - started
        assert drained.claimed == changes, drained
        started = time.perf_counter()
        for number, product in enumerate(products):
            item = PRODUCT_AVAILABILITY.item(
                {"ProductId": f"raw-{product}", "Price": 1, "Stock": 1, "Version": number}
            )
            client.put_item(TableName=table, Item=marshal(item))
        raw_per_s = len(products) / (time.perf_counter() - started)
        outbox_per_s = changes / drain_s
        print(f"outbox drain: {changes} changes ({len(products)} rows x 4 versions) in {drain_s:.2f} s = "
              f"{outbox_per_s:,.0f} changes/s; raw PutItem {raw_per_s:,.0f} items/s")  # fmt: skip

    print(json.dumps({
        "hit_dynamodb_calls": hit["dynamodb_calls"], "hit_sql_calls": hit["sql_calls"],
        "miss_dynamodb_calls": miss["dynamodb_calls"], "miss_sql_calls": miss["sql_calls"],
        "hit_p50_ms": hit["p50_ms"], "miss_p50_ms": miss["p50_ms"], "sql_p50_ms": sql["p50_ms"],
        "hit_vs_sql_p50_ratio": round(hit["p50_ms"] / sql["p50_ms"], 3),
        "outbox_changes_per_s": round(outbox_per_s), "raw_dynamodb_writes_per_s": round(raw_per_s),
        "outbox_vs_raw_ratio": round(outbox_per_s / raw_per_s, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
