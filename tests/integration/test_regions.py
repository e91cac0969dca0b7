"""The global tables' local twin (local/dynamodb/replication.py): the synthesized app with a replica
of each of its tables in us-west-2, a DynamoDB Local per Region, and the engine at home. Each
semantic the replicator claims is checked here against its AWS page (cited in the module)."""

from __future__ import annotations

import json
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync import workloads
from hybridsync.local.app import LocalApp
from hybridsync.local.dynamodb.replication import canonical
from hybridsync.local.dynamodb.ttl import Expiries, TtlSweeper
from hybridsync.local.process import tuned_assembly
from hybridsync.local.template import Assembly
from hybridsync.model.convert import marshal
from shop.model import MODEL, ORDER, ORDER_LINE

HOME, WEST = "us-east-1", "us-west-2"
CREATED = "2031-05-06T10:00:00.000Z"


def replicated(assembly_dir) -> Assembly:
    """The app with a us-west-2 replica of every table, as `-c replica_regions=us-west-2` renders it
    (its home replica last, streams with both images), its batching windows at 0. Also the chaos
    run's and bench/regions.py's."""
    assembly = Assembly.load(assembly_dir)
    for table in assembly.resources("AWS::DynamoDB::GlobalTable"):
        table.properties["Replicas"] = [{"Region": WEST}, *table.properties["Replicas"]]
        table.properties.setdefault("StreamSpecification", {"StreamViewType": "NEW_AND_OLD_IMAGES"})
    for mapping in assembly.resources("AWS::Lambda::EventSourceMapping"):
        mapping.properties["MaximumBatchingWindowInSeconds"] = 0
    return assembly


def replicated_on_disk(assembly_dir, target):
    """`replicated`, written as an assembly `hybridsync up --assembly` takes (assets linked)."""
    tuned_assembly(assembly_dir, target, MaximumBatchingWindowInSeconds=0)
    for path in target.glob("*.template.json"):
        template = json.loads(path.read_text())
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::DynamoDB::GlobalTable":
                properties = resource["Properties"]
                properties["Replicas"] = [{"Region": WEST}, *properties["Replicas"]]
                properties.setdefault("StreamSpecification", {"StreamViewType": "NEW_AND_OLD_IMAGES"})
        path.write_text(json.dumps(template))
    return target


@pytest.fixture(scope="module")
def twin(cloud_assembly, stack, tmp_path_factory):
    """The session's app, replicated, running in both Regions."""
    state, prefix = tmp_path_factory.mktemp("twin"), f"tw{uuid.uuid4().hex[:4]}"
    app = LocalApp(replicated(cloud_assembly), **stack.endpoints(), state_dir=state, prefix=prefix,
                   regions=[HOME, WEST])  # fmt: skip
    app.start(http_port=None, schedules=False)
    yield app
    app.stop()


def west(app):
    return app.replicator.regions[WEST].client()


def put(client, table, entity, values, **condition):
    """A plain PutItem, as any writer makes it (no version guard: the Regions race)."""
    client.put_item(TableName=table, Item=marshal(entity.item(values)), **condition)


def items(client, table, tag):
    """The table's items of this test, as DynamoDB compares them (`20.0` is `20`)."""
    found = client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True).build_full_result()
    return sorted(canonical(i) for i in found["Items"] if tag in str(i))


def caught_up(app):
    assert app.replicator.settle(60), app.replicator.figures()
    assert workloads.wait_caught_up(lambda: app.status()["mappings"], None, timeout_s=120, outbox=False)


def order(tag, n, **values):
    return {"OrderId": f"{tag}-o{n}", "CustomerId": f"{tag}-c{n % 3}", "CreatedAt": CREATED, "Status": "OPEN",
            "Version": 1, "Total": Decimal("10")} | values  # fmt: skip


def test_the_twin_refuses_regions_the_app_has_not(cloud_assembly, stack, tmp_path):
    assembly = Assembly.load(cloud_assembly)
    made = dict(stack.endpoints(), state_dir=tmp_path, prefix="refused")
    with pytest.raises(ValueError, match="no table of this app has a replica in us-west-2"):
        LocalApp(assembly, **made, regions=[HOME, WEST])
    with pytest.raises(ValueError, match=r"the first Region is home.*pinned to us-east-1"):
        LocalApp(assembly, **made, regions=[WEST, HOME])
    with pytest.raises(ValueError, match="one replica Region at least"):
        LocalApp(assembly, **made, regions=[HOME])


def test_a_write_in_either_region_reaches_the_other_and_the_rows(twin, engine):
    """Asynchronous replication both ways, "typically within a second"; the home stream carries
    the write made in us-west-2 as any other, and the engine writes its row back."""
    table, tag = twin.tables["MainTable"], uuid.uuid4().hex[:6]
    put(twin.client, table, ORDER, order(tag, 1))
    put(west(twin), table, ORDER, order(tag, 2))
    caught_up(twin)
    assert items(twin.client, table, tag) == items(west(twin), table, tag)
    assert len(items(twin.client, table, tag)) == 2
    figures = twin.replicator.figures()
    assert figures["latency"][f"{HOME}->{WEST}"]["p50_ms"] < 2000  # from when it was read: the lag, 0.3 s
    assert twin.status()["replication"]["local_writes"][WEST] >= 1
    verdict = workloads.verify(twin.client, twin.table_names, engine, MODEL)
    assert not [k for d in verdict.to_sql.values() for k in d.missing + d.stale + d.extra if tag in str(k)]


def test_writes_racing_in_two_regions_converge_and_postgresql_and_the_aggregates_follow(twin, engine):
    """The same order lines written at once in both Regions: every replica converges on one winner
    per item (last writer wins), the rows equal it, and the aggregates equal a recount of it: a
    version that lost is in none."""
    table, tag = twin.tables["MainTable"], uuid.uuid4().hex[:6]

    def writes(seed):
        rng = random.Random(seed)
        for _ in range(120):
            line = order(tag, rng.randrange(6), LineNo=1, ProductId=f"{tag}-p{rng.randrange(2)}",
                         Quantity=rng.randrange(1, 9), UnitPrice=Decimal("2.5"))  # fmt: skip
            del line["Total"]
            line["Status"] = rng.choice(["OPEN", "OPEN", "CANCELLED"])
            yield line, rng.random() < 0.1

    def writer(client, region):
        for line, deleting in writes(region):
            if deleting:
                client.delete_item(TableName=table, Key=marshal(ORDER_LINE.key(line)))
            else:
                put(client, table, ORDER_LINE, line)

    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(writer, twin.client, HOME), pool.submit(writer, west(twin), WEST)]:
            done.result()
    caught_up(twin)
    home_items = items(twin.client, table, tag)
    assert home_items == items(west(twin), table, tag)
    verdict = workloads.verify(twin.client, twin.table_names, engine, MODEL, keep=lambda k: tag in str(k))
    assert not [k for d in verdict.to_sql.values() for k in d.missing + d.stale + d.extra if tag in str(k)]
    assert verdict.stored and verdict.aggregates_equal, verdict.aggregate_differences()
    assert twin.replicator.figures()["replicated"][HOME] > 0


def test_a_conditional_write_evaluates_its_own_regions_item(twin):
    """Conditional writes evaluate the local replica's version (HowItWorks, "Conflict resolution"):
    an insert-if-absent succeeds in both Regions before either replicated; one winner remains."""
    table, tag = twin.tables["MainTable"], uuid.uuid4().hex[:6]
    first, second = order(tag, 1), order(tag, 1, Total=Decimal("99"))
    absent = {"ConditionExpression": "attribute_not_exists(PK)"}
    twin.replicator.partition(WEST)  # neither reaches the other before both are written
    try:
        put(twin.client, table, ORDER, first, **absent)
        put(west(twin), table, ORDER, second, **absent)  # not refused: us-west-2 has not the first
    finally:
        twin.replicator.partition(WEST, cut=False)
    assert twin.replicator.settle(30)
    (here,), (there,) = items(twin.client, table, tag), items(west(twin), table, tag)
    assert here == there and here in (canonical(marshal(ORDER.item(v))) for v in (first, second))


def test_the_later_of_two_writes_in_two_regions_wins_everywhere(twin):
    """Last writer wins ("the latest internal timestamp on a per-item basis", HowItWorks): home's
    write, then us-west-2's (cut off, so neither replicates first); once joined, both hold us-west-2's."""
    table, tag = twin.tables["MainTable"], uuid.uuid4().hex[:6]
    earlier, later = order(tag, 1, Total=Decimal("1")), order(tag, 1, Total=Decimal("2"))
    key = (table, canonical(marshal(ORDER.key(earlier))))
    twin.replicator.partition(WEST)
    try:
        put(twin.client, table, ORDER, earlier)
        deadline = time.monotonic() + 30
        while key not in twin.replicator.ledger.winners:  # stamped: the later write comes after it
            assert time.monotonic() < deadline
            time.sleep(0.05)
        put(west(twin), table, ORDER, later)
    finally:
        twin.replicator.partition(WEST, cut=False)
    assert twin.replicator.settle(30)
    (here,), (there,) = items(twin.client, table, tag), items(west(twin), table, tag)
    assert here == there == canonical(marshal(ORDER.item(later)))


def test_a_region_cut_off_keeps_its_writes_and_sends_them_once_joined(twin, engine):
    """A partitioned Region takes writes; they replicate once it is joined again, and it gets what
    it missed (HowItWorks, "Availability and durability")."""
    table, tag = twin.tables["MainTable"], uuid.uuid4().hex[:6]
    twin.replicator.partition(WEST)
    try:
        put(west(twin), table, ORDER, order(tag, 1))
        put(twin.client, table, ORDER, order(tag, 2))
        # six replication lags: the twin stamps a write when it reads it from the stream (a lag
        # after the write), so the cut-off write's measured latency is over a second, whatever its lag
        time.sleep(2.0)
        (only,) = items(twin.client, table, tag)
        assert f"{tag}-o2" in only
        assert len(items(west(twin), table, tag)) == 1
    finally:
        twin.replicator.partition(WEST, cut=False)
    caught_up(twin)
    assert len(items(twin.client, table, tag)) == 2 == len(items(west(twin), table, tag))
    # home's write reached us-west-2 late, and home's CloudWatch has it as DynamoDB measures it
    late = twin.metrics.values(
        "AWS/DynamoDB", "ReplicationLatency", {"TableName": table, "ReceivingRegion": WEST}, time.time() - 60
    )
    assert max(late) >= 1000, late
    assert "ReplicationLatency" in twin.cloudwatch.alarms.sources["AWS/DynamoDB"]


def test_a_region_stopped_and_started_again_catches_up(twin, engine):
    table, tag = twin.tables["MainTable"], uuid.uuid4().hex[:6]
    put(west(twin), table, ORDER, order(tag, 1))
    assert twin.replicator.settle(30)
    twin.replicator.stop_region(WEST)
    try:
        put(twin.client, table, ORDER, order(tag, 2))
        time.sleep(1.0)
        with pytest.raises(Exception, match="Could not connect"):  # its clients get no answer
            west(twin).describe_table(TableName=table)
    finally:
        twin.replicator.start_region(WEST)
    caught_up(twin)
    assert len(items(west(twin), table, tag)) == 2  # its data kept, and what it missed received


def test_ttl_deleting_in_another_region_keeps_the_row_as_at_home(twin, engine):
    """TTL deletes in any Region; in the Regions a deletion is replicated to, its records are "not
    identifiable" (ttl-expired-items.html), as the twin's carry no identity. The write-back still
    takes it as TTL's, by the expiry its old image holds: the row stays live."""
    table, tag = twin.tables["MainTable"], uuid.uuid4().hex[:6]
    put(twin.client, table, ORDER, order(tag, 1, Status="SHIPPED", ExpiresAt=int(time.time()) - 60))
    home = [(sweeper, sweeper.attribute) for sweeper in twin.sweepers]
    try:  # home's TTL must not fire first (every 15 s): us-west-2's deletion is the one under test
        for sweeper, _ in home:
            sweeper.attribute = "NotTheTtlAttribute"
        assert twin.replicator.settle(30)
        caught_up(twin)
        # TTL fires in us-west-2 (now, or it did on its own schedule)
        TtlSweeper(west(twin), table, *twin.replicator.expiring[table], Expiries()).sweep()
        assert items(west(twin), table, tag) == []
        assert twin.replicator.settle(30)
    finally:
        for sweeper, attribute in home:
            sweeper.attribute = attribute
    caught_up(twin)
    assert items(twin.client, table, tag) == []
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT deleted FROM orders WHERE order_id = :o"), {"o": f"{tag}-o1"}
        ).one()
    assert row.deleted is False
