"""HTTP read API (API Gateway HTTP API): cache-aside entities, order views, top sellers, top customers,
leaderboard. Every error answers one JSON envelope: {"statusCode": N, "message": "..."}."""

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import BadRequestError, ServiceError
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync import keys, settings
from hybridsync.model import (
    CUSTOMER,
    CUSTOMER_SPEND,
    ID_LENGTH,
    ORDER,
    PLAYER_SCORE,
    PRODUCT_AVAILABILITY,
    PRODUCT_DETAILS,
    SALES,
)
from hybridsync.reads import cache, orders, rankings
from hybridsync.runtime import dynamodb, engine
from hybridsync.views import public

logger = Logger()
metrics = Metrics()
app = APIGatewayHttpResolver()
MAX_N = rankings.MAX_N
ROUTES: dict[str, set[str]] = {}  # rule -> methods: what a wrong method is told it may use (405)


def get(rule: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    ROUTES.setdefault(rule, set()).add("GET")
    return app.get(rule)


def table() -> str:
    return settings.table_name("main")


# --- parameters: every bad one is a 400 that names it -----------------------------------------


def _id(name: str, value: str) -> str:
    if not value or len(value) > ID_LENGTH:
        raise BadRequestError(f"{name} must be 1 to {ID_LENGTH} characters")
    return value


def _n(default: int = 10) -> int:
    raw = app.current_event.get_query_string_value("n", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_N:
        raise BadRequestError(f"n must be an integer from 1 to {MAX_N}, got {raw!r}")
    return int(raw)


def _time(name: str, default: str) -> str:
    """An ISO-8601 date or time as the fixed-width UTC prefix the keys sort by."""
    raw = app.current_event.get_query_string_value(name, None)
    if raw is None:
        return default
    try:
        if len(raw) == 10:
            return datetime.strptime(raw, "%Y-%m-%d").strftime("%Y-%m-%d")
        return keys.iso_ms(keys.parse_iso(raw))
    except ValueError:
        raise BadRequestError(
            f"{name} must be an ISO-8601 date or time with a timezone, got {raw!r}"
        ) from None


def _period(day: str | None, month: str | None) -> str:
    try:
        return rankings.period_of(day, month)
    except ValueError as error:
        raise BadRequestError(str(error)) from None


def _cached(lookups: list[cache.Lookup]) -> dict[str, str]:
    hit = all(lookup.hit for lookup in lookups)
    metrics.add_metric("CacheHit" if hit else "CacheMiss", MetricUnit.Count, 1)
    conflicts = sum(lookup.conflict for lookup in lookups)
    if conflicts:
        metrics.add_metric("PopulateConflict", MetricUnit.Count, conflicts)
    return {"X-Cache": "hit" if hit else "miss"}


def _json(body: Any, headers: dict[str, str] | None = None, status: int = 200) -> Response:
    return Response(status, content_types.APPLICATION_JSON, body, headers or {})


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json({"statusCode": status, "message": message}, headers, status)


# --- routes ----------------------------------------------------------------------------------


@get("/products/top")
def top_products() -> Response:
    event = app.current_event
    period = _period(event.get_query_string_value("day", None), event.get_query_string_value("month", None))
    rows = rankings.top_sellers(dynamodb(), table(), period, _n())
    return _json({"period": period, "products": [public(SALES, r) for r in rows]})


@get("/products/<product_id>")
def product(product_id: str) -> Response:
    key = {"ProductId": _id("product id", product_id)}
    lookups = [
        cache.get(dynamodb(), table(), engine(), e, key) for e in (PRODUCT_DETAILS, PRODUCT_AVAILABILITY)
    ]
    headers = _cached(lookups)
    if any(lookup.item is None for lookup in lookups):
        return _error(404, f"no product {product_id!r}", headers)
    details, availability = (lookup.item or {} for lookup in lookups)
    return _json(
        details | availability | {"Version": max(details["Version"], availability["Version"])}, headers
    )


@get("/customers/top")
def top_customers() -> Response:
    month = app.current_event.get_query_string_value("month", None)
    period = _period(None, month or datetime.now(UTC).strftime("%Y-%m"))
    rows = rankings.top_customers(dynamodb(), table(), period, _n())
    return _json({"month": period, "customers": [public(CUSTOMER_SPEND, r) for r in rows]})


@get("/customers/<customer_id>")
def customer(customer_id: str) -> Response:
    lookup = cache.get(
        dynamodb(), table(), engine(), CUSTOMER, {"CustomerId": _id("customer id", customer_id)}
    )
    headers = _cached([lookup])
    if lookup.item is None:
        return _error(404, f"no customer {customer_id!r}", headers)
    return _json(lookup.item, headers)


@get("/customers/<customer_id>/orders")
def customer_orders(customer_id: str) -> Response:
    start, end = _time("from", "0000"), _time("to", "9999")
    if start > end:
        raise BadRequestError("from must not be after to")
    rows = orders.customer_orders(dynamodb(), table(), _id("customer id", customer_id), start, end)
    return _json({"orders": [public(ORDER, r) for r in rows]})


@get("/orders/recent")
def recent_orders() -> Response:
    since = _time("since", keys.iso_ms(datetime.now(UTC) - timedelta(days=1)))
    rows = orders.recent_orders(dynamodb(), table(), since, _n())
    return _json({"since": since, "orders": [public(ORDER, r) for r in rows]})


@get("/orders/open")
def open_orders() -> Response:
    return _json({"orders": [public(ORDER, r) for r in orders.open_orders(dynamodb(), table(), _n())]})


@get("/leaderboard")
def leaderboard() -> Response:
    rows = rankings.leaderboard(dynamodb(), table(), _n())
    return _json({"players": [public(PLAYER_SCORE, r) for r in rows]})


@app.exception_handler(ServiceError)
def bad_request(error: ServiceError) -> Response:
    return _error(error.status_code, str(error.msg))


@app.exception_handler(sa.exc.OperationalError)
def database_unavailable(error: Exception) -> Response:
    logger.exception("database unavailable")
    metrics.add_metric("DatabaseUnavailable", MetricUnit.Count, 1)
    return _error(503, "database unavailable, retry later")


@app.exception_handler(Exception)
def internal_error(error: Exception) -> Response:
    logger.exception("unhandled error")  # the trace goes to the log, never to the client
    return _error(500, "internal error")


def _allowed(path: str) -> set[str]:
    return {
        method
        for rule, methods in ROUTES.items()
        if re.fullmatch(re.sub(r"<\w+>", "[^/]+", rule), path)
        for method in methods
    }


@app.not_found
def unknown_route(_: Exception) -> Response:
    path = app.current_event.path
    if allowed := _allowed(path):
        methods = ", ".join(sorted(allowed))
        return _error(405, f"{app.current_event.http_method} is not allowed on {path!r}; use {methods}",
                      {"Allow": methods})  # fmt: skip
    return _error(404, f"no route {path!r}")


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    return app.resolve(event, context)
