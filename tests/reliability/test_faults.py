"""The whole running app under injected faults: the demo's workload on both sides (orders with
edits, cancellations and deletes, follows, scores, catalogue and prices, reviews, poison records)
through the app of the session's `cdk synth`, every stream delivery exposed to seeded faults
(duplicate deliveries, failures before and after the function ran), every DynamoDB request of a
function to throttles and 500s. Then the same checks as a
clean run: no drift, aggregates equal a recount, the dead letters are the poison records."""

from __future__ import annotations

import threading
import uuid

import pytest
import sqlalchemy as sa
from rich.console import Console

from hybridsync import db, migrations
from hybridsync.local import demo
from hybridsync.local.app import LocalApp
from hybridsync.local.faults import FaultPlan
from hybridsync.local.template import Assembly
from hybridsync.sync import outbox

POISON_REASONS = {
    ("write_back", "Total must be a number, got str '12.00'"),
    ("write_back", "Quantity must be an integer, got str 'two'"),
    ("write_back", "OrderId is 200 characters long, over its limit of 128"),
    ("aggregate", "Quantity must be an integer, got str 'two'"),
}


@pytest.fixture
def own_database(stack, engine):
    """A database of its own on the session's PostgreSQL server: reconcile compares whole tables,
    and the other tests' rows are not this app's."""
    name = f"rel_{uuid.uuid4().hex[:8]}"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(stack.database_url).set(database=name).render_as_string(hide_password=False)
    migrations.upgrade(url, "head")
    own = db.create_engine(url)
    yield url, own
    own.dispose()


def test_faults_on_every_delivery_change_nothing_but_the_work(cloud_assembly, stack, own_database, tmp_path):
    database_url, engine = own_database
    assembly = Assembly.load(cloud_assembly)
    for mapping in assembly.resources("AWS::Lambda::EventSourceMapping"):  # many small batches: many faults
        mapping.properties.update(BatchSize=25, MaximumBatchingWindowInSeconds=0)
    plan = FaultPlan(seed=20261122, duplicate=0.3, fail_before=0.15, fail_after=0.15, throttle=0.05,
                     server_error=0.02)  # fmt: skip
    app = LocalApp(assembly, dynamodb_endpoint=stack.dynamodb_endpoint, database_url=database_url,
                   state_dir=tmp_path, prefix=f"rel{uuid.uuid4().hex[:4]}", faults=plan)  # fmt: skip
    stop = threading.Event()  # the outbox drain on NOTIFY, as `hybridsync up` runs it
    drain_args = (database_url, app.client, app.tables["MainTable"], stop)
    drainer = threading.Thread(target=outbox.listen_and_drain, args=drain_args, daemon=True)
    try:
        app.start(http_port=0, schedules=False)
        drainer.start()
        work = demo.Workload(customers=40, products=20, orders=120, players=30, follows=60)
        figures = demo.run(app, engine, tmp_path, Console(quiet=True), work, timeout_s=240)
    finally:
        app.stop()
        stop.set()
        drainer.join(timeout=10)
    assert figures["caught_up"]
    assert figures["drift"] == 0
    assert figures["aggregates_equal_recount"] and figures["aggregates"] > 0
    assert set(map(tuple, figures["dead_letters"])) == POISON_REASONS  # exactly the poison, once each
    logged = "".join(log.read_text() for log in (tmp_path / "logs").glob("*.log"))
    injected = figures["faults_injected"] | {
        "throttle": logged.count("injected: ProvisionedThroughputExceededException"),
        "server_error": logged.count("injected: InternalServerError"),
    }
    print(f"faults injected: {injected}")  # shown with -s
    assert min(injected.values()) >= 3 and len(injected) == 5, injected
    assert figures["failed_batches_queued"] == 0  # every failure retried through, none exhausted
