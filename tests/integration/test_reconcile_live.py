"""Reconcile and repair while the app runs: writes landing while the table is scanned (or after
the export was taken) are never drift, and repair never tombstones a live row nor overwrites what
the write-back landed meanwhile."""

from __future__ import annotations

from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync import exports
from hybridsync.scans import Scanner
from hybridsync.sync import writeback
from hybridsync.sync.reconcile import reconcile
from shop.model import MODEL


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


def test_a_repair_from_an_export_older_than_a_write_leaves_the_new_row_live(stack, engine, workload, stream):
    """The export is taken, then order o-new is created and written back: the export does not hold
    it, but it is not extra, and repair leaves it live; replaying its INSERT changes nothing."""
    table = stack.table_names["main"]
    stream.read()
    export = exports.by_scan(stack.client(), stack.client("s3"), table, stack.bucket_names["bodies"],
                             f"exports/{workload.prefix}")  # fmt: skip
    new = workload.id("o")
    workload.order(new)
    records = stream.read()
    writeback.write_back(records, engine, MODEL)

    def from_export(_):
        return exports.ExportReader(stack.client("s3"), export)

    report = reconcile(stack.client(), table, engine, MODEL, repair=True, scanner=from_export)
    assert mine(report, workload.prefix) == set()
    assert row(engine, new).deleted is False
    writeback.write_back(records, engine, MODEL)  # a replay of its INSERT
    assert row(engine, new).deleted is False


def test_a_repair_by_a_scan_that_a_write_outruns_leaves_the_new_row_live(stack, engine, workload, stream):
    table = stack.table_names["main"]
    stream.read()
    new = workload.id("o")

    def meanwhile():  # created and written back after the scan passed its key
        workload.order(new)
        writeback.write_back(stream.read(), engine, MODEL)

    report = reconcile(stack.client(), table, engine, MODEL, repair=True,
                       scanner=lambda name: Outrun(stack.client(), name, meanwhile))  # fmt: skip
    assert mine(report, workload.prefix) == set()
    assert row(engine, new).deleted is False


def test_the_read_by_key_alone_keeps_a_live_row_that_looks_older_than_the_scan(
    stack, engine, workload, stream
):
    """Defence in depth: even a row whose last change predates the snapshot (a clock that lied,
    say) is extra only if DynamoDB holds no item for it when read again, strongly consistent."""
    table = stack.table_names["main"]
    stream.read()
    new = workload.id("o")

    def meanwhile():
        workload.order(new)
        writeback.write_back(stream.read(), engine, MODEL)
        with engine.begin() as conn:
            an_hour_ago = "UPDATE orders SET updated_at = now() - interval '1 hour' WHERE order_id = :o"
            conn.execute(sa.text(an_hour_ago), {"o": new})

    reconcile(stack.client(), table, engine, MODEL, repair=True,
              scanner=lambda name: Outrun(stack.client(), name, meanwhile))  # fmt: skip
    assert row(engine, new).deleted is False


def test_a_row_deleted_while_it_was_being_repaired_stays_deleted(stack, engine, workload, stream):
    """The scan sees a drifted row; before repair the item is deleted and its REMOVE written back:
    the repair does not bring it back."""
    table = stack.table_names["main"]
    doomed = workload.id("o")
    values = workload.order(doomed)
    writeback.write_back(stream.read(), engine, MODEL)
    with engine.begin() as conn:  # drift: an edit by hand
        conn.execute(sa.text("UPDATE orders SET total = 0 WHERE order_id = :o"), {"o": doomed})

    def meanwhile():
        workload.delete("Order", **values)
        writeback.write_back(stream.read(), engine, MODEL)

    reconcile(stack.client(), table, engine, MODEL, repair=True,
              scanner=lambda name: Outrun(stack.client(), name, meanwhile))  # fmt: skip
    assert row(engine, doomed).deleted is True


def test_a_write_back_landing_during_the_repair_wins(stack, engine, workload, stream):
    """Repair writes a row only if it is still as it was read again: a newer change written back
    between that read and the repair's write is kept."""
    table = stack.table_names["main"]
    oid = workload.id("o")
    workload.order(oid, Total=Decimal("10.00"))
    writeback.write_back(stream.read(), engine, MODEL)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE orders SET total = 0 WHERE order_id = :o"), {"o": oid})
    from hybridsync.sync import reconcile as module

    confirm = module._confirm

    def racing_confirm(*args):
        fixes = confirm(*args)
        workload.order(oid, Total=Decimal("20.00"))  # after the read by key, before the repair writes
        writeback.write_back(stream.read(), engine, MODEL)
        return fixes

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_confirm", racing_confirm)
        report = reconcile(stack.client(), table, engine, MODEL, repair=True)
    assert row(engine, oid).total == Decimal("20.00")
    assert any(
        oid in problem and "changed since it was read" in problem for problem in report["Order"].unrepaired
    )


def test_repair_brings_back_a_row_tombstoned_at_the_version_dynamodb_holds(stack, engine, workload, stream):
    """A tombstone never ties a live version: one at the version of an item DynamoDB holds now
    (as an earlier repair could leave) removed nothing, and repair replaces it with the row."""
    table = stack.table_names["main"]
    oid = workload.id("o")
    workload.order(oid)
    writeback.write_back(stream.read(), engine, MODEL)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE orders SET deleted = true WHERE order_id = :o"), {"o": oid})
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == {
        ("Order", "missing", oid)
    }
    reconcile(stack.client(), table, engine, MODEL, repair=True)
    assert row(engine, oid).deleted is False
    assert mine(reconcile(stack.client(), table, engine, MODEL), workload.prefix) == set()
