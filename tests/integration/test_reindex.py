"""`reindex` on DynamoDB Local: orders written before the Inverted header copies and the
OrdersByStatus index existed get their keys, once; an order written meanwhile keeps its writer's."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from hybridsync import cli
from hybridsync.dynamodb import store
from hybridsync.dynamodb.reindex import reindex
from hybridsync.dynamodb.scans import Scanner
from hybridsync.model.convert import marshal, unmarshal
from shop import order_reads, orders
from shop.model import MAIN, MODEL, ORDER

LINES = [{"ProductId": "p-1", "Quantity": 2, "UnitPrice": Decimal("3.50")}]
ADDED = ("GSI1PK", "GSI1SK", "StatusShard")  # what this release added to the order header


@pytest.fixture
def table(stack):
    """A table of its own, holding three orders as the release before wrote them."""
    client, name = stack.client(), f"reindex-{uuid.uuid4().hex[:8]}"
    client.create_table(**MODEL.table("main").create_request(name))
    placed = [orders.place_order(client, name, "c-1", LINES, now=datetime(2030, 5, day, tzinfo=UTC))[0]
              for day in (1, 2, 3)]  # fmt: skip
    orders.set_status(client, name, placed[0]["OrderId"], "SHIPPED")
    for order in placed:
        key = marshal(ORDER.key(order))
        client.update_item(TableName=name, Key=key, UpdateExpression="REMOVE " + ", ".join(ADDED))
    return client, name, [o["OrderId"] for o in placed]


def scan(client, name):
    return list(Scanner(client, name).items())


def header(client, name, order_id):
    return orders.get_order(client, name, order_id)


def test_older_orders_get_the_new_index_keys_once_and_are_found(table):
    client, name, ids = table
    in_range = lambda: order_reads.customer_orders(client, name, "c-1", "2030-05-01", "2030-05-03")  # noqa: E731
    assert in_range() == []  # the release before wrote no header copy
    dry = reindex(client, name, MAIN, MODEL, scan(client, name), dry_run=True)
    assert dry.entities["Order"].updated == 3 and dry.write_units > 0
    assert in_range() == []  # a dry run changes nothing
    report = reindex(client, name, MAIN, MODEL, scan(client, name))
    assert (report.entities["Order"].checked, report.entities["Order"].updated) == (3, 3)
    assert report.entities["OrderLine"].updated == 0 and not report.failed
    assert sorted(o["OrderId"] for o in in_range()) == sorted(ids)
    shipped = order_reads.orders_with_status(
        client, name, "SHIPPED", 10, since="2030-05-01", until="2030-05-03"
    )
    assert [o["OrderId"] for o in shipped] == [ids[0]]
    again = reindex(client, name, MAIN, MODEL, scan(client, name))
    assert again.out_of_date == 0 and again.write_units == 0  # a second run changes nothing


def test_an_order_written_between_the_scan_and_the_update_keeps_its_writers_keys(table):
    client, name, ids = table
    read = scan(client, name)
    orders.set_status(client, name, ids[1], "CANCELLED")  # the new release writes it meanwhile
    report = reindex(client, name, MAIN, MODEL, read)
    assert report.entities["Order"].written_meanwhile == 1 and report.entities["Order"].updated == 2
    stored = unmarshal(client.get_item(TableName=name, Key=marshal(ORDER.key(header(client, name, ids[1]))),
                                       ConsistentRead=True)["Item"])  # fmt: skip
    assert stored["Status"] == "CANCELLED" and stored["StatusShard"].startswith("CANCELLED#")
    assert "OpenShard" not in stored and stored["Version"] > read[0].get("Version", 0)


def test_the_command_counts_then_updates(table, handler_env, capsys):
    client, name, _ = table
    assert cli.main(["reindex", "--dry-run", "--table", name, "--rate", "0"]) == 1
    out = capsys.readouterr().out
    assert "out of date" in out and "read units by the model" in out
    assert cli.main(["reindex", "--table", name]) == 0
    assert cli.main(["reindex", "--dry-run", "--table", name]) == 0
    assert store.get(client, name, ORDER.key(header(client, name, table[2][2])))["GSI1PK"] == "CUSTOMER#c-1"


def test_an_order_another_service_wrote_without_tag_or_version_gets_its_keys(table):
    """Issue 42: a plain PutItem of another service (no Entity, no Version) is an Order by its
    keys: it gets its index keys (it was counted as no entity's and left out of the index)."""
    client, name, _ = table
    order = {k: v for k, v in ORDER.item({"OrderId": "o-plain", "CustomerId": "c-1", "Status": "OPEN",
                                          "CreatedAt": "2030-05-02T10:00:00.000Z", "Total": Decimal("7"),
                                          "Version": 1}).items()
             if k not in ("Entity", "Version", *ADDED)}  # fmt: skip
    client.put_item(TableName=name, Item=marshal(order))
    report = reindex(client, name, MAIN, MODEL, scan(client, name))
    assert report.entities["Order"].checked == 4 and report.not_declared == 0
    found = order_reads.customer_orders(client, name, "c-1", "2030-05-01", "2030-05-03")
    assert "o-plain" in [o["OrderId"] for o in found]


def test_an_order_changed_meanwhile_without_a_new_version_is_left_to_its_writer(table):
    """A writer outside the model changes Status and leaves Version as it was (the console, the
    CLI): the update read SHIPPED and is refused, never filing a CANCELLED order under SHIPPED
    (it was conditioned on Version alone); the next run files it under CANCELLED."""
    client, name, ids = table
    read = scan(client, name)
    shipped = header(client, name, ids[0])
    client.update_item(TableName=name, Key=marshal(ORDER.key(shipped)), UpdateExpression="SET #s = :s",
                       ExpressionAttributeNames={"#s": "Status"},
                       ExpressionAttributeValues=marshal({":s": "CANCELLED"}))  # fmt: skip
    report = reindex(client, name, MAIN, MODEL, read)
    assert report.entities["Order"].written_meanwhile == 1
    assert "StatusShard" not in store.get(client, name, ORDER.key(shipped))
    reindex(client, name, MAIN, MODEL, scan(client, name))
    assert store.get(client, name, ORDER.key(shipped))["StatusShard"].startswith("CANCELLED#")
