"""Writes mastered in PostgreSQL reach DynamoDB through the outbox; a price change rewrites only the
small availability item (vertical partitioning), at a third of the write units of one combined item."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from hybridsync.dynamodb import capacity, store
from hybridsync.model.errors import Invalid, NotFound
from hybridsync.sql import rows
from hybridsync.sync import outbox
from shop import catalog
from shop.model import CUSTOMER, MODEL, PRODUCT_AVAILABILITY, PRODUCT_DETAILS


@pytest.fixture
def table(stack):
    return stack.table_names["main"]


def product(product_id):
    details = {"ProductId": product_id, "Name": "Kettle", "Category": "kitchen",
               "Description": "A quiet 1.7 l kettle with a steel body. " * 60,
               "Attributes": {"colors": ["red", "black"], "watts": 2200}}  # fmt: skip
    return details, {"ProductId": product_id, "Price": Decimal("24.99"), "Stock": 12}


def test_a_price_change_rewrites_only_the_small_item(engine, dynamodb, table):
    product_id = f"p-{uuid.uuid4().hex[:8]}"
    catalog.put_product(engine, *product(product_id))
    outbox.drain_all(engine, dynamodb, MODEL, {"main": table})
    details_before = store.get(dynamodb, table, PRODUCT_DETAILS.key({"ProductId": product_id}))
    availability_before = store.get(dynamodb, table, PRODUCT_AVAILABILITY.key({"ProductId": product_id}))

    catalog.set_price(engine, product_id, Decimal("19.99"))
    drained = outbox.drain_all(engine, dynamodb, MODEL, {"main": table})

    details = store.get(dynamodb, table, PRODUCT_DETAILS.key({"ProductId": product_id}))
    availability = store.get(dynamodb, table, PRODUCT_AVAILABILITY.key({"ProductId": product_id}))
    assert drained.applied == 1  # one change, one item
    assert details == details_before  # not rewritten: same version, same bytes
    assert (
        availability["Price"] == Decimal("19.99") and availability["Version"] > availability_before["Version"]
    )
    split = capacity.write_units(availability)
    combined = capacity.write_units(details | availability)
    assert (split, combined) == (1, 3)


def test_customers_are_written_in_sql_and_reach_dynamodb(engine, dynamodb, table):
    customer_id = f"c-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        rows.upsert(conn, CUSTOMER, {"CustomerId": customer_id, "Name": "Zoë", "Email": "z@example.com"})
    outbox.drain_all(engine, dynamodb, MODEL, {"main": table})
    assert store.get(dynamodb, table, CUSTOMER.key({"CustomerId": customer_id}))["Name"] == "Zoë"
    with engine.begin() as conn:
        rows.update(conn, CUSTOMER, {"CustomerId": customer_id}, {"Tier": "gold"})
    outbox.drain_all(engine, dynamodb, MODEL, {"main": table})
    assert store.get(dynamodb, table, CUSTOMER.key({"CustomerId": customer_id}))["Tier"] == "gold"
    with pytest.raises(NotFound), engine.begin() as conn:
        rows.update(conn, CUSTOMER, {"CustomerId": f"{customer_id}-none"}, {"Tier": "gold"})
    with pytest.raises(Invalid, match="Email"), engine.begin() as conn:
        rows.upsert(conn, CUSTOMER, {"CustomerId": customer_id, "Name": "Zoë"})
    with pytest.raises(NotFound):
        catalog.set_price(engine, f"{customer_id}-none", Decimal(1))
