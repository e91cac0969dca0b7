"""The shop's catalogue, mastered in PostgreSQL. A price change touches only the small
`product_availability` row, so only the small availability item is rewritten in DynamoDB
(vertical partitioning, pattern 16); the large details item keeps its version."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from hybridsync import rows
from shop.model import PRODUCT_AVAILABILITY, PRODUCT_DETAILS


def put_product(engine: sa.Engine, details: dict[str, Any], availability: dict[str, Any]) -> None:
    """A product's two parts, in one SQL transaction."""
    with engine.begin() as conn:
        rows.upsert(conn, PRODUCT_DETAILS, details)
        rows.upsert(conn, PRODUCT_AVAILABILITY, availability)


def set_price(engine: sa.Engine, product_id: str, price: Any, stock: int | None = None) -> int:
    """A price (and stock) change: one small row, hence one small item in DynamoDB."""
    changes = {"Price": price} | ({"Stock": stock} if stock is not None else {})
    with engine.begin() as conn:
        return rows.update(conn, PRODUCT_AVAILABILITY, {"ProductId": product_id}, changes)
