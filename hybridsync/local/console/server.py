"""The console's HTTP server: the page, its server-sent events, the trace box and the redrive button,
on 127.0.0.1 only. It reads the running app (`current()`: after a `hybridsync failover`, the app in
the new home) and PostgreSQL; it writes nothing itself but a redrive, which runs the operation
`hybridsync dead-letters redrive` runs (sync/operations.py).

A page from another site cannot use it: a request naming another host is refused (DNS rebinding),
and a redrive needs the page's own token and htmx's header (a plain cross-site form sends
neither)."""

from __future__ import annotations

import hmac
import html
import secrets
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hybridsync.local.console import diagram, scripts, views

STYLE = Path(__file__).with_name("console.css")
TICK_S = 1.0  # how often the live sections are redrawn and sent
ENTITIES_EVERY_S = 10.0  # a recount reads every item and row: not every second
TRACE_SINCE_S = 24 * 3600.0  # a stream's retention


class Console:
    """`Console(lambda: app, engine, model).start()`; `url`; `close()`."""

    def __init__(self, current: Callable[[], Any], engine: Any, model: Any, *, port: int = 0):
        self.current, self.engine, self.model = current, engine, model
        self.scripts = scripts.install()  # refused with scripts.Unavailable
        self.token = secrets.token_urlsafe(24)
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._drawn: tuple[float, dict[str, str]] = (0.0, {})
        self._counted: tuple[float, dict[str, Any] | None] = (0.0, None)
        handler = type("Handler", (_Handler,), {"console": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads, self.server.block_on_close = True, False
        self.port = self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        threading.Thread(target=self.server.serve_forever, name="console", daemon=True).start()

    def close(self) -> None:
        self.closing.set()  # the event streams end
        self.server.shutdown()
        self.server.server_close()

    # --- what the page shows -------------------------------------------------------------------

    def sections(self) -> dict[str, str]:
        """Every live section, drawn at most once a second whoever asks (each open page asks)."""
        with self._lock:
            at, drawn = self._drawn
            now = time.time()
            if now - at >= TICK_S:
                drawn = self._draw(self.current(), now)
                self._drawn = (now, drawn)
            return drawn

    def _draw(self, app: Any, now: float) -> dict[str, str]:
        from hybridsync.sql.deadletters import pending

        status = app.status()
        items = {name: app.client.describe_table(TableName=name)["Table"].get("ItemCount", 0)
                 for name in app.tables.values()}  # fmt: skip
        with self.engine.connect() as conn:
            rows = {s.sql_table: _live_rows(conn, s) for s in self.model.synced()}
            letters = list(reversed(pending(conn)))[:100]
        if now - self._counted[0] >= ENTITIES_EVERY_S:
            self._counted = (now, _entities(app, self.engine, self.model))
        return {
            "diagram": diagram.svg(diagram.of_app(app, self.model, status, items, rows)),
            "charts": views.charts(app, now),
            "letters": views.letters(letters, self.model, self.token, REDRIVEN),
            "alarms": views.alarms(status["alarms"]),
            "entities": views.entities(self._counted[1], self._counted[0]),
        }

    def page(self) -> str:
        return views.page(self.token, [t.name for t in self.model.tables], self.sections(),
                          f"the app of {self.current().prefix}")  # fmt: skip

    def trace(self, query: dict[str, list[str]]) -> tuple[int, str]:
        """The trace box: `table` and `key` (ATTR=VALUE lines), as `hybridsync trace` takes them."""
        from hybridsync.local.dynamodb.streams import every_record
        from hybridsync.runtime import aws
        from hybridsync.sync import trace

        table = (query.get("table") or [""])[0].strip()
        lines = [line.strip() for line in (query.get("key") or [""])[0].splitlines() if line.strip()]
        if not table:
            return 400, views.error("table: name one of the model's tables")
        if not lines or any("=" not in line or line.startswith("=") for line in lines):
            return 400, views.error("key: give each key attribute as ATTR=VALUE, one per line")
        key = dict(line.split("=", 1) for line in lines)
        app = self.current()
        streams = aws.client("dynamodbstreams", app.streams_server.endpoint if app.streams_server
                             else app.dynamodb_endpoint, app.region)  # fmt: skip
        sources = trace.Sources(app.client, every_record(streams), trace.in_postgres(self.engine, self.model),
                                trace.local_lines(app.state_dir / "logs"))  # fmt: skip
        try:
            events = trace.trace(
                self.model, table, key, app.table_names, sources, time.time() - TRACE_SINCE_S
            )
        except ValueError as wrong:  # names the table or the key attribute
            return 400, views.error(f"{'table' if 'table' in str(wrong) else 'key'}: {wrong}")
        return 200, views.timeline(events, table, key)

    def redrive(self, form: dict[str, list[str]]) -> tuple[int, str]:
        """What `hybridsync dead-letters redrive [--id N]` runs: the write-back's and the drain's
        pending letters applied again, as their items are now."""
        from hybridsync.sync import operations
        from hybridsync.sync.jobs import Services

        given = (form.get("id") or [""])[0].strip()
        if given and not given.isdigit():
            return 400, views.error(f"id: {given!r} is not a dead letter's id (a number)")
        app = self.current()
        services = Services(app.client, self.engine, self.model, dict(app.table_names), app.aws)
        event = {"operation": "redrive", "what": "dead-letters", "source": None,
                 "ids": [int(given)] if given else None}  # fmt: skip
        answer = operations.perform(services, event, lambda: 900.0)
        with self._lock:
            self._drawn = (0.0, {})  # the letters redrawn at once
        still = "".join(f"<li>{html.escape(s['id'])}: {html.escape(s['reason'])}</li>"
                        for s in answer["still"])  # fmt: skip
        return 200, (f"redriven: {answer['landed']} landed, {len(answer['still'])} still rejected"
                     + (f"<ul>{still}</ul>" if still else ""))  # fmt: skip


REDRIVEN = ("write_back", "sql_sync")  # the sources a redrive applies (the others: a load, a rebuild)


def _live_rows(conn: Any, synced: Any) -> int:
    import sqlalchemy as sa

    from hybridsync.model.declare import Side

    live = "WHERE NOT deleted" if synced.master is Side.DYNAMODB else ""  # written back: tombstones
    return int(conn.execute(sa.text(f"SELECT count(*) FROM {synced.sql_table} {live}")).scalar_one())


def _entities(app: Any, engine: Any, model: Any) -> dict[str, Any]:
    """Per entity, items against live rows and the drift reconcile finds (the run report's figures)."""
    from hybridsync.local import report

    f = report.figures(app, engine, model, started=time.time(), elapsed=0.0, writes=0, caught_up=True)
    drift = f["drift_by_entity"]
    return {
        "entities": [
            {
                "entity": s.name,
                "master": s.master.name.lower(),
                "items": f["dynamodb_items"].get(s.name, 0),
                "sql_table": s.sql_table,
                "rows": f["postgresql_rows"].get(s.sql_table, 0),
                "drift": drift.get(s.name, 0),
            }
            for s in model.synced()
        ],
        "drift": f["drift"],
        "aggregates": f["aggregates"],
        "aggregates_equal": f["aggregates_equal_recount"],
        "gaps": f["gaps"],
        "every_s": ENTITIES_EVERY_S,
    }


class _Handler(BaseHTTPRequestHandler):
    console: Console

    def do_GET(self) -> None:  # http.server's name
        if not self._ours():
            return
        url = urlsplit(self.path)
        if url.path == "/":
            return self._send(200, self.console.page())
        if url.path == "/events":
            return self._events()
        if url.path == "/trace":
            return self._send(*self.console.trace(parse_qs(url.query)))
        if url.path == "/static/console.css":
            return self._send(200, STYLE.read_bytes(), "text/css")
        if (name := url.path.removeprefix("/static/")) in scripts.PINNED:
            return self._send(200, (self.console.scripts / name).read_bytes(), "text/javascript")
        self._send(404, views.error(f"no page {url.path} (the console is at /)"))

    def do_POST(self) -> None:
        if not self._ours():
            return
        if urlsplit(self.path).path != "/redrive":
            return self._send(404, views.error("only /redrive takes a POST"))
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(min(length, 65536)).decode(errors="replace"))
        token = (form.get("token") or [""])[0]
        if self.headers.get("HX-Request") != "true" or not hmac.compare_digest(token, self.console.token):
            return self._send(403, views.error("token: a redrive is asked from the console's own page"))
        self._send(*self.console.redrive(form))

    def _ours(self) -> bool:
        """Only requests to this console by its loopback name: another name is a page of another
        site that resolved its host to 127.0.0.1 (DNS rebinding)."""
        port = self.console.port
        if self.headers.get("Host") in (f"127.0.0.1:{port}", f"localhost:{port}"):
            return True
        self._send(403, views.error(f"Host: open the console as http://127.0.0.1:{port}/"))
        return False

    def _events(self) -> None:
        """The live sections as server-sent events (`event: diagram`, ...), each sent when it changed."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        sent: dict[str, str] = {}
        try:
            while not self.console.closing.is_set():
                for name, fragment in self.console.sections().items():
                    if sent.get(name) != fragment:
                        data = "".join(f"data: {line}\n" for line in fragment.splitlines() or [""])
                        self.wfile.write(f"event: {name}\n{data}\n".encode())
                        sent[name] = fragment
                self.wfile.write(b": tick\n\n")  # a closed page is noticed here
                self.wfile.flush()
                self.console.closing.wait(TICK_S)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _send(self, code: int, body: str | bytes, kind: str = "text/html; charset=utf-8") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Frame-Options", "DENY")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # the app's terminal is the banner's
        pass
