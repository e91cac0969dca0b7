"""The pieces together: one order written to DynamoDB flows to PostgreSQL and to the top-N that
the read API serves; one price changed in PostgreSQL flows to the product the read API serves."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

import sqlalchemy as sa

from tests.handlers import LambdaContext, load


def http(api, path, **query):
    event = {"version": "2.0", "rawPath": path, "rawQueryString": "", "queryStringParameters": query or None,
             "headers": {},
             "requestContext": {"http": {"method": "GET", "path": path}, "stage": "$default"}}  # fmt: skip
    response = api.handler(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def test_an_order_reaches_postgresql_and_the_top_sellers(handler_env, engine, workload, stream):
    write_back, aggregate, api = load("write_back"), load("aggregate"), load("api")
    product = f"{workload.prefix}-kettle"
    oid = workload.id("o")
    workload.order(oid, CreatedAt="2026-09-01T08:00:00.000Z")
    workload.line(
        oid, 1, ProductId=product, Quantity=100, UnitPrice=Decimal("30"), CreatedAt="2026-09-01T08:00:00.000Z"
    )
    records = stream.read()
    event = {"Records": records, "shardId": stream.shard}
    assert write_back.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert aggregate.handler(event, LambdaContext())["batchItemFailures"] == []
    with engine.connect() as conn:
        quantity = conn.execute(
            sa.text("SELECT quantity FROM order_lines WHERE order_id = :o"), {"o": oid}
        ).scalar_one()
    assert quantity == 100
    status, body = http(api, "/products/top", day="2026-09-01", n="1")
    assert status == 200
    assert body["products"][0]["ProductId"] == product and body["products"][0]["Units"] == 100


def test_a_price_change_in_postgresql_reaches_the_read_api(handler_env, engine):
    api, drain = load("api"), load("sql_sync")
    pid = f"p-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO products (product_id, name, category) VALUES (:p, 'Mug', 'kitchen')"),
            {"p": pid},
        )
        conn.execute(
            sa.text("INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 4, 10)"),
            {"p": pid},
        )
    assert http(api, f"/products/{pid}")[1]["Price"] == "4"  # a miss populates the cache
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE product_availability SET price = 3.50 WHERE product_id = :p"), {"p": pid}
        )
    drain.handler({}, LambdaContext())
    status, body = http(api, f"/products/{pid}")
    assert (status, body["Price"], body["Name"]) == (
        200,
        "3.5",
        "Mug",
    )  # DynamoDB keeps numbers without trailing zeros
