"""Adoption on `hybridsync up` as an operator runs it, every operation inside the app's operations
function (`--deployed`): legacy rows loaded both ways, the aggregates rebuilt while orders keep
coming (the aggregation paused and resumed through the local Lambda API), reconcile with no drift."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from decimal import Decimal

import boto3
import pytest
import sqlalchemy as sa

from hybridsync.dynamodb import store
from hybridsync.dynamodb.scans import Scanner
from hybridsync.runtime import db
from hybridsync.sync.aggregate import Aggregation
from shop.model import MODEL
from tests.integration.conftest import started_up

pytestmark = pytest.mark.integration
DAY = "2026-11-22T10:00:00.000Z"


@pytest.fixture(scope="module")
def up(cloud_assembly, tmp_path_factory):
    app = started_up(
        cloud_assembly, tmp_path_factory.mktemp("adopt"), "adopt", MaximumBatchingWindowInSeconds=1
    )
    yield app
    app.stop()


def last_json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_loads_and_the_rebuild_run_inside_the_app_with_writes_going(up):
    names = up.environment()
    client = boto3.client("dynamodb", endpoint_url=names["DYNAMODB_ENDPOINT"], region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
    table, tag = names["TABLE_MAIN"], uuid.uuid4().hex[:6]
    engine = db.create_engine(names["DATABASE_URL"])
    with engine.begin() as conn:  # the legacy application's rows
        conn.execute(sa.text("INSERT INTO customers (customer_id, name, email) VALUES (:c, 'n', 'e@x.org')"),
                     [{"c": f"{tag}-c{n}"} for n in range(20)])  # fmt: skip
        conn.execute(sa.text("INSERT INTO orders (order_id, customer_id, created_at, status, total, version) "
                             "VALUES (:o, :c, '2026-11-01T10:00:00Z', 'SHIPPED', 12, 1)"),
                     [{"o": f"{tag}-o{n}", "c": f"{tag}-c1"} for n in range(10)])  # fmt: skip
    views = last_json(up.cli("load", "views", "Customer", "--deployed", "--json", "--segments", "2"))
    assert views["read"] >= 20 and views["dead_lettered"] == 0 and views["undone"] == 0
    items = last_json(up.cli("load", "items", "Order", "--deployed", "--json"))
    assert items["written"] >= 10
    rows = last_json(up.cli("load", "rows", "--deployed", "--json", "--segments", "2"))
    assert rows["undone"] == 0
    # a wrong aggregate, and order lines written while the rebuild runs
    wrong = MODEL.aggregate("Sales").entity.item(
        MODEL.aggregate("Sales").item_values((f"{tag}-p0", "2026-11-22"), (Decimal(999), Decimal(999)))
    )
    client.put_item(TableName=table, Item=store.marshal(wrong))
    stop = threading.Event()

    def orders() -> None:
        n = 0
        while not stop.is_set():
            values = {"OrderId": f"{tag}-w{n}", "CustomerId": f"{tag}-c1", "CreatedAt": DAY,
                      "Status": "OPEN", "LineNo": 1, "ProductId": f"{tag}-p{n % 3}", "Quantity": 1 + n % 4,
                      "UnitPrice": Decimal("2.50"), "Version": 1}  # fmt: skip
            store.put(client, table, MODEL.entity("OrderLine"), values)
            n += 1
            time.sleep(0.05)

    writer = threading.Thread(target=orders)
    writer.start()
    try:
        rebuilt = last_json(up.cli("aggregates", "rebuild", "--deployed", "--json", "--settle", "1"))
    finally:
        time.sleep(1)
        stop.set()
        writer.join()
    assert rebuilt["undone"] == 0 and rebuilt["written"] >= 1
    lam = boto3.client("lambda", endpoint_url=names["LAMBDA_ENDPOINT"], region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
    mappings = lam.list_event_source_mappings(FunctionName=names["AGGREGATE_FUNCTION"])["EventSourceMappings"]
    assert mappings and all(m["State"] == "Enabled" for m in mappings)  # resumed
    # a mapping paused by hand shows as such in `hybridsync status`, its position kept
    lam.update_event_source_mapping(UUID=mappings[0]["UUID"], Enabled=False)
    deadline = time.monotonic() + 30
    shown = ""
    while "DISABLED: not polling" not in shown and time.monotonic() < deadline:
        time.sleep(0.5)
        shown = up.cli("status", "--state-dir", str(up.state)).stdout
    lam.update_event_source_mapping(UUID=mappings[0]["UUID"], Enabled=True)
    assert "DISABLED: not polling" in shown, shown
    aggregation = Aggregation(MODEL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        scanned = list(Scanner(client, table, consistent=True).items())
        ours = lambda key: str(key[1]).startswith(tag)  # noqa: E731
        if aggregation.stored(scanned, ours) == aggregation.recount(scanned, ours):
            break
        time.sleep(2)
    assert aggregation.stored(scanned, ours) == aggregation.recount(scanned, ours)
    listed = [json.loads(line) for line in up.cli("jobs", "--json").stdout.splitlines()]
    assert {"views", "items", "rows", "rebuild"} <= {j["kind"] for j in listed}
    report = up.cli("reconcile", "--deployed")
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-2000:]
    # the other operations run there too: migrations, and both redrives (nothing pending: exit 0)
    redrive_letters = ("dead-letters", "redrive", "--deployed", "--source", "write_back")
    for args, says in ((("migrations", "current", "--deployed"), "schema at revision"),
                       (redrive_letters, "redriven: 0 landed"),
                       (("failed-batches", "redrive", "--deployed"), "redriven: 0 batch(es)")):  # fmt: skip
        done = up.cli(*args)
        assert done.returncode == 0 and says in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    engine.dispose()
