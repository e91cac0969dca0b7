"""Two Regions: how much later a write made in a replica Region reaches PostgreSQL than one made at
home, and what writes racing in both Regions leave behind.

The app (cdk.out, or `--assembly`) with a us-west-2 replica of every table, as `-c
replica_regions=us-west-2` renders it (its templates edited so: replicas, streams with both
images), runs on services of its own: embedded PostgreSQL, DynamoDB Local at home and one in
us-west-2 with the replicator between them (`hybridsync up --regions us-east-1,us-west-2`:
local/dynamodb/replication.py), its batching windows at 0 (`-c freshness=realtime`).

Part 1, freshness by Region. B bursts (default 12; --smoke 2), each W order lines (default 10;
--smoke 3) written with plain PutItem at home and W in us-west-2 at once, each line its own. A
watcher polling PostgreSQL every 20 ms notes when each line is a row. p50/p99 per Region, and their
ratio: a write in us-west-2 waits for replication (the lag, 0.3 s by default, plus a poll) before
home's stream carries it. Beside them the replicator's own latency per Region pair (CloudWatch's
`ReplicationLatency`, from when it read the write).

Part 2, failing over. A writer per Region puts lines, each its own, while the app fails over live
to us-west-2 (`hybridsync failover`: local/failover.py). The hand-over's steps in seconds (fence,
replication settled, the pipeline started there, the aggregates rebuilt), and each line's time to
its row: the worst against home's p50 of part 1 says how long a change waits across it.

Part 3, racing, on the new home. Two writers per Region for S seconds (default 20; --smoke 4) on the
same 16 orders' lines: puts, deletes, conditional increments. Then: whether every replica holds
the same items, the drift between them and PostgreSQL, whether the aggregates equal a recount,
the versions a Region's newer write had to win back.

What travels: the ratio of Regions (one machine, the same emulators: it measures the replication
lag the twin is given, not AWS's distance) and the correctness figures, which must hold anywhere.
The hand-over's length is mostly its rebuild's, which scans the table: it grows with the table.

Usage: python bench/regions.py [--smoke] [--bursts N] [--writes N] [--seconds S] [--lag S] [--assembly DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local, workloads  # noqa: E402
from hybridsync.local.app import LocalApp  # noqa: E402
from hybridsync.local.dynamodb.replication import canonical  # noqa: E402
from hybridsync.local.failover import failover  # noqa: E402
from hybridsync.local.template import synth_if_stale  # noqa: E402
from hybridsync.model.convert import marshal  # noqa: E402
from hybridsync.runtime import db  # noqa: E402
from hybridsync.workloads import percentile, scratch  # noqa: E402
from shop.model import MODEL, ORDER_LINE  # noqa: E402
from tests.integration.test_regions import HOME, WEST, replicated  # noqa: E402

CREATED = "2031-07-08T09:00:00.000Z"
WATCH_EVERY_S = 0.02
WAIT_S = 20.0


def line(tag: str, order: int, number: int, **values: Any) -> dict[str, Any]:
    return {"OrderId": f"{tag}-o{order}", "CustomerId": f"{tag}-c{order % 4}", "CreatedAt": CREATED,
            "Status": "OPEN", "Version": 1, "LineNo": number, "ProductId": f"{tag}-p{order % 3}",
            "Quantity": 2, "UnitPrice": Decimal("1.5")} | values  # fmt: skip


def freshness(
    app: LocalApp, engine: sa.Engine, bursts: int, writes: int, seed: int
) -> dict[str, list[float]]:
    """Part 1: per Region, the seconds from each PutItem's return until its row is in PostgreSQL."""
    table, rng = app.tables["MainTable"], random.Random(seed)
    clients = {HOME: app.client, WEST: app.replicator.regions[WEST].client()}
    seen: dict[str, list[float]] = {HOME: [], WEST: []}
    for _ in range(bursts):
        tag = f"f{uuid.uuid4().hex[:6]}"
        written: dict[str, tuple[str, float]] = {}  # order id -> (Region, when its put returned)

        def put(region: str, n: int, tag: str = tag, written: dict = written) -> None:
            values = line(tag, n, 1, OrderId=f"{tag}-{region}-o{n}")
            clients[region].put_item(TableName=table, Item=marshal(ORDER_LINE.item(values)))
            written[values["OrderId"]] = (region, time.monotonic())

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda r: [put(r, n) for n in range(writes)], (HOME, WEST)))
        deadline = time.monotonic() + WAIT_S
        while written and time.monotonic() < deadline:
            with engine.connect() as conn:
                rows = conn.execute(sa.text("SELECT order_id FROM order_lines WHERE order_id LIKE :t"),
                                    {"t": f"{tag}-%"}).scalars().all()  # fmt: skip
            now = time.monotonic()
            for order_id in set(rows) & set(written):
                region, at = written.pop(order_id)
                seen[region].append(now - at)
            time.sleep(WATCH_EVERY_S)
        seen["unseen"] = [*seen.get("unseen", []), *(1.0 for _ in written)]
        time.sleep(rng.uniform(0.2, 0.8))
    return seen


def handover(app: LocalApp, engine: sa.Engine) -> tuple[LocalApp, dict[str, Any]]:
    """Part 2: a live failover to us-west-2 with a writer per Region; the app it leaves running."""
    table, tag, stop = app.tables["MainTable"], f"h{uuid.uuid4().hex[:6]}", threading.Event()
    written: dict[str, float] = {}  # order id -> when its put returned

    def writer(region: str) -> None:
        client, n = app.replicator.regions[region].client(), 0
        while not stop.is_set():
            values = line(tag, n, 1, OrderId=f"{tag}-{region}-o{n}")
            client.put_item(TableName=table, Item=marshal(ORDER_LINE.item(values)))
            written[values["OrderId"]] = time.monotonic()
            n += 1
            time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(region,)) for region in (HOME, WEST)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(2)
        moved, done = failover(app, WEST, MODEL)
        time.sleep(2)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    delays, deadline = [], time.monotonic() + 3 * WAIT_S
    while written and time.monotonic() < deadline:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT order_id FROM order_lines WHERE order_id LIKE :t"),
                                {"t": f"{tag}-%"}).scalars().all()  # fmt: skip
        now = time.monotonic()
        delays += [now - written.pop(order_id) for order_id in set(rows) & set(written)]
        time.sleep(WATCH_EVERY_S)
    steps = {f"handover_{k}": round(v, 2) for k, v in done.as_json().items() if k.endswith("_s")}
    return moved, steps | {"handover_rows": len(delays), "handover_unseen": len(written),
                           "handover_row_p50_s": round(percentile(delays, 0.5), 3),
                           "handover_row_max_s": round(max(delays, default=0.0), 3),
                           "handover_rebuild_written": done.rebuild.get("written", 0)}  # fmt: skip


def racing(app: LocalApp, engine: sa.Engine, seconds: float, seed: int) -> dict[str, Any]:
    """Part 3: two writers per Region on the same lines, then everything checked."""
    table, tag, until = app.tables["MainTable"], f"r{uuid.uuid4().hex[:6]}", time.monotonic() + seconds
    clients = {region: app.replicator.regions[region].client() for region in (HOME, WEST)}
    writes = [0]

    def writer(region: str, n: int) -> None:
        rng, client = random.Random(seed * 10 + n), clients[region]
        while time.monotonic() < until:
            values = line(tag, rng.randrange(16), rng.randrange(1, 3), Quantity=rng.randrange(1, 9),
                          Status=rng.choice(["OPEN", "OPEN", "CANCELLED"]))  # fmt: skip
            key, roll = marshal(ORDER_LINE.key(values)), rng.random()
            if roll < 0.6:
                client.put_item(TableName=table, Item=marshal(ORDER_LINE.item(values)))
            elif roll < 0.75:
                client.delete_item(TableName=table, Key=key)
            else:
                with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
                    client.update_item(
                        TableName=table,
                        Key=key,
                        UpdateExpression="SET Quantity = Quantity + :one",
                        ConditionExpression="Quantity < :most",
                        ExpressionAttributeValues={":one": {"N": "1"}, ":most": {"N": "9"}},
                    )
            writes[0] += 1
            time.sleep(0.01)

    threads = [threading.Thread(target=writer, args=(r, n)) for n, r in enumerate([HOME, WEST, HOME, WEST])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    settled = app.replicator.settle(120)
    caught_up = workloads.wait_caught_up(lambda: app.status()["mappings"], engine, timeout_s=180)

    def items(client: Any) -> list[str]:
        pages = client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        return sorted(canonical(i) for page in pages for i in page["Items"] if tag in str(i))

    verdict = workloads.verify(app.client, app.table_names, engine, MODEL, keep=lambda k: tag in str(k))
    drift = sum(1 for d in verdict.to_sql.values() for k in d.missing + d.stale + d.extra if tag in str(k))
    return {"racing_writes": writes[0], "settled": settled and caught_up,
            "replicas_equal": items(clients[HOME]) == items(clients[WEST]), "racing_drift": drift,
            "aggregates_equal_recount": bool(verdict.stored) and verdict.aggregates_equal,
            "won_back": app.replicator.figures()["overwritten"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/regions.py --smoke")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="2 bursts of 3, 4 s of racing: seconds")
    parser.add_argument("--bursts", type=int, help="bursts (default 12; --smoke 2)")
    parser.add_argument("--writes", type=int, help="lines per Region per burst (default 10; --smoke 3)")
    parser.add_argument("--seconds", type=float, help="seconds of racing writes (default 20; --smoke 4)")
    parser.add_argument("--lag", type=float, default=0.3, help="the replication lag, s (default 0.3)")
    parser.add_argument("--seed", type=int, default=20261129, help="the writers' seed")
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    args = parser.parse_args()
    bursts, writes = args.bursts or (2 if args.smoke else 12), args.writes or (3 if args.smoke else 10)
    state = scratch("bench-regions-")
    with local.start(state, tables=False) as stack:
        assembly = replicated(args.assembly or synth_if_stale(ROOT / "cdk.out"))
        app = LocalApp(assembly, **stack.endpoints(), state_dir=state / "app", regions=[HOME, WEST],
                       replication_lag_s=args.lag)  # fmt: skip
        engine = db.create_engine(stack.database_url)
        app.start(http_port=None, schedules=False)
        try:
            seen = freshness(app, engine, bursts, writes, args.seed)
            latency = app.replicator.figures()["latency"]
            app, moved = handover(app, engine)
            race = racing(app, engine, args.seconds or (4 if args.smoke else 20), args.seed)
        finally:
            app.stop()
            engine.dispose()
    home_p50, west_p50 = percentile(seen[HOME], 0.5), percentile(seen[WEST], 0.5)
    figures = {
        "bursts": bursts, "writes_per_region": writes, "lag_s": args.lag,
        "home_row_p50_s": round(home_p50, 3), "home_row_p99_s": round(percentile(seen[HOME], 0.99), 3),
        "replica_row_p50_s": round(west_p50, 3), "replica_row_p99_s": round(percentile(seen[WEST], 0.99), 3),
        "replica_vs_home_row_p50_ratio": round(west_p50 / home_p50, 2) if home_p50 else None,
        "unseen": len(seen.get("unseen", [])),
        "replication_p50_ms": latency.get(f"{WEST}->{HOME}", {}).get("p50_ms"),
        "replication_max_ms": latency.get(f"{WEST}->{HOME}", {}).get("max_ms"),
    } | moved | race  # fmt: skip
    worst = moved["handover_row_max_s"]
    figures["handover_row_max_vs_home_row_p50_ratio"] = round(worst / home_p50, 1) if home_p50 else None
    for name, value in figures.items():
        print(f"{name:32} {value}")
    print(json.dumps(figures))
    good = figures["unseen"] == moved["handover_unseen"] == 0 and race["settled"] and race["replicas_equal"]
    good = good and race["racing_drift"] == 0
    if not (good and race["aggregates_equal_recount"]):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
