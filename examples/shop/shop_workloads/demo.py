"""The shop's demo (`./scripts/up --demo`, `[tool.hybridsync] demo`): a realistic workload on both
sides of the running app, then a report.

Everything goes through the shop's write path. PostgreSQL gets customers, a
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
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress

from hybridsync import rows, workloads
from hybridsync.local import report
from hybridsync.local.app import LocalApp
from hybridsync.model.convert import marshal
from hybridsync.model.errors import Conflict
from hybridsync.runtime import aws
from hybridsync.workloads import Writer
from shop import catalog, follows, orders, publications, reviews, stores
from shop.model import CANCELLED, CUSTOMER, MODEL, ORDER, ORDER_LINE, PLAYER_SCORE, SHIPPED


@dataclass
class Workload:
    customers: int = 120
    products: int = 60
    orders: int = 300
    players: int = 80
    follows: int = 200
    seed: int = 20261122


def place_order(
    writer: Writer, order: dict[str, Any], products: list[str], unit_price: Decimal
) -> dict[str, Any]:
    """An open order (OrderId, CustomerId, CreatedAt) with a line per product, quantities 1, 2,
    ..., lines first: the order's Total is theirs."""
    order = order | {"Status": "OPEN"}
    for line_no, product in enumerate(products, 1):
        writer.put(
            ORDER_LINE,
            order | {"LineNo": line_no, "ProductId": product, "Quantity": line_no, "UnitPrice": unit_price},
        )
    total = unit_price * sum(range(1, len(products) + 1))
    return writer.put(ORDER, order | {"Total": total})


def orders_for(writer: Writer, seconds: float, tag: str,
               created: str = "2031-05-06T07:00:00.000Z") -> tuple[int, float]:  # fmt: skip
    """Orders with two lines (of 30 products), back to back, for `seconds` (the benchmarks' steady
    writer); returns (orders, orders per second)."""
    started, n = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        order = {"OrderId": f"{tag}-o{n}", "CustomerId": f"{tag}-c{n % 50}", "CreatedAt": created}
        place_order(writer, order, [f"{tag}-p{(n + line) % 30}" for line in (1, 2)], Decimal("9.99"))
        n += 1
    return n, n / (time.monotonic() - started)


def _sql_side(engine: sa.Engine, work: Workload, rng: random.Random, progress: Progress) -> list[str]:
    """The catalogue, written where it is mastered, through the write path's SQL functions."""
    task = progress.add_task(
        "PostgreSQL: customers, catalogue, prices", total=work.customers + 2 * work.products
    )
    with engine.begin() as conn:
        for n in range(work.customers):
            customer = {
                "CustomerId": f"demo-c{n}",
                "Name": f"Customer {n}",
                "Email": f"c{n}@example.com",
                "Tier": rng.choice(["gold", "silver", None]),
            }
            rows.upsert(conn, CUSTOMER, customer)
            progress.advance(task)
    products = [f"demo-p{n}" for n in range(work.products)]
    for n, product in enumerate(products):
        details = {
            "ProductId": product,
            "Name": f"Product {n}",
            "Description": "A fine thing. " * 40,
            "Category": rng.choice(["kitchen", "garden", "office"]),
        }
        price = Decimal(rng.randint(199, 9999)) / 100
        availability = {"ProductId": product, "Price": price, "Stock": rng.randint(0, 500)}
        catalog.put_product(engine, details, availability)
        progress.advance(task)
    for product in products:  # price changes: each its own transaction, as a pricing job commits them
        with engine.connect() as conn:
            price = conn.execute(
                sa.text("SELECT price FROM product_availability WHERE product_id = :p"), {"p": product}
            ).scalar_one()
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
    run = f"{table.rsplit('-', 1)[0]}-{today:%H%M%S}"  # a second run on the same tables places new orders
    weights = [1 / (k + 1) ** 1.1 for k in range(len(products))]  # a few best sellers, a long tail
    for n in range(work.orders):
        customer = f"demo-c{rng.randrange(work.customers)}"
        lines = [
            {
                "ProductId": rng.choices(products, weights)[0],
                "Quantity": rng.randint(1, 5),
                "UnitPrice": Decimal(rng.randint(199, 4999)) / 100,
            }
            for _ in range(rng.randint(1, 4))
        ]
        moment = today.replace(microsecond=rng.randrange(1000) * 1000)
        order, created = orders.place_order(
            client, table, customer, lines, idempotency_key=f"demo-o{n}-{run}", now=moment
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


PLACES = [
    ("CH", "ZH", "Zürich"),
    ("CH", "GE", "Genève"),
    ("DE", "BY", "München"),
    ("JP", "東京都", "渋谷区"),
    ("US", "WA", "Seattle"),
    ("US", "WA", "Spokane"),
]


def _shapes(
    app: LocalApp, writer: Writer, products: list[str], rng: random.Random, progress: Progress
) -> None:
    """The other data shapes of the write path: stores under hierarchical keys, publications with
    titles, tags and revisions, and reviews whose bodies range from a line to megabytes."""
    client, table = writer.client, writer.table
    buckets = list(app.buckets.values())
    place = reviews.Place(
        app.table_names["chunks"],
        aws.client("s3", app.services_endpoint, app.region),
        buckets[0] if buckets else None,
    )
    task = progress.add_task("DynamoDB: stores, publications, reviews", total=30 + 3 + 24)
    for n in range(30):
        country, region, city = rng.choice(PLACES)
        stores.put_store(
            client,
            table,
            {
                "Country": country,
                "Region": region,
                "City": city,
                "StoreId": f"demo-s{n}",
                "Name": f"{city} {n}",
            },
        )
        writer.written += 1
        progress.advance(task)
    for n in range(3):
        publication = f"demo-pub{n}"
        for revision in range(1, 6):
            publications.edit(
                client,
                table,
                publication,
                {"Name": f"Publication {n}", "Description": f"revision {revision}"},
                editor=f"demo-c{revision}",
            )
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
        review = {
            "ReviewId": f"demo-r{n}",
            "ProductId": rng.choice(products),
            "CustomerId": f"demo-c{n}",
            "Rating": rng.randint(1, 5),
            "Title": f"{size:,} bytes of opinion",
        }
        reviews.put_review(client, table, place, review, body)
        writer.written += 1
        progress.advance(task)


POISON = {  # name: (entity, what another writer got wrong, the dead letters it must give)
    "an order whose Total is text": (
        "Order",
        {"Total": {"S": "12.00"}},
        [("write_back", "Total must be a number, got str '12.00'")],
    ),
    "an order line whose Quantity is text": (
        "OrderLine",
        {"Quantity": {"S": "two"}},
        [
            ("write_back", "Quantity must be an integer, got str 'two'"),
            ("aggregate", "Quantity must be an integer, got str 'two'"),
        ],
    ),
    "an order with an id over 128 characters": (
        "Order",
        {"OrderId": {"S": "x" * 200}},
        [("write_back", "OrderId is 200 characters long, over its limit of 128")],
    ),
}
POISON_REASONS = {letter for _, _, letters in POISON.values() for letter in letters}


def poison_item(writer: Writer, name: str, order_id: str) -> None:
    """An item another writer put without the model's validation (a POISON kind): it must become
    dead letters."""
    entity_name, bad, _ = POISON[name]
    entity = MODEL.entity(entity_name)
    values = {
        "OrderId": order_id,
        "CustomerId": "demo-c0",
        "CreatedAt": "2026-01-01T00:00:00.000Z",
        "Status": "OPEN",
        "Version": 1,
    }
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
    writer = Writer(app.client, app.table_names["main"])
    started = time.time()
    with Progress(console=console, transient=False) as progress:
        products = _sql_side(engine, work, rng, progress)
        _dynamodb_side(writer, products, work, rng, progress)
        _shapes(app, writer, products, rng, progress)
        _poison(writer)
    written_s = time.time() - started
    with console.status("the pipeline is catching up...") as status:
        caught_up = workloads.wait_caught_up(
            lambda: app.status()["mappings"],
            engine,
            timeout_s=timeout_s,
            calm=2,  # a status read between a take and its buffering sees neither
            progress=lambda lag: status.update(
                f"the pipeline is catching up: {lag} (batching windows as deployed)"
            ),
        )
    figures = report.figures(
        app,
        engine,
        MODEL,
        started=started,
        elapsed=time.time() - started,
        writes=writer.written,
        caught_up=caught_up,
    )
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    figures |= {
        "writing_seconds": round(written_s, 1),
        "top_sellers": _http(app, f"/products/top?day={day}&n=5")["products"],
        "leaderboard": _http(app, "/leaderboard?n=5")["players"],
    }
    extra = [
        (
            "top sellers today (HTTP API, over a socket)",
            ["product", "units", "revenue"],
            [[r["ProductId"], r["Units"], r["Revenue"]] for r in figures["top_sellers"]],
        ),
        (
            "leaderboard (HTTP API)",
            ["player", "score"],
            [[r["PlayerId"], r["Score"]] for r in figures["leaderboard"]],
        ),
    ]
    report.show(console, figures, extra)
    (state_dir / "report.json").write_text(json.dumps(figures, indent=1, default=str))
    (state_dir / "report.html").write_text(report.html_report(figures, extra))
    console.print(f"report: {state_dir / 'report.html'} (open it in a browser; no network needed)")
    return figures
