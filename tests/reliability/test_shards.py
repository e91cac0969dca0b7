"""The app on streams shaped as production's: 4 shards by partition-key hash, each sealed every 6 s
and continued by a child, one split on demand mid-run, hot aggregate items updated from several
shards at once with transaction conflicts injected, and the usual delivery and DynamoDB faults.
Then the checks of a clean run: no drift, aggregates equal a recount, the dead letters are the
poison records, every conflict absorbed in place."""

from __future__ import annotations

import threading
import uuid

from rich.console import Console

from hybridsync import local
from hybridsync.local import faults
from hybridsync.local.app import LocalApp
from hybridsync.local.faults import FaultPlan
from hybridsync.local.template import Assembly
from hybridsync.runtime import db
from hybridsync.sql import migrations
from hybridsync.sync.aggregate import Aggregation
from shop.model import MODEL
from shop_workloads import demo


def test_four_shards_with_rollover_and_a_split_under_faults(cloud_assembly, stack, tmp_path):
    url, stop_pg = local.start_postgres(tmp_path / "pg")  # its own: drift compares whole tables
    migrations.upgrade(url, "head")
    engine = db.create_engine(url)
    assembly = Assembly.load(cloud_assembly)
    for mapping in assembly.resources("AWS::Lambda::EventSourceMapping"):  # many small batches
        mapping.properties.update(BatchSize=25, MaximumBatchingWindowInSeconds=0)
    plan = FaultPlan(seed=20261123, duplicate=0.2, fail_before=0.1, fail_after=0.1, throttle=0.03,
                     conflict=0.5)  # fmt: skip
    prefix = f"shd{uuid.uuid4().hex[:4]}"
    endpoints = stack.endpoints() | {"database_url": url}
    app = LocalApp(
        assembly,
        **endpoints,
        state_dir=tmp_path,
        prefix=prefix,
        faults=plan,
        shards=4,
        shard_lifetime_s=6,
        shard_records=100,
    )  # fmt: skip  (rolls over however fast)
    split: list[tuple[str, str]] = []
    splitter = threading.Timer(5, lambda: split.append(app.split("main")))
    try:
        app.start(http_port=0, schedules={"SqlSync"})  # the outbox drain's schedule alone
        splitter.start()
        work = demo.Workload(customers=30, products=8, orders=100, players=20, follows=40)
        figures = demo.run(app, engine, tmp_path, Console(quiet=True), work, timeout_s=240)
        status = app.status()
        table = app.table_names["main"]
        counts = Aggregation(MODEL, "main").bookkeeping_counts(app.client, table)
    finally:
        splitter.cancel()
        app.stop()
        engine.dispose()
        stop_pg()
    streams = status["streams"][table]
    injected = faults.injected(tmp_path, figures["faults_injected"])
    aggregate_errors = status["functions"]["Aggregate"]["errors_by_type"]
    print(f"streams {streams}; bookkeeping {counts}; faults {injected}; aggregate errors {aggregate_errors}")
    assert len(split) == 1 and streams["splits"] == 1
    assert streams["rollovers"] >= 4  # every shard sealed at least once while the workload ran
    assert figures["caught_up"]
    assert figures["drift"] == 0
    assert figures["aggregates_equal_recount"] and figures["aggregates"] > 0
    assert figures["index_keys_out_of_date"] == 0  # every writer wrote the keys the model derives
    assert set(map(tuple, figures["dead_letters"])) == demo.POISON_REASONS
    assert figures["failed_batches_stored"] == 0  # no batch failed for good
    assert injected.get("conflict", 0) >= 1  # hot items written from two shards at once, cancelled
    assert "TransactionCanceledException" not in aggregate_errors  # every conflict absorbed in place
    assert counts["cursors"] == counts["shards_listed"] >= 4  # one per shard that aggregated, listed
