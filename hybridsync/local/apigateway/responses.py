"""API Gateway HTTP APIs, locally: routes matched as API Gateway matches them, each request turned
into the Lambda proxy event of payload format 2.0, and the function's answer into the HTTP response,
as the API Gateway developer guide describes both ("Create AWS Lambda proxy integrations for HTTP
APIs"): duplicate headers and query parameters joined with commas, cookies in `cookies`, a binary
body base64-encoded, `routeKey` the matched route's key, and an answer without `statusCode` taken
as a 200 JSON body."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from hybridsync.local.template import ACCOUNT

log = logging.getLogger(__name__)
JSON = [("content-type", "application/json")]
TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|javascript|x-www-form-urlencoded)|[^;]*\+(json|xml))")


@dataclass(frozen=True)
class Route:
    key: str  # "GET /orders/{id}", "ANY /{proxy+}" or "$default"
    invoke: Callable[[dict[str, Any]], Any]

    @property
    def method(self) -> str:
        return "ANY" if self.key == "$default" else self.key.partition(" ")[0]

    @property
    def pattern(self) -> re.Pattern[str]:
        path = "/{proxy+}" if self.key == "$default" else self.key.partition(" ")[2]
        pattern = re.sub(r"\\\{(\w+)\\\+\\\}", r"(?P<\1>.+)", re.escape(path))
        return re.compile(re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", pattern))

    def specificity(self) -> tuple[bool, bool, int, bool]:
        """API Gateway prefers a route without a greedy variable, then the one with more literal
        path, then the request's own method over ANY; `$default` comes last. Lower sorts first."""
        literal = len(re.sub(r"\{[^}]+\}", "", self.key))
        return (self.key == "$default", "+}" in self.key, -literal, self.method == "ANY")


def match(routes: list[Route], method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    found = [(r, m) for r in routes if r.method in ("ANY", method) and (m := r.pattern.fullmatch(path))]
    if not found:
        return None
    route, matched = min(found, key=lambda pair: pair[0].specificity())
    return route, matched.groupdict()


def http_event(method: str, target: str, headers: list[tuple[str, str]], body: bytes | None, *,
               route_key: str = "$default", parameters: dict[str, str] | None = None,
               source_ip: str = "127.0.0.1") -> dict[str, Any]:  # fmt: skip
    """The payload 2.0 event of one request (`target`: the path and its query string)."""
    url = urlsplit(target)
    joined: dict[str, list[str]] = {}
    for name, value in headers:
        joined.setdefault(name.lower(), []).append(value)
    cookies = [c.strip() for value in joined.pop("cookie", []) for c in value.split(";") if c.strip()]
    query: dict[str, list[str]] = {}
    for name, value in parse_qsl(url.query, keep_blank_values=True):
        query.setdefault(name, []).append(value)
    content_type = (joined.get("content-type") or [""])[0]
    # "A text payload is a UTF-8-encoded JSON string. A binary payload is anything other than a text
    # payload" (API Gateway developer guide, binary media types): bytes that are not UTF-8 go base64.
    text = body is not None and bool(TEXT_TYPES.match(content_type) or not content_type) and _utf8(body)
    now = datetime.now(UTC)
    event: dict[str, Any] = {
        "version": "2.0", "routeKey": route_key, "rawPath": url.path, "rawQueryString": url.query,
        "headers": {name: ",".join(values) for name, values in joined.items()},
        "queryStringParameters": {name: ",".join(values) for name, values in query.items()} or None,
        "pathParameters": parameters or None,
        "requestContext": {
            "accountId": ACCOUNT, "apiId": "local", "domainName": "127.0.0.1", "domainPrefix": "local",
            "http": {"method": method, "path": url.path, "protocol": "HTTP/1.1", "sourceIp": source_ip,
                     "userAgent": ",".join(joined.get("user-agent", []))},
            "requestId": str(uuid.uuid4()), "routeKey": route_key, "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"), "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": body is not None and not text,
    }  # fmt: skip
    if cookies:
        event["cookies"] = cookies
    if body is not None:
        event["body"] = body.decode() if text else base64.b64encode(body).decode()
    return event


def _utf8(body: bytes) -> bool:
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def response_of(answer: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """The HTTP response for a function's answer: a dict with `statusCode` as it says (cookies as
    Set-Cookie headers, a base64 body decoded), anything else as a 200 JSON body of it."""
    if not (isinstance(answer, dict) and "statusCode" in answer):
        return 200, JSON, json.dumps(answer).encode()
    headers = [(k, str(v)) for k, v in (answer.get("headers") or {}).items()]
    headers += [("set-cookie", cookie) for cookie in answer.get("cookies") or []]
    body = answer.get("body") or ""
    data = base64.b64decode(body) if answer.get("isBase64Encoded") else str(body).encode()
    return int(answer["statusCode"]), headers, data


class GatewayHandler(BaseHTTPRequestHandler):
    """A request to the gateway; `serve` gives its subclass the routes, the failure a function
    raises, and the access log."""

    routes: list[Route]
    failed: type[Exception]
    access_log: Callable[[dict[str, Any]], None]

    def _serve(self) -> None:
        """Every request gets an answer in API Gateway's shape ({"message": ...}), whatever it
        holds: no route (any method, `FOO` too) 404, a malformed one 400, a failure 500."""
        self.started, self.request_id, self.route_key = time.monotonic(), str(uuid.uuid4()), "-"
        try:
            target = self.path.encode("latin-1").decode()  # http.server reads the line as Latin-1
            length = int(self.headers.get("content-length") or 0)
            if length < 0:
                raise ValueError(length)
        # not UTF-8, or a Content-Length that is not a length: the message cannot be framed, a
        # 400 (RFC 9112 6.3; no AWS document or recording says more of API Gateway's answer)
        except ValueError:
            self.close_connection = True
            return self._answer(400, JSON, b'{"message":"Bad Request"}')
        body = self.rfile.read(length) if length else None
        found = match(self.routes, self.command, urlsplit(target).path)
        if found is None:
            return self._answer(404, JSON, b'{"message":"Not Found"}')
        route, parameters = found
        self.route_key = route.key
        try:
            event = http_event(self.command, target, list(self.headers.items()), body,
                               route_key=route.key, parameters=parameters,
                               source_ip=self.client_address[0])  # fmt: skip
            event["requestContext"]["requestId"] = self.request_id
            self._answer(*response_of(route.invoke(event)))
        except self.failed:
            self._answer(500, JSON, b'{"message":"Internal Server Error"}')
        except Exception:  # the gateway's own fault: still an answer, never a dropped connection
            log.exception("local API gateway: %s %s", self.command, target[:200])
            self._answer(500, JSON, b'{"message":"Internal Server Error"}')

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # any method: API Gateway answers one it has no route for 404
            return self._serve
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A request http.server cannot parse (its line, its headers): JSON, as API Gateway answers."""
        self.close_connection = True
        body = json.dumps({"message": message or self.responses.get(code, ("Error",))[0]}).encode()
        self._answer(code, JSON, body)

    def _answer(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
        request_id = getattr(self, "request_id", None) or str(uuid.uuid4())
        self.send_response(status)
        self.send_header("apigw-requestid", request_id)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        started = getattr(self, "started", time.monotonic())
        self.access_log(
            {
                "requestId": request_id,
                "ip": self.client_address[0],
                "httpMethod": self.command,
                "routeKey": getattr(self, "route_key", "-"),
                "status": status,
                "responseLength": len(data),
                "responseLatency": round((time.monotonic() - started) * 1000),
            }
        )

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

    def log_message(self, *args: Any) -> None:
        pass


def serve(
    routes: list[Route],
    port: int,
    failed: type[Exception],
    access_log: Callable[[dict[str, Any]], None] = lambda entry: None,
) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1 for these routes (serve_forever it); a function that fails
    (`failed` raised) answers 500 as API Gateway does. Each answer is an `access_log` entry, the
    fields of the stage's JSON access log (request id, route, status, latency)."""

    handler = type("Handler", (GatewayHandler,), {"routes": routes, "failed": failed,
                                                  "access_log": staticmethod(access_log)})  # fmt: skip
    return ThreadingHTTPServer(("127.0.0.1", port), handler)
