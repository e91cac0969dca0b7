"""What every route of the HTTP API shares: the resolver, parameters that answer 400 naming
themselves, JSON bodies, and one error envelope for every error: {"statusCode": N, "message": "..."}.

A project adds its routes in its own modules (`[tool.hybridsync] routes = ["myapp.api"]`):

    from hybridsync.web import get, respond, ident

    @get("/invoices/<invoice_id>")
    def invoice(invoice_id: str) -> Response: ...
"""

import functools
import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import BadRequestError
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync import keys, runtime
from hybridsync.convert import jsonable
from hybridsync.declare import ID_LENGTH
from hybridsync.reads import cache, rankings

logger = Logger()
metrics = Metrics()
app = APIGatewayHttpResolver()
MAX_N = rankings.MAX_N
ROUTES: dict[str, set[str]] = {}  # rule -> methods: what a wrong method is told it may use (405)


def route(method: str, rule: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """Register a route; its path parameters arrive percent-decoded (`Z%C3%BCrich` is `Zürich`,
    `%23` is a `#` the key checks then refuse), as API Gateway leaves them encoded in the path. A
    path parameter or query value holding a NUL is refused (400 naming it) before the route runs."""
    ROUTES.setdefault(rule, set()).add(method)

    def register(handler: Callable[..., Response]) -> Callable[..., Response]:
        @functools.wraps(handler)
        def decoded(**parameters: str) -> Response:
            values = {name: unquote(value) for name, value in parameters.items()}
            query = app.current_event.query_string_parameters or {}
            for name, value in [*values.items(), *query.items()]:
                if "\x00" in value:  # no text column stores it: PostgreSQL refuses the whole statement
                    raise BadRequestError(f"{name.replace('_', ' ')} must not contain a NUL character (%00)")
            return handler(**values)

        return app.route(rule, method)(decoded)

    return register


def get(rule: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    return route("GET", rule)


def table(logical: str | None = None) -> str:
    """The physical name of a table of the model (by default its first)."""
    return runtime.tables()[logical or runtime.model().tables[0].name]


# --- parameters: every bad one is a 400 that names it -----------------------------------------


def ident(name: str, value: str) -> str:
    if not value or len(value) > ID_LENGTH:
        raise BadRequestError(f"{name} must be 1 to {ID_LENGTH} characters")
    return value


def top_n(default: int = 10) -> int:
    raw = app.current_event.get_query_string_value("n", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_N:
        raise BadRequestError(f"n must be an integer from 1 to {MAX_N}, got {raw!r}")
    return int(raw)


def time_param(name: str, default: str) -> str:
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


def period(day: str | None, month: str | None) -> str:
    try:
        return rankings.period_of(day, month)
    except ValueError as error:
        raise BadRequestError(str(error)) from None


def cached(lookups: list[cache.Lookup]) -> dict[str, str]:
    hit = all(lookup.hit for lookup in lookups)
    metrics.add_metric("CacheHit" if hit else "CacheMiss", MetricUnit.Count, 1)
    conflicts = sum(lookup.conflict for lookup in lookups)
    if conflicts:
        metrics.add_metric("PopulateConflict", MetricUnit.Count, conflicts)
    return {"X-Cache": "hit" if hit else "miss"}


def respond(body: Any, headers: dict[str, str] | None = None, status: int = 200) -> Response:
    """JSON, numbers exact: integers as integers, other decimals as strings ("24.99")."""
    return Response(status, content_types.APPLICATION_JSON, jsonable(body), headers or {})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return respond({"statusCode": status, "message": message}, headers, status)


def body() -> Any:
    """The request's JSON body; numbers as Decimal, so they stay exact."""
    raw = app.current_event.decoded_body
    if not raw:
        raise BadRequestError("body must be a JSON object")
    try:
        return json.loads(raw, parse_float=Decimal, parse_int=Decimal)
    except ValueError:
        raise BadRequestError("body is not valid JSON") from None


def page() -> tuple[int, str | None]:
    """`limit` (1-100, default 20) and `cursor` (from the previous page) of a paged read."""
    raw = app.current_event.get_query_string_value("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise BadRequestError(f"limit must be an integer from 1 to 100, got {raw!r}")
    return int(raw), app.current_event.get_query_string_value("cursor", None)
