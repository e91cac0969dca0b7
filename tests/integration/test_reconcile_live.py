"""Reconcile and repair while the app runs: writes landing while the table is scanned (or after
the export was taken) are never drift, and repair never tombstones a live row nor overwrites what
the write-back landed meanwhile."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync.dynamodb import exports
from hybridsync.dynamodb.scans import Scanner
from hybridsync.model import placing
from hybridsync.model.convert import marshal
from hybridsync.sync import writeback
from hybridsync.sync.reconcile import reconcile, reconcile_views
from shop.model import MODEL, PRODUCT_AVAILABILITY


def row(engine, order_id):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT total, version, deleted FROM orders WHERE order_id = :o"),
                            {"o": order_id}).one_or_none()  # fmt: skip


def mine(report, prefix):
    """This test's keys in the report (other tests leave deliberate drift in the table)."""
    labels = ("missing", "stale", "extra")
    return {(entity, label, key[0]) for entity, drift in report.items() for label in labels
            for key in getattr(drift, label) if str(key[0]).startswith(prefix)}  # fmt: skip


class Outrun(Scanner):
    """A scan during which the app keeps writing: `meanwhile` runs after its last page."""

    def __init__(self, client, table, meanwhile):
        super().__init__(client, table)
        self.meanwhile = meanwhile

    def items(self, **extra):
        yield from super().items(**extra)
        self.meanwhile()


def test_a_repair_from_an_export_older_than_a_write_leaves_the_new_row_live(
    truth, stack, engine, workload, stream
):
    """The export is taken, then order o-new is created and written back: the export does not hold
    it, but it is not extra, and repair leaves it live; replaying its INSERT changes nothing."""
    table = stack.table_names["main"]
    stream.read()
    export = exports.by_scan(stack.client(), stack.client("s3"), table, stack.bucket_names["bodies"],
                             f"exports/{workload.prefix}")  # fmt: skip
    new = workload.id("o")
    workload.order(new)
    records = stream.read()
    writeback.write_back(records, engine, MODEL, truth=truth)

    def from_export(_):
        return exports.ExportReader(stack.client("s3"), export)

    report = reconcile(stack.client(), table, engine, MODEL, repair=True, scanner=from_export)
    assert mine(report, workload.prefix) == set()
    assert row(engine, new).deleted is False
    writeback.write_back(records, engine, MODEL, truth=truth)  # a replay of its INSERT
    assert row(engine, new).deleted is False


def test_a_repair_by_a_scan_that_a_write_outruns_leaves_the_new_row_live(
    truth, stack, engine, workload, stream
):
    table = stack.table_names["main"]
    stream.read()
    new = workload.id("o")

    def meanwhile():  # created and written back after the scan passed its key
        workload.order(new)
        writeback.write_back(stream.read(), engine, MODEL, truth=truth)

    report = reconcile(stack.client(), table, engine, MODEL, repair=True,
                       scanner=lambda name: Outrun(stack.client(), name, meanwhile))  # fmt: skip
    assert mine(report, workload.prefix) == set()
    assert row(engine, new).deleted is False


def test_the_read_by_key_alone_keeps_a_live_row_that_looks_older_than_the_scan(
    truth, stack, engine, workload, stream
):
    """Defence in depth: even a row whose last change predates the snapshot (a clock that lied,
    say) is extra only if DynamoDB holds no item for it when read again, strongly consistent."""
    table = stack.table_names["main"]
    stream.read()
    new = workload.id("o")

    def meanwhile():
        workload.order(new)
        writeback.write_back(stream.read(), engine, MODEL, truth=truth)
        with engine.begin() as conn:
            an_hour_ago = "UPDATE orders SET updated_at = now() - interval '1 hour' WHERE order_id = :o"
            conn.execute(sa.text(an_hour_ago), {"o": new})

    reconcile(stack.client(), table, engine, MODEL, repair=True,
              scanner=lambda name: Outrun(stack.client(), name, meanwhile))  # fmt: skip
    assert row(engine, new).deleted is False


def test_a_row_deleted_while_it_was_being_repaired_stays_deleted(truth, stack, engine, workload, stream):
    """The scan sees a drifted row; before repair the item is deleted and its REMOVE written back:
    the repair does not bring it back."""
    table = stack.table_names["main"]
    doomed = workload.id("o")
    values = workload.order(doomed)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    with engine.begin() as conn:  # drift: an edit by hand
        conn.execute(sa.text("UPDATE orders SET total = 0 WHERE order_id = :o"), {"o": doomed})

    def meanwhile():
        workload.delete("Order", **values)
        writeback.write_back(stream.read(), engine, MODEL, truth=truth)

    reconcile(stack.client(), table, engine, MODEL, repair=True,
              scanner=lambda name: Outrun(stack.client(), name, meanwhile))  # fmt: skip
    assert row(engine, doomed).deleted is True


def test_a_write_back_landing_during_the_repair_wins(truth, stack, engine, workload, stream):
    """Repair writes a row only if it is still as it was read again: a newer change written back
    between that read and the repair's write is kept."""
    table = stack.table_names["main"]
    oid = workload.id("o")
    workload.order(oid, Total=Decimal("10.00"))
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE orders SET total = 0 WHERE order_id = :o"), {"o": oid})
    from hybridsync.sync import reconcile as module

    confirm = module._confirm

    def racing_confirm(*args):
        fixes = confirm(*args)
        workload.order(oid, Total=Decimal("20.00"))  # after the read by key, before the repair writes
        writeback.write_back(stream.read(), engine, MODEL, truth=truth)
        return fixes

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_confirm", racing_confirm)
        report = reconcile(stack.client(), table, engine, MODEL, repair=True)
    assert row(engine, oid).total == Decimal("20.00")
    assert any(
        oid in problem and "changed since it was read" in problem for problem in report["Order"].unrepaired
    )


def test_repair_brings_back_a_row_tombstoned_at_the_version_dynamodb_holds(
    truth, stack, engine, workload, stream
):
    """A tombstone never ties a live version: one at the version of an item DynamoDB holds now
    (as an earlier repair could leave) removed nothing, and repair replaces it with the row."""
    table = stack.table_names["main"]
    oid = workload.id("o")
    workload.order(oid)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE orders SET deleted = true WHERE order_id = :o"), {"o": oid})
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == {
        ("Order", "missing", oid)
    }
    reconcile(stack.client(), table, engine, MODEL, repair=True)
    assert row(engine, oid).deleted is False
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == set()


# --- items of any writer: untagged, without a version, or with a counter of its own ------------


def foreign(stack, **attributes):
    """Another service's plain PutItem: exactly these attributes, no tag, no version unless given."""
    stack.client().put_item(TableName=stack.table_names["main"], Item=marshal(attributes))


def header(workload, order_id, **changes):
    """An order header as another writer spells it: its table keys and values, nothing else."""
    customer = f"{workload.prefix}-c1"
    values = {"OrderId": order_id, "CustomerId": customer, "Status": "OPEN",
              "CreatedAt": "2026-11-22T07:00:00.000Z", "Total": Decimal("12.50"),
              "ShippingAddress": {"City": "Lyon", "Lines": ["1 rue X"], "Floor": Decimal("2")}}  # fmt: skip
    values |= changes
    return {"PK": f"CUSTOMER#{customer}", "SK": f"ORDER#{values['CreatedAt']}#{order_id}", **values}


def stored(engine, order_id):
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT total, shipping_address, status, version, deleted, stream_position FROM orders "
                    "WHERE order_id = :o"), {"o": order_id},
        ).one_or_none()  # fmt: skip


def test_an_untagged_item_without_a_version_missing_from_postgresql_is_found_and_repaired(
    stack, engine, workload, stream
):
    """Issue 42: a plain PutItem (no Entity, no Version) whose change never reached PostgreSQL is
    missing (it was not even looked at: only tagged items were), and repair writes it as it is."""
    table, oid = stack.table_names["main"], workload.id("o")
    foreign(stack, **header(workload, oid))
    stream.read()  # its record lost (say, a pipeline paused past the stream's 24 hours)
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == {
        ("Order", "missing", oid)
    }
    report = reconcile(stack.client(), table, engine, MODEL, repair=True)
    assert not report["Order"].unrepaired
    assert tuple(stored(engine, oid)) == (
        Decimal("12.50"),
        {"City": "Lyon", "Lines": ["1 rue X"], "Floor": 2},
        "OPEN",
        None,
        False,
        None,
    )
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == set()


def test_an_item_recreated_at_version_1_over_a_tombstone_of_version_3_is_repaired(
    truth, stack, engine, workload, stream
):
    """A writer with a counter of its own (tagging its items as the model does) restarts it after
    a delete: the item re-created at Version 1 is the live one, whatever the tombstone's version 3
    says, and repair brings it back (it was reported, never repaired: older by version) keeping the
    row's stream position, so a record still in flight applies after it."""
    table, oid = stack.table_names["main"], workload.id("o")
    truth = writeback.Truth(stack.client(), stack.table_names)
    item = header(workload, oid, Entity="Order")
    for version in (1, 2, 3):
        foreign(stack, **(item | {"Version": version, "Total": Decimal(version)}))
    stack.client().delete_item(TableName=table, Key=marshal({k: item[k] for k in ("PK", "SK")}))
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    tombstone = stored(engine, oid)
    assert (tombstone.version, tombstone.deleted) == (3, True) and tombstone.stream_position is not None
    foreign(stack, **(item | {"Version": 1, "Status": "SHIPPED"}))  # re-created; its record lost
    lost = stream.read()
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == {
        ("Order", "missing", oid)
    }
    report = reconcile(stack.client(), table, engine, MODEL, repair=True)
    assert not report["Order"].unrepaired, report["Order"].unrepaired
    repaired = stored(engine, oid)
    assert (repaired.status, repaired.total, repaired.version, repaired.deleted) == (
        "SHIPPED",
        Decimal("12.50"),
        1,
        False,
    )
    assert repaired.stream_position == tombstone.stream_position  # kept, not nulled
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == set()
    writeback.write_back(lost, engine, MODEL, truth=truth)  # the lost record, found after all
    assert (stored(engine, oid).status, stored(engine, oid).deleted) == ("SHIPPED", False)
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == set()


def test_an_item_at_a_lower_version_than_its_row_is_still_repaired(truth, stack, engine, workload, stream):
    """The row carries the writer's version as it is: a row at a higher version than the item's is
    no reason to leave the item's values out (they were: 'PostgreSQL newer than DynamoDB')."""
    table, oid = stack.table_names["main"], workload.id("o")
    truth = writeback.Truth(stack.client(), stack.table_names)
    foreign(stack, **header(workload, oid, Entity="Order"), Version=7)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    with engine.begin() as conn:  # drift: an edit by hand, the version made larger
        conn.execute(sa.text("UPDATE orders SET total = 0, version = 9 WHERE order_id = :o"), {"o": oid})
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == {("Order", "stale", oid)}
    reconcile(stack.client(), table, engine, MODEL, repair=True)
    assert (stored(engine, oid).total, stored(engine, oid).version) == (Decimal("12.50"), 7)
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == set()


def test_items_of_no_entity_are_named_never_a_crash(stack, engine, workload, stream):
    """Items whose keys fit no entity, a tag the keys contradict, values the mapping refuses, an
    unknown tag: reconcile (and repair) name the ones that look meant as an entity in its
    `unmappable` and go on; another application's items are none of its business."""
    table, prefix = stack.table_names["main"], workload.prefix
    customer = f"CUSTOMER#{prefix}-c1"
    odd = {"PK": customer, "SK": "ORDER#no-order-here"}
    assert placing.place(MODEL, odd) is None  # fits no key template
    foreign(stack, **odd, OrderId=f"{prefix}-o1", Total=Decimal(1))
    contradicted = {"PK": customer, "SK": "REVIEW#x"}
    values = {k: v for k, v in header(workload, f"{prefix}-o2").items() if k not in ("PK", "SK")}
    foreign(stack, **contradicted, Entity="Order", **values, Version=1)
    refused = header(workload, f"{prefix}-o3", Total="twelve", Version="v1")
    foreign(stack, **refused)
    untold = {"PK": customer, "SK": f"ORDER#x#{prefix}-o4"}
    foreign(stack, **untold, Entity=["not", "a", "name"])
    legacy = {"PK": f"LEGACY#{prefix}", "SK": "anything"}
    foreign(stack, **legacy, Data=b"\x00")  # another application's
    try:
        for repair in (False, True):
            report = reconcile(stack.client(), table, engine, MODEL, repair=repair)
            assert mine(report, prefix) == set()
            named = [problem for problem in report["Order"].unmappable if prefix in problem]
            assert len(named) == 4, named
            assert any("ORDER#no-order-here" in p and "fit no key template" in p for p in named), named
            assert any("REVIEW#x" in p and "do not fit" in p for p in named), named
            assert any(f"{prefix}-o3" in p and "Total" in p for p in named), named
            assert any(f"{prefix}-o4" in p and "unknown entity" in p for p in named), named
            assert not any(f"LEGACY#{prefix}" in p for d in report.values() for p in d.unmappable)
    finally:  # the session's table is every test's: other tools need not meet these
        for item in (odd, contradicted, refused, untold, legacy):
            stack.client().delete_item(TableName=table, Key=marshal({k: item[k] for k in ("PK", "SK")}))


def test_views_another_writer_rewrote_are_stale_or_named_never_a_crash(stack, engine, dynamodb):
    """The other direction survives any item too: a view rewritten without its version is stale,
    one whose values the mapping refuses is named (both stopped reconcile_views: KeyError 'Version',
    Rejected)."""
    table, products = stack.table_names["main"], [f"p-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with engine.begin() as conn:
        for p in products:
            conn.execute(sa.text("INSERT INTO product_availability (product_id, price, stock) "
                                 "VALUES (:p, 10.00, 5)"), {"p": p})  # fmt: skip
    unversioned, refused = (PRODUCT_AVAILABILITY.key({"ProductId": p}) for p in products)
    foreign(stack, **unversioned, Entity=PRODUCT_AVAILABILITY.name, ProductId=products[0], Price=Decimal(10),
            Stock=5)  # fmt: skip
    foreign(stack, **refused, Entity=PRODUCT_AVAILABILITY.name, ProductId=products[1], Price=Decimal(10),
            Stock="lots", Version=1)  # fmt: skip
    report = reconcile_views(dynamodb, table, engine, MODEL)[PRODUCT_AVAILABILITY.name]
    assert [key for key in report.stale if key[0] in products] == [(products[0],)]
    assert any(products[1] in p and "Stock" in p for p in report.unmappable), report.unmappable
    with engine.begin() as conn:  # leave no drift behind for the tests after
        conn.execute(sa.text("DELETE FROM product_availability WHERE product_id = ANY(:p)"), {"p": products})
    for key in (unversioned, refused):
        dynamodb.delete_item(TableName=table, Key=marshal(key))
