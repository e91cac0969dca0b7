"""Chaos on two Regions: the app with a us-west-2 replica of its tables (the global tables' twin,
local/dynamodb/replication.py), writers in both Regions racing on the same orders and lines (puts,
deletes, conditional increments), us-west-2 cut off then stopped while they write, every
delivery fault of the fault plan on the engine's consumers, and then a failover to us-west-2 while
they write on (local/failover.py). Then: every replica holds the same items, the rows equal them
(nothing lost, nothing stale), the aggregates equal a recount (nothing counted twice, no losing
version counted)."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from decimal import Decimal

import pytest

from hybridsync import workloads
from hybridsync.local.app import LocalApp
from hybridsync.local.dynamodb.replication import RegionFault
from hybridsync.local.failover import failover
from hybridsync.local.faults import FaultPlan
from hybridsync.model.convert import marshal
from shop.model import MODEL, ORDER, ORDER_LINE
from tests.integration.test_regions import CREATED, HOME, WEST, items, replicated

WRITE_S = 12.0
FAULTS = "partition=us-west-2@2+3,stop=us-west-2@6+3"
FAILOVER_AT_S = 10.0  # us-west-2 back from its stop: it becomes home while the writers go on


@pytest.fixture(scope="module")
def chaos_app(cloud_assembly, stack, tmp_path_factory):
    assembly = replicated(cloud_assembly)
    plan = FaultPlan(seed=53, duplicate=0.2, fail_before=0.05, fail_after=0.05, throttle=0.05,
                     server_error_after=0.05)  # fmt: skip
    app = LocalApp(assembly, **stack.endpoints(), state_dir=tmp_path_factory.mktemp("regions-chaos"),
                   prefix=f"rc{uuid.uuid4().hex[:4]}", faults=plan, regions=[HOME, WEST],
                   region_faults=RegionFault.parse(FAULTS))  # fmt: skip
    app.start(http_port=None, schedules=False)
    running = [app]  # the app running last: the failover's
    yield running
    running[-1].stop()


class Writer(threading.Thread):
    """One seeded writer in one Region, on orders and lines every writer shares."""

    def __init__(self, app: LocalApp, region: str, tag: str, seed: int, until: float):
        super().__init__(name=f"writer-{region}-{seed}")
        self.client = app.client if region == HOME else app.replicator.regions[region].client()
        self.table, self.tag, self.until = app.tables["MainTable"], tag, until
        self.rng, self.done = random.Random(seed), Counter()
        self.errors: list[str] = []

    def values(self) -> dict:
        n = self.rng.randrange(8)
        status = self.rng.choice(["OPEN", "OPEN", "SHIPPED", "CANCELLED"])
        return {"OrderId": f"{self.tag}-o{n}", "CustomerId": f"{self.tag}-c{n % 3}", "CreatedAt": CREATED,
                "Status": status, "Version": 1}  # fmt: skip

    def step(self) -> str:
        values, roll = self.values(), self.rng.random()
        product = f"{self.tag}-p{self.rng.randrange(3)}"
        line = values | {"LineNo": self.rng.randrange(1, 3), "ProductId": product,
                         "Quantity": self.rng.randrange(1, 9), "UnitPrice": Decimal("1.5")}  # fmt: skip
        if roll < 0.35:
            self.client.put_item(TableName=self.table, Item=marshal(ORDER_LINE.item(line)))
            return "put_line"
        if roll < 0.5:
            self.client.put_item(
                TableName=self.table, Item=marshal(ORDER.item(values | {"Total": Decimal(7)}))
            )
            return "put_order"
        if roll < 0.6:
            self.client.delete_item(TableName=self.table, Key=marshal(ORDER_LINE.key(line)))
            return "delete_line"
        try:  # evaluated against this Region's item: another Region's may differ
            self.client.update_item(
                TableName=self.table, Key=marshal(ORDER_LINE.key(line)),
                UpdateExpression="SET Quantity = Quantity + :one", ConditionExpression="Quantity < :most",
                ExpressionAttributeValues={":one": {"N": "1"}, ":most": {"N": "9"}},
            )  # fmt: skip
            return "increment"
        except self.client.exceptions.ConditionalCheckFailedException:
            return "increment_refused"

    def run(self) -> None:
        while time.monotonic() < self.until:
            try:
                self.done[self.step()] += 1
            except self.client.exceptions.ClientError as error:  # DynamoDB refused it: a bug here
                self.errors.append(repr(error))
                return
            except Exception:  # the Region is down: its clients get no answer
                self.done["unanswered"] += 1
                time.sleep(0.1)
            time.sleep(0.01)


def test_nothing_lost_counted_twice_or_stale_with_two_regions_racing_under_faults(chaos_app, engine):
    tag, began = uuid.uuid4().hex[:6], time.monotonic()
    home = chaos_app[0]
    writers = [
        Writer(home, region, tag, seed, began + WRITE_S)
        for seed, region in enumerate([HOME, WEST, HOME, WEST])
    ]
    for writer in writers:
        writer.start()
    time.sleep(max(0.0, began + FAILOVER_AT_S - time.monotonic()))
    chaos_app.append(failover(home, WEST, MODEL)[0])
    for writer in writers:
        writer.join()
    assert not [e for w in writers for e in w.errors]
    done = sum((w.done for w in writers), Counter())
    chaos_app = chaos_app[-1]
    print(dict(done), chaos_app.replicator.figures())  # shown with -s
    assert chaos_app.replicator.settle(60), chaos_app.replicator.figures()
    assert workloads.wait_caught_up(lambda: chaos_app.status()["mappings"], None, timeout_s=180, outbox=False)
    table = chaos_app.tables["MainTable"]
    assert chaos_app.replicator.home == WEST
    assert items(chaos_app.client, table, tag) == items(
        chaos_app.replicator.regions[HOME].client(), table, tag
    )
    verdict = workloads.verify(
        chaos_app.client, chaos_app.table_names, engine, MODEL, keep=lambda k: tag in str(k)
    )
    drift = {
        n: [k for k in d.missing + d.stale + d.extra if tag in str(k)] for n, d in verdict.to_sql.items()
    }
    assert not any(drift.values()), drift
    assert verdict.stored and verdict.aggregates_equal, verdict.aggregate_differences()
    figures = chaos_app.replicator.figures()
    assert figures["faults"] == {"partition": 1, "stop": 1}
    assert figures["local_writes"][WEST] > 50 and done["unanswered"] > 0  # west wrote, and was down a while
    injected = home.faults.counts + chaos_app.faults.counts  # before the failover and after
    # duplicates, and failures of other kinds (which ones, in the few seconds each app ran, varies)
    assert injected.get("duplicate", 0) > 0 and sum(injected.values()) > injected["duplicate"], injected
