"""`hybridsync up --demo`: a realistic workload on both sides of the running app, then a report.

Everything goes through the write path (`hybridsync.writes`). PostgreSQL gets customers, a
catalogue and price changes (mastered there, they reach DynamoDB through the outbox); DynamoDB gets
orders with lines, edits, cancellations and deletes, player scores and follows (written back to
PostgreSQL, folded into aggregates), stores, publications with revisions, titles and tags, reviews
from a line to megabytes, and a few poison records.
Then, once the pipeline has caught up: what each side holds, reconcile drift, the aggregates
against a clean recount, top sellers and the leaderboard read through the HTTP API over a socket,
the dead letters with their reasons, lag and throughput; and the same as `.local/report.html`.
"""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from hybridsync import aws, store, versions
from hybridsync.convert import marshal, to_row, unmarshal
from hybridsync.deadletters import pending
from hybridsync.errors import Conflict
from hybridsync.local.app import LocalApp
from hybridsync.local.report import html_report
from hybridsync.model import (
    CANCELLED,
    CUSTOMER,
    CUSTOMER_SPEND,
    ENTITY,
    MODEL,
    ORDER,
    ORDER_LINE,
    PLAYER_SCORE,
    SALES,
    SHIPPED,
)
from hybridsync.records import Rejected
from hybridsync.sync.aggregate import points
from hybridsync.sync.reconcile import reconcile
from hybridsync.writes import catalog, follows, orders, publications, reviews, stores


@dataclass
class Workload:
    customers: int = 120
    products: int = 60
    orders: int = 300
    players: int = 80
    follows: int = 200
    seed: int = 20261122


@dataclass
class Writer:
    """DynamoDB writes as an application makes them: every write with a growing version."""

    client: Any
    table: str
    versions: dict[str, int] = field(default_factory=dict)
    written: int = 0

    def put(self, entity: Any, values: dict[str, Any]) -> dict[str, Any]:
        slot = f"{entity.name}:{entity.key(values)}"
        self.versions[slot] = versions.next_version(self.versions.get(slot))
        values = values | {"Version": self.versions[slot]}
        store.put(self.client, self.table, entity, values)
        self.written += 1
        return values

    def order(self, order: dict[str, Any], products: list[str], unit_price: Decimal) -> dict[str, Any]:
        """An open order (OrderId, CustomerId, CreatedAt) with a line per product, quantities 1, 2,
        ..., lines first: the order's Total is theirs."""
        order = order | {"Status": "OPEN"}
        for line_no, product in enumerate(products, 1):
            self.put(ORDER_LINE, order | {"LineNo": line_no, "ProductId": product, "Quantity": line_no,
                                          "UnitPrice": unit_price})  # fmt: skip
        total = unit_price * sum(range(1, len(products) + 1))
        return self.put(ORDER, order | {"Total": total})


def _sql_side(engine: sa.Engine, work: Workload, rng: random.Random, progress: Progress) -> list[str]:
    """The catalogue, written where it is mastered, through the write path's SQL functions."""
    task = progress.add_task(
        "PostgreSQL: customers, catalogue, prices", total=work.customers + 2 * work.products
    )
    with engine.begin() as conn:
        for n in range(work.customers):
            customer = {"CustomerId": f"demo-c{n}", "Name": f"Customer {n}", "Email": f"c{n}@example.com",
                        "Tier": rng.choice(["gold", "silver", None])}  # fmt: skip
            catalog.upsert(conn, CUSTOMER, customer)
            progress.advance(task)
    products = [f"demo-p{n}" for n in range(work.products)]
    for n, product in enumerate(products):
        details = {"ProductId": product, "Name": f"Product {n}", "Description": "A fine thing. " * 40,
                   "Category": rng.choice(["kitchen", "garden", "office"])}  # fmt: skip
        price = Decimal(rng.randint(199, 9999)) / 100
        availability = {"ProductId": product, "Price": price, "Stock": rng.randint(0, 500)}
        catalog.put_product(engine, details, availability)
        progress.advance(task)
    for product in products:  # price changes: each its own transaction, as a pricing job commits them
        with engine.connect() as conn:
            price = conn.execute(sa.text("SELECT price FROM product_availability WHERE product_id = :p"),
                                 {"p": product}).scalar_one()  # fmt: skip
        catalog.set_price(engine, product, (price * Decimal("0.9")).quantize(Decimal("0.01")))
        progress.advance(task)
    return products


def _dynamodb_side(
    writer: Writer, products: list[str], work: Workload, rng: random.Random, progress: Progress
) -> None:
    """Orders, follows, reviews and publication edits through the write path; scores as a game
    server writes them."""
    task = progress.add_task(
        "DynamoDB: orders, lines, edits, scores, follows", total=work.orders + work.players + work.follows
    )
    client, table = writer.client, writer.table
    today = datetime.now(UTC)
    weights = [1 / (k + 1) ** 1.1 for k in range(len(products))]  # a few best sellers, a long tail
    for n in range(work.orders):
        customer = f"demo-c{rng.randrange(work.customers)}"
        lines = [{"ProductId": rng.choices(products, weights)[0], "Quantity": rng.randint(1, 5),
                  "UnitPrice": Decimal(rng.randint(199, 4999)) / 100}
                 for _ in range(rng.randint(1, 4))]  # fmt: skip
        moment = today.replace(microsecond=rng.randrange(1000) * 1000)
        order, created = orders.place_order(
            client, table, customer, lines, idempotency_key=f"demo-o{n}", now=moment
        )
        writer.written += 1 if created else 0
        fate = rng.random()
        try:
            if fate < 0.10:  # a quantity edit
                orders.edit_line(client, table, order["OrderId"], 1, order["Lines"][0]["Quantity"] + 1)
            elif fate < 0.15:  # cancelled: the order and its lines
                orders.set_status(client, table, order["OrderId"], CANCELLED)
            elif fate < 0.18:  # deleted, lines too
                orders.delete_order(client, table, order["OrderId"])
            elif fate < 0.5:
                orders.set_status(client, table, order["OrderId"], SHIPPED)
            writer.written += 1
        except Conflict:
            pass  # a demo run again: the order already moved on in the run before
        progress.advance(task)
    for n in range(work.players):
        for _ in range(rng.randint(1, 3)):  # scores move
            writer.put(PLAYER_SCORE, {"PlayerId": f"demo-c{n}", "Score": rng.randint(0, 100_000)})
        progress.advance(task)
    for _ in range(work.follows):
        a, b = (f"demo-c{x}" for x in rng.sample(range(work.customers), 2))
        follows.follow(client, table, a, b)
        if rng.random() < 0.1:
            follows.unfollow(client, table, a, b)
        writer.written += 1
        progress.advance(task)


PLACES = [("CH", "ZH", "Zürich"), ("CH", "GE", "Genève"), ("DE", "BY", "München"), ("JP", "東京都", "渋谷区"),
          ("US", "WA", "Seattle"), ("US", "WA", "Spokane")]  # fmt: skip


def _shapes(
    app: LocalApp, writer: Writer, products: list[str], rng: random.Random, progress: Progress
) -> None:
    """The other data shapes of the write path: stores under hierarchical keys, publications with
    titles, tags and revisions, and reviews whose bodies range from a line to megabytes."""
    client, table = writer.client, writer.table
    buckets = list(app.buckets.values())
    place = reviews.Place(app.tables["ChunksTable"], aws.client("s3", app.services_endpoint, app.region),
                          buckets[0] if buckets else None)  # fmt: skip
    task = progress.add_task("DynamoDB: stores, publications, reviews", total=30 + 3 + 24)
    for n in range(30):
        country, region, city = rng.choice(PLACES)
        stores.put_store(client, table, {"Country": country, "Region": region, "City": city,
                                         "StoreId": f"demo-s{n}", "Name": f"{city} {n}"})  # fmt: skip
        writer.written += 1
        progress.advance(task)
    for n in range(3):
        publication = f"demo-pub{n}"
        for revision in range(1, 6):
            publications.edit(client, table, publication, {"Name": f"Publication {n}",
                              "Description": f"revision {revision}"}, editor=f"demo-c{revision}")  # fmt: skip
        for t in range(4):
            with contextlib.suppress(Conflict):  # a demo run again: the title is there already
                tags = tuple(rng.sample(["dynamodb", "sql", "streams", "cdk"], 2))
                publications.add_title(client, table, publication, f"t{t}", f"Title {t}", tags)
        writer.written += 9
        progress.advance(task)
    sizes = [300, 5_000, 40_000, 300_000, 1_500_000]  # text, gzip, gzip, chunks, S3 (when noisy enough)
    for n in range(24):
        size = sizes[n % len(sizes)]
        noisy = size >= 300_000  # random hex hardly compresses: it really needs chunks or S3
        body = rng.randbytes(size // 2).hex() if noisy else "Boils fast, pours well. " * (size // 24)
        review = {"ReviewId": f"demo-r{n}", "ProductId": rng.choice(products), "CustomerId": f"demo-c{n}",
                  "Rating": rng.randint(1, 5), "Title": f"{size:,} bytes of opinion"}  # fmt: skip
        reviews.put_review(client, table, place, review, body)
        writer.written += 1
        progress.advance(task)


POISON = {  # name: (entity, what another writer got wrong, the dead letters it must give)
    "an order whose Total is text": ("Order", {"Total": {"S": "12.00"}},
                                     [("write_back", "Total must be a number, got str '12.00'")]),
    "an order line whose Quantity is text": ("OrderLine", {"Quantity": {"S": "two"}},
                                             [("write_back", "Quantity must be an integer, got str 'two'"),
                                              ("aggregate", "Quantity must be an integer, got str 'two'")]),
    "an order with an id over 128 characters": (
        "Order", {"OrderId": {"S": "x" * 200}},
        [("write_back", "OrderId is 200 characters long, over its limit of 128")]),
}  # fmt: skip
POISON_REASONS = {letter for _, _, letters in POISON.values() for letter in letters}


def poison_item(writer: Writer, name: str, order_id: str) -> None:
    """An item another writer put without the model's validation (a POISON kind): it must become
    dead letters."""
    entity_name, bad, _ = POISON[name]
    entity = MODEL.entity(entity_name)
    values = {"OrderId": order_id, "CustomerId": "demo-c0", "CreatedAt": "2026-01-01T00:00:00.000Z",
              "Status": "OPEN", "Version": 1}  # fmt: skip
    values |= (
        {"Total": Decimal(1)}
        if entity is ORDER
        else {"LineNo": 1, "ProductId": "demo-p0", "Quantity": 1, "UnitPrice": Decimal(1)}
    )
    writer.client.put_item(TableName=writer.table, Item=marshal(entity.item(values)) | bad)
    writer.written += 1


def _poison(writer: Writer) -> None:
    for n, name in enumerate(POISON):
        poison_item(writer, name, f"demo-poison{n}")


def _caught_up(app: LocalApp, engine: sa.Engine) -> tuple[bool, str]:
    try:
        with engine.connect() as conn:
            outbox = conn.execute(sa.text("SELECT count(*) FROM outbox")).scalar_one()
    except sa.exc.OperationalError:  # PostgreSQL restarting: not caught up yet, ask again
        return False, "PostgreSQL unreachable"
    lag = {p.settings.name.split(":")[0]: p.stats.lag_records for p in app.pollers}
    done = outbox == 0 and all(p.stats.caught_up for p in app.pollers)
    return done, ", ".join(f"{name} {n}" for name, n in lag.items()) + f", outbox {outbox}"


Aggregates = dict[tuple[str, str, str], tuple[Decimal, Decimal]]  # (entity, owner, period) -> counters


def recount(items: list[dict[str, Any]]) -> Aggregates:
    """The aggregates a clean pass over the order lines gives (lines the mapping rejects count for
    nothing, as in the pipeline: they are dead letters)."""
    totals: dict[tuple[str, str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for item in items:
        if item[ENTITY] != ORDER_LINE.name:
            continue
        try:
            line = to_row(ORDER_LINE, item)
        except Rejected:
            continue
        if line["status"] == CANCELLED:
            continue
        revenue = line["quantity"] * line["unit_price"]
        day = line["created_at"].strftime("%Y-%m-%d")
        for period in (day, day[:7]):
            totals[(SALES.name, line["product_id"], period)][0] += line["quantity"]
            totals[(SALES.name, line["product_id"], period)][1] += revenue
        totals[(CUSTOMER_SPEND.name, line["customer_id"], day[:7])][0] += points(revenue)
        totals[(CUSTOMER_SPEND.name, line["customer_id"], day[:7])][1] += revenue
    return {k: (v[0], v[1]) for k, v in totals.items() if v != [0, 0]}


def stored_aggregates(items: list[dict[str, Any]], owners: str = "demo-") -> Aggregates:
    """The aggregates of the products and customers named `owners`... as stored (zero counters
    count as absent)."""
    fields = {
        SALES.name: ("ProductId", "Units", "Revenue"),
        CUSTOMER_SPEND.name: ("CustomerId", "Points", "Spend"),
    }
    out = {}
    for item in items:
        if item[ENTITY] in fields:
            owner, first, second = fields[item[ENTITY]]
            value = (item[first], item[second])
            if item[owner].startswith(owners) and value != (0, 0):
                out[(item[ENTITY], item[owner], item["Period"])] = value
    return out


def _http(app: LocalApp, path: str) -> Any:
    assert app.http is not None
    url = f"http://127.0.0.1:{app.http.server_address[1]}{path}"
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def run(
    app: LocalApp,
    engine: sa.Engine,
    state_dir: Path,
    console: Console,
    work: Workload | None = None,
    timeout_s: float = 300,
) -> dict[str, Any]:
    """Drive the workload through the running app and report on it; returns the report's figures."""
    work = work or Workload()
    rng = random.Random(work.seed)
    table = app.tables["MainTable"]
    writer = Writer(app.client, table)
    started = time.time()
    with Progress(console=console, transient=False) as progress:
        products = _sql_side(engine, work, rng, progress)
        _dynamodb_side(writer, products, work, rng, progress)
        _shapes(app, writer, products, rng, progress)
        _poison(writer)
    written_s = time.time() - started
    with console.status("the pipeline is catching up...") as status:
        deadline = time.monotonic() + timeout_s
        while True:
            done, lag = _caught_up(app, engine)
            status.update(f"the pipeline is catching up: lag {lag} (batching windows as deployed)")
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    figures = _report(app, engine, writer, started, time.time() - started, written_s, done)
    _print(console, figures)
    (state_dir / "report.json").write_text(json.dumps(figures, indent=1, default=str))
    (state_dir / "report.html").write_text(html_report(figures))
    console.print(f"report: {state_dir / 'report.html'} (open it in a browser; no network needed)")
    return figures


def _report(
    app: LocalApp,
    engine: sa.Engine,
    writer: Writer,
    started: float,
    elapsed: float,
    written_s: float,
    caught_up: bool,
) -> dict[str, Any]:
    table = app.tables["MainTable"]
    items = [unmarshal(i) for page in store.pages(app.client, "scan", TableName=table) for i in page["Items"]]
    dynamodb = Counter(i.get(ENTITY, "?") for i in items if not i.get("Missing"))
    rows = {}
    with engine.connect() as conn:
        for entity in MODEL.synced():
            live = "WHERE NOT deleted" if entity in MODEL.written_back() else ""
            count = sa.text(f"SELECT count(*) FROM {entity.sql_table} {live}")
            rows[entity.sql_table] = conn.execute(count).scalar_one()
        since = datetime.fromtimestamp(started, UTC)  # this run's only: earlier runs' stay in the table
        letters = [(r.source, r.reason) for r in pending(conn) if r.created_at >= since]
    drift = reconcile(app.client, table, engine)
    clean, stored = recount(items), stored_aggregates(items)
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    lags = sorted(lag for p in app.pollers for _, lag in p.stats.lags)
    delivered = [(at, lag) for p in app.pollers for at, lag in p.stats.lags]
    return {
        "caught_up": caught_up,
        "writes": writer.written,
        "seconds": round(elapsed, 1),
        "writing_seconds": round(written_s, 1),
        "dynamodb_items": dict(sorted(dynamodb.items())),
        "postgresql_rows": rows,
        "drift": sum(d.total for d in drift.values()),
        "aggregates": len(stored),
        "aggregates_equal_recount": stored == clean,
        "top_sellers": _http(app, f"/products/top?day={day}&n=5")["products"],
        "leaderboard": _http(app, "/leaderboard?n=5")["players"],
        "dead_letters": letters,
        "lag_p50_s": round(statistics.median(lags), 3) if lags else None,
        "lag_p99_s": round(lags[int(len(lags) * 0.99)] if lags else 0, 3),
        "records_delivered": len(lags),
        "throughput_records_s": round(len(lags) / elapsed, 1),
        "timeline": sorted((round(at, 3), round(lag, 3)) for at, lag in delivered),
        "faults_injected": dict(app.faults.counts) if app.faults else {},
        "failed_batches_queued": sum(app.status()["failure_queues"].values()),
    }


def _print(console: Console, f: dict[str, Any]) -> None:
    sides = Table(title=f"both sides after {f['writes']} writes in {f['seconds']} s")
    sides.add_column("DynamoDB entity"), sides.add_column("items", justify="right")
    sides.add_column("PostgreSQL table"), sides.add_column("live rows", justify="right")
    left, right = list(f["dynamodb_items"].items()), list(f["postgresql_rows"].items())
    for n in range(max(len(left), len(right))):
        a, b = left[n] if n < len(left) else ("", ""), right[n] if n < len(right) else ("", "")
        sides.add_row(str(a[0]), str(a[1]), str(b[0]), str(b[1]))
    console.print(sides)
    ok = "[green]{}[/green]", "[red]{}[/red]"
    console.print("reconcile drift: " + (ok[0] if f["drift"] == 0 else ok[1]).format(f["drift"]))
    equal = f["aggregates_equal_recount"]
    console.print(
        f"aggregates: {f['aggregates']}, "
        + (ok[0] if equal else ok[1]).format(
            "equal to a clean recount of the order lines" if equal else "DIFFERENT from a clean recount"
        )
    )
    sellers = Table(title="top sellers today (HTTP API, over a socket)")
    for column in ("product", "units", "revenue"):
        sellers.add_column(column)
    for row in f["top_sellers"]:
        sellers.add_row(row["ProductId"], str(row["Units"]), str(row["Revenue"]))
    board = Table(title="leaderboard (HTTP API)")
    board.add_column("player"), board.add_column("score")
    for row in f["leaderboard"]:
        board.add_row(row["PlayerId"], str(row["Score"]))
    console.print(sellers, board)
    letters = Table(title=f"dead letters ({len(f['dead_letters'])})")
    letters.add_column("consumer"), letters.add_column("reason")
    for source, reason in f["dead_letters"]:
        letters.add_row(source, reason)
    console.print(letters)
    console.print(
        f"pipeline lag p50 {f['lag_p50_s']} s, p99 {f['lag_p99_s']} s over {f['records_delivered']} "
        f"records; {f['throughput_records_s']} records/s delivered"
        + ("" if f["caught_up"] else " [red](did not catch up in time)[/red]")
    )
    if f["faults_injected"]:
        injected = ", ".join(f"{kind} {n}" for kind, n in sorted(f["faults_injected"].items()))
        console.print(f"faults injected into stream deliveries: {injected}; "
                      f"failed batches in the failure queues: {f['failed_batches_queued']}")  # fmt: skip
