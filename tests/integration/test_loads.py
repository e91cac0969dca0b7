"""The initial loads on real PostgreSQL and DynamoDB Local, with the app's writes racing them: views
of PostgreSQL rows, the master moved (legacy rows become items), items older than the stream
written back; a killed load resumes redoing at most a chunk per unit."""

from __future__ import annotations

import itertools
import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync.dynamodb import exports, store
from hybridsync.dynamodb.scans import Pacer
from hybridsync.local.dynamodb import streams
from hybridsync.model.convert import to_row
from hybridsync.sync import jobs, loads, outbox, writeback
from hybridsync.sync.jobs import JobStore, Services
from hybridsync.sync.reconcile import reconcile
from shop.model import MODEL
from tests.integration.conftest import Workload

pytestmark = pytest.mark.integration


@pytest.fixture
def own(stack):
    """Tables of the test's own: a load reads every row of its entity in the shared PostgreSQL, and
    what it writes must not reach another test's table."""
    return stack.with_tables(f"ld{uuid.uuid4().hex[:6]}")


@pytest.fixture
def services(own, engine):
    return Services(own.client(), engine, MODEL, dict(own.table_names), own.client, Pacer(None))


@pytest.fixture
def workload(own):
    return Workload(own)


@pytest.fixture
def stream(own):
    arn = own.client().describe_table(TableName=own.table_names["main"])["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(own.client("dynamodbstreams"), arn, start="LATEST")
    reader.read()
    return reader


def run(services, kind, spec, **options):
    job = jobs.start(services, kind, spec)
    store_ = JobStore(services.client, services.model, services.tables)
    return jobs.run(store_, job, jobs.in_process(services, options.pop("slice_s", 2.0)), **options)


def item(tables, entity, **values):
    return store.get(tables.client(), tables.table_names["main"], MODEL.entity(entity).key(values))


def test_views_load_every_row_and_never_replace_a_newer_view(own, engine, services, workload):
    ids = [workload.id("c") for _ in range(7)]
    with engine.begin() as conn:
        for n, cid in enumerate(ids):
            conn.execute(
                sa.text("INSERT INTO customers (customer_id, name, email) VALUES (:i, :n, :e)"),
                {"i": cid, "n": f"name {n}", "e": f"{cid}@example.com"},
            )
    # a change the load's read of the last row predates: its view is newer than the row it reads
    with engine.connect() as conn:
        version = conn.execute(
            sa.text("SELECT version FROM customers WHERE customer_id = :i"), {"i": ids[-1]}
        ).scalar_one()
    values = {"CustomerId": ids[-1], "Name": "renamed", "Email": "x@example.com"}
    assert outbox.put_view(
        own.client(), own.table_names["main"], MODEL.entity("Customer"), values, version + 1
    )
    outcome = run(services, "views", {"entity": "Customer", "segments": 3})
    assert outcome.undone == 0 and outcome.counts.dead_lettered == 0
    for n, cid in enumerate(ids[:-1]):
        view = item(own, "Customer", CustomerId=cid)
        assert view["Name"] == f"name {n}" and view["Origin"] == "sql"
    assert item(own, "Customer", CustomerId=ids[-1])["Name"] == "renamed"
    assert outcome.counts.older >= 1


def test_moving_the_master_makes_items_and_the_write_back_changes_nothing(
    own, engine, services, workload, stream
):
    orders = [workload.id("o") for _ in range(5)]
    customer = f"{workload.prefix}-legacy"
    stream.read()
    with engine.begin() as conn:  # what the legacy application wrote, before hybridsync
        for n, oid in enumerate(orders):
            conn.execute(
                sa.text(
                    "INSERT INTO orders (order_id, customer_id, created_at, status, total, version) "
                    "VALUES (:o, :c, '2026-11-01T10:00:00Z', 'OPEN', :t, :v)"
                ),
                {"o": oid, "c": customer, "t": 10 + n, "v": n},
            )
    # the app has already written one of them as an item since: it is never replaced
    workload.order(orders[0], customer="legacy", Total=Decimal("99.00"), CreatedAt="2026-11-01T10:00:00.000Z")
    outcome = run(services, "items", {"entity": "Order", "segments": 2})
    assert outcome.undone == 0 and outcome.counts.older == 1
    assert item(own, "Order", CustomerId=customer, CreatedAt="2026-11-01T10:00:00.000Z", OrderId=orders[0])[
        "Total"
    ] == Decimal("99.00")
    loaded = item(own, "Order", CustomerId=customer, CreatedAt="2026-11-01T10:00:00.000Z", OrderId=orders[3])
    assert loaded["Total"] == 13 and loaded["Version"] == 3 and loaded["Status"] == "OPEN"
    records = [
        r for r in stream.read() if r["dynamodb"]["NewImage"].get("OrderId", {}).get("S") in orders[1:]
    ]
    assert len(records) == 4
    truth = writeback.Truth(own.client(), own.table_names)
    assert writeback.write_back(records, engine, MODEL, truth=truth).changed == 0  # the load's own: nothing
    # a second pass (the cut-over's, after the legacy writer stopped) rewrites only what changed
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE orders SET status = 'SHIPPED' WHERE order_id = :o"), {"o": orders[4]})
    again = run(services, "items", {"entity": "Order"})
    assert again.counts.written >= 1 and again.counts.skipped >= 3 and again.counts.older >= 1
    rewritten = {r["dynamodb"]["Keys"]["SK"]["S"].rsplit("#", 1)[-1] for r in stream.read()}
    assert rewritten & set(orders) == {orders[4]}  # the unchanged ones were not written again
    shipped = item(own, "Order", CustomerId=customer, CreatedAt="2026-11-01T10:00:00.000Z", OrderId=orders[4])
    assert shipped["Status"] == "SHIPPED"
    report = reconcile(own.client(), own.table_names["main"], engine, MODEL)
    drifted = {k[0] for d in report.values() for k in d.missing + d.stale + d.extra}
    assert drifted.isdisjoint(orders[1:])


def test_rows_load_items_of_any_writer_and_never_regresses_a_row(own, engine, services, workload, stream):
    client, table = own.client(), own.table_names["main"]
    customer = f"{workload.prefix}-c1"
    old = [workload.order(workload.id("o")) for _ in range(30)]  # older than the stream: never written back
    legacy_id = workload.id("o")
    legacy = {
        "PK": f"CUSTOMER#{customer}",
        "SK": f"ORDER#2026-11-02T10:00:00.000Z#{legacy_id}",
        "OrderId": legacy_id,
        "CustomerId": customer,
        "CreatedAt": "2026-11-02T10:00:00.000Z",
        "Status": "OPEN",
        "Total": Decimal(5),
    }
    stray = {"PK": f"NOTHING#{workload.prefix}", "SK": "X", "Junk": 1}
    for raw in (legacy, stray):
        client.put_item(TableName=table, Item=store.marshal(raw))
    # a newer version reaches PostgreSQL through the stream before the load reads the older item
    newer = dict(old[0]) | {"Status": "SHIPPED", "Version": old[0]["Version"] + 1}
    order = MODEL.entity("Order")
    change = writeback.Change(
        order, (newer["OrderId"],), newer["Version"], False, to_row(order, newer), {}, 10**20
    )
    with engine.begin() as conn:
        writeback.apply_changes(conn, [change])
    outcome = run(services, "rows", {"entities": ["Order"], "segments": 3})
    assert outcome.undone == 0
    with engine.connect() as conn:
        rows = dict(
            conn.execute(
                sa.text("SELECT order_id, status FROM orders WHERE customer_id = :c"), {"c": customer}
            ).all()
        )
        letters = (
            conn.execute(
                sa.text("SELECT reason FROM dead_letters WHERE source = 'load' AND record::text LIKE :p"),
                {"p": f"%NOTHING#{workload.prefix}%"},
            )
            .scalars()
            .all()
        )
    assert len(rows) == 31 and rows[old[0]["OrderId"]] == "SHIPPED" and rows[legacy_id] == "OPEN"
    assert letters and "matches no entity" in letters[0]
    untouched = client.get_item(TableName=table, Key=store.marshal({"PK": legacy["PK"], "SK": legacy["SK"]}))
    assert store.unmarshal(untouched["Item"]) == legacy  # placed by its keys, never tagged or versioned


def test_a_killed_load_resumes_and_redoes_at_most_a_chunk_per_unit(
    own, engine, services, workload, monkeypatch
):
    monkeypatch.setattr(loads, "CHUNK", 20)
    ids = [workload.id("p") for _ in range(130)]
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO product_availability (product_id, price, stock) VALUES (:i, 1, 1)"),
            [{"i": i} for i in ids],
        )
    job = jobs.start(services, "views", {"entity": "ProductAvailability", "segments": 2})
    store_ = JobStore(services.client, MODEL, services.tables)
    calls = itertools.count()

    def killed_after_three_chunks(job_id, number):
        unit = jobs.run_unit(services, store_, job_id, number, until=lambda: True)  # one chunk
        if next(calls) >= 2:
            raise RuntimeError("killed")
        return unit

    killed = jobs.run(store_, job, killed_after_three_chunks, concurrency=1)
    assert killed.undone == 2 and killed.errors
    done_before = killed.counts.read
    resumed = jobs.run(store_, job, jobs.in_process(services))
    assert resumed.undone == 0
    total = sum(1 for i in ids if item(own, "ProductAvailability", ProductId=i) is not None)
    assert total == 130
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT count(*) FROM product_availability")).scalar_one()
    assert resumed.counts.read - rows <= 2 * loads.CHUNK and done_before > 0


def test_rows_load_from_an_export_reads_no_table_and_lands_every_item(stack, own, engine):
    """A point-in-time export (0 read units) loaded a data file per unit."""
    client, table = own.client(), own.table_names["main"]
    tag = uuid.uuid4().hex[:6]
    for n in range(12):
        values = {"OrderId": f"{tag}-o{n}", "CustomerId": f"{tag}-c", "Status": "OPEN",
                  "CreatedAt": "2026-11-22T07:00:00.000Z", "Total": Decimal(n), "Version": 1}  # fmt: skip
        assert store.put(client, table, MODEL.entity("Order"), values)
    export = exports.by_scan(client, own.client("s3"), table, stack.bucket_names["bodies"], f"exports/{tag}",
                             items_per_file=5)  # fmt: skip
    services = Services(client, engine, MODEL, dict(own.table_names), own.client, Pacer(None))
    outcome = run(services, "rows", {"entities": ["Order"], "export": export.url})
    assert outcome.undone == 0 and outcome.units == 3 and outcome.counts.read == 12
    with engine.connect() as conn:
        found = conn.execute(sa.text("SELECT count(*) FROM orders WHERE customer_id = :c"), {"c": f"{tag}-c"})
        assert found.scalar_one() == 12
