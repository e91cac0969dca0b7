"""`hybridsync up --seed` for the shop: a small run of the demo's workload (customers, a catalogue
and price changes in PostgreSQL; orders with edits, cancellations and deletes, scores and follows
in DynamoDB), through the same write paths. Returns how many writes it made."""

from __future__ import annotations

import random
from typing import Any

import sqlalchemy as sa
from rich.progress import Progress

from hybridsync.workloads import Writer
from shop_workloads import demo

SMALL = demo.Workload(customers=20, products=10, orders=40, players=10, follows=20, seed=7)


def seed(app: Any, engine: sa.Engine) -> int:
    rng, writer = random.Random(SMALL.seed), Writer(app.client, app.table_names["main"])
    with Progress(transient=True) as progress:
        products = demo._sql_side(engine, SMALL, rng, progress)
        demo._dynamodb_side(writer, products, SMALL, rng, progress)
    return writer.written + SMALL.customers + 2 * SMALL.products
