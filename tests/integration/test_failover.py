"""A Region evacuated (local/failover.py): the replicated app moved from us-east-1 to us-west-2,
live and offline, while writers go on in both Regions on the same lines. Then every replica holds
the same items, the rows equal them, and the aggregates equal a recount: nothing lost across the
hand-over, nothing counted twice."""

from __future__ import annotations

import random
import threading
import time
import uuid
from decimal import Decimal

import boto3
import pytest
import sqlalchemy as sa

from hybridsync import workloads
from hybridsync.local.app import LocalApp
from hybridsync.local.failover import Stranded, failover
from hybridsync.model.convert import marshal
from hybridsync.runtime import db
from hybridsync.streams import changes
from shop.model import MODEL, ORDER_LINE
from tests.integration.conftest import started_up
from tests.integration.test_regions import CREATED, HOME, WEST, items, replicated, replicated_on_disk


@pytest.fixture
def moving(cloud_assembly, stack, tmp_path):
    """The replicated app running at home; whichever app runs last is stopped, then the twin."""
    app = LocalApp(replicated(cloud_assembly), **stack.endpoints(), state_dir=tmp_path,
                   prefix=f"fo{uuid.uuid4().hex[:4]}", regions=[HOME, WEST])  # fmt: skip
    app.start(http_port=None, schedules=False)
    running = [app]
    yield running
    running[-1].stop()  # and the twin with it


class Writers:
    """A writer per Region on the same order lines (puts and deletes), until stopped."""

    def __init__(self, clients: dict[str, object], table: str, tag: str):
        self.table, self.tag, self.stop, self.written = table, tag, threading.Event(), 0
        self.threads = [
            threading.Thread(target=self.run, args=(c, n)) for n, c in enumerate(clients.values())
        ]

    def run(self, client, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            line = {"OrderId": f"{self.tag}-o{rng.randrange(5)}", "CustomerId": f"{self.tag}-c", "LineNo": 1,
                    "CreatedAt": CREATED, "Status": "OPEN", "ProductId": f"{self.tag}-p{rng.randrange(2)}",
                    "Quantity": rng.randrange(1, 9), "UnitPrice": Decimal("2.5"), "Version": 1}  # fmt: skip
            try:
                if rng.random() < 0.15:
                    client.delete_item(TableName=self.table, Key=marshal(ORDER_LINE.key(line)))
                else:
                    client.put_item(TableName=self.table, Item=marshal(ORDER_LINE.item(line)))
                self.written += 1
            except Exception:  # a Region that does not answer: the writer goes on
                pass
            time.sleep(0.01)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        for thread in self.threads:
            thread.join()


def converged(app, engine, tag):
    """Every replica equal, the rows equal the new home's items, the aggregates a recount of them."""
    assert app.replicator.settle(60), app.replicator.figures()
    assert workloads.wait_caught_up(lambda: app.status()["mappings"], None, timeout_s=120, outbox=False)
    table = app.tables["MainTable"]
    regions = app.replicator.regions
    assert items(regions[HOME].client(), table, tag) == items(regions[WEST].client(), table, tag) != []
    verdict = workloads.verify(app.client, app.table_names, engine, MODEL, keep=lambda k: tag in str(k))
    assert not [k for d in verdict.to_sql.values() for k in d.missing + d.stale + d.extra if tag in str(k)]
    assert verdict.stored and verdict.aggregates_equal, verdict.aggregate_differences()


def test_a_live_failover_with_writes_going_on_loses_nothing_and_counts_nothing_twice(moving, engine):
    app, tag = moving[0], uuid.uuid4().hex[:6]
    clients = {HOME: app.client, WEST: app.replicator.regions[WEST].client()}
    said: list[str] = []
    with Writers(clients, app.tables["MainTable"], tag) as writers:
        time.sleep(3)  # the old home folds some, and has some in flight
        moved, done = failover(app, WEST, MODEL, say=said.append)
        moving.append(moved)
        time.sleep(3)  # and the new home takes writes from both Regions
    assert writers.written > 100
    assert (
        moved.replicator.home == WEST and moved.dynamodb_endpoint == moved.replicator.regions[WEST].endpoint
    )
    assert done.live and done.rebuild["written"] >= 1 and done.total_s < 120, done
    assert any("fencing us-east-1" in line for line in said) and said[-1].startswith("us-west-2 is home")
    converged(moved, engine, tag)
    # rows settled against the new home: each row's position is of its stream's slot, not compared
    # with the old stream's (every line was written after the failover)
    with engine.connect() as conn:
        positions = (
            conn.execute(
                sa.text(
                    "SELECT stream_position FROM order_lines WHERE order_id LIKE :t "
                    "AND stream_position IS NOT NULL"
                ),
                {"t": f"{tag}-%"},
            )
            .scalars()
            .all()
        )
    slots, old = ({changes.slot(arn) for arn in a.mapping_sources.values()} for a in (moved, app))
    assert positions and {changes.band(int(p)) for p in positions} <= slots and slots.isdisjoint(old)
    # the aggregation runs on after the rebuild: a write now moves its aggregate once
    mappings = moved.status()["mappings"]
    assert all(m["state"] == "Enabled" for m in mappings.values()), mappings


def test_an_offline_failover_then_the_old_home_rejoining(moving, engine):
    """Home cut off (its pipeline fenced where it stands), writes in both Regions; after the
    failover home rejoins and what it took while cut off flows on from us-west-2's stream. The
    aggregates it folded while cut off replicate too, and one that only it had would count its
    changes twice (once as replicated, once folded again): one more rebuild makes them a recount
    (the runbook's last step)."""
    app, tag = moving[0], uuid.uuid4().hex[:6]
    clients = {HOME: app.client, WEST: app.replicator.regions[WEST].client()}
    with pytest.raises(ValueError, match="--offline: us-east-1 still replicates"):
        failover(app, WEST, MODEL, live=False)
    with pytest.raises(ValueError, match="not eu-west-1"):
        failover(app, "eu-west-1", MODEL)
    with Writers(clients, app.tables["MainTable"], tag):
        time.sleep(2)
        app.replicator.partition(HOME)
        # home takes writes it cannot replicate, and folds them: one into an aggregate only it has
        solo = {"OrderId": f"{tag}-solo", "CustomerId": f"{tag}-c", "LineNo": 1, "CreatedAt": CREATED,
                "Status": "OPEN", "ProductId": f"{tag}-solo", "Quantity": 3, "UnitPrice": Decimal("2.5"),
                "Version": 1}  # fmt: skip
        app.client.put_item(TableName=app.tables["MainTable"], Item=marshal(ORDER_LINE.item(solo)))
        time.sleep(2)
        moved, done = failover(app, WEST, MODEL, live=False)
        moving.append(moved)
        time.sleep(2)
        moved.replicator.partition(HOME, cut=False)  # the old home rejoins
        time.sleep(2)
    assert not done.live and done.settled_s < 1
    assert moved.replicator.settle(60)
    from hybridsync.local.failover import rebuild

    rebuild(moved, MODEL)
    converged(moved, engine, tag)


def test_a_failover_that_fails_between_the_two_apps_strands_nothing(moving, engine, cloud_assembly,
                                                                    stack, monkeypatch):  # fmt: skip
    """The new app cannot start (killed midway, as far as the pipeline goes): Stranded, said in one
    sentence; nothing runs, the twin's Regions are stopped, and an app started again on the same
    state (as `up` is) runs at home with everything it had."""
    app, tag = moving[0], uuid.uuid4().hex[:6]
    table = app.tables["MainTable"]
    line = {"OrderId": f"{tag}-o", "CustomerId": f"{tag}-c", "LineNo": 1, "CreatedAt": CREATED,
            "Status": "OPEN", "ProductId": f"{tag}-p", "Quantity": 2, "UnitPrice": Decimal("2.5"),
            "Version": 1}  # fmt: skip
    app.client.put_item(TableName=table, Item=marshal(ORDER_LINE.item(line)))
    started = LocalApp.start

    def refused(self, **kwargs):
        raise OSError("[Errno 98] Address already in use")

    monkeypatch.setattr(LocalApp, "start", refused)
    with pytest.raises(Stranded, match=r"failed after us-east-1 was fenced: .*Address already in use"):
        failover(app, WEST, MODEL)
    assert app.replicator.regions[WEST].stopped
    began = time.monotonic()
    app.stop()  # `up` stops it again on its way out: the fenced app's second stop is harmless
    assert time.monotonic() - began < 5
    monkeypatch.setattr(LocalApp, "start", started)
    again = LocalApp(replicated(cloud_assembly), **stack.endpoints(), state_dir=app.state_dir,
                     prefix=app.prefix, regions=[HOME, WEST])  # fmt: skip
    moving.append(again)
    again.start(http_port=None, schedules=False)
    converged(again, engine, tag)


def test_the_failover_command_moves_the_running_app(cloud_assembly, tmp_path):
    """`hybridsync failover --to us-west-2` beside `hybridsync up --regions ...`: each step said,
    `.local/env` pointing at the new home, and a write there written back."""
    assembly = replicated_on_disk(cloud_assembly, tmp_path / "replicated")
    up = started_up(assembly, tmp_path, f"fc{uuid.uuid4().hex[:4]}", "--regions", f"{HOME},{WEST}")
    try:
        state = ("--state-dir", str(up.state))
        refused = up.cli("failover", "--to", "eu-west-1", *state)
        assert refused.returncode == 1 and "not eu-west-1: us-east-1 is home" in refused.stderr, refused
        moved = up.cli("failover", "--to", WEST, *state)
        assert moved.returncode == 0, moved.stdout + moved.stderr + up.log_tail()
        assert "fencing us-east-1" in moved.stdout and "us-west-2 is home (fenced" in moved.stdout
        names = up.environment()
        assert names["DYNAMODB_ENDPOINT"] == names["DYNAMODB_ENDPOINT_US_WEST_2"]
        client = boto3.client("dynamodb", endpoint_url=names["DYNAMODB_ENDPOINT"], region_name=HOME,
                              aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
        line = {"OrderId": f"{up.command[-1]}-o", "CustomerId": "c", "LineNo": 1, "CreatedAt": CREATED,
                "Status": "OPEN", "ProductId": "p", "Quantity": 2, "UnitPrice": Decimal("2.5"),
                "Version": 1}  # fmt: skip
        client.put_item(TableName=names["TABLE_MAIN"], Item=marshal(ORDER_LINE.item(line)))
        engine = db.create_engine(names["DATABASE_URL"])
        deadline = time.monotonic() + 60
        with engine.connect() as conn:
            while not conn.execute(sa.text("SELECT 1 FROM order_lines WHERE order_id = :o"),
                                   {"o": line["OrderId"]}).first():  # fmt: skip
                assert time.monotonic() < deadline, up.log_tail()
                time.sleep(0.5)
                conn.rollback()
        assert up.status()["replication"]["home"] == WEST
        shown = up.cli("status", *state).stdout
        assert "replication: home us-west-2" in shown and "local writes" in shown, shown
    finally:
        up.stop()
