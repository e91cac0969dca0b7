"""Freshness end to end: how soon a change is seen on the other side, and what it costs under load.

Part 1, low load, measured from the outside. For each change source (DynamoDB Streams; Kinesis
Data Streams for DynamoDB) x each freshness (`realtime`, the default; `economy`), one after the
other, each on services of its own (DynamoDB Local, moto server, embedded PostgreSQL), the app
synthesized with that setting runs (`LocalApp`, the outbox drain's schedule alone: its first run
at start, then one a minute). Its consumers are warmed first (a container per shard, each invoked
once, and a line through the write-back): Lambda keeps them warm between bursts seconds apart.
The workload, the same seeded fractions of a span for every app: B bursts (default 12) at random
moments, each 10 plain boto3 PutItem writes of the shop's order lines (no entity tag, no version,
as an existing service writes them; each line names a product of its own, so that product's day
`Sales` aggregate counts exactly that line) and one PostgreSQL commit changing a product's price
(`product_availability`, mastered in PostgreSQL; its view `PRODUCT_AVAILABILITY` carries the row's
version). From each write's return, a watcher polling every 20 ms notes when:

  row        the line is a row of `order_lines` in PostgreSQL
  aggregate  the product's day aggregate counts it (consistent BatchGetItem: its `Units` reached)
  item       the availability item holds the commit's version (or a newer one)

(at the start of the first poll that saw it: up to one poll late). p50/p99/max per direction,
the realtime ones against the issue's goals (p99: row <= 1 s, aggregate <= 2 s, item <= 1 s, on
both sources), each consumer's own published `Freshness` p99 beside them, and the stream
consumers' invocations per DynamoDB write (the app's function and mapping stats; the aggregation's
include its tumbling windows' final invocations). Realtime bursts fall over 2.5 s x B; economy's
within the drain's first minute after start (so its commits meet every phase of the once-a-minute
drain and wait for the same run). Waits are bounded (15 s realtime; 30 s row, 90 s aggregate and
item under economy): a write not seen by then is `unseen`, and a percentile it reaches is null.

Part 2, the cost at 1,000 changes/s over 4 shards, on the last app's services once it stopped, on
tables of its own:

  aggregation  10,000 order-line changes (bench/aggregate.py's workload: Zipf products and
               customers, 5% edited, 3% cancelled) on a 10 s timeline, spread over 4 shards by the
               hash of the order id, cut into the batches Lambda makes: realtime one per shard per
               0.25 s poll (what arrived since: 62), economy per shard a 30 s window or 5,000
               records, whichever first (at 250/s per shard 5,000 take 20 s: the 10 s timeline
               ends first, so each shard's one batch is its 2,500 records; the 60 s tumbling window
               of both cuts nothing here). The real `Aggregation.aggregate` folds them on DynamoDB
               Local, a process per shard, the shards at once (realtime paced to the timeline).
               DynamoDB Local never cancels a transaction for a conflict (it serializes them), so
               the local app's emulation of DynamoDB's TransactionConflict is installed (the chaos
               run's `conflict` fault, local/dynamodb/faults.py, certain): a transaction writing an
               item another process's transaction is writing is cancelled and sent again by the
               engine. Local transactions are slower and queued, so this overstates conflicts
               against AWS. A batch failing past the engine's retries is sent again whole, as
               Lambda retries it. Write units (DynamoDB's rules, every transaction that applied, a
               failed attempt's too), transactions and batches per change, the ratio to a naive
               per-record ADD (bench/aggregate.py's count: 3 write units per update; goal <= 0.15x),
               and whether each equals a clean recount. Beside them the floor: what any folding
               scheme pays if a change must reach its aggregates within 0.25, 1, 2 or 5 s (each
               aggregate item the window's changes move, all shards' summed, written once at a
               naive update's price): the workload's keys bound the cost at a given freshness.
  write-back   `writeback.write_back` (as bench/write_back.py calls it) on 1,000 plain records
               (orders and lines) in realtime-sized batches (62: one shard's poll at 1,000/s over 4
               shards) and in 1,000-record batches (what economy's 5 s window, or a busy shard,
               fills) vs the COPY + merge limit, one batch at a time, best of 3 from empty tables
               (goal >= 0.9x COPY).

`invocations_per_change_<freshness>` are part 2's: the aggregation's and the write-back's batches
per change at 1,000/s (economy's write-back batches: 1,000 records, full after 4 s, before its 5 s
window). Part 1's are `<source>_<freshness>_invocations_per_change`.

Usage: python bench/freshness.py [--quick | --smoke] [--bursts N] [--assembly DIR]
           [--kinesis-assembly DIR] [--economy-assembly DIR] [--kinesis-economy-assembly DIR]
  An assembly not given is synthesized into a temporary folder with the CDK CLI (`-c
  freshness=economy`, `-c change_source=kinesis`), those missing at once; `--assembly` defaults to
  cdk.out (made when stale).
  --quick: realtime on DynamoDB Streams only (economy's drain alone waits up to a minute), 4
  bursts; part 2 on a 1,000-change timeline, the write-back best of 2: under a minute.
  --smoke: realtime only, on both sources (the given assemblies: no economy one is needed, none is
  synthesized), 1 burst of 3 writes; part 2 on 400 changes and 120 write-back records, once:
  seconds, the same code path and JSON keys (what a mode leaves out is null).
example: python bench/freshness.py --quick
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import sqlalchemy as sa
from boto3.dynamodb.types import TypeSerializer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.aggregate import AGGREGATION, NAIVE_UNITS_PER_UPDATE, naive_updates, recount, stored  # noqa: E402
from bench.aggregate import workload as aggregate_workload  # noqa: E402
from bench.write_back import copy_records, count_rows, make_records, truncate  # noqa: E402
from hybridsync import local  # noqa: E402
from hybridsync.dynamodb import store  # noqa: E402
from hybridsync.local.app import LocalApp  # noqa: E402
from hybridsync.local.cloudwatch.alarms import percentiles_s  # noqa: E402
from hybridsync.local.dynamodb import faults as dynamodb_faults  # noqa: E402
from hybridsync.local.template import Assembly, synth_if_stale  # noqa: E402
from hybridsync.model import keys  # noqa: E402
from hybridsync.runtime import aws, db  # noqa: E402
from hybridsync.sync import aggregate, writeback  # noqa: E402
from hybridsync.workloads import percentile, scratch  # noqa: E402
from shop import catalog  # noqa: E402
from shop.model import MODEL, ORDER_LINE, PRODUCT_AVAILABILITY, SALES  # noqa: E402

SOURCES = ("dynamodb", "kinesis")
FRESHNESS = ("realtime", "economy")
DIRECTIONS = {  # direction -> (what it is, the goal for its p99 at the defaults, s)
    "row": ("DynamoDB write -> PostgreSQL row", 1.0),
    "aggregate": ("DynamoDB write -> aggregate", 2.0),
    "item": ("PostgreSQL commit -> DynamoDB item", 1.0),
}
PUBLISHED = {"row": "write_back", "aggregate": "aggregate", "item": "sql_sync"}  # its consumer's metric
BOUNDS_S = {  # how long a write is waited for, per freshness and direction
    "realtime": {"row": 15.0, "aggregate": 15.0, "item": 15.0},
    "economy": {"row": 30.0, "aggregate": 90.0, "item": 90.0},
}
WATCH_EVERY_S = 0.02
DRAIN_PERIOD_S = 60.0  # the drain's schedule: economy's bursts fall before its second run
OPTIONS = {  # (source, freshness) -> (its command-line option, the CDK context synthesizing it)
    ("dynamodb", "realtime"): ("--assembly", ()),
    ("kinesis", "realtime"): ("--kinesis-assembly", ("change_source=kinesis",)),
    ("dynamodb", "economy"): ("--economy-assembly", ("freshness=economy",)),
    ("kinesis", "economy"): ("--kinesis-economy-assembly", ("change_source=kinesis", "freshness=economy")),
}
RATE, SHARDS, POLL_S = 1000, 4, 0.25  # part 2: changes/s, shards, Lambda's poll of a shard
ECONOMY_WINDOW_S, AGGREGATE_BATCH, WRITE_BACK_BATCH = 30.0, 5000, 1000
AGGREGATE_GOAL, WRITE_BACK_GOAL = 0.15, 0.9  # the issue's: x a naive ADD's units; x the COPY limit
_wire = TypeSerializer().serialize


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def synth_missing(wanted: dict[tuple[str, str], Path | None], out: Path) -> dict[tuple[str, str], Path]:
    """Each wanted assembly: as given, else synthesized with the CDK CLI into `out` (those missing
    at once); the default one is cdk.out, made when older than its sources."""
    found: dict[tuple[str, str], Path] = {}
    running: dict[tuple[str, str], tuple[subprocess.Popen, Path]] = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    for config, given in wanted.items():
        if given is not None:
            found[config] = given
        elif config == ("dynamodb", "realtime"):
            progress("the default app: cdk.out (synthesized when older than its sources)")
            found[config] = synth_if_stale(ROOT / "cdk.out")
        else:
            target = out / "-".join(config)
            context = [a for c in OPTIONS[config][1] for a in ("-c", c)]
            progress(f"synthesizing the app with {' '.join(context)} into {target} ...")
            command = [str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "--quiet", "--no-notices",
                       *context, "--output", str(target)]  # fmt: skip
            running[config] = (subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.PIPE, text=True), target)  # fmt: skip
    started = time.monotonic()
    for config, (process, target) in running.items():
        _, errors = process.communicate(timeout=900)
        if process.returncode:
            raise SystemExit(f"cdk synth {' '.join(OPTIONS[config][1])} failed:\n{errors[-3000:]}")
        progress(f"  {'-'.join(config)} synthesized ({time.monotonic() - started:.0f} s)")
        found[config] = target
    return found


# --- part 1: a write, until the other side holds it ---------------------------------------------


@dataclass
class Waiting:
    """One write waited for in one direction: what shows it, when it returned, when it was seen."""

    direction: str
    what: Any  # row: (order id, line no); aggregate: (key, units); item: (key, version)
    written: float  # monotonic
    seen: float | None = None


@dataclass
class Watcher:
    """Polls every `every_s` for what is still waited for: the rows in one query, the aggregates and
    the items in one consistent BatchGetItem each; a write is seen at the start of the poll that
    found it."""

    client: Any
    table: str
    conn: sa.Connection
    every_s: float = WATCH_EVERY_S
    waits: list[Waiting] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def add(self, direction: str, what: Any, written: float) -> None:
        with self._lock:
            self.waits.append(Waiting(direction, what, written))

    def pending(self, direction: str | None = None) -> list[Waiting]:
        with self._lock:
            return [w for w in self.waits if w.seen is None and direction in (None, w.direction)]

    def forget(self) -> None:
        with self._lock:
            self.waits = []

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._rows()
                self._items("aggregate", lambda item, units: item.get("Units", 0) >= units)
                self._items("item", lambda item, version: item.get("Version", 0) >= version)
            except Exception as error:  # a slow service: the next poll asks again
                progress(f"  watcher: {type(error).__name__}: {error}")
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - started)))

    def _rows(self) -> None:
        waits = self.pending("row")
        if not waits:
            return
        at = time.monotonic()
        query = sa.text("SELECT order_id, line_no FROM order_lines WHERE order_id = ANY(:ids)")
        there = {
            (o, int(n)) for o, n in self.conn.execute(query, {"ids": sorted({w.what[0] for w in waits})})
        }
        for wait in waits:
            if wait.what in there:
                wait.seen = at

    def _items(self, direction: str, holds: Callable[[dict[str, Any], Any], bool]) -> None:
        waits = self.pending(direction)
        if not waits:
            return
        at = time.monotonic()
        wanted = {json.dumps(w.what[0], sort_keys=True): w.what[0] for w in waits}
        items = store.batch_get(self.client, self.table, list(wanted.values()))
        got = {json.dumps({k: i[k] for k in ("PK", "SK")}, sort_keys=True): i for i in items}
        for wait in waits:
            item = got.get(json.dumps(wait.what[0], sort_keys=True))
            if item is not None and holds(item, wait.what[1]):
                wait.seen = at


def seed_products(engine: sa.Engine, tag: str, count: int) -> list[str]:
    """A product per burst in PostgreSQL (details and availability): each burst's price change's."""
    products = [f"{tag}-price{n}" for n in range(count)]
    for n, product in enumerate(products):
        details = {"ProductId": product, "Name": f"Product {n}", "Category": "kitchen"}
        catalog.put_product(engine, details, {"ProductId": product, "Price": Decimal("10.00"), "Stock": 5})
    return products


def line_item(values: dict[str, Any]) -> dict[str, Any]:
    """An order line as an existing service's PutItem writes it: keys and fields, no tag, no version."""
    item = ORDER_LINE.item(values | {MODEL.names.version: 1})
    item.pop(MODEL.names.entity, None)
    item.pop(MODEL.names.version, None)
    return {k: _wire(v) for k, v in item.items()}


def line(tag: str, name: str, created: str, quantity: int) -> dict[str, Any]:
    return {"OrderId": f"{tag}-o{name}", "CustomerId": f"{tag}-c{name}", "CreatedAt": created,
            "Status": "OPEN", "LineNo": 1, "ProductId": f"{tag}-p{name}", "Quantity": quantity,
            "UnitPrice": Decimal("9.99")}  # fmt: skip


def counts(app: LocalApp) -> dict[str, int]:
    """Invocations per function, and per consumer function its mappings' records and batches."""
    out = {f"{name}:invocations": f.stats.invocations for name, f in app.functions.items()}
    for name, stats in app.mapping_stats.items():
        function = app.mapping_functions[name]
        out[f"{function}:delivered"] = out.get(f"{function}:delivered", 0) + stats.delivered
        out[f"{function}:batches"] = out.get(f"{function}:batches", 0) + stats.batches
    return out


def run_app(config: tuple[str, str], assembly: Path, stack: local.LocalStack, state: Path,
            fractions: list[float], writes: int, seed: int,
            realtime_span_s: float) -> dict[str, Any]:  # fmt: skip
    """One app on its services: warmed, then the bursts; what each direction waited, its counts."""
    source, freshness = config
    tag = f"{source[0]}{freshness[0]}"
    rng = random.Random(seed)
    began = time.monotonic()
    engine = db.create_engine(stack.database_url)
    app = LocalApp(
        Assembly.load(assembly), **stack.endpoints(), state_dir=state / "app", prefix=f"fresh-{tag}"
    )  # names of its own: moto's state is this process's, whichever server answers
    app.start(http_port=None, schedules={"SqlSync"})
    app_up = time.monotonic()
    products = seed_products(engine, tag, len(fractions))  # their items: whenever the drain runs
    watching = sa.create_engine(db.sqlalchemy_url(stack.database_url), isolation_level="AUTOCOMMIT")
    client = boto3.client("dynamodb", endpoint_url=stack.dynamodb_endpoint, region_name=app.region,
                          aws_access_key_id="local", aws_secret_access_key="local")  # fmt: skip
    table = app.table_names["main"]
    watcher = Watcher(client, table, watching.connect())
    try:
        # a warm container per shard for each consumer, invoked at once; then a line through
        shards = max(Counter(p.settings.name for p in app.pollers).values())
        final = {"Records": [], "isFinalInvokeForWindow": True, "state": {}}  # the aggregation's no-op
        calls = [("WriteBack", {"Records": []}), ("Aggregate", final)] * shards
        with ThreadPoolExecutor(len(calls)) as pool:
            list(pool.map(lambda call: app.functions[call[0]].invoke(call[1]), calls))
        watcher.start()
        warm = line(tag, "warm", keys.iso_ms(datetime.now(UTC)), 1)
        client.put_item(TableName=table, Item=line_item(warm))
        watcher.add("row", (warm["OrderId"], 1), time.monotonic())
        if freshness == "realtime":  # under economy its 30 s window would hold it: it joins the first burst's
            watcher.add(
                "aggregate", (SALES.key(warm | {"Period": warm["CreatedAt"][:10]}), 1), time.monotonic()
            )
        while watcher.pending() and time.monotonic() - began < 300:
            time.sleep(0.05)
        watcher.forget()
        time.sleep(0.5)  # a poller counts its batch once the invocation returned: after its writes
        before, ready, since = counts(app), time.monotonic(), time.time()
        span = realtime_span_s if freshness == "realtime" else DRAIN_PERIOD_S - 3 - (ready - app_up)
        moments = [f * span for f in fractions]
        progress(f"  {source}/{freshness}: services and app up in {app_up - began:.0f} s, warm in "
                 f"{ready - app_up:.0f} s; {len(moments)} burst(s) over {span:.0f} s ...")  # fmt: skip
        written = 0
        for burst, moment in enumerate(moments):
            time.sleep(max(0.0, ready + moment - time.monotonic()))
            created = keys.iso_ms(datetime.now(UTC))
            for n in range(writes):
                values = line(tag, f"{burst}-{n}", created, rng.randint(1, 3))
                client.put_item(TableName=table, Item=line_item(values))
                at = time.monotonic()
                watcher.add("row", (values["OrderId"], 1), at)
                sales = SALES.key(values | {"Period": created[:10]})
                watcher.add("aggregate", (sales, values["Quantity"]), at)
                written += 1
            version = catalog.set_price(engine, products[burst], Decimal(rng.randint(1000, 9999)) / 100)
            availability = PRODUCT_AVAILABILITY.key({"ProductId": products[burst]})
            watcher.add("item", (availability, version), time.monotonic())
        last = time.monotonic()
        bounds = BOUNDS_S[freshness]
        while any(time.monotonic() - w.written < bounds[w.direction] for w in watcher.pending()):
            time.sleep(0.1)
        waited = time.monotonic() - last
        time.sleep(2.0)  # the last batches counted, their metrics flushed (the drain's each second) and read
        published = {d: percentiles_s(v) for d, v in app.freshness_values(since).items()}
        after = counts(app)
    finally:
        watcher.stop()
        app.stop()
        watching.dispose()
        engine.dispose()
    lags: dict[str, list[float]] = defaultdict(list)
    for wait in watcher.waits:
        lags[wait.direction].append(math.inf if wait.seen is None else wait.seen - wait.written)
    progress(f"  {source}/{freshness}: done {waited:.0f} s after the last burst "
             f"({time.monotonic() - began:.0f} s in all)")  # fmt: skip
    return {"lags": dict(lags), "writes": written, "published": published,
            "counts": {k: v - before.get(k, 0) for k, v in after.items()}}  # fmt: skip


def quantiles(values: list[float]) -> dict[str, float | None]:
    """p50, p99 and max in seconds (to 10 ms); None where an unseen write (inf) reaches it."""
    out = {}
    for name, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0)):
        value = percentile(values, q) if values else None
        out[name] = None if value is None or math.isinf(value) else value
    return out


def shown(value: float | None) -> str:
    return "unseen" if value is None else f"{value:.2f}"


def report_part1(runs: dict[tuple[str, str], dict[str, Any]], bursts: int, writes: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    print(f"Part 1: a write, until the other side holds it (s, from the write's return; per app {bursts} "
          f"burst(s) of {writes} PutItem + 1 commit; goal: the issue's p99 at the defaults)")  # fmt: skip
    print(f"{'direction':<35} {'source':<9} {'freshness':<9} {'n':>4} {'p50':>7} {'p99':>7} {'max':>7} "
          f"{'goal':>5} {'':>4}  {'published p99':>13}")  # fmt: skip
    for direction, (label, goal) in DIRECTIONS.items():
        for (source, freshness), run in runs.items():
            values = run["lags"].get(direction, [])
            q = quantiles(values)
            figures |= {f"{source}_{freshness}_{direction}_{name}_s": value for name, value in q.items()}
            realtime = freshness == "realtime"
            mark = ("PASS" if q["p99"] is not None and q["p99"] <= goal else "MISS") if realtime else ""
            published = run["published"].get(PUBLISHED[direction], {}).get("p99_s")
            print(f"{label:<35} {source:<9} {freshness:<9} {len(values):>4} {shown(q['p50']):>7} "
                  f"{shown(q['p99']):>7} {shown(q['max']):>7} {goal if realtime else '-':>5} {mark:>4}  "
                  f"{'-' if published is None else published:>13}")  # fmt: skip
    print("stream consumers' invocations per DynamoDB write (each mapping's records/batches; drain runs)")
    for (source, freshness), run in runs.items():
        counted = run["counts"]
        invoked = counted.get("WriteBack:invocations", 0) + counted.get("Aggregate:invocations", 0)
        per = round(invoked / max(run["writes"], 1), 3)
        unseen = sum(1 for values in run["lags"].values() for v in values if math.isinf(v))
        figures[f"{source}_{freshness}_invocations_per_change"] = per
        figures[f"{source}_{freshness}_unseen"] = unseen
        mapped = ", ".join(f"{f} {counted.get(f'{f}:delivered', 0)}/{counted.get(f'{f}:batches', 0)}"
                           for f in ("WriteBack", "Aggregate"))  # fmt: skip
        print(f"  {source:<9} {freshness:<9} {per:>6}  ({mapped}; aggregate invocations "
              f"{counted.get('Aggregate:invocations', 0)}, window closes included; drain runs "
              f"{counted.get('SqlSync:invocations', 0)}; unseen {unseen})")  # fmt: skip
    return figures


# --- part 2: the cost at 1,000 changes/s over 4 shards -------------------------------------------


def order_of(record: dict[str, Any]) -> str:
    image = record["dynamodb"].get("NewImage") or record["dynamodb"]["OldImage"]
    return image["OrderId"]["S"]


def cut(records: list[dict[str, Any]], economy: bool) -> dict[int, list[tuple[float, list[dict]]]]:
    """Per shard, the batches Lambda makes of the timeline (record i arrives at i / RATE s), each with
    the moment it is delivered: realtime one per 0.25 s poll (what arrived since); economy a 30 s
    window or AGGREGATE_BATCH records, whichever first (what is open when the timeline ends goes then)."""
    shards: dict[int, list[tuple[float, dict]]] = defaultdict(list)
    for n, record in enumerate(records):
        shards[keys.shard_of(order_of(record), SHARDS)].append((n / RATE, record))
    end = len(records) / RATE
    out: dict[int, list[tuple[float, list[dict]]]] = {}
    for shard, arrivals in sorted(shards.items()):
        batches: list[tuple[float, list[dict]]] = []
        if not economy:
            polls: dict[int, list[dict]] = defaultdict(list)
            for at, record in arrivals:
                polls[int(at // POLL_S)].append(record)
            batches = [((poll + 1) * POLL_S, polls[poll]) for poll in sorted(polls)]
        else:
            current: list[dict] = []
            opened = 0.0
            for at, record in arrivals:
                if current and at - opened >= ECONOMY_WINDOW_S:
                    batches.append((opened + ECONOMY_WINDOW_S, current))
                    current = []
                if not current:
                    opened = at
                current.append(record)
                if len(current) == AGGREGATE_BATCH:
                    batches.append((at, current))
                    current = []
            if current:
                batches.append((end, current))
        out[shard] = batches
    return out


FOLDED = ("calls", "write_units", "transactions", "applied", "conflicts_retried")
FLOOR_WINDOWS_S = (0.25, 1.0, 2.0, 5.0)


def floor(records: list[dict[str, Any]], window_s: float) -> float:
    """The least any folding scheme can pay, as a share of the naive ADD, when a change must reach
    its aggregates within `window_s`: every aggregate item the changes of a window (all shards'
    changes, record i arriving at i / RATE s) move written once, at a naive update's own price (no
    transaction, no bookkeeping). It depends on the workload's keys alone: how many distinct items
    a window's changes touch."""
    size = max(1, round(window_s * RATE))
    deltas = [set(d.deltas) if (d := AGGREGATION.parse(r)) else set() for r in records]
    written = sum(len(set().union(*deltas[i : i + size])) for i in range(0, len(deltas), size))
    return written / max(1, sum(len(d) for d in deltas))


def fold_shard(endpoint: str, table: str, shard: int, batches: list[tuple[float, list[dict]]],
               start_at: float | None, claims: str) -> dict[str, Any]:  # fmt: skip
    """One shard's batches in order, as its invocations run them (in a process of its own, beside
    the other shards'): the real handler code, each batch not before `start_at` + its moment when
    paced, under the emulation of DynamoDB's TransactionConflict (certain, claims in `claims`)."""
    client = aws.client("dynamodb", endpoint)
    injected: Counter[str] = Counter()
    spec = f"conflict=1,seed={shard},conflict_dir={claims}"
    dynamodb_faults.inject(client.meta.events, spec, lambda kind: injected.update([kind]))
    made: list[aggregate.Outcome] = []

    class Counted(aggregate.Outcome):
        """The call's outcome, kept: an attempt that raised still wrote what it applied."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    aggregate.Outcome = Counted  # type: ignore[misc]  # this worker process's only
    folded: dict[str, Any] = dict.fromkeys(FOLDED, 0) | {"behind_s": 0.0, "batches_retried": 0}
    for due, batch in batches:
        if start_at is not None:
            time.sleep(max(0.0, start_at + due - time.time()))
            folded["behind_s"] = max(folded["behind_s"], time.time() - start_at - due)
        while True:
            try:
                AGGREGATION.aggregate(batch, client, table, f"shardId-{shard:020d}")
                break
            except client.exceptions.TransactionCanceledException:  # past the engine's retries:
                folded["batches_retried"] += 1  # Lambda sends the batch again, the cursor resumes it
        for outcome in made:  # the batch's attempts: the applied transactions of each count
            for name in FOLDED:
                folded[name] += getattr(outcome, name)
        made.clear()
    return folded | {"conflicts_injected": injected["conflict"]}


def fold(pool: Executor, endpoint: str, table: str, batches: dict[int, list[tuple[float, list[dict]]]],
         paced: bool, claims: Path) -> dict[str, Any]:  # fmt: skip
    """The shards' batches at once, a process each; paced: each batch not before its moment. The
    summed figures, and how far the fold fell behind the timeline (`behind_s`: the latest a batch
    started after its moment)."""
    start_at = time.time() + 0.5 if paced else None
    futures = [pool.submit(fold_shard, endpoint, table, shard, shard_batches, start_at, str(claims))
               for shard, shard_batches in batches.items()]  # fmt: skip
    results = [f.result() for f in futures]
    total = {name: sum(r[name] for r in results) for name in results[0] if name != "behind_s"}
    return total | {"behind_s": max(r["behind_s"] for r in results)}


def best_rate(engine: sa.Engine, records: list[dict], repeats: int, run: Callable[[], None]) -> float:
    """Records/s of the best of `repeats` runs, each from empty tables, every row checked there."""
    best = math.inf
    for _ in range(repeats):
        truncate(engine)
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
        assert count_rows(engine) == len(records)
    return len(records) / best


def part2(stack: local.LocalStack, state: Path, changes: int, write_back_records: int,
          repeats: int) -> dict[str, Any]:  # fmt: skip
    figures: dict[str, Any] = {"changes": changes, "changes_per_s": RATE, "shards": SHARDS}
    cost = stack.with_tables("cost")  # the workload's table, its stream on
    progress(f"part 2: {changes:,} order-line changes written, read back from the stream ...")
    records, _ = aggregate_workload(cost, changes)
    clean = recount(records)
    naive = len(naive_updates(records)) * NAIVE_UNITS_PER_UPDATE
    seconds = changes / RATE
    lines = [f"Part 2: the cost at {RATE:,} changes/s over {SHARDS} shards ({changes:,} order-line changes, "
             f"a {seconds:g} s timeline; the aggregation on DynamoDB Local, its {SHARDS} shards at once)",
             f"{'aggregation':<21} {'batches':>7} {'records/batch':>13} {'units/change':>12} {'vs naive':>9} "
             f"{'goal':>6} {'':>4}  {'txns/change':>11} {'conflicts':>9} {'retried':>7} "
             f"{'exact':>5}"]  # fmt: skip
    batches_of: dict[str, int] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(SHARDS, mp_context=context) as pool:
        list(pool.map(time.sleep, [0.5] * SHARDS))  # every process up before any clock starts
        for name, economy in (("realtime", False), ("economy", True)):
            batches = cut(records, economy)
            count = batches_of[name] = sum(len(b) for b in batches.values())
            target = stack.with_tables(f"agg-{name}", streams=False)
            table = target.table_names["main"]
            progress(f"  folding {count} {name} batches ...")
            folded = fold(
                pool, target.dynamodb_endpoint, table, batches, not economy, state / f"claims-{name}"
            )
            exact = stored(target.client(), table) == clean
            ratio = round(folded["write_units"] / naive, 3)
            figures |= {
                f"aggregate_{name}_units_per_change": round(folded["write_units"] / changes, 3),
                f"aggregate_{name}_units_ratio": ratio,
                f"aggregate_{name}_transactions_per_change": round(folded["transactions"] / changes, 4),
                f"aggregate_{name}_batches_per_change": round(count / changes, 5),
                f"aggregate_{name}_conflicts_retried": folded["conflicts_retried"],
                f"aggregate_{name}_batches_retried": folded["batches_retried"],
                f"aggregate_{name}_fold_behind_s": round(folded["behind_s"], 2),
                f"aggregate_{name}_exact": exact,
            }
            mark = "PASS" if ratio <= AGGREGATE_GOAL else "MISS"
            lines.append(f"{name:<21} {count:>7,} {changes / count:>13,.0f} "
                         f"{folded['write_units'] / changes:>12.3f} {ratio:>8.3f}x {AGGREGATE_GOAL:>5}x "
                         f"{mark:>4}  "
                         f"{folded['transactions'] / changes:>11.4f} {folded['conflicts_retried']:>9,} "
                         f"{folded['batches_retried']:>7} {exact!s:>5}")  # fmt: skip
    lines.append(f"{'naive per-record ADD':<21} {'-':>7} {'-':>13} {naive / changes:>12.3f} {1:>8.3f}x")
    lines.append("(conflicts: transactions cancelled by the emulated TransactionConflict and sent again; "
                 "retried: batches past the engine's retries, sent again whole. Realtime's fold, paced to "
                 f"the timeline, started a batch up to {figures['aggregate_realtime_fold_behind_s']} s "
                 "after its moment.)")  # fmt: skip
    figures["aggregate_naive_units_per_change"] = round(naive / changes, 3)
    floors = {w: round(floor(records, w), 3) for w in FLOOR_WINDOWS_S}
    figures |= {f"aggregate_floor_{w:g}s_ratio": ratio for w, ratio in floors.items()}
    lines.append("floor, vs naive: each aggregate item a window's changes move written once at a naive "
                 "update's price, all shards' changes summed: "
                 + ", ".join(f"{w:g} s {ratio:.3f}x" for w, ratio in floors.items()))  # fmt: skip
    figures["aggregate_conflicts_retried"] = sum(
        figures[f"aggregate_{n}_conflicts_retried"] for n in FRESHNESS
    )
    figures["aggregate_exact"] = all(figures[f"aggregate_{n}_exact"] for n in FRESHNESS)

    progress(f"  write-back: {write_back_records:,} plain records ...")
    plain = make_records(cost, write_back_records, "fresh", plain=True)
    engine = db.create_engine(stack.database_url)
    truth = writeback.Truth(cost.client(), cost.table_names)
    sizes = {"realtime": int(RATE / SHARDS * POLL_S), "full_batch": min(len(plain), WRITE_BACK_BATCH)}

    def handler(size: int) -> Callable[[], None]:
        def run() -> None:
            for start in range(0, len(plain), size):
                writeback.write_back(plain[start : start + size], engine, MODEL, truth=truth)

        return run

    copy_rate = best_rate(engine, plain, repeats, lambda: copy_records(engine, plain))
    rates = {name: best_rate(engine, plain, repeats, handler(size)) for name, size in sizes.items()}
    engine.dispose()
    lines.append(f"{'write-back':<21} {'batch':>7} {'records/s':>13} {'vs COPY':>12} {'goal':>9}")
    for name, size in sizes.items():
        ratio = round(rates[name] / copy_rate, 3)
        figures[f"writeback_{name}_records_per_s"] = round(rates[name])
        figures[f"writeback_{name}_vs_copy_ratio"] = ratio
        mark = "PASS" if ratio >= WRITE_BACK_GOAL else "MISS"
        lines.append(f"{name.replace('_', ' '):<21} {size:>7,} {rates[name]:>13,.0f} {ratio:>11.3f}x "
                     f"{WRITE_BACK_GOAL:>8}x {mark:>4}")  # fmt: skip
    lines.append(f"{'COPY + merge (limit)':<21} {min(len(plain), WRITE_BACK_BATCH):>7,} {copy_rate:>13,.0f}")
    figures |= {"writeback_copy_records_per_s": round(copy_rate), "writeback_records": len(plain)}
    # invocations per change at RATE: the aggregation's batches and the write-back's (realtime one
    # per shard per poll; economy WRITE_BACK_BATCH records, full before its 5 s window)
    writeback_batches = {"realtime": changes / sizes["realtime"], "economy": changes / WRITE_BACK_BATCH}
    for name in FRESHNESS:
        figures[f"invocations_per_change_{name}"] = round(
            (batches_of[name] + writeback_batches[name]) / changes, 5
        )
    lines.append(f"invocations per change at {RATE:,}/s (aggregation + write-back batches): realtime "
                 f"{figures['invocations_per_change_realtime']}, economy "
                 f"{figures['invocations_per_change_economy']}")  # fmt: skip
    print("\n".join(["", *lines]))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/freshness.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="realtime on DynamoDB Streams, 4 bursts: ~1 min")
    parser.add_argument("--smoke", action="store_true", help="realtime, 1 burst of 3, 400 changes: seconds")
    parser.add_argument("--bursts", type=int, help="bursts per app (default 12; --quick 4; --smoke 1)")
    parser.add_argument("--seed", type=int, default=20261124, help="the burst moments and quantities")
    for option, context in OPTIONS.values():
        made = f"-c {' -c '.join(context)}" if context else "as cdk.out holds it"
        parser.add_argument(option, type=Path, help=f"the app synthesized {made} (default: synthesized)")
    args = parser.parse_args()
    started = time.monotonic()
    bursts = args.bursts or (1 if args.smoke else 4 if args.quick else 12)
    writes = 3 if args.smoke else 10
    changes = 400 if args.smoke else 1000 if args.quick else 10_000
    write_back_records = 120 if args.smoke else 1000
    repeats = 1 if args.smoke else 2 if args.quick else 3
    freshness = ["realtime"] if args.smoke or args.quick else list(FRESHNESS)
    configs = [(s, f) for f in freshness for s in SOURCES if not (args.quick and s != "dynamodb")]
    state = scratch("bench-freshness-")
    wanted = {c: getattr(args, OPTIONS[c][0].lstrip("-").replace("-", "_")) for c in configs}
    assemblies = synth_missing(wanted, state / "assemblies")
    moments = random.Random(args.seed)
    fractions = sorted(moments.random() for _ in range(bursts))  # of each app's span
    sources = sorted({s for s, _ in configs})
    figures: dict[str, Any] = {"bursts": bursts, "writes_per_burst": writes, "sources": sources,
                               "freshness": freshness}  # fmt: skip
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    cost: dict[str, Any] = {}
    for n, config in enumerate(configs):  # each on services of its own, one after the other
        folder = state / "-".join(config)
        with local.start(folder, tables=False) as stack:
            runs[config] = run_app(config, assemblies[config], stack, folder, fractions, writes, args.seed,
                                   realtime_span_s=2.5 * bursts)  # fmt: skip
            if n == len(configs) - 1:  # the last app's services, once it stopped
                figures |= report_part1(runs, bursts, writes)
                cost = part2(stack, state, changes, write_back_records, repeats)
    for source, fresh in ((s, f) for s in SOURCES for f in FRESHNESS if (s, f) not in runs):
        for direction in DIRECTIONS:  # not measured in this mode: the same keys, null
            figures |= {f"{source}_{fresh}_{direction}_{q}_s": None for q in ("p50", "p99", "max")}
        figures[f"{source}_{fresh}_invocations_per_change"] = figures[f"{source}_{fresh}_unseen"] = None
    measured = [
        figures[f"{s}_realtime_{d}_p99_s"] for s in SOURCES if (s, "realtime") in runs for d in DIRECTIONS
    ]
    goals = [DIRECTIONS[d][1] for s in SOURCES if (s, "realtime") in runs for d in DIRECTIONS]
    figures["realtime_goals_met"] = all(
        p is not None and p <= g for p, g in zip(measured, goals, strict=True)
    )
    figures |= cost | {"seconds": round(time.monotonic() - started)}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
