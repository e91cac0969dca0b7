"""The shop's read routes: cache-aside entities (pattern 12), order views, a customer's reviews,
top sellers, top customers, leaderboard."""

from datetime import UTC, datetime, timedelta

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import BadRequestError

from hybridsync.api import openapi
from hybridsync.api.web import (
    QUERY,
    app,
    cached,
    error,
    get,
    ident,
    page,
    period,
    respond,
    shown,
    table,
    time_param,
    top_n,
)
from hybridsync.model import keys
from hybridsync.reads import cache
from hybridsync.runtime.clients import dynamodb, engine
from shop import order_reads as orders
from shop import rankings, reviews
from shop.model import (
    CUSTOMER,
    CUSTOMER_SPEND,
    ORDER,
    ORDER_STATUSES,
    PLAYER_SCORE,
    PRODUCT_AVAILABILITY,
    PRODUCT_DETAILS,
    REVIEW,
    SALES,
)

TEXT = {"type": "string"}
PRODUCT = openapi.shape(PRODUCT_DETAILS, extra=openapi.shown_properties(PRODUCT_AVAILABILITY))
ORDER_LIST = openapi.array(openapi.shape(ORDER))
ORDERS = openapi.listing(orders=ORDER_LIST)


@get(
    "/products/top",
    query=("day", ("month", QUERY["month"] | {"examples": ["2026-11"]}), "n"),
    returns=openapi.listing(period=TEXT, products=openapi.array(openapi.shape(SALES))),
)
def top_products() -> Response:
    """Top sellers of a day (`day`) or a month (`month`), exactly one of them, by units sold."""
    event = app.current_event
    chosen = period(event.get_query_string_value("day", None), event.get_query_string_value("month", None))
    rows = rankings.top_sellers(dynamodb(), table(), chosen, top_n())
    return respond({"period": chosen, "products": [shown(SALES, r) for r in rows]})


@get("/products/<product_id>", returns=PRODUCT)
def product(product_id: str) -> Response:
    """A product: its details, price and stock, cache-aside (`X-Cache: hit` or `miss`)."""
    key = {"ProductId": ident("product id", product_id)}
    lookups = [
        cache.get(dynamodb(), table(), engine(), e, key) for e in (PRODUCT_DETAILS, PRODUCT_AVAILABILITY)
    ]
    headers = cached(lookups)
    if any(lookup.item is None for lookup in lookups):
        return error(404, f"no product {product_id!r}", headers)
    details, availability = (lookup.item or {} for lookup in lookups)
    version = max(details["Version"], availability["Version"])
    return respond(
        shown(PRODUCT_DETAILS, details)
        | shown(PRODUCT_AVAILABILITY, availability)
        | {"Version": int(version)},
        headers,
    )


@get(
    "/customers/top",
    query=("month", "n"),
    returns=openapi.listing(month=TEXT, customers=openapi.array(openapi.shape(CUSTOMER_SPEND))),
)
def top_customers() -> Response:
    """Top customers of a month (default: this month), by loyalty points."""
    month = app.current_event.get_query_string_value("month", None)
    chosen = period(None, datetime.now(UTC).strftime("%Y-%m") if month is None else month)  # `month=`: a 400
    rows = rankings.top_customers(dynamodb(), table(), chosen, top_n())
    return respond({"month": chosen, "customers": [shown(CUSTOMER_SPEND, r) for r in rows]})


@get("/customers/<customer_id>", returns=openapi.shape(CUSTOMER))
def customer(customer_id: str) -> Response:
    """A customer, cache-aside (`X-Cache: hit` or `miss`)."""
    lookup = cache.get(
        dynamodb(), table(), engine(), CUSTOMER, {"CustomerId": ident("customer id", customer_id)}
    )
    headers = cached([lookup])
    if lookup.item is None:
        return error(404, f"no customer {customer_id!r}", headers)
    return respond(shown(CUSTOMER, lookup.item), headers)


@get("/customers/<customer_id>/orders", query=("from", "to"), returns=ORDERS)
def customer_orders(customer_id: str) -> Response:
    """A customer's orders created between `from` and `to` (dates or times), oldest first."""
    start, end = time_param("from", "0000"), time_param("to", "9999")
    if start > end:
        raise BadRequestError("from must not be after to")
    rows = orders.customer_orders(dynamodb(), table(), ident("customer id", customer_id), start, end)
    return respond({"orders": [shown(ORDER, r) for r in rows]})


@get(
    "/customers/<customer_id>/reviews",
    query=("limit", "cursor"),
    returns=openapi.listing(reviews=openapi.array(openapi.shape(REVIEW)), cursor=openapi.CURSOR),
)
def customer_reviews(customer_id: str) -> Response:
    """A customer's reviews, newest first, a page at a time (without their bodies)."""
    rows, cursor = reviews.customer_reviews(dynamodb(), table(), ident("customer id", customer_id), *page())
    return respond({"reviews": [shown(REVIEW, r) for r in rows], "cursor": cursor})


STATUS = ("status", {"type": "string", "enum": list(ORDER_STATUSES)}, True)  # required


@get(
    "/orders", query=(STATUS, "since", "until", "n"), returns=openapi.listing(status=TEXT, orders=ORDER_LIST)
)
def orders_by_status() -> Response:
    """Orders of one status, newest first, optionally between `since` and `until`."""
    status = app.current_event.get_query_string_value("status", None)
    if status not in ORDER_STATUSES:
        raise BadRequestError(f"status must be one of {', '.join(ORDER_STATUSES)}, got {status!r}")
    since, until = time_param("since", ""), time_param("until", "")
    if since and until and since > until:
        raise BadRequestError("since must not be after until")
    rows = orders.orders_with_status(dynamodb(), table(), status, top_n(), since=since or None,
                                     until=until or None)  # fmt: skip
    return respond({"status": status, "orders": [shown(ORDER, r) for r in rows]})


@get(
    "/orders/recent",
    query=("since", "until", ("order", {"type": "string", "enum": ["newest", "oldest"]}), "n"),
    returns=openapi.listing(since=TEXT, until={"type": ["string", "null"]}, orders=ORDER_LIST),
)
def recent_orders() -> Response:
    """Orders created since `since` (default: the last 24 hours), newest or oldest first."""
    since = time_param("since", keys.iso_ms(datetime.now(UTC) - timedelta(days=1)))
    until = time_param("until", "")
    if until and since > until:
        raise BadRequestError("since must not be after until")
    order = app.current_event.get_query_string_value("order", "newest")
    if order not in ("newest", "oldest"):
        raise BadRequestError("order must be newest or oldest")
    rows = orders.recent_orders(dynamodb(), table(), since, top_n(), until=until or None,
                                oldest_first=order == "oldest")  # fmt: skip
    return respond({"since": since, "until": until or None, "orders": [shown(ORDER, r) for r in rows]})


@get("/orders/open", query=("since", "until", "n"), returns=ORDERS)
def open_orders() -> Response:
    """Open orders, oldest first, optionally between `since` and `until`."""
    since, until = time_param("since", ""), time_param("until", "")
    if since and until and since > until:
        raise BadRequestError("since must not be after until")
    rows = orders.open_orders(dynamodb(), table(), top_n(), since=since or None, until=until or None)
    return respond({"orders": [shown(ORDER, r) for r in rows]})


@get(
    "/leaderboard", query=("n",), returns=openapi.listing(players=openapi.array(openapi.shape(PLAYER_SCORE)))
)
def leaderboard() -> Response:
    """The players with the highest scores."""
    rows = rankings.leaderboard(dynamodb(), table(), top_n())
    return respond({"players": [shown(PLAYER_SCORE, r) for r in rows]})
