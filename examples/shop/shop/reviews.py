"""Product reviews with bodies of any size (pattern 18): the engine's large bodies
(`hybridsync.dynamodb.large`) of the shop's `Review` entity (`shop.model.REVIEW_BODIES`)."""

from __future__ import annotations

from typing import Any

from hybridsync.dynamodb import large, store
from hybridsync.dynamodb.large import BODY_ATTRIBUTES, Limits, Place
from hybridsync.model.convert import marshal
from shop.model import MAIN, REVIEW, REVIEW_BODIES

__all__ = ["BODY_ATTRIBUTES", "Limits", "Place", "customer_reviews", "delete_review", "get_review",
           "put_review", "sweep"]  # fmt: skip


def put_review(client: Any, table: str, place: Place, values: dict[str, Any], body: str) -> dict[str, Any]:
    """Create or replace a review and its body; returns the review as stored (without the body)."""
    return large.put(REVIEW_BODIES, client, table, place, values, body)


def get_review(client: Any, table: str, place: Place, product_id: str, review_id: str) -> dict[str, Any]:
    return large.get(REVIEW_BODIES, client, table, place, {"ProductId": product_id, "ReviewId": review_id})


def delete_review(client: Any, table: str, place: Place, product_id: str, review_id: str) -> None:
    large.delete(REVIEW_BODIES, client, table, place, {"ProductId": product_id, "ReviewId": review_id})


def sweep(client: Any, table: str, place: Place, older_than_s: int = 900) -> dict[str, int]:
    """Remove review chunks and objects no review names, once older than `older_than_s`."""
    return large.sweep(REVIEW_BODIES, client, table, place, older_than_s)


def customer_reviews(
    client: Any, table: str, customer_id: str, limit: int = 20, cursor: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """A customer's reviews, newest first, a page at a time: one Query of the Inverted index, where
    the product -> review edge is keyed by its author. The index projects no body: a reader wanting
    one reads the review itself (`get_review`)."""
    index = MAIN.index("Inverted")
    assert index.sort is not None
    request = {
        "TableName": table,
        "IndexName": index.name,
        "KeyConditionExpression": f"{index.partition.name} = :pk AND begins_with({index.sort.name}, :sk)",
        "ExpressionAttributeValues": marshal({
            ":pk": REVIEW.key_value(index.partition.name, {"CustomerId": customer_id}),
            ":sk": REVIEW.key_prefix(index.sort.name),
        }),
        "ScanIndexForward": False,
    }  # fmt: skip
    return store.page(client, request, limit, cursor)
