"""A schema-driven fuzzer for a running HTTP API: Hypothesis strategies built from its OpenAPI
document (`/openapi.json`), a valid request for each route mixed with what a hostile or careless
client sends (control characters, lone surrogates, invalid UTF-8 and percent-encoding, strings of
10 KB to 1 MB, numbers past DynamoDB's limits, NaN, wrong JSON types, deep nesting, bad dates,
forged cursors, wrong methods and media types), each request sent over a socket of its own.

What counts against the API: a 5xx (`server_errors`), a request with no answer (`dropped`), and
an answer unlike the document says (`schema_violations`: not JSON, an error without its message,
a status the route does not declare). What an accepted request did to the pipeline (dead letters,
drift, a stopped consumer) is for the caller to check afterwards (`bench/fuzz.py`, the fuzz tier).

    from hybridsync.testing import fuzz
    figures = fuzz.run("http://127.0.0.1:3000", requests=5_000, ids=["c-1", "p-1"])
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st


class Raw(str):
    """JSON text written as it is (a number past what floats hold, NaN, a lone surrogate escape)."""


HOSTILE_TEXT = [
    "", " ", "\x00", "a\x00b", "\t\r\n", "\x1b[31m", "\u202e", "💥", "Zürich", "a#b", "#", "%", "%FF",
    "'; DROP TABLE orders--", "../../etc/passwd", '"', "\\", "`", "null", "0", "-1", "x" * 129, "x" * 1_100,
    "x" * 10_000,
]  # fmt: skip
LONE_SURROGATES = [Raw('"\\ud800"'), Raw('"a\\udfffb"')]
HOSTILE_NUMBERS = [Raw(n) for n in (
    "0", "-0", "-1", "1.5", "0.001", "2.50", "1e37", "1E+38", "1e125", "1e126", "1e-130", "1e-131",
    "1e400", "1e-400", "1" * 40, "9" * 5_000, "NaN", "Infinity", "-Infinity",
)]  # fmt: skip
HOSTILE_TIMES = [
    "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "0999-06-01", "0001-01-01", "2026-13-40",
    "2026-02-30", "yesterday", "2026-11-22T10:00:00", "2026-11-22T25:00:00Z", "+002026-11-22", "²⁰²⁶-11-22",
]  # fmt: skip
HOSTILE_SEGMENTS = [
    "%00", "%FF", "%C3%28", "%", "%zz", "%2F", '"', "`", "\\", "Z%C3%BCrich", "%F0%9F%92%A5", "a%23b",
    "x" * 200, "x" * 5_000, "..", "%2E%2E", "%20", "*",
]  # fmt: skip
CURSORS = [
    "", "e30", "e30.AAAA", "bm9wZQ", "!!!", "a" * 5_000, base64.urlsafe_b64encode(b"[" * 600).decode(),
    base64.urlsafe_b64encode(b'{"PK": {"S": "X"}}').decode() + ".Zm9yZ2Vk",
]  # fmt: skip
BODIES = [
    b"", b"{", b"null", b"[]", b'"x"', b"[" * 10_000, b'{"a":' * 600 + b"1" + b"}" * 600, b"\xff\xfe\x00",
    '{"a": 1}'.encode("utf-16"), b'{"a": NaN}', b"x" * 1_000_000,
]  # fmt: skip
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "FOO"]
CONTENT_TYPES = [None, "application/json", "application/json; charset=utf-16", "text/plain", "image/png",
                 "multipart/form-data; boundary=x", "application/json; charset=latin-1"]  # fmt: skip
Answer = tuple[int, dict[str, str], bytes]  # status, headers (lower-case names), body


@dataclass(frozen=True)
class Request:
    route: str  # "GET /orders/{order_id}": the operation it was drawn for
    method: str
    target: str  # path and query, as sent on the request line
    headers: tuple[tuple[str, str], ...]
    body: bytes | None

    def shown(self, limit: int = 300) -> str:
        body = "" if self.body is None else f" body={self.body[:limit]!r}"
        return f"{self.method} {self.target[:limit]}{body}"


@dataclass
class Figures:
    requests: int = 0
    server_errors: int = 0
    dropped: int = 0
    schema_violations: int = 0
    accepted: int = 0  # answered 2xx
    routes: Counter[str] = field(default_factory=Counter)  # requests per operation
    statuses: Counter[int] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)  # the first failures, to reproduce them
    # every accepted write: (the request as shown, its text decoded), so that what it poisoned
    # downstream (a dead letter, drift) can be traced to it (`accepted_matching`)
    accepted_writes: list[tuple[str, str]] = field(default_factory=list, repr=False)

    def failed(self, kind: str, request: Request, what: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples) < 20:
            self.examples.append(f"{kind}: {request.shown()} -> {what}")


# --- strategies from the document --------------------------------------------------------------


def text(schema: dict[str, Any], ids: list[str]) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.one_of(st.sampled_from(schema["enum"]), st.sampled_from(HOSTILE_TEXT))
    if schema.get("format") in ("date", "date-time") or "ISO-8601" in schema.get("description", ""):
        valid = st.sampled_from(["2026-11-22", "2026-11-22T10:00:00Z", "2026-11-22T10:00:00.123+05:30"])
        return st.one_of(valid, st.sampled_from(HOSTILE_TIMES))
    if "pattern" in schema:  # months
        return st.one_of(
            st.sampled_from(["2026-11", "2026-01"]), st.sampled_from(["2026-13", "999-1", "²⁰²⁶-11"])
        )
    plain = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1,
                    max_size=min(schema.get("maxLength", 24), 24))  # fmt: skip
    chosen = [plain, st.sampled_from(HOSTILE_TEXT), st.sampled_from(LONE_SURROGATES)]
    if ids:
        chosen.insert(0, st.sampled_from(ids))
    return st.one_of(*chosen)


def number(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    low, high = schema.get("minimum", -(10**6)), schema.get("maximum", 10**6)
    valid = st.integers(min_value=int(low), max_value=int(high)).map(lambda n: Raw(str(n)))
    if schema["type"] == "number":
        valid = st.one_of(valid, st.sampled_from([Raw("24.99"), Raw("0.5"), Raw("1")]))
    return st.one_of(valid, st.sampled_from(HOSTILE_NUMBERS), st.sampled_from(["12", True, None, [], {}]))


def nested(levels: int) -> Any:
    """A value nested `levels` deep as DynamoDB counts (a scalar is level 1)."""
    value: Any = "leaf"
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def value(schema: dict[str, Any], ids: list[str]) -> st.SearchStrategy[Any]:
    """A valid value of the schema, or something hostile in its place."""
    kind = schema.get("type")
    if kind == "string":
        return text(schema, ids)
    if kind in ("integer", "number"):
        return number(schema)
    if kind == "boolean":
        return st.one_of(st.booleans(), st.sampled_from(["true", 1, None]))
    if kind == "array":
        items = value(schema.get("items", {"type": "string"}), ids)
        return st.one_of(st.lists(items, min_size=1, max_size=3), st.sampled_from(["x", {}, [[]] * 200]))
    if kind == "object":
        return body_object(schema, ids)
    # a JSON field (object or array): small documents, or nesting past DynamoDB's 32 levels
    leaves = st.one_of(
        st.integers(-5, 5), st.text(max_size=5), st.sampled_from(HOSTILE_NUMBERS + LONE_SURROGATES)
    )

    def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3))

    small = st.recursive(leaves, containers, max_leaves=8)
    return st.one_of(small, st.sampled_from([nested(31), nested(32), nested(33), nested(600)]))


def body_object(schema: dict[str, Any], ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fields = {name: value(sub, ids) for name, sub in properties.items()}

    @st.composite
    def draw(data: Callable[..., Any]) -> dict[str, Any]:
        out = {}
        for name, strategy in fields.items():
            if name in required or data(st.booleans()):
                out[name] = data(strategy)
        if data(st.integers(0, 9)) == 0 and required:  # a required field left out
            out.pop(data(st.sampled_from(sorted(required))), None)
        if data(st.integers(0, 9)) == 0:  # a field the route does not take
            out[data(st.sampled_from(["Coupon", "__proto__", "Version", "PK", "\x00"]))] = 1
        return out

    return draw()


def write_json(value: Any) -> str:
    """JSON text keeping `Raw` parts as written (json.dumps would refuse NaN's meaning, floats...)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{write_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(write_json(v) for v in value) + "]"
    return json.dumps(value)


def requests(document: dict[str, Any], ids: list[str]) -> st.SearchStrategy[Request]:
    operations = [
        (path, method, op) for path, methods in document["paths"].items() for method, op in methods.items()
    ]

    @st.composite
    def draw(data: Callable[..., Any]) -> Request:
        path, method, operation = data(st.sampled_from(operations))
        route = f"{method.upper()} {path}"
        target = path
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "path":
                continue
            raw = data(st.one_of(st.sampled_from(ids or ["x"]), st.sampled_from(HOSTILE_SEGMENTS),
                                 text(parameter["schema"], ids)))  # fmt: skip
            segment = raw if raw in HOSTILE_SEGMENTS else quote(raw, safe="")
            target = target.replace("{" + parameter["name"] + "}", segment or "%20")
        query = []
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query" and data(st.booleans()):
                if parameter["name"] == "cursor":
                    given = data(st.sampled_from(CURSORS))
                else:
                    given = data(value(parameter["schema"], ids))
                shown = given if isinstance(given, str) else write_json(given)
                query.append(f"{parameter['name']}={quote(shown.encode('utf-8', 'surrogatepass'), safe='')}")
        if data(st.integers(0, 19)) == 0:
            query.append(data(st.sampled_from(["x=1", "n=%00", "limit=", "cursor", "=", "%FF=%FF"])))
        if query:
            target += "?" + "&".join(query)
        verb = method.upper() if data(st.integers(0, 9)) else data(st.sampled_from(METHODS))
        body: bytes | None = None
        schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if schema is not None or verb in ("POST", "PUT", "PATCH"):
            if schema is not None and data(st.integers(0, 4)):
                body = write_json(data(body_object(schema, ids))).encode("utf-8", "surrogatepass")
            else:
                body = data(st.sampled_from(BODIES))
        headers = [("host", "fuzz")]
        content_type = "application/json" if data(st.integers(0, 5)) else data(st.sampled_from(CONTENT_TYPES))
        if body is not None and content_type:
            headers.append(("content-type", content_type))
        return Request(route, verb, target, tuple(headers), body)

    return draw()


# --- sending and judging --------------------------------------------------------------------------


def send(base: str, request: Request, timeout_s: float = 60) -> tuple[int, dict[str, str], bytes]:
    """One request on a connection of its own, bytes as drawn (http.client would refuse some)."""
    lines = [f"{request.method} {request.target} HTTP/1.1", *(f"{k}: {v}" for k, v in request.headers),
             "connection: close"]  # fmt: skip
    if request.body is not None:
        lines.append(f"content-length: {len(request.body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogatepass")
    return exchange(base, head + (request.body or b""), request.method, timeout_s)


def exchange(base: str, data: bytes, method: str = "GET", timeout_s: float = 60) -> Answer:
    """Bytes sent as they are on a connection of their own; the answer (status, headers, body)."""
    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=timeout_s) as connection:
        connection.sendall(data)
        response = http.client.HTTPResponse(connection, method=method)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def judge(figures: Figures, document: dict[str, Any], request: Request, answer: Answer) -> None:
    status, headers, data = answer
    figures.statuses[status] += 1
    if status >= 500:
        return figures.failed("server_errors", request, f"{status} {data[:200]!r}")
    if 200 <= status < 300:
        figures.accepted += 1
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            figures.accepted_writes.append((request.shown(), decoded(request)))
    if request.method == "HEAD" or status == 204:
        return None
    try:
        answer_json = json.loads(data) if data else None
    except ValueError:
        return figures.failed("schema_violations", request, f"{status}: not JSON: {data[:200]!r}")
    if not headers.get("content-type", "").startswith("application/json"):
        return figures.failed(
            "schema_violations", request, f"{status}: content-type {headers.get('content-type')}"
        )
    if status >= 400:
        if not (isinstance(answer_json, dict) and isinstance(answer_json.get("message"), str)
                and answer_json.get("statusCode", status) == status):  # fmt: skip
            return figures.failed(
                "schema_violations", request, f"{status}: not an error envelope: {data[:200]!r}"
            )
        return None
    method, _, path = request.route.partition(" ")
    if request.method == method and str(status) not in document["paths"][path][method.lower()]["responses"]:
        return figures.failed("schema_violations", request, f"{status} is not an answer the route declares")
    return None


def decoded(request: Request, limit: int = 4_000) -> str:
    """What a request carried, as text: its target percent-decoded, its body as UTF-8."""
    body = (request.body or b"")[:limit].decode("utf-8", "surrogateescape")
    return f"{unquote(request.target[:limit], errors='surrogateescape')} {body}"


def accepted_matching(figures: Figures, values: list[str]) -> list[str]:
    """The accepted writes whose text holds every one of `values` (an item's ids): the requests
    that wrote what a consumer then refused, to send again."""
    wanted = [v for v in values if v]
    if not wanted:
        return []
    return [shown for shown, text in figures.accepted_writes if all(v in text for v in wanted)]


def document_of(base: str) -> dict[str, Any]:
    status, _, data = send(
        base, Request("GET /openapi.json", "GET", "/openapi.json", (("host", "fuzz"),), None)
    )
    if status != 200:
        raise RuntimeError(f"{base}/openapi.json answered {status}")
    document: dict[str, Any] = json.loads(data)  # the OpenAPI document: JSON
    return document


def run(
    base: str,
    *,
    requests_count: int = 500,
    ids: list[str] | None = None,
    seed_value: int = 30,
    progress: Callable[[Figures], None] | None = None,
    document: dict[str, Any] | None = None,
) -> Figures:
    """`requests_count` requests drawn from the API's document, sent to `base`; their figures."""
    spec = document or document_of(base)
    figures = Figures()
    strategy = requests(spec, list(ids or []))

    @seed(seed_value)
    @settings(max_examples=requests_count, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(strategy)
    def probe(request: Request) -> None:
        figures.requests += 1
        figures.routes[request.route] += 1
        try:
            answer = send(base, request)
        except (OSError, http.client.HTTPException) as error:
            figures.failed("dropped", request, f"{type(error).__name__}: {error}")
            time.sleep(0.05)
        else:
            judge(figures, spec, request, answer)
        if progress:
            progress(figures)

    probe()
    return figures
