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
import re
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
MAX_FORM = 65536


class Console:
    """`Console(lambda: app, engine, model).start()`; `url`; `close()`."""

    def __init__(self, current: Callable[[], Any], engine: Any, model: Any, *, port: int = 0):
        self.current, self.engine, self.model = current, engine, model
        self.scripts = scripts.install()  # refused with scripts.Unavailable
        self.token = secrets.token_urlsafe(24)
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._drawn: tuple[float, dict[str, str]] = (0.0, {})
        self._counted: tuple[float, str] = (0.0, "")  # (when, the section drawn then)
        self._recount_lock, self._recounting = threading.Lock(), False
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
        """Every live section, drawn at most once a second whoever asks (each open page asks). A
        part that cannot be read now (PostgreSQL down, say) says why in its section."""
        with self._lock:
            at, drawn = self._drawn
            now = time.time()
            if now - at >= TICK_S:
                drawn = self._draw(self.current(), now)
                self._drawn = (now, drawn)
            return drawn

    def _draw(self, app: Any, now: float) -> dict[str, str]:
        from hybridsync.sql.deadletters import pending

        drawn: dict[str, str] = {}

        def section(name: str, draw: Callable[[], str]) -> None:
            try:
                drawn[name] = draw()
            except Exception as error:  # shown on the page, the next tick tries again
                drawn[name] = views.error(f"not readable now: {type(error).__name__}: {error}")

        try:
            status = app.status()
        except Exception as error:  # the app between two states (a failover): the next tick tries again
            return {
                name: views.error(f"not readable now: {type(error).__name__}: {error}") for name in views.LIVE
            }
        with self._recount_lock:  # the entities' counts, made apart: they read every item and row
            if now - self._counted[0] >= ENTITIES_EVERY_S and not self._recounting:
                self._recounting = True
                threading.Thread(
                    target=self._recount, args=(app, now), name="console-recount", daemon=True
                ).start()

        def figures() -> str:
            items = {name: app.client.describe_table(TableName=name)["Table"].get("ItemCount", 0)
                     for name in app.tables.values()}  # fmt: skip
            with self.engine.connect() as conn:
                rows = _live_rows(conn, self.model)
                waiting = _waiting(conn)
            return diagram.svg(diagram.of_app(app, self.model, status, items, rows, waiting))

        def letters() -> str:
            with self.engine.connect() as conn:
                newest, count = pending(conn, newest=LETTERS_SHOWN), _waiting(conn)
            physical = {name: logical for logical, name in app.table_names.items()}
            return views.letters(newest, sum(count.values()), self.model, physical, REDRIVEN)

        section("diagram", figures)
        section("charts", lambda: views.charts(app, now))
        section("letters", letters)
        section("alarms", lambda: views.alarms(status["alarms"]))
        section("entities", lambda: self._counted[1] or "<p>counting...</p>")
        return drawn

    def _recount(self, app: Any, started: float) -> None:
        try:
            self._counted = (started, views.entities(_entities(app, self.engine, self.model), started))
        except Exception as error:  # said in its section until the next recount
            self._counted = (started, views.error(f"not counted: {type(error).__name__}: {error}"))
        finally:
            self._recounting = False

    def page(self) -> str:
        tables = [t.name for t in self.model.tables] + [e.name for e in self.model.synced()]
        return views.page(self.token, tables, self.sections(),
                          f"the app of {self.current().prefix}")  # fmt: skip

    def trace(self, query: dict[str, list[str]]) -> tuple[int, str]:
        """The trace box: `table` and `key` (ATTR=VALUE lines), as `hybridsync trace` takes them."""
        from hybridsync.local.dynamodb.streams import every_record
        from hybridsync.runtime import aws
        from hybridsync.sync import trace

        table = (query.get("table") or [""])[0].strip()
        lines = [line.strip("\r") for line in (query.get("key") or [""])[0].split("\n") if line.strip()]
        if not table:
            return 400, views.error("table: name one of the model's tables")
        if not lines or any("=" not in line or line.startswith("=") for line in lines):
            return 400, views.error("key: give each key attribute as ATTR=VALUE, one per line")
        key = dict(line.split("=", 1) for line in lines)
        app = self.current()
        if table not in app.table_names:  # an entity and its sql_key: its item, by the row it has
            try:
                table, key = trace.located(self.engine, self.model, table, key)
            except ValueError as wrong:
                return 400, views.error(f"table: {wrong}")
        streams = aws.client("dynamodbstreams", app.streams_server.endpoint if app.streams_server
                             else app.dynamodb_endpoint, app.region)  # fmt: skip
        sources = trace.Sources(app.client, every_record(streams), trace.in_postgres(self.engine, self.model),
                                trace.local_lines(app.state_dir / "logs"))  # fmt: skip
        if app.failed_batches_bucket:  # the batches a mapping gave up on, their records kept
            from hybridsync.sync import failed

            sources.failed = failed.BucketStore(app.aws("s3"), app.failed_batches_bucket).pending
        try:
            events = trace.trace(
                self.model, table, key, app.table_names, sources, time.time() - TRACE_SINCE_S
            )
        except ValueError as wrong:  # names the key attribute
            return 400, views.error(f"key: {wrong}")
        return 200, views.timeline(events, table, key)

    def redrive(self, form: dict[str, list[str]]) -> tuple[int, str]:
        """What `hybridsync dead-letters redrive [--id N]` runs: the write-back's and the drain's
        pending letters applied again, as their items are now."""
        from hybridsync.sync import operations
        from hybridsync.sync.jobs import Services

        given = (form.get("id") or [""])[0].strip()
        if given and not re.fullmatch(r"[0-9]{1,18}", given):
            return 400, views.error(f"id: {given!r} is not a dead letter's id (a number)")
        app = self.current()
        services = Services(app.client, self.engine, self.model, dict(app.table_names), app.aws)
        event = {"operation": "redrive", "what": "dead-letters", "source": None,
                 "ids": [int(given)] if given else None}  # fmt: skip
        answer = operations.perform(services, event, lambda: 900.0)
        self._drawn = (0.0, self._drawn[1])  # the letters redrawn at the next tick
        still = "".join(f"<li>{html.escape(s['id'])}: {html.escape(s['reason'])}</li>"
                        for s in answer["still"])  # fmt: skip
        return 200, (f"redriven: {answer['landed']} landed, {len(answer['still'])} still rejected"
                     + (f"<ul>{still}</ul>" if still else ""))  # fmt: skip


REDRIVEN = ("write_back", "sql_sync")  # the sources a redrive applies (the others: a load, a rebuild)
LETTERS_SHOWN = 100


def _waiting(conn: Any) -> dict[str, int]:
    """Pending dead letters per consumer."""
    import sqlalchemy as sa

    from hybridsync.sql.schema import dead_letters as letters

    query = sa.select(letters.c.source, sa.func.count()).where(letters.c.redriven_at.is_(None))
    return {source: count for source, count in conn.execute(query.group_by(letters.c.source))}


def _live_rows(conn: Any, model: Any) -> dict[str, int]:
    """Each synced table's live rows (written back: its tombstones left out), in one statement: a
    page asks every second."""
    import sqlalchemy as sa

    from hybridsync.model.declare import Side

    synced = model.synced()
    counts = ", ".join(
        f"(SELECT count(*) FROM {s.sql_table}{' WHERE NOT deleted' if s.master is Side.DYNAMODB else ''})"
        for s in synced
    )
    if not counts:
        return {}
    found = conn.execute(sa.text(f"SELECT {counts}")).one()
    return {s.sql_table: int(n) for s, n in zip(synced, found, strict=True)}


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
        if self._ours():
            self._answer(self._get)

    def do_POST(self) -> None:
        if self._ours():
            self._answer(self._post)

    def _get(self) -> None:
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

    def _post(self) -> None:
        if urlsplit(self.path).path != "/redrive":
            return self._send(404, views.error("only /redrive takes a POST"))
        length = self.headers.get("Content-Length") or "0"
        if not length.isascii() or not length.isdigit() or int(length) > MAX_FORM:
            return self._send(400, views.error(f"Content-Length: a form of at most {MAX_FORM} bytes"))
        form = parse_qs(self.rfile.read(int(length)).decode(errors="replace"))
        token = (form.get("token") or [""])[0].encode()
        if self.headers.get("HX-Request") != "true" or not hmac.compare_digest(
            token, self.console.token.encode()
        ):
            return self._send(403, views.error("token: a redrive is asked from the console's own page"))
        self._send(*self.console.redrive(form))

    def _answer(self, handle: Callable[[], None]) -> None:
        """A request's answer; what fails unexpectedly (a service down) is said, as a 503."""
        try:
            handle()
        except OSError:  # the browser went away
            return
        except Exception as error:
            self._send(503, views.error(f"the console could not answer: {type(error).__name__}: {error}"))

    def _ours(self) -> bool:
        """Only requests to this console by its loopback name, from its own pages: another name is a
        page of another site that resolved its host to 127.0.0.1 (DNS rebinding), and a request a
        page of another site sends is refused before it reads anything."""
        port = self.console.port
        if self.headers.get("Host") not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            self._send(403, views.error(f"Host: open the console as http://127.0.0.1:{port}/"))
            return False
        if self.headers.get("Sec-Fetch-Site") == "cross-site":
            self._send(403, views.error("Sec-Fetch-Site: the console answers its own pages only"))
            return False
        return True

    def _events(self) -> None:
        """The live sections as server-sent events (`event: diagram`, ...), each sent when it changed."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        sent: dict[str, str] = {}
        while not self.console.closing.is_set():
            for name, fragment in self.console.sections().items():
                if sent.get(name) != fragment:
                    lines = re.split(r"\r\n|\r|\n", fragment)  # SSE's own line ends, no other
                    data = "".join(f"data: {line}\n" for line in lines)
                    self.wfile.write(f"event: {name}\n{data}\n".encode())
                    sent[name] = fragment
            self.wfile.write(b": tick\n\n")  # a closed page is noticed here
            self.wfile.flush()
            self.console.closing.wait(TICK_S)

    def _send(self, code: int, body: str | bytes, kind: str = "text/html; charset=utf-8") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # the app's terminal is the banner's
        pass
