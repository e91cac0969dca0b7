"""The live console of `hybridsync up`, in a real browser: Playwright driving the system's Chromium
(Debian's `chromium` package; `.ci/run` installs it when it is missing, and no test downloads a
browser nor skips without one). The app is the session's `cdk synth`, running locally; every
figure the page shows is read from it while the test writes through its HTTP API and its table.

With HYBRIDSYNC_SCREENSHOTS=docs/images, the run's screenshots are the docs' own
(`./scripts/screenshots`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect, sync_playwright

from hybridsync.dynamodb import store
from hybridsync.local.app import LocalApp
from hybridsync.local.console.server import Console
from hybridsync.local.template import Assembly
from shop.model import MODEL, ORDER, ORDER_LINE
from tests.integration.test_local_app import call, esm, wait_for

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# a root container has no user namespace for the sandbox; a closed network: no background requests
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip
WAIT_MS = 30_000


ORDERS: list[str] = []  # the orders the tests write: their rows go with the app (the session's
# PostgreSQL is shared, and the run report's tests count its rows against their own tables' items)


@pytest.fixture(scope="module")
def app(cloud_assembly, stack, engine, tmp_path_factory):
    assembly = Assembly.load(cloud_assembly)
    for function in ("WriteBack", "Aggregate"):
        esm(assembly, function).properties.update(MaximumBatchingWindowInSeconds=0)
    state, prefix = tmp_path_factory.mktemp("console"), f"con{uuid.uuid4().hex[:4]}"
    running = LocalApp(assembly, **stack.endpoints(), state_dir=state, prefix=prefix)
    running.start(http_port=0, schedules=False)
    yield running
    running.stop()
    with engine.begin() as conn:
        for table in ("order_lines", "orders"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE order_id = ANY(:o)"), {"o": ORDERS})


@pytest.fixture(scope="module")
def console(app, engine):
    started = Console(lambda: app, engine, MODEL)
    started.start()
    yield started
    started.close()


@pytest.fixture(scope="module")
def browser():
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: install Debian's (apt-get install chromium), as .ci/run "
                    "does, or name one in CHROMIUM")  # fmt: skip
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser, console):
    opened = browser.new_page(viewport={"width": 1280, "height": 900})
    opened.goto(console.url)
    yield opened
    opened.close()


def shot(part, name: str) -> None:
    """A part of the page as the docs show it, when asked (HYBRIDSYNC_SCREENSHOTS: a folder)."""
    folder = os.environ.get("HYBRIDSYNC_SCREENSHOTS")
    if folder:
        part.screenshot(path=str(Path(folder) / f"console-{name}.png"))


def delivered(page, mapping: str) -> int:
    text = page.locator(f'[id="mapping:{mapping}"]').text_content()
    return int(re.search(r"([\d,]+) delivered", text)[1].replace(",", ""))


def test_the_console_shows_every_mapping_function_and_table_of_the_synthesized_app(app, page):
    assert app.mapping_settings  # the template's mappings, as the app read them
    for name in app.mapping_settings:
        expect(page.locator(f'[id="mapping:{name}"]')).to_contain_text(name.split(":")[0])
    for name in set(app.mapping_functions.values()):
        expect(page.locator(f'[id="function:{name}"]')).to_contain_text("invocations")
    for name in app.tables.values():
        expect(page.locator(f'[id="table:{name}"]')).to_contain_text(re.compile(r"\d+ items?"))
    for synced in MODEL.synced():
        expect(page.locator(f'[id="sql:{synced.sql_table}"]')).to_contain_text(re.compile(r"\d+ rows?"))
    alarms = len(app.alarms.alarms)  # the template's
    expect(page.locator("#alarms")).to_contain_text(f"{alarms} alarms, evaluated locally")
    page.click("#alarms summary")
    expect(page.locator("#alarms details tr")).to_have_count(alarms + 1)  # all OK or without data yet
    expect(page.locator("#entities")).to_contain_text("drift", timeout=WAIT_MS)


def test_a_write_through_the_http_api_moves_the_counters_and_its_trace_shows_row_and_aggregate(
    app, page, engine
):
    write_back = next(name for name in app.mapping_settings if name.startswith("WriteBack"))
    before = delivered(page, write_back)
    tag = uuid.uuid4().hex[:6]
    assert call(app, "PUT", f"/customers/{tag}-c", {"Name": "C", "Email": "c@example.com"})[0] == 200
    assert (
        call(app, "PUT", f"/products/{tag}-p", {"Name": "P", "Category": "c", "Price": 4.5, "Stock": 9})[0]
        == 200
    )
    order = {"CustomerId": f"{tag}-c", "Lines": [{"ProductId": f"{tag}-p", "Quantity": 2, "UnitPrice": 4.5}]}
    code, placed = call(app, "POST", "/orders", order, {"Idempotency-Key": tag})
    assert code == 201, placed
    ORDERS.append(placed["OrderId"])
    page.wait_for_function(  # the page's own figure moves, pushed by the server: no reload
        f"() => /([\\d,]+) delivered/.exec(document.getElementById('mapping:{write_back}').textContent)[1]"
        f".replace(/,/g, '') > {before}",
        timeout=WAIT_MS,
    )
    wait_for(lambda: _row(engine, placed["OrderId"]))
    key = ORDER_LINE.key(placed | {"LineNo": 1})
    page.select_option("select[name=table]", "main")
    page.fill("textarea[name=key]", "\n".join(f"{k}={v}" for k, v in key.items()))
    page.click("#trace-form button")
    timeline = page.locator("#timeline")
    for kind in ("stream_record", "invocation", "aggregate", "row"):
        expect(timeline.locator(f"li.{kind}").first).to_be_visible(timeout=WAIT_MS)
    expect(timeline.locator("li.row")).to_contain_text("order_lines")
    kinds = [li.get_attribute("class") for li in timeline.locator("li").all()]
    assert kinds.index("stream_record") < kinds.index("invocation") and kinds[-1] == "row", kinds
    shot(page.locator("section", has=timeline), "trace")


def _row(engine, order_id: str):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT status FROM orders WHERE order_id = :o"), {"o": order_id}).first()


def test_a_poisoned_record_shows_as_a_dead_letter_and_lands_once_redriven_from_the_page(
    app, page, engine, refusing
):
    order_id = f"{uuid.uuid4().hex[:6]}-poison"
    ORDERS.append(order_id)
    values = {"OrderId": order_id, "CustomerId": "c-con", "CreatedAt": "2031-03-04T10:00:00.000Z",
              "Status": refusing, "Version": 1, "Total": Decimal("5")}  # fmt: skip
    store.put(app.client, app.tables["MainTable"], ORDER, values)
    letter = page.locator("#letters tr", has_text=order_id)
    expect(letter).to_contain_text("rejected by PostgreSQL", timeout=WAIT_MS)
    shot(page.locator("section", has=page.locator("#letters")), "dead-letter")
    with engine.begin() as conn:  # the fix: the team drops its constraint
        conn.execute(sa.text("ALTER TABLE orders DROP CONSTRAINT no_refused"))
    letter.get_by_role("button", name="redrive").click()
    expect(page.locator("#redriven")).to_contain_text("redriven: 1 landed, 0 still rejected", timeout=WAIT_MS)
    assert _row(engine, order_id).status == refusing
    expect(page.locator("#letters tr", has_text=order_id)).to_have_count(0, timeout=WAIT_MS)
    shot(page.locator("section", has=page.locator("#diagram")), "diagram")
    shot(page.locator("section", has=page.locator("#charts")), "charts")


def request(console, path: str, *, method: str = "GET", host: str | None = None, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, str]:  # fmt: skip
    asked = urllib.request.Request(
        console.url.rstrip("/") + path, method=method, data=body, headers=headers or {}
    )
    if host:
        asked.add_unredirected_header("Host", host)
    try:
        with urllib.request.urlopen(asked, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_console_refuses_other_hosts_foreign_redrives_and_names_a_bad_parameter(console):
    assert console.server.server_address[0] == "127.0.0.1"
    assert request(console, "/", host=f"evil.example:{console.port}")[0] == 403  # DNS rebinding
    form = urllib.parse.urlencode({"token": "guessed"}).encode()
    code, said = request(console, "/redrive", method="POST", body=form, headers={"HX-Request": "true"})
    assert code == 403 and "token" in said
    form = urllib.parse.urlencode({"token": console.token}).encode()
    assert request(console, "/redrive", method="POST", body=form)[0] == 403  # not the page's htmx
    code, said = request(console, "/trace?" + urllib.parse.urlencode({"table": "main", "key": "PK"}))
    assert code == 400 and "key:" in said
    code, said = request(console, "/trace?" + urllib.parse.urlencode({"table": "nope", "key": "PK=x"}))
    assert code == 400 and "table:" in said and "nope" in said
    code, said = request(console, "/trace?" + urllib.parse.urlencode({"table": "main", "key": "Qty=table"}))
    assert code == 400 and said.startswith('<p class="error">key:'), said
    assert request(console, "/trace?key=PK%3Dx")[0] == 400
    bad = urllib.parse.urlencode({"token": console.token, "id": "1; drop"}).encode()
    code, said = request(console, "/redrive", method="POST", body=bad, headers={"HX-Request": "true"})
    assert code == 400 and "id:" in said
    assert request(console, "/", headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
    for length in ("-1", "abc", "99999999"):  # never read unbounded, never a dropped connection
        code, said = request(console, "/redrive", method="POST", body=b"",
                             headers={"HX-Request": "true", "Content-Length": length})  # fmt: skip
        assert code == 400 and "Content-Length" in said, length
    form = urllib.parse.urlencode({"token": "é"}).encode()
    assert request(console, "/redrive", method="POST", body=form, headers={"HX-Request": "true"})[0] == 403
    assert request(console, "/static/htmx.min.js")[0] == 200
    assert request(console, "/nothing")[0] == 404
    json.dumps(console.sections())  # every section drawn, as text


def test_the_scripts_are_fetched_once_and_refused_when_they_are_not_the_pinned_ones(tmp_path, monkeypatch):
    """htmx from the npm registry, checked against its pinned integrity: the same bytes every time,
    or no console (never a script nobody pinned)."""
    from hybridsync.local.console import scripts

    folder = scripts.install(tmp_path / "ok")
    assert b"htmx" in (folder / "htmx.min.js").read_bytes() and (folder / "sse.min.js").is_file()
    package, _, member = scripts.PINNED["sse.min.js"]
    monkeypatch.setitem(scripts.PINNED, "sse.min.js", (package, "sha512-" + "A" * 86 + "==", member))
    with pytest.raises(scripts.Unavailable, match="does not match its pinned integrity"):
        scripts.install(tmp_path / "tampered")
    assert not (tmp_path / "tampered" / "sse.min.js").exists()
