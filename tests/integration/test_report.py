"""The local run's report (`hybridsync up --demo`, issue 51): an item a plain writer put without the
entity tag counts as the entity its keys place it in, as reconcile places it; and a gap between an
entity's items and its rows that an earlier run's dead letters explain says so, in the printed
report and in the HTML one, when this run has none."""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from rich.console import Console

from hybridsync.local import report
from hybridsync.model.convert import marshal
from hybridsync.sql.schema import table_of
from shop.model import MODEL, ORDER

pytestmark = pytest.mark.integration


def app_of(stack):
    """What `report.figures` reads of a running app, over the session's stack (no functions run)."""
    return SimpleNamespace(client=stack.client(), table_names=stack.table_names, mapping_stats={},
                           faults=None, alarms=None, failed_batches_stored=lambda: 0,
                           freshness_values=lambda started: {})  # fmt: skip


def figures(stack, engine, started):
    return report.figures(
        app_of(stack), engine, MODEL, started=started, elapsed=1.0, writes=1, caught_up=True
    )


def order(tag):
    return {"OrderId": f"o-{tag}", "CustomerId": f"c-{tag}", "CreatedAt": "2026-01-01T00:00:00.000Z",
            "Status": "OPEN", "Total": Decimal(1), "Version": 1}  # fmt: skip


def test_an_untagged_item_counts_as_the_entity_its_keys_place_it_in(stack, engine):
    """A plain writer's item (no `Entity`) is no "?": it is an Order, as reconcile says."""
    item = marshal(ORDER.item(order(uuid.uuid4().hex[:8])))
    del item[MODEL.names.entity]
    assert report.entity_of(MODEL, "main", ORDER.key(order("x"))) == "Order"
    before = figures(stack, engine, time.time())["dynamodb_items"]
    stack.client().put_item(TableName=stack.table_names["main"], Item=item)
    after = figures(stack, engine, time.time())["dynamodb_items"]
    assert after.get("Order", 0) == before.get("Order", 0) + 1
    assert after.get("?", 0) == before.get("?", 0)


def named(found):
    """(items, of this run, of earlier runs) the Order gap's pending write-back letters name."""
    for gap in found["gaps"]:
        if gap.startswith("Order:") and (
            said := re.search(r"name (\d+) of its items \((\d+) of this run, (\d+)", gap)
        ):
            return tuple(map(int, said.groups()))
    return (0, 0, 0)


def pending_letter(engine, item, tag, at):
    """A write-back dead letter of `item`'s record, pending, created `at`."""
    keys = {a.name: item[a.name] for a in ORDER.table.key_schema()}
    record = {"eventID": f"e-{tag}", "dynamodb": {"Keys": marshal(keys), "NewImage": marshal(item)}}
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO dead_letters (source, event_id, reason, record, created_at) "
                    "VALUES ('write_back', :e, 'Total must be a number', :r, :at)"),
            {"e": f"e-{tag}", "r": json.dumps(record), "at": at},
        )  # fmt: skip
    return keys


def forget(stack, engine, tag, keys):
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM dead_letters WHERE event_id = :e"), {"e": f"e-{tag}"})
        orders = table_of(ORDER)
        conn.execute(orders.delete().where(orders.c[ORDER.field("OrderId").column] == f"o-{tag}"))
    stack.client().delete_item(TableName=stack.table_names["main"], Key=marshal(keys))


def test_a_gap_an_earlier_runs_dead_letters_explain_is_explained(stack, engine):
    """Items without a row from an earlier run: that run's dead letters, still pending, are named,
    though this run has none."""
    tag = uuid.uuid4().hex[:8]
    before = named(figures(stack, engine, time.time()))
    poisoned = ORDER.item(order(tag))
    stack.client().put_item(TableName=stack.table_names["main"], Item=marshal(poisoned))  # never written back
    keys = pending_letter(engine, poisoned, tag, datetime.now(UTC) - timedelta(hours=1))
    try:
        found = figures(stack, engine, time.time())
        assert ("write_back", "Total must be a number") not in found["dead_letters"]  # not this run's
        assert ("write_back", "Total must be a number") in found["dead_letters_earlier"]
        (gap,) = [g for g in found["gaps"] if g.startswith("Order:")]
        assert named(found) == (before[0] + 1, 0, before[2] + 1), gap  # one more item, an earlier run's
        printed = io.StringIO()
        report.show(Console(file=printed, width=200), found)
        text = printed.getvalue()
        assert "pending from earlier runs)" in text and gap.split(";")[0] in text, text
        page = report.html_report(found | {"aggregates": 0, "aggregates_equal_recount": True})
        assert "pending from earlier runs" in page and "earlier, still pending" in page
    finally:
        forget(stack, engine, tag, keys)


def test_a_letter_whose_item_has_its_row_or_is_gone_explains_no_gap(stack, engine):
    """A pending letter of an item that has its live row (a later change wrote it back), and one of
    an item since deleted: neither is named as a cause of a gap, which another item with no row
    and its letter still shows."""
    tags = [uuid.uuid4().hex[:8] for _ in range(3)]  # no row; a row; gone
    started = time.time()
    before = named(figures(stack, engine, started))
    items = [ORDER.item(order(tag)) for tag in tags]
    for item in items[:2]:
        stack.client().put_item(TableName=stack.table_names["main"], Item=marshal(item))
    now = datetime.now(UTC)
    keys = [pending_letter(engine, item, tag, now) for item, tag in zip(items, tags, strict=True)]
    row = {ORDER.field(a).column: v for a, v in ORDER.values(items[1]).items()}
    with engine.begin() as conn:
        conn.execute(table_of(ORDER).insert().values(row))
    stranger = {"PK": f"STRANGER#{tags[0]}", "SK": "S", MODEL.names.entity: "Stranger"}  # another model's
    keys.append(pending_letter(engine, stranger, f"s-{tags[0]}", now))
    tags.append(f"s-{tags[0]}")
    try:
        found = figures(stack, engine, started)
        (gap,) = [g for g in found["gaps"] if g.startswith("Order:")]
        assert named(found) == (before[0] + 1, before[1] + 1, before[2]), gap  # the row-less item only
    finally:
        for tag, key in zip(tags, keys, strict=True):
            forget(stack, engine, tag, key)
