"""The Lambda API of the local app, the part operators and the operations function call: invoke a
function (`Invoke`, RequestResponse or Event), reserve its concurrency (`PutFunctionConcurrency`,
`DeleteFunctionConcurrency`: 0 stops it, every call throttled), and list, read, disable and enable
its stream mappings (`ListEventSourceMappings`, `GetEventSourceMapping`, `UpdateEventSourceMapping`
with `Enabled`), on Lambda's REST paths, so boto3's Lambda client works against it unchanged
(`LAMBDA_ENDPOINT`).

A disabled mapping stops polling and keeps its position; enabled again, it resumes from there,
losing nothing (Lambda API reference, UpdateEventSourceMapping: "If you disable the event source
mapping, AWS Lambda stops polling. If you enable again, it will resume polling from the time it had
stopped polling"). Its `State` goes `Disabling` -> `Disabled` once no batch is in flight.

Two routes of the local app's own (not AWS's: boto3's CloudWatch client speaks a protocol this
server does not), for `hybridsync doctor` and its canary alarm: `POST /hybridsync/alarms/<name>/state`
with `{"StateValue": "ALARM", "StateReason": "..."}` is SetAlarmState (the state now, its actions run,
the next evaluation brings it back; 200 `{}`), and `GET /hybridsync/alarms/<name>/history` is
DescribeAlarmHistory of that alarm (`{"AlarmHistoryItems": [...]}`, newest first; `?HistoryItemType=`
keeps one kind). An unknown alarm is a 404 ResourceNotFound, a bad state a 400 InvalidFormat.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from hybridsync.local.awslambda.functions import FunctionError
from hybridsync.local.template import TemplateError


@dataclass
class Switch:
    """Whether a mapping polls; its pollers say when they are idle (nothing in flight)."""

    enabled: bool = True
    pollers: set[int] = field(default_factory=set)
    idle: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def join(self, poller: object) -> None:
        with self.lock:
            self.pollers.add(id(poller))

    def may_poll(self, poller: object) -> bool:
        with self.lock:
            if self.enabled:
                self.idle.discard(id(poller))
            else:
                self.idle.add(id(poller))
            return self.enabled

    @property
    def state(self) -> str:
        with self.lock:
            if self.enabled:
                return "Enabled"
            return "Disabled" if self.pollers <= self.idle else "Disabling"


MAPPINGS = re.compile(r"^/2015-03-31/event-source-mappings/?([^/]*)$")
INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")
CONCURRENCY = re.compile(r"^/2017-10-31/functions/([^/]+)/concurrency$")
ALARM_STATE = re.compile(r"^/hybridsync/alarms/([^/]+)/state$")
ALARM_HISTORY = re.compile(r"^/hybridsync/alarms/([^/]+)/history$")


def function_name(name_or_arn: str) -> str:
    """`Name`, `Name:live` or an ARN, qualified or not -> `Name`."""
    name = unquote(name_or_arn)
    return name.split(":function:")[1].split(":")[0] if ":function:" in name else name.split(":")[0]


class LambdaApi:
    """Serves `app`'s functions and mappings on 127.0.0.1 (a port of its own, or `port`)."""

    def __init__(self, app: Any, port: int = 0):
        self.app = app
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                api.answer(self, "GET")

            def do_PUT(self) -> None:
                api.answer(self, "PUT")

            def do_POST(self) -> None:
                api.answer(self, "POST")

            def do_DELETE(self) -> None:
                api.answer(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="lambda-api").start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def uuid_of(self, name: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.app.prefix}/{name}"))

    def mapping(self, name: str) -> dict[str, Any]:
        app = self.app
        return {
            "UUID": self.uuid_of(name),
            "FunctionArn": f"arn:aws:lambda:{app.region}:{app.account}:function:"
            + app.mapping_functions[name],
            "EventSourceArn": app.mapping_sources.get(name, ""),
            "BatchSize": app.mapping_settings[name].batch_size,
            "State": app.switches[name].state,
        }

    def answer(self, request: BaseHTTPRequestHandler, method: str) -> None:
        path = urlsplit(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        status, payload, headers = 404, {"Type": "User", "message": f"no route {method} {path.path}"}, {}
        try:
            if (found := MAPPINGS.match(path.path)) and method in ("GET", "PUT"):
                status, payload = self._mappings(method, found.group(1), parse_qs(path.query), body)
            elif (found := CONCURRENCY.match(path.path)) and method in ("PUT", "DELETE"):
                function = self.app.function(function_name(found.group(1)))
                if method == "PUT":
                    function.reserved = int(json.loads(body)["ReservedConcurrentExecutions"])
                    status, payload = 200, {"ReservedConcurrentExecutions": function.reserved}
                else:  # no reservation at all: the account's unreserved pool
                    function.reserved, status, payload = None, 204, None
            elif (found := INVOKE.match(path.path)) and method == "POST":
                function = self.app.function(function_name(found.group(1)))
                event = json.loads(body or b"{}")
                try:
                    if request.headers.get("X-Amz-Invocation-Type") == "Event":  # queued: 202 at once
                        threading.Thread(
                            target=self.app.invoke_async, args=(function, event), daemon=True
                        ).start()
                        status, payload = 202, None
                    else:
                        status, payload = 200, function.invoke(event)
                except FunctionError as error:
                    if error.error_type == "TooManyRequestsException":  # Lambda: 429, the reason why
                        status = 429
                        payload = {"Type": "User", "message": error.message,
                                   "Reason": "ReservedFunctionConcurrentInvocationLimitExceeded"}  # fmt: skip
                        headers["x-amzn-ErrorType"] = "TooManyRequestsException"
                    else:  # Lambda: 200 with X-Amz-Function-Error
                        status = 200
                        payload = {"errorType": error.error_type, "errorMessage": error.message,
                                   "stackTrace": error.trace}  # fmt: skip
                        headers["X-Amz-Function-Error"] = "Unhandled"
            elif (found := ALARM_STATE.match(path.path)) and method == "POST":
                try:
                    asked = json.loads(body or b"{}")
                    self._alarms().set_state(unquote(found.group(1)), str(asked.get("StateValue")),
                                             str(asked.get("StateReason", "")))  # fmt: skip
                    status, payload = 200, {}
                except ValueError as error:  # CloudWatch: InvalidFormat for a state it does not know
                    status, payload = 400, {"Type": "User", "message": f"InvalidFormat: {error}"}
                    headers["x-amzn-ErrorType"] = "InvalidFormat"
            elif (found := ALARM_HISTORY.match(path.path)) and method == "GET":
                kind = (parse_qs(path.query).get("HistoryItemType") or [None])[0]
                items = self._alarms().history(unquote(found.group(1)), kind)
                status, payload = 200, {"AlarmHistoryItems": items}
        except (KeyError, TemplateError) as error:  # no such mapping; no such function; no such alarm
            status, payload = 404, {"Type": "User", "message": f"ResourceNotFoundException: {error}"}
        data = b"" if payload is None else json.dumps(payload, default=str).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        if status == 404:
            request.send_header("x-amzn-ErrorType", "ResourceNotFoundException")
        for name, value in headers.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _alarms(self) -> Any:
        if self.app.alarms is None:  # before the app evaluates them (start() makes them)
            raise KeyError("the app's alarms are not evaluated yet")
        return self.app.alarms

    def _mappings(
        self, method: str, wanted: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, Any]:
        names = list(self.app.switches)
        if not wanted:
            function = function_name((query.get("FunctionName") or [""])[0])
            listed = [n for n in names if not function or self.app.mapping_functions[n] == function]
            return 200, {"EventSourceMappings": [self.mapping(n) for n in listed]}
        name = next((n for n in names if self.uuid_of(n) == wanted), None)
        if name is None:
            raise KeyError(f"no event source mapping {wanted}")
        if method == "PUT":
            asked = json.loads(body or b"{}")
            if "Enabled" in asked:
                self.app.switches[name].enabled = bool(asked["Enabled"])
        return (202 if method == "PUT" else 200), self.mapping(name)
