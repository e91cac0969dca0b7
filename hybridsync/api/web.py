"""What every route of the HTTP API shares: the resolver, parameters that answer 400 naming
themselves, JSON bodies, and one error envelope for every error: {"statusCode": N, "message": "..."}.

A project adds its routes in its own modules (`[tool.hybridsync] routes = ["myapp.api"]`):

    from hybridsync.api.web import get, respond, ident

    @get("/invoices/<invoice_id>")
    def invoice(invoice_id: str) -> Response: ...
"""

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable, Mapping
from datetime import date
from decimal import Decimal
from typing import Any, TypedDict, Unpack
from urllib.parse import unquote

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import BadRequestError, ServiceError
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.api import openapi
from hybridsync.dynamodb import cursors
from hybridsync.model import keys, limits
from hybridsync.model.convert import fixed, from_json, jsonable
from hybridsync.model.declare import ID_LENGTH, Entity, Field, FieldType
from hybridsync.model.errors import Invalid
from hybridsync.reads import cache, rankings
from hybridsync.runtime import clients

logger = Logger()
metrics = Metrics()
MAX_N = rankings.MAX_N
MAX_BODY_BYTES = 6 * 1024 * 1024  # Lambda's synchronous invocation payload quota
# JSON, and what clients send JSON as by default (curl -d, urllib): another media type, or another
# charset than UTF-8, is a 415
TEXT_BODIES = ("application/json", "text/plain", "application/x-www-form-urlencoded")
ROUTES: dict[str, set[str]] = {}  # rule -> methods: what a wrong method is told it may use (405)
TIME = {
    "type": "string",
    "description": "an ISO-8601 date (YYYY-MM-DD) or time with a timezone, years 1-9999",
}
QUERY: dict[str, dict[str, Any]] = {  # the query parameters routes share, as the helpers below check them
    "n": {"type": "integer", "minimum": 1, "maximum": MAX_N, "default": 10},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
    "cursor": {"type": "string", "description": "the previous page's, for this route and query only"},
    "since": TIME, "until": TIME, "from": TIME, "to": TIME,
    "day": {"type": "string", "format": "date"},
    "month": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
}  # fmt: skip


class Resolver(APIGatewayHttpResolver):
    """Powertools' resolver, a path parameter being whatever API Gateway routes to it: any
    characters but `/` (its `{name}` variable), where Powertools matches a narrower set (a `"`,
    `\\` or backtick in an id would otherwise miss its route)."""

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}$") -> re.Pattern[str]:
        return re.compile(base_regex.format(re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", rule)))


app = Resolver()


Handler = Callable[..., Response[str]]
# a query parameter a route reads: a name of QUERY's, or (name, schema), or (name, schema, required)
QueryParameter = str | tuple[str, openapi.Schema] | tuple[str, openapi.Schema, bool]


class RouteDescription(TypedDict, total=False):
    """What `get` passes on to `route` to describe a route (see `route`)."""

    query: tuple[QueryParameter, ...]
    body: openapi.Schema | None
    responses: dict[int, str] | None
    path: dict[str, openapi.Schema] | None
    returns: openapi.Schema | None


def route(method: str, rule: str, *, query: tuple[QueryParameter, ...] = (),
          body: openapi.Schema | None = None, responses: dict[int, str] | None = None,
          path: dict[str, openapi.Schema] | None = None,
          returns: openapi.Schema | None = None) -> Callable[[Handler], Handler]:  # fmt: skip
    """Register a route and describe it (`hybridsync.api.openapi`): the query parameters it reads
    (names of `QUERY`, `(name, schema)`, or `(name, schema, True)` when required), the JSON schema
    of its body, its answers, the schemas of its path parameters that are not ids (`path`), the
    schema of its answers' body (`returns`: `openapi.shape(ENTITY)` for what `shown` renders); its
    summary is its handler's docstring. Its path parameters
    arrive percent-decoded (`Z%C3%BCrich` is `Zürich`, `%23` is a `#` the key checks then refuse),
    as API Gateway leaves them encoded in the path. A path parameter that is not UTF-8 once
    decoded (`%FF`), or one or a query value holding a NUL, is refused (400 naming it) before the
    route runs; a cursor given out by this route, for this query, is the only one it takes."""
    ROUTES.setdefault(rule, set()).add(method)
    openapi.describe(method, rule, query=query, body=body, responses=responses, parameters=QUERY,
                     path_schemas=path, returns=returns)  # fmt: skip

    def register(handler: Handler) -> Handler:
        openapi.summarize(method, rule, handler.__doc__)

        @functools.wraps(handler)
        def decoded(**parameters: str) -> Response[str]:
            values = {name: _path_parameter(name, value) for name, value in parameters.items()}
            query = app.current_event.query_string_parameters or {}
            for name, value in [*values.items(), *query.items()]:
                if "\x00" in value:  # no text column stores it: PostgreSQL refuses the whole statement
                    raise BadRequestError(f"{name.replace('_', ' ')} must not contain a NUL character (%00)")
            unbound = sorted((k, v) for k, v in query.items() if k not in ("cursor", "limit"))
            with cursors.bound(json.dumps([method, rule, sorted(values.items()), unbound])):
                return handler(**values)

        return app.route(rule, method)(decoded)

    return register


def _path_parameter(name: str, value: str) -> str:
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise BadRequestError(
            f"{name.replace('_', ' ')} is not UTF-8 once percent-decoded: {value!r}"
        ) from None


def get(rule: str, **description: Unpack[RouteDescription]) -> Callable[[Handler], Handler]:
    return route("GET", rule, **description)


def table(logical: str | None = None) -> str:
    """The physical name of a table of the model (by default its first)."""
    return clients.tables()[logical or clients.model().tables[0].name]


# --- parameters: every bad one is a 400 that names it -----------------------------------------


def ident(name: str, value: str) -> str:
    if not value or len(value) > ID_LENGTH:
        raise BadRequestError(f"{name} must be 1 to {ID_LENGTH} characters")
    return value


def as_field(entity: Entity, attribute: str, value: str, name: str | None = None) -> Any:
    """A path or query value checked as the entity's declared field (its `max_length`, the value
    contract): what a key is built from is refused here, not by DynamoDB's key size limits (a 500)."""
    try:
        return from_json(entity, {attribute: value}, (attribute,), partial=True).get(attribute, value)
    except Invalid as bad:
        raise BadRequestError(f"{name or attribute}: {bad}" if name else str(bad)) from None


def integer(name: str, raw: str, low: int, high: int) -> int:
    """A decimal integer from `low` to `high`: ASCII digits only (`²` is a digit to `isdigit`)."""
    if not re.fullmatch(r"[0-9]{1,18}", raw) or not low <= int(raw) <= high:
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise BadRequestError(f"{name} must be an integer from {low} to {high}, got {shown!r}")
    return int(raw)


def top_n(default: int = 10) -> int:
    return integer("n", app.current_event.get_query_string_value("n", str(default)), 1, MAX_N)


def time_param(name: str, default: str) -> str:
    """An ISO-8601 date or time (any year 1-9999, any offset) as the fixed-width UTC prefix the
    keys sort by."""
    raw = app.current_event.get_query_string_value(name, None)
    if raw is None:
        return default
    try:
        if len(raw) == 10:
            return date.fromisoformat(raw).isoformat()
        return keys.iso_ms(keys.parse_iso(raw))
    except ValueError as error:
        raise BadRequestError(
            f"{name} must be an ISO-8601 date or time with a timezone, got {raw[:40]!r}"
            + (f" ({error})" if "UTC" in str(error) else "")
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


def respond(body: Any, headers: dict[str, str] | None = None, status: int = 200) -> Response[str]:
    """JSON. An entity's values are rendered by `shown` (one JSON type per field type); any other
    number stays exact: an integral one as an integer, another as a decimal string."""
    text = None if body is None else _dumps(jsonable(body))
    return Response(status, content_types.APPLICATION_JSON, text, headers or {})


# --- one JSON type per field type --------------------------------------------------------------


class Number(str):
    """The text of a JSON number, written as it is (`_dumps`): a JSON field's numbers come back as
    the numbers stored, exactly, never through a binary float."""


def shown(entity: Entity, values: Mapping[str, Any]) -> dict[str, Any]:
    """The entity's declared fields among `values` (never its keys, TTL or sync bookkeeping), each
    as its type's one JSON type, whichever side it was read from and whatever its value:

    - INTEGER: a JSON integer (`3`);
    - DECIMAL: a JSON string holding the exact decimal (`"120"`, `"12.5"`; with a declared scale,
      that many digits after the point: `"12.50"`), never a number a client would parse as a binary
      float (`openapi.shown_schema` documents it);
    - JSON: the object or array stored, its numbers as JSON numbers, exactly;
    - STRING and TIMESTAMP: strings; BOOLEAN: true or false; BINARY: base64.

    `values` may be raw (numbers as Decimal) or already JSON-ready (`views.public`)."""
    return {
        f.attribute: field_shown(f, values[f.attribute]) for f in entity.all_fields if f.attribute in values
    }


def field_shown(f: Field, value: Any) -> Any:
    if value is None:
        return None
    if f.type is FieldType.DECIMAL:
        number = value if isinstance(value, Decimal) else Decimal(str(value))
        return fixed(number, f.scale) if f.scale is not None else decimal_text(number)
    if f.type is FieldType.INTEGER:
        return int(value)
    if f.type is FieldType.JSON:
        return _exact(value)
    if f.type is FieldType.BINARY:
        data = getattr(value, "value", value)  # boto3 decodes a B as Binary
        return base64.b64encode(data).decode() if isinstance(data, bytes | bytearray) else data
    return jsonable(value)


def decimal_text(number: Decimal) -> str:
    """An exact decimal in DynamoDB's canonical form: no exponent, no trailing zeros (`"120"`,
    `"12.5"`), so a view read from PostgreSQL and the same view read from DynamoDB print alike."""
    if number == number.to_integral_value():
        return str(int(number))
    return format(number, "f").rstrip("0")


def _exact(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, Decimal | int):
        return Number(decimal_text(Decimal(value)) if value == int(value) else str(value))
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_exact(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    """Compact JSON, a `Number` written as the number it holds."""
    if isinstance(value, Number):
        return str.__str__(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    return json.dumps(value, separators=(",", ":"), default=str)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[str]:
    return respond({"statusCode": status, "message": message}, headers, status)


def body() -> Any:
    """The request's JSON body, numbers as Decimal (so they stay exact), checked as a whole before
    any field is: UTF-8 JSON (415 for another media type or charset), at most 6 MB, nested no
    deeper than a field can be stored, and every string, key and number one both sides can store
    (400 naming where it is, `Lines[0].UnitPrice`)."""
    event = app.current_event
    media, _, parameters = (event.headers.get("content-type") or "application/json").partition(";")
    charset = re.search(r"charset\s*=\s*\"?([\w-]+)", parameters, re.IGNORECASE)
    if media.strip().lower() not in TEXT_BODIES or (charset and charset[1].lower() not in ("utf-8", "utf8")):
        raise ServiceError(415, "body must be application/json in UTF-8")
    raw = event.body or ""
    try:
        data = base64.b64decode(raw, validate=True) if event.is_base64_encoded else raw.encode()
        text = data.decode("utf-8")
    except (binascii.Error, UnicodeError):
        raise BadRequestError("body is not UTF-8 text") from None
    if len(data) > MAX_BODY_BYTES:
        raise ServiceError(413, f"body is over {MAX_BODY_BYTES // 1024 // 1024} MB")
    if not text.strip():
        raise BadRequestError("body must be a JSON object")
    try:
        given = json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=_constant)
    except RecursionError:
        raise BadRequestError(f"body is nested deeper than {limits.DEPTH} levels") from None
    except ValueError as error:
        raise BadRequestError(f"body is not valid JSON: {str(error)[:80]}") from None
    fields = given.items() if isinstance(given, dict) else [("body", given)]
    for name, value in fields:  # a field of the body is an attribute: 32 levels in it, and valid values
        if problem := limits.value_problem(name, value):
            raise BadRequestError(problem)
    return given


def _constant(name: str) -> Decimal:
    return Decimal(name)  # NaN, Infinity: not JSON, refused naming their field by the value checks


def page() -> tuple[int, str | None]:
    """`limit` (1-100, default 20) and `cursor` (from the previous page) of a paged read."""
    limit = integer("limit", app.current_event.get_query_string_value("limit", "20"), 1, 100)
    return limit, app.current_event.get_query_string_value("cursor", None)
