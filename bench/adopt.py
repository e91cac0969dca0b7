"""Adopting an existing system: a legacy dataset loaded in all three directions and the aggregates
rebuilt, online, each operation run as an operator runs it (`hybridsync load ... --json`, a process
of its own) while a workload writes both sides and the pipeline runs (outbox drain, write-back,
aggregation, in threads of this process); one load killed midway (SIGKILL) and resumed.

The dataset, per size N: N product_availability rows in PostgreSQL (mastered there, no views yet),
N/4 legacy `orders` rows (mastered in DynamoDB, never items), N order lines in DynamoDB written
before the stream was read (never written back, never aggregated) and a few items of no entity.
Side by side in the same run:

  views vs batch write   `load views` against raw BatchWriteItem of the same view items, built in
                         memory beforehand, at the same concurrency, into an empty table
  rows vs COPY + merge   `load rows` against the limit of PostgreSQL's ingest: the same items read by
                         the same parallel scan, then COPY into a temporary table and one merge
  memory                 each command's peak RSS at N and 2N (the loads keep a chunk, not a table)

Usage: python bench/adopt.py [--quick | --smoke] [--rows N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.dynamodb import store  # noqa: E402
from hybridsync.dynamodb.scans import Scanner  # noqa: E402
from hybridsync.dynamodb.views import CACHE_TTL_S, view_item  # noqa: E402
from hybridsync.local.dynamodb import streams  # noqa: E402
from hybridsync.model.convert import item_values, marshal, to_row  # noqa: E402
from hybridsync.runtime import aws, db  # noqa: E402
from hybridsync.sync import aggregate, loads, outbox, writeback  # noqa: E402
from hybridsync.sync.jobs import JobStore  # noqa: E402
from hybridsync.sync.reconcile import reconcile, reconcile_views  # noqa: E402
from hybridsync.workloads import scratch  # noqa: E402
from shop.model import MODEL  # noqa: E402

SEGMENTS = 4
PAGE = 250  # items per Scan request of the killed load: a redo is at most one page per segment
DAY = "2026-11-22T10:00:00.000Z"


class App:
    """The pipeline, in threads: the outbox drained, the stream written back and aggregated (the
    aggregation pausable, as the rebuild pauses its mappings)."""

    def __init__(self, stack: local.LocalStack, engine: sa.Engine):
        self.stack, self.engine, self.client = stack, engine, stack.client()
        self.tables = dict(stack.table_names)
        arn = self.client.describe_table(TableName=self.tables["main"])["Table"]["LatestStreamArn"]
        self.reader = streams.StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
        self.reader.read()  # what is in the stream now is "older than the stream": never delivered
        self.aggregation = aggregate.Aggregation(MODEL)
        self.paused, self.stop = threading.Event(), threading.Event()
        self.backlog: list[dict] = []
        self.quiet = 0  # consecutive polls that found nothing to do
        self.threads = [threading.Thread(target=self._drain), threading.Thread(target=self._consume)]
        for thread in self.threads:
            thread.start()

    def _drain(self) -> None:
        while not self.stop.wait(0.2):
            outbox.drain_all(self.engine, self.client, MODEL, self.tables)

    def _consume(self) -> None:
        while not self.stop.wait(0.2):
            records = self.reader.read()
            self.quiet = 0 if records or self.backlog else self.quiet + 1
            if records:
                writeback.write_back(
                    records, self.engine, MODEL, truth=writeback.Truth(self.client, self.tables)
                )
                self.backlog += records
            if self.backlog and not self.paused.is_set():
                batch, self.backlog = self.backlog, []
                self.aggregation.aggregate(batch, self.client, self.tables["main"], self.reader.shard)

    def settle(self) -> None:
        """Until the outbox is empty and the stream is read and aggregated to its end."""
        for _ in range(400):
            time.sleep(0.25)
            if self.quiet >= 3 and not outbox.backlog(self.engine).depth:
                return

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


class Workload:
    """Writes both sides while the loads run: price changes in PostgreSQL, order lines in DynamoDB."""

    def __init__(self, stack: local.LocalStack, engine: sa.Engine, run: str, products: int):
        self.client, self.table, self.engine = stack.client(), stack.table_names["main"], engine
        self.run, self.products, self.writes = run, products, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._write)
        self.thread.start()

    def _write(self) -> None:
        n = 0
        while not self.stop.wait(0.02):
            with self.engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE product_availability SET price = price + 1 WHERE product_id = :p"),
                    {"p": f"{self.run}-p{(n * 7) % self.products}"},
                )
            values = {
                "OrderId": f"{self.run}-w{n}",
                "CustomerId": f"{self.run}-c{n % 50}",
                "CreatedAt": DAY,
                "Status": "OPEN",
                "LineNo": 1,
                "ProductId": f"{self.run}-p{n % 40}",
                "Quantity": 1 + n % 3,
                "UnitPrice": Decimal("2.50"),
                "Version": 1,
            }
            store.put(self.client, self.table, MODEL.entity("OrderLine"), values)
            self.writes += 2
            n += 1

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def legacy(stack: local.LocalStack, engine: sa.Engine, run: str, size: int) -> list[dict]:
    """The legacy dataset (see the module's docstring); the order-line items, for the baselines."""
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO product_availability (product_id, price, stock) VALUES (:p, :v, 10)"),
            [{"p": f"{run}-p{n}", "v": n % 1000} for n in range(size)],
        )
        conn.execute(
            sa.text(
                "INSERT INTO orders (order_id, customer_id, created_at, status, total, version) "
                "VALUES (:o, :c, :t, 'SHIPPED', 20, 1)"
            ),
            [{"o": f"{run}-lo{n}", "c": f"{run}-c{n % 50}", "t": DAY} for n in range(size // 4)],
        )
    line = MODEL.entity("OrderLine")
    items = [
        line.item(
            {
                "OrderId": f"{run}-o{n // 3}",
                "CustomerId": f"{run}-c{n % 50}",
                "CreatedAt": DAY,
                "Status": "OPEN",
                "LineNo": n % 3,
                "ProductId": f"{run}-p{n % 40}",
                "Quantity": 1 + n % 5,
                "UnitPrice": Decimal("2.50"),
                "Version": 1_795_000_000_000 + n,
            }
        )
        for n in range(size)
    ]
    strays = [{"PK": f"STRAY#{run}-{n}", "SK": "X", "Junk": n} for n in range(3)]
    requests = [{"PutRequest": {"Item": marshal(i)}} for i in items + strays]
    store.batch_write(stack.client(), stack.table_names["main"], requests)
    return items


# the command as a user runs it, reporting its own peak RSS when it exits: VmHWM, the high-water
# mark of this process's memory (getrusage's ru_maxrss would carry the forking parent's over exec)
PEAK = (
    "import atexit, re, runpy, sys; atexit.register(lambda: print('PEAK_RSS_KB', "
    "re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)); "
    "runpy.run_module('hybridsync.cli', run_name='__main__')"
)


def command(env: dict[str, str], *args: str, kill: str | None = None) -> tuple[dict, float, float]:
    """`hybridsync <args> --json` in a process of its own: its JSON, seconds, peak RSS in MB. With
    `kill` (a kind of job), SIGKILLed once a unit of its job has checkpointed a chunk."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", PEAK, *args, "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill:
        threading.Thread(target=_kill_at_first_checkpoint, args=(process, env, kill), daemon=True).start()
    out, err = process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode not in (0, 1) and not kill:
        raise SystemExit(
            f"hybridsync {' '.join(args)} failed ({process.returncode}):\n{out[-2000:]}\n{err[-2000:]}"
        )
    # a process killed on purpose may leave its last line half written: only whole figures count
    peak = [
        f[1]
        for line in err.splitlines()
        if len(f := line.split()) == 2 and f[0] == "PEAK_RSS_KB" and f[1].isdigit()
    ]
    lines = out.strip().splitlines()
    figures = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return figures, seconds, int(peak[0]) / 1024 if peak else 0.0


def _kill_at_first_checkpoint(process: subprocess.Popen, env: dict[str, str], kind: str) -> None:
    jobs = JobStore(aws.client("dynamodb", env["DYNAMODB_ENDPOINT"]), MODEL, {"main": env["TABLE_MAIN"]})
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        listed = [j for j in jobs.jobs() if j["kind"] == kind and j["done"] < j["units"]]
        if listed and any(u.checkpoint for u in jobs.units(listed[0]["job"])):
            process.send_signal(signal.SIGKILL)
            return
        time.sleep(0.02)


def views_baseline(stack: local.LocalStack, engine: sa.Engine, run: str) -> float:
    """BatchWriteItem of the same view items, built beforehand, SEGMENTS threads, an empty table."""
    entity = MODEL.entity("ProductAvailability")
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT to_jsonb(t)::text, version FROM product_availability t WHERE product_id LIKE :r"),
            {"r": f"{run}-p%"},
        ).all()
    now = int(time.time())
    items = [
        view_item(entity, item_values(entity, outbox.exact_json(r[0])), r[1], now=now, ttl_s=CACHE_TTL_S)
        for r in rows
    ]
    scratch = stack.with_tables(
        f"bw{run}"
    )  # with a stream, as the table the load writes: each write pays for it
    client, table = scratch.client(), scratch.table_names["main"]
    requests = [{"PutRequest": {"Item": marshal(i)}} for i in items]
    parts = [requests[n::SEGMENTS] for n in range(SEGMENTS)]
    started = time.perf_counter()
    with ThreadPoolExecutor(SEGMENTS) as pool:
        list(pool.map(lambda part: store.batch_write(client, table, part), parts))
    took = time.perf_counter() - started
    drop(scratch)
    return took


def drop(stack: local.LocalStack) -> None:
    """Delete a size's tables once measured: DynamoDB Local serializes every request through one
    thread, and each write to a table with a stream costs more the more streams it holds."""
    client = stack.client()
    for name in stack.table_names.values():
        client.delete_table(TableName=name)


def rows_baseline(stack: local.LocalStack, engine: sa.Engine) -> float:
    """The same items read by the same parallel scan, then COPY into a temporary table and one merge."""
    line = MODEL.entity("OrderLine")
    columns = [f.column for f in line.fields] + ["version", "deleted"]
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS bench_lines"))
        conn.execute(sa.text("CREATE TABLE bench_lines (LIKE order_lines INCLUDING ALL)"))
    started = time.perf_counter()
    rows = []
    for item in Scanner(
        stack.client(), stack.table_names["main"], segments=SEGMENTS, page_limit=loads.PAGE
    ).items():
        if item.get("Entity") == "OrderLine":
            row = to_row(line, item)
            rows.append((*row.values(), int(item["Version"]), False))
    raw = engine.raw_connection()
    try:
        with raw.cursor() as cur:
            cur.execute("CREATE TEMP TABLE limit_lines (LIKE order_lines INCLUDING DEFAULTS) ON COMMIT DROP")
            with cur.copy(f"COPY limit_lines ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in ("order_id", "line_no"))
            cur.execute(
                f"INSERT INTO bench_lines ({', '.join(columns)}) "
                f"SELECT {', '.join(columns)} FROM limit_lines "
                f"ON CONFLICT (order_id, line_no) DO UPDATE SET {updates} "
                "WHERE bench_lines.version < excluded.version"
            )
        raw.commit()
    finally:
        raw.close()
    return time.perf_counter() - started


def environment(stack: local.LocalStack) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("TABLE_", "DYNAMODB_", "LAMBDA_"))}
    return keep | stack.environment() | {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}


def killed_and_resumed(stack: local.LocalStack, engine: sa.Engine, size: int) -> tuple[bool, int]:
    """`load rows` SIGKILLed after its first checkpoint, then `--resume`d: whether it finished, and
    how many rows the resumed run merged again (committed by the killed run, not yet checkpointed)."""
    own = stack.with_tables(f"kill{size}")
    legacy(own, engine, f"k{size}", size)
    env = environment(own)
    paged = ["--segments", str(SEGMENTS), "--rate", "0", "--page-limit", str(PAGE)]
    command(env, "load", "rows", "OrderLine", *paged, kill="rows")
    jobs = JobStore(own.client(), MODEL, dict(own.table_names))
    job = next(j for j in jobs.jobs() if j["kind"] == "rows")
    with engine.connect() as conn:
        committed = conn.execute(
            sa.text("SELECT count(*) FROM order_lines WHERE order_id LIKE :r"), {"r": f"k{size}-o%"}
        ).scalar_one()
    checkpointed = (
        job["counts"]["written"] + job["counts"]["older"]
    )  # the order lines merged (strays: letters)
    figures, _, _ = command(env, "load", "rows", "OrderLine", *paged, "--resume", job["job"])
    drop(own)
    return figures.get("undone") == 0, max(0, committed - checkpointed)


def one_size(stack: local.LocalStack, engine: sa.Engine, size: int) -> dict[str, Any]:
    run = f"a{size}"
    with engine.begin() as conn:  # each size alone in PostgreSQL: a load reads every row of its entity
        conn.execute(sa.text("TRUNCATE product_availability, orders, order_lines, outbox, dead_letters"))
    own = stack.with_tables(run)
    legacy(own, engine, run, size)
    env = environment(own)
    app = App(own, engine)
    workload = Workload(own, engine, run, size)
    options = ["--segments", str(SEGMENTS), "--rate", "0"]
    out: dict[str, Any] = {}
    try:
        # each baseline right after its load, under the same load: the workload writing, the pipeline
        # running (DynamoDB Local slows as a run goes on: measured apart, the later one would lose)
        views, _, rss_views = command(env, "load", "views", "ProductAvailability", *options)
        out["views_baseline_s"] = views_baseline(own, engine, run)
        items, _, rss_items = command(env, "load", "items", "Order", *options)
        rows, _, rss_rows = command(env, "load", "rows", *options)
        out["rows_baseline_s"] = rows_baseline(own, engine)
        app.paused.set()  # the rebuild pauses the aggregation, as it disables its mappings in the stack
        time.sleep(0.5)
        rebuilt, _, rss_rebuild = command(
            env, "aggregates", "rebuild", "--no-pause", "--settle", "1", "--segments", str(SEGMENTS)
        )
        app.paused.clear()
    finally:
        workload.close()
        app.settle()
        app.close()
    out["workload_writes"] = workload.writes
    # the seconds each job's units ran: the command's start-up (imports) and planning are not the load's
    out |= {
        f"{k}_s": f["seconds"]
        for k, f in (("views", views), ("items", items), ("rows", rows), ("rebuild", rebuilt))
    }
    out["rows_pg_to_ddb"] = views["read"] + items["read"]
    out["rows_ddb_to_pg"] = rows["read"]
    out["dead_lettered"] = rows["dead_lettered"]  # the strays: items of no entity
    out["undone"] = sum(f["undone"] for f in (views, items, rows, rebuilt))
    out["peak_rss_mb"] = max(rss_views, rss_items, rss_rows, rss_rebuild)
    out["rss_mb"] = {"views": rss_views, "items": rss_items, "rows": rss_rows, "rebuild": rss_rebuild}
    mine = lambda key: str(key[0]).startswith(run)  # noqa: E731 - this size's rows (PostgreSQL is shared)
    back = reconcile(own.client(), dict(own.table_names), engine, MODEL)
    views_drift = reconcile_views(own.client(), dict(own.table_names), engine, MODEL, every_row=True)
    out["lost"] = sum(1 for d in back.values() for k in d.missing if mine(k))
    out["lost"] += sum(
        1 for n, d in views_drift.items() for k in d.missing if mine(k) and n == "ProductAvailability"
    )
    out["stale"] = sum(1 for r in (back, views_drift) for d in r.values() for k in d.stale if mine(k))
    out["extra"] = sum(1 for r in (back, views_drift) for d in r.values() for k in d.extra if mine(k))
    aggregation = aggregate.Aggregation(MODEL)
    scanned = list(Scanner(own.client(), own.table_names["main"], consistent=True).items())
    out["aggregates_equal_recount"] = aggregation.stored(scanned) == aggregation.recount(scanned)
    drop(own)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="4,000 rows per direction (and 8,000)")
    parser.add_argument("--smoke", action="store_true", help="200 rows: seconds, the same code path and keys")
    parser.add_argument("--rows", type=int, help="rows per direction at the first size (default 20,000)")
    args = parser.parse_args()
    size = args.rows or (200 if args.smoke else 4000 if args.quick else 20000)

    def on_fresh_services(measure: Any, *args: Any) -> Any:
        """Each measurement on servers of its own: DynamoDB Local serializes every request through
        one thread, and what earlier tables leave behind in it slows every later write."""
        with local.start(scratch("bench-adopt-"), prefix="bench") as stack:
            engine = db.create_engine(stack.database_url, pool_size=4)
            try:
                return measure(stack, engine, *args)
            finally:
                engine.dispose()

    def on_shared_services(measure: Any, *args: Any) -> Any:
        return measure(shared, shared_engine, *args)

    if args.smoke:  # seconds of work: one set of servers for all three (each measure has tables of its own)
        shared = local.start(scratch("bench-adopt-"), prefix="bench")
        shared_engine = db.create_engine(shared.database_url, pool_size=4)
    on_services = on_shared_services if args.smoke else on_fresh_services
    try:
        resumed, redone = on_services(killed_and_resumed, size)
        first, second = on_services(one_size, size), on_services(one_size, 2 * size)
    finally:
        if args.smoke:
            shared_engine.dispose()
            shared.close()
    print(
        f"{'size':>7} {'views s':>8} {'batch s':>8} {'items s':>8} {'rows s':>7} {'copy s':>7} "
        f"{'rebuild s':>9} {'rss MB':>7} {'writes':>7}"
    )
    for n, r in ((size, first), (2 * size, second)):
        print(
            f"{n:>7} {r['views_s']:8.2f} {r['views_baseline_s']:8.2f} {r['items_s']:8.2f} {r['rows_s']:7.2f} "
            f"{r['rows_baseline_s']:7.2f} {r['rebuild_s']:9.2f} {r['peak_rss_mb']:7.0f} "
            f"{r['workload_writes']:7}"
        )
    both = (first, second)
    figures = {
        "rows": size,
        "rows_pg_to_ddb": second["rows_pg_to_ddb"],
        "rows_ddb_to_pg": second["rows_ddb_to_pg"],
        "pg_to_ddb_vs_batch_write_ratio": round(second["views_baseline_s"] / second["views_s"], 3),
        "ddb_to_pg_vs_copy_ratio": round(second["rows_baseline_s"] / second["rows_s"], 3),
        "lost": sum(r["lost"] for r in both),
        "stale": sum(r["stale"] for r in both),
        "extra": sum(r["extra"] for r in both),
        "undone": sum(r["undone"] for r in both),
        "aggregates_equal_recount": all(r["aggregates_equal_recount"] for r in both),
        "resumed": resumed,
        "rows_redone_after_resume": redone,
        "redo_bound": SEGMENTS * PAGE,  # one chunk (a scan page) per segment
        "peak_rss_mb": [round(first["peak_rss_mb"]), round(second["peak_rss_mb"])],
        "rss_ratio_2x_size": round(second["peak_rss_mb"] / first["peak_rss_mb"], 3),
        "rss_mb_by_command": [first["rss_mb"], second["rss_mb"]],
        "workload_writes": sum(r["workload_writes"] for r in both),
    }
    figures["drift"] = figures["lost"] + figures["stale"] + figures["extra"]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
