"""Aggregates rebuilt on real components: items older than the stream (never counted), records the
aggregation counted, records written during the rebuild and not yet counted; after the rebuild and
the aggregation's resumption, every aggregate equals a recount (counted once, never twice)."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from hybridsync.dynamodb import store
from hybridsync.dynamodb.scans import Pacer, Scanner
from hybridsync.local.dynamodb import streams
from hybridsync.model.convert import marshal
from hybridsync.sync import aggregate, jobs, rebuild
from hybridsync.sync.jobs import JobStore, Services
from shop.model import MODEL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def own(stack):
    return stack.with_tables(f"rb{uuid.uuid4().hex[:4]}")


def line(client, table, order, n, product, quantity, *, status="OPEN", version=1):
    values = {
        "OrderId": order,
        "CustomerId": "c-rb",
        "CreatedAt": "2026-11-22T10:00:00.000Z",
        "Status": status,
        "LineNo": n,
        "ProductId": product,
        "Quantity": quantity,
        "UnitPrice": Decimal("2.50"),
        "Version": version,
    }
    assert store.put(client, table, MODEL.entity("OrderLine"), values)


def stored_equals_recount(client, table):
    aggregation = aggregate.Aggregation(MODEL)
    items = list(Scanner(client, table, consistent=True).items())
    return aggregation.stored(items) == aggregation.recount(items)


def test_a_rebuild_counts_every_record_once_with_writes_going(own, engine, monkeypatch):
    client, table = own.client(), own.table_names["main"]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(own.client("dynamodbstreams"), arn, start="TRIM_HORIZON")
    aggregation = aggregate.Aggregation(MODEL)
    for n in range(6):  # older than the stream: their records are gone (read and dropped)
        line(client, table, "o-old", n, f"p{n % 2}", n + 1)
    reader.read()
    line(client, table, "o-1", 1, "p0", 3)  # counted by the aggregation before the rebuild
    aggregation.aggregate(reader.read(), client, table, reader.shard)
    line(client, table, "o-2", 1, "p1", 4)  # written before the rebuild, not yet counted
    assert not stored_equals_recount(client, table)

    def write_meanwhile():  # the app writes as the scan starts: a change, a new line, a cancel
        line(client, table, "o-old", 0, "p0", 9, version=2)
        line(client, table, "o-3", 1, "p1", 5)
        line(client, table, "o-1", 1, "p0", 3, status="CANCELLED", version=2)

    class Racing(Scanner):
        def items(self, **extra):
            write_meanwhile()
            yield from super().items(**extra)

    monkeypatch.setattr(rebuild, "Scanner", Racing)
    monkeypatch.setattr(rebuild.time, "sleep", lambda _: None)
    services = Services(client, engine, MODEL, dict(own.table_names), own.client, Pacer(None))
    job = jobs.start(services, "rebuild", {"segments": 2, "no_pause": True})
    outcome = jobs.run(JobStore(client, MODEL, services.tables), job, jobs.in_process(services))
    assert outcome.undone == 0 and outcome.counts.written > 0
    # resumed: the aggregation counts what came after the watermark, the rebuild's writes included
    aggregation.aggregate(reader.read(), client, table, reader.shard)
    assert stored_equals_recount(client, table)
    # a failed batch from before the rebuild is never redriven into it
    before = aggregation.redrive(
        [
            r
            for r in streams.StreamReader(own.client("dynamodbstreams"), arn, start="TRIM_HORIZON").read()
            if r["dynamodb"].get("NewImage", {}).get("OrderId", {}).get("S") == "o-1"
        ][:1],
        client,
        table,
        reader.shard,
    )
    assert before.applied == 0 and stored_equals_recount(client, table)


def test_a_rebuild_counts_an_item_fixed_after_the_aggregation_refused_it(stack, engine, monkeypatch):
    """A line another writer put with a quantity that is text is a dead letter of the aggregation,
    and so is its fix in place (its old image is still the bad one). The watermark passes both, so
    the rebuild counts the fixed line from the table instead of waiting for records the stream will
    never apply again."""
    own = stack.with_tables(f"rp{uuid.uuid4().hex[:4]}")
    client, table = own.client(), own.table_names["main"]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(own.client("dynamodbstreams"), arn, start="TRIM_HORIZON")
    aggregation, letters = aggregate.Aggregation(MODEL), []
    line(client, table, "o-1", 1, "p0", 3)
    good = {
        "OrderId": "o-2",
        "CustomerId": "c-rb",
        "CreatedAt": "2026-11-22T10:00:00.000Z",
        "Version": 1,
        "Status": "OPEN",
        "LineNo": 1,
        "ProductId": "p1",
        "Quantity": 3,
        "UnitPrice": Decimal("2.50"),
    }
    bad = MODEL.entity("OrderLine").item(good) | {"Quantity": "three"}  # another writer's mistake,
    plain = {k: v for k, v in bad.items() if k not in ("Entity", "Version")}  # put as plain SDK writers do
    client.put_item(TableName=table, Item=marshal(plain))
    aggregation.aggregate(reader.read(), client, table, reader.shard, dead_letter=letters.extend)
    line(client, table, "o-2", 1, "p1", 3, version=2)  # fixed in place: its old image is the bad one
    aggregation.aggregate(reader.read(), client, table, reader.shard, dead_letter=letters.extend)
    assert len(letters) == 2 and not stored_equals_recount(client, table)

    monkeypatch.setattr(rebuild.time, "sleep", lambda _: None)
    services = Services(client, engine, MODEL, dict(own.table_names), own.client, Pacer(None))
    job = jobs.start(services, "rebuild", {"no_pause": True})
    outcome = jobs.run(JobStore(client, MODEL, services.tables), job, jobs.in_process(services))
    assert outcome.undone == 0 and outcome.counts.written > 0
    aggregation.aggregate(reader.read(), client, table, reader.shard)  # resumed: nothing after it
    assert stored_equals_recount(client, table)


def test_a_rebuild_of_a_stream_no_cursor_read_counts_to_its_last_record(stack, engine, monkeypatch):
    """A new home's replica after a failover: no cursor, so no watermark. In AWS its trim horizon
    moves on (records over 24 hours old), so the aggregation, started after the rebuild, may not find
    the records the rebuild read first. The rebuild counts as of the last record it read and starts
    each shard's cursor there: the aggregation counts only what came after, wherever it starts."""
    own = stack.with_tables(f"rf{uuid.uuid4().hex[:4]}")
    client, table = own.client(), own.table_names["main"]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    line(client, table, "o-1", 1, "p0", 3)
    line(client, table, "o-1", 2, "p1", 4)
    line(client, table, "o-1", 1, "p0", 7, version=2)
    line(client, table, "o-2", 1, "p1", 2)
    line(client, table, "o-2", 1, "p1", 2, status="CANCELLED", version=2)
    plain = {k: v for k, v in MODEL.entity("OrderLine").item(
        {"OrderId": "o-5", "CustomerId": "c-rb", "CreatedAt": "2026-11-22T10:00:00.000Z", "Status": "OPEN",
         "LineNo": 1, "ProductId": "p0", "Quantity": 2, "UnitPrice": Decimal("2.50"), "Version": 1}
    ).items() if k not in ("Entity", "Version")}  # fmt: skip
    client.put_item(TableName=table, Item=marshal(plain))  # a writer that is not ours: no tag, no version
    key = {k: plain[k] for k in ("PK", "SK")}
    client.update_item(TableName=table, Key=marshal(key), UpdateExpression="SET Quantity = :q",
                       ExpressionAttributeValues=marshal({":q": 6}))  # fmt: skip

    class Racing(Scanner):  # the app writes as the scan starts
        def items(self, **extra):
            line(client, table, "o-3", 1, "p0", 5)
            yield from super().items(**extra)

    monkeypatch.setattr(rebuild, "Scanner", Racing)
    monkeypatch.setattr(rebuild.time, "sleep", lambda _: None)
    services = Services(client, engine, MODEL, dict(own.table_names), own.client, Pacer(None))
    job = jobs.start(services, "rebuild", {"no_pause": True})
    assert jobs.run(JobStore(client, MODEL, services.tables), job, jobs.in_process(services)).undone == 0
    assert stored_equals_recount(client, table)
    line(client, table, "o-4", 1, "p1", 6)  # after the rebuild: the aggregation's to count
    records = streams.StreamReader(own.client("dynamodbstreams"), arn, start="TRIM_HORIZON").read()
    aggregation = aggregate.Aggregation(MODEL)
    shard = streams.StreamReader(own.client("dynamodbstreams"), arn, start="TRIM_HORIZON").shard
    # the aggregation starts at a trim horizon that moved past the first three records
    outcome = aggregation.aggregate(records[3:], client, table, shard)
    assert outcome.applied == 1 and stored_equals_recount(client, table)
    # and where it did not move, what the rebuild counted comes as duplicates
    assert aggregation.aggregate(records, client, table, shard).applied == 0
    assert stored_equals_recount(client, table)


def test_a_journal_left_half_applied_is_finished_before_the_rebuild_reads_the_aggregates(
    stack, engine, monkeypatch
):
    """A batch stopped between its journal and applying it (its function timed out): the rebuild
    finishes the journal before its scan, so the stored aggregates it compares with include it, even
    where they had drifted to what the rebuild computes (after the scan, the journal's delta would
    stay in an aggregate the rebuild saw no reason to write)."""
    own = stack.with_tables(f"rj{uuid.uuid4().hex[:4]}")
    client, table = own.client(), own.table_names["main"]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(own.client("dynamodbstreams"), arn, start="TRIM_HORIZON")
    aggregation = aggregate.Aggregation(MODEL)
    line(client, table, "o-1", 1, "p0", 3)
    aggregation.aggregate(reader.read(), client, table, reader.shard)
    line(client, table, "o-1", 2, "p0", 4)

    def stopped(*_, **__):
        raise TimeoutError("the function's time ran out")

    with monkeypatch.context() as patch:
        patch.setattr(aggregate.Aggregation, "_apply_journal", stopped)
        with pytest.raises(TimeoutError):
            aggregation.aggregate(reader.read(), client, table, reader.shard)
    # the aggregates set by hand to a recount, the journal still pending on top of them
    items = list(Scanner(client, table, consistent=True).items())
    for key, values in aggregation.recount(items).items():
        update = aggregation._update(table, key[0], tuple(key[1:]), values, absolute=True)
        client.transact_write_items(TransactItems=[update])
    assert stored_equals_recount(client, table)
    monkeypatch.setattr(rebuild.time, "sleep", lambda _: None)
    services = Services(client, engine, MODEL, dict(own.table_names), own.client, Pacer(None))
    job = jobs.start(services, "rebuild", {"no_pause": True})
    assert jobs.run(JobStore(client, MODEL, services.tables), job, jobs.in_process(services)).undone == 0
    assert stored_equals_recount(client, table)


def test_a_fresh_rebuild_killed_after_starting_its_cursors_is_run_again_and_counts_once(
    stack, engine, monkeypatch
):
    """Killed between starting the cursors and writing the aggregates: run again, it counts as of
    those cursors (no longer a fresh stream), and the aggregation after it counts nothing twice."""
    own = stack.with_tables(f"rk{uuid.uuid4().hex[:4]}")
    client, table = own.client(), own.table_names["main"]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    line(client, table, "o-1", 1, "p0", 3)
    line(client, table, "o-2", 1, "p1", 4)
    monkeypatch.setattr(rebuild.time, "sleep", lambda _: None)
    services = Services(client, engine, MODEL, dict(own.table_names), own.client, Pacer(None))
    jobs_store = JobStore(client, MODEL, services.tables)

    def killed(*_, **__):
        raise TimeoutError("the function's time ran out")

    with monkeypatch.context() as patch:
        patch.setattr(rebuild, "_write", killed)
        with pytest.raises(TimeoutError):
            rebuild.rebuild(services, aggregate.Aggregation(MODEL), table, {a.name for a in MODEL.aggregates})
    line(client, table, "o-3", 1, "p0", 5)  # written while nothing ran
    job = jobs.start(services, "rebuild", {"no_pause": True})
    assert jobs.run(jobs_store, job, jobs.in_process(services)).undone == 0
    # resumed from the trim horizon: o-3, after the cursors, is the aggregation's; the rest skipped
    reader = streams.StreamReader(own.client("dynamodbstreams"), arn, start="TRIM_HORIZON")
    records, aggregation = reader.read(), aggregate.Aggregation(MODEL)
    assert aggregation.aggregate(records, client, table, reader.shard).applied == 1
    assert stored_equals_recount(client, table)
    assert aggregation.aggregate(records, client, table, reader.shard).applied == 0  # a replay
    assert stored_equals_recount(client, table)
