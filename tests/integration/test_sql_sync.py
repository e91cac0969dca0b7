"""SQL -> DynamoDB through the outbox, on embedded PostgreSQL and moto server."""

from __future__ import annotations

import threading
import time
import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync import filters
from hybridsync.convert import marshal, unmarshal
from hybridsync.sync import outbox, reconcile, writeback
from shop.model import MODEL, PRODUCT_AVAILABILITY, PRODUCT_DETAILS
from tests.handlers import LambdaContext, load


@pytest.fixture
def product_id():
    return f"p-{uuid.uuid4().hex[:8]}"


def sql(engine, statement, **params):
    with engine.begin() as conn:
        conn.execute(sa.text(statement), params)


def view(dynamodb, stack, entity, product_id):
    got = dynamodb.get_item(
        TableName=stack.table_names["main"], Key=marshal(entity.key({"ProductId": product_id})),
        ConsistentRead=True,
    )  # fmt: skip
    return unmarshal(got["Item"]) if "Item" in got else None


def drain(stack, engine):
    return outbox.drain_all(engine, stack.client(), MODEL, stack.table_names)


def test_price_and_stock_updates_reach_dynamodb_in_order(stack, engine, dynamodb, product_id):
    sql(
        engine,
        "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 10.00, 5)",
        p=product_id,
    )
    for price in ("11.00", "12.50", "9.99"):
        sql(engine, "UPDATE product_availability SET price = :x WHERE product_id = :p", x=price, p=product_id)
    sql(engine, "UPDATE product_availability SET stock = stock - 1 WHERE product_id = :p", p=product_id)
    drain(stack, engine)
    item = view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)
    assert (item["Price"], item["Stock"], item["Origin"]) == (Decimal("9.99"), 4, "sql")
    with engine.connect() as conn:
        version = conn.execute(
            sa.text("SELECT version FROM product_availability WHERE product_id = :p"), {"p": product_id}
        ).scalar_one()
    assert item["Version"] == version
    assert view(dynamodb, stack, PRODUCT_DETAILS, product_id) is None  # vertical partition: untouched


def test_delete_replaces_the_view_with_a_tombstone(stack, engine, dynamodb, product_id):
    sql(
        engine,
        "INSERT INTO products (product_id, name, category) VALUES (:p, 'Kettle', 'kitchen')",
        p=product_id,
    )
    drain(stack, engine)
    assert view(dynamodb, stack, PRODUCT_DETAILS, product_id)["Name"] == "Kettle"
    sql(engine, "DELETE FROM products WHERE product_id = :p", p=product_id)
    drain(stack, engine)
    item = view(dynamodb, stack, PRODUCT_DETAILS, product_id)
    assert item["Missing"] is True and "Name" not in item


class CrashOnPut:
    def __init__(self, client, after):
        self._client, self.after, self.puts = client, after, 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def put_item(self, **kwargs):
        self.puts += 1
        if self.puts > self.after:
            raise ConnectionError("drainer died between claim and apply")
        return self._client.put_item(**kwargs)


def test_crash_between_claim_and_apply_loses_nothing(stack, engine, dynamodb):
    ids = [f"p-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    for n, pid in enumerate(ids):
        sql(
            engine,
            "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, :x, 1)",
            p=pid,
            x=n,
        )
    with pytest.raises(ConnectionError):
        outbox.drain(engine, CrashOnPut(stack.client(), after=2), MODEL, stack.table_names)
    with engine.connect() as conn:
        pending = conn.execute(sa.text("SELECT count(*) FROM outbox WHERE row_key->>'product_id' = ANY(:i)"),
                               {"i": ids}).scalar_one()  # fmt: skip
    assert pending == 5  # the claim rolled back with the crash
    drain(stack, engine)
    drain(stack, engine)  # a duplicate drain changes nothing
    assert [view(dynamodb, stack, PRODUCT_AVAILABILITY, p)["Price"] for p in ids] == [0, 1, 2, 3, 4]


def test_concurrent_drainers_share_the_work_and_end_exact(stack, engine, dynamodb):
    ids = [f"p-{uuid.uuid4().hex[:8]}" for _ in range(20)]
    for pid in ids:
        sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1, 1)", p=pid)
        for stock in range(2, 5):
            sql(engine, "UPDATE product_availability SET stock = :s WHERE product_id = :p", s=stock, p=pid)
    results = []

    def drainer():
        results.append(outbox.drain_all(engine, stack.client(), MODEL, stack.table_names, limit=7))

    threads = [threading.Thread(target=drainer) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.claimed for r in results) >= 80
    assert {view(dynamodb, stack, PRODUCT_AVAILABILITY, p)["Stock"] for p in ids} == {4}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM outbox")).scalar_one() == 0


def test_an_older_change_never_overwrites_a_newer_view(stack, engine, dynamodb, product_id):
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1, 1)", p=product_id)
    drain(stack, engine)
    newer = view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)
    stale = {"ProductId": product_id, "Price": Decimal("0.01"), "Stock": 0}
    assert not outbox.put_view(stack.client(), stack.table_names["main"], PRODUCT_AVAILABILITY, stale,
                                newer["Version"] - 1)  # fmt: skip
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Price"] == Decimal(1)


def test_no_echo_changes_from_sql_are_not_written_back(stack, engine, dynamodb, product_id, workload, stream):
    sql(engine, "INSERT INTO customers (customer_id, name, email) VALUES (:c, 'Ada', 'ada@example.com')",
        c=product_id)  # fmt: skip
    drain(stack, engine)
    records = stream.read()
    assert records and all(r["dynamodb"]["NewImage"]["Origin"]["S"] == "sql" for r in records)
    outcome = writeback.write_back(records, engine, MODEL)
    assert (outcome.skipped, outcome.applied) == (len(records), 0)
    # the event source mapping would not even deliver them, and it tells the origin apart: a change
    # of a written-back entity is delivered when made in DynamoDB, dropped when marked as from SQL
    assert not any(filters.admits(writeback.event_filters(MODEL), r) for r in records)
    workload.order(workload.id("o"))
    (own,) = stream.read()
    assert filters.admits(writeback.event_filters(MODEL), own)
    own["dynamodb"]["NewImage"]["Origin"] = {"S": "sql"}
    assert not filters.admits(writeback.event_filters(MODEL), own)


def test_handler_drains_everything_and_reports(handler_env, stack, engine, dynamodb, product_id):
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 3, 3)", p=product_id)
    result = load("sql_sync").handler({}, LambdaContext())
    assert result["claimed"] >= 1
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 3


def test_notify_wakes_the_local_drainer(stack, engine, dynamodb, product_id):
    stop = threading.Event()
    drainer = threading.Thread(
        target=outbox.listen_and_drain,
        args=(stack.database_url, stack.client(), MODEL, stack.table_names, stop),
        kwargs={"idle_s": 30.0},  # longer than the wait below: only the NOTIFY can explain a prompt drain
        daemon=True,
    )
    drainer.start()
    try:
        time.sleep(0.5)  # listening
        sql(
            engine,
            "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 7, 7)",
            p=product_id,
        )
        deadline = time.monotonic() + 10
        while view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 7
    finally:
        stop.set()
        sql(engine, "SELECT pg_notify('hybridsync_outbox', 'stop')")  # wake it so it sees stop
        drainer.join(timeout=10)


def test_reconcile_views_finds_stale_and_extra_views(stack, engine, dynamodb, product_id):
    """The SQL -> DynamoDB direction of reconcile: a change not drained yet leaves a stale view, a
    deleted row's live view is extra, and once drained both are gone."""
    table = stack.table_names["main"]

    def drifted():
        report = reconcile.reconcile_views(dynamodb, table, engine, MODEL)[PRODUCT_AVAILABILITY.name]
        return {kind for kind in ("missing", "stale", "extra")
                if any(product_id in map(str, key) for key in getattr(report, kind))}  # fmt: skip

    sql(
        engine,
        "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 10.00, 5)",
        p=product_id,
    )
    assert drifted() == set()  # no view yet: a cold cache is no drift
    drain(stack, engine)
    assert drifted() == set()
    sql(engine, "UPDATE product_availability SET price = 11.00 WHERE product_id = :p", p=product_id)
    assert drifted() == {"stale"}
    drain(stack, engine)
    sql(engine, "DELETE FROM product_availability WHERE product_id = :p", p=product_id)
    assert drifted() == {"extra"}
    drain(stack, engine)
    assert drifted() == set()
