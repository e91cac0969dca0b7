"""The shop's HTTP API fuzzed on `hybridsync up` (a process of its own, on services of its own):
a small catalogue seeded through the API, then `hybridsync.testing.fuzz` over every route of its
OpenAPI document, then the pipeline checked, as the issue that asked for it said (issue 30):

- `server_errors`, `dropped`, `schema_violations`: what the fuzzer counted (each must be 0);
- `accepted_then_poisoned`: what the accepted requests did downstream, once the app caught up:
  dead letters that appeared, drift between both sides (rows and views), aggregates unlike a
  recount, and whether a consumer stopped (an ordinary order placed last is counted);
- `poison_replayed`: the first finding of the issue replayed (an order line of 1e37 written
  straight to DynamoDB after an ordinary one of its product): its dead letter appears and the next
  ordinary order is counted (the aggregation goes on).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from hybridsync import workloads
from hybridsync.dynamodb import store
from hybridsync.local.process import UpProcess, tuned_assembly
from hybridsync.model import keys, placing
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.runtime import db
from hybridsync.testing import fuzz
from shop.model import MODEL, ORDER_LINE, SALES

OURS = ("DYNAMODB_", "AWS_", "DATABASE_URL")  # the app makes its own services


def call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, method=method,
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def seed(base: str, tag: str) -> list[str]:
    """Customers, products, a publication, a follow and a store the fuzzer's ids name."""
    ids = [f"{tag}-c1", f"{tag}-c2", f"{tag}-p1", f"{tag}-p2", f"{tag}-pub", f"{tag}-u1"]
    for customer in ids[:2]:
        assert call(base, "PUT", f"/customers/{customer}", {"Name": "C", "Email": "c@example.com"})[0] == 200
    for product in ids[2:4]:
        body = {"Name": "P", "Category": "tools", "Price": 24.99, "Stock": 5}
        assert call(base, "PUT", f"/products/{product}", body)[0] == 200
    assert call(base, "PUT", f"/publications/{tag}-pub", {"Name": "N", "Editor": "e"})[0] in (200, 201, 404)
    assert call(base, "PUT", f"/users/{tag}-u1/follows/{tag}-c1")[0] in (200, 201)
    return ids


def dead_letters(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM dead_letters")).scalar_one())


def last_dead_letter(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT coalesce(max(id), 0) FROM dead_letters")).scalar_one())


def item_ids(record: Any) -> list[str]:
    """The text values a dead-lettered record's item was written with: its keys read back by the
    templates of the entity they fit best, else its text attributes (an outbox row: its key), what
    the request that wrote it held."""
    record = record if isinstance(record, dict) else {}
    data = record.get("dynamodb") if isinstance(record.get("dynamodb"), dict) else {}
    keys = unmarshal(data.get("Keys") or {}) if isinstance(data.get("Keys"), dict) else {}
    fits = sorted(((weight, found) for match, weight in map(placing.matcher, MODEL.entities)
                   if weight and (found := match(keys)) is not None), key=lambda f: -f[0])  # fmt: skip
    if fits:
        return list(fits[0][1].values())
    image = data.get("NewImage") or data.get("OldImage") or record.get("row_key") or {}
    texts = (
        [v.get("S") if isinstance(v, dict) else v for v in image.values()] if isinstance(image, dict) else []
    )
    return [t for t in texts if isinstance(t, str)][:3]


def poisoned_examples(
    engine: sa.Engine, after: int, figures: fuzz.Figures, verdict: workloads.Verdict
) -> list[str]:
    """Each dead letter that appeared, with its reason and the accepted requests that wrote its item;
    each key that drifted, with the accepted requests that named it."""
    out = []
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT source, reason, record FROM dead_letters WHERE id > :after "
                                    "ORDER BY id"), {"after": after}).all()  # fmt: skip
    for source, reason, record in rows:
        record = json.loads(record) if isinstance(record, str) else record
        ids = item_ids(record)
        sent = fuzz.accepted_matching(figures, ids) or [f"no accepted request holds {ids!r}"]
        out += [
            f"accepted_then_poisoned: {request} -> dead letter ({source}): {reason}" for request in sent[:3]
        ]
    for drift in verdict.drifts:
        for kind in ("missing", "stale", "extra"):
            for key in getattr(drift, kind):
                ids = [str(v) for v in key]
                sent = fuzz.accepted_matching(figures, ids) or [f"no accepted request holds {ids!r}"]
                out += [
                    f"accepted_then_poisoned: {request} -> drift ({kind} {key!r})" for request in sent[:3]
                ]
    return out


def settled(client: Any, tables: dict[str, str], engine: sa.Engine, timeout_s: float) -> workloads.Verdict:
    """Both sides checked once the app has caught up (drift 0), or as they stand at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        verdict = workloads.verify(client, tables, engine, MODEL, every_row=True)
        if (verdict.drift == 0 and verdict.aggregates_equal) or time.monotonic() > deadline:
            return verdict
        time.sleep(2)


def sales(client: Any, table: str, product: str) -> tuple[Decimal, Decimal]:
    """The product's units and revenue today, as its aggregate item holds them (0, 0 if none)."""
    day = time.strftime("%Y-%m-%d", time.gmtime())
    key = marshal(SALES.key({"ProductId": product, "Period": day}))
    item = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item", {})
    return Decimal(item.get("Units", {}).get("N", "0")), Decimal(item.get("Revenue", {}).get("N", "0"))


def wait(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return bool(condition())


def replay_poison(base: str, client: Any, table: str, engine: sa.Engine, tag: str) -> bool:
    """Issue 30's first finding through the running app: an ordinary order, a line of 1e37 on the
    same product written straight to DynamoDB (the API refuses it now), then an ordinary order:
    the poison becomes a dead letter and the last order is counted."""
    product, customer = f"{tag}-poison-p", f"{tag}-c1"
    details = {"Name": "P", "Category": "t", "Price": 1, "Stock": 1}
    assert call(base, "PUT", f"/products/{product}", details)[0] == 200
    line = {"ProductId": product, "Quantity": 1, "UnitPrice": 24.99}
    assert call(base, "POST", "/orders", {"CustomerId": customer, "Lines": [line]})[0] == 201
    if not wait(lambda: sales(client, table, product)[0] == 1, 90):
        return False
    before = dead_letters(engine)
    created = keys.iso_ms(datetime.now(UTC))
    huge = {"OrderId": f"{tag}-huge", "CustomerId": f"{tag}-huge-c", "CreatedAt": created, "Status": "OPEN",
            "LineNo": 1, "ProductId": product, "Quantity": 1, "UnitPrice": Decimal("1E+37"),
            "Version": 1}  # fmt: skip
    store.put(client, table, ORDER_LINE, huge)
    assert (
        call(base, "POST", "/orders", {"CustomerId": customer, "Lines": [line | {"Quantity": 2}]})[0] == 201
    )
    counted = wait(lambda: sales(client, table, product) == (3, Decimal("74.97")), 90)
    lettered = wait(lambda: dead_letters(engine) > before, 30)
    return counted and lettered


def run(
    assembly: Path, work: Path, *, requests: int, seed_value: int, console: Console | None = None
) -> dict:
    console = console or Console(stderr=True)
    state = work / "state"
    state.mkdir(parents=True)
    # batches as soon as records arrive (what -c stream_batching_window_s=1 -c
    # aggregate_batching_window_s=1 synthesize)
    tuned = tuned_assembly(assembly, work / "assembly", MaximumBatchingWindowInSeconds=1)
    app = UpProcess(tuned, state, {k: v for k, v in os.environ.items() if not k.startswith(OURS)},
                    prefix="fuzz")  # fmt: skip
    started = time.monotonic()
    app.start()
    try:
        names = app.environment()
        base = app.status()["http"]
        client = boto3.client("dynamodb", endpoint_url=names["DYNAMODB_ENDPOINT"], region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
        tables = {t.name: names[f"TABLE_{t.name.upper()}"] for t in MODEL.tables}
        engine = db.create_engine(names["DATABASE_URL"])
        tag = uuid.uuid4().hex[:6]
        ids = seed(base, tag)
        letters, after = dead_letters(engine), last_dead_letter(engine)
        with console.status("fuzzing") as shown:

            def progress(f: fuzz.Figures) -> None:
                shown.update(f"fuzzing: {f.requests:,} of {requests:,}")

            figures = fuzz.run(
                base, requests_count=requests, ids=ids, seed_value=seed_value, progress=progress
            )
        fuzzed_s = time.monotonic() - started
        # an ordinary order after the fuzz: the consumers still run, and it is counted
        last = {"ProductId": f"{tag}-p1", "Quantity": 1, "UnitPrice": 1}
        placed = call(base, "POST", "/orders", {"CustomerId": f"{tag}-c1", "Lines": [last]})[0] == 201
        verdict = settled(client, tables, engine, timeout_s=90)
        new_letters = dead_letters(engine) - letters
        poisoned = new_letters + verdict.drift + (not verdict.aggregates_equal) + (not placed)
        figures.examples += poisoned_examples(engine, after, figures, verdict)
        if not verdict.aggregates_equal:
            unlike = dict(list(verdict.aggregate_differences().items())[:3])
            figures.examples.append(f"accepted_then_poisoned: aggregates unlike a recount: {unlike!r}")
        if not placed:
            figures.examples.append("accepted_then_poisoned: the ordinary order placed last was refused")
        replayed = replay_poison(base, client, tables["main"], engine, tag)
        engine.dispose()
    finally:
        app.stop()
    out = {
        "requests": figures.requests, "server_errors": figures.server_errors, "dropped": figures.dropped,
        "schema_violations": figures.schema_violations, "accepted_then_poisoned": poisoned,
        "accepted": figures.accepted, "routes": len(figures.routes), "dead_letters_new": new_letters,
        "drift": verdict.drift, "aggregates_equal_recount": verdict.aggregates_equal,
        "poison_replayed": replayed, "requests_per_s": round(figures.requests / max(fuzzed_s, 1e-9), 1),
        "statuses": {str(k): v for k, v in sorted(figures.statuses.items())}, "seed": seed_value,
        "examples": figures.examples,
    }  # fmt: skip
    show(console, out)
    return out


def show(console: Console, f: dict[str, Any]) -> None:
    table = Table(
        title=f"fuzz: {f['requests']:,} requests over {f['routes']} routes ({f['requests_per_s']}/s)"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name in ("server_errors", "dropped", "schema_violations", "accepted_then_poisoned", "accepted",
                 "dead_letters_new", "drift", "aggregates_equal_recount", "poison_replayed"):  # fmt: skip
        table.add_row(name, str(f[name]))
    console.print(table)
    for example in f["examples"]:  # every one: each poisoned request with its dead letter's reason
        console.print(f"  {example}", markup=False)
