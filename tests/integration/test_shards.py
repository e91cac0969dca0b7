"""Streams shaped as production's, over DynamoDB Local (hybridsync.local.dynamodb.models): what a reader of
the Streams API sees (AWS-shaped shard ids, ParentShardId on rollover and split, each item's
records in one lineage and in order parent before child), the two-readers limit, and retention:
records trimmed before a mapping read them go to its failure destination, their redrive finds
them gone, and `reconcile --repair` brings PostgreSQL back."""

from __future__ import annotations

import re
import time
import uuid
from decimal import Decimal

import pytest

from hybridsync import local
from hybridsync.local.app import LocalApp
from hybridsync.local.dynamodb.models import LimitExceeded, ShardView, Topology, TrimmedDataAccess
from hybridsync.local.dynamodb.responses import StreamsServer
from hybridsync.local.faults import FaultPlan
from hybridsync.local.template import Assembly
from hybridsync.model.convert import marshal
from hybridsync.runtime import aws, db
from hybridsync.sql import migrations
from hybridsync.streams.records import sequence
from hybridsync.sync import failed, reconcile
from shop.model import MODEL

SHARD_ID = re.compile(r"shardId-\d{20}-[0-9a-f]{8}")


@pytest.fixture
def table(stack):
    own = stack.with_tables(f"shd{uuid.uuid4().hex[:6]}")
    name = own.table_names["main"]
    return own, name, own.client().describe_table(TableName=name)["Table"]["LatestStreamArn"]


def put(client, table, pk, n):
    client.put_item(TableName=table, Item=marshal({"PK": pk, "SK": "ITEM", "N": n, "Entity": "Probe"}))


def read_all(streams, arn, shard_id):
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")
    records, iterator = [], iterator["ShardIterator"]
    while iterator:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        records += page["Records"]
        if not page["Records"] and "NextShardIterator" in page:
            break  # an open shard's end
        iterator = page.get("NextShardIterator")
    return records


def test_a_reader_sees_shards_roll_over_and_split_with_each_item_in_one_lineage(table):
    own, name, arn = table
    client = own.client()
    topology = Topology(own.client("dynamodbstreams"), arn, "PK", shards=4, lifetime_s=0.6)
    server = StreamsServer({arn: topology}, own.dynamodb_endpoint)
    try:
        for n in range(3):  # three versions of 12 items, a rollover or so between each
            for key in range(12):
                put(client, name, f"P#{key}", n)
            topology.pump()
            time.sleep(0.7)
        topology.split()
        for key in range(12):
            put(client, name, f"P#{key}", 3)
        streams = aws.client("dynamodbstreams", server.endpoint)
        shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        by_id = {s["ShardId"]: s for s in shards}
        assert all(SHARD_ID.fullmatch(s["ShardId"]) for s in shards)
        roots = [s for s in shards if "ParentShardId" not in s]
        assert len(roots) == 4 and topology.rollovers >= 4 and topology.splits == 1
        sealed = [s for s in shards if "EndingSequenceNumber" in s["SequenceNumberRange"]]
        assert len(sealed) == len(shards) - len(topology.open_shards())
        children = {}
        for s in shards:
            if "ParentShardId" in s:
                children.setdefault(s["ParentShardId"], []).append(s["ShardId"])
        assert any(len(c) == 2 for c in children.values())  # the split: one parent, two children

        def lineage(shard_id):  # root first
            chain = [shard_id]
            while "ParentShardId" in by_id[chain[0]]:
                chain.insert(0, by_id[chain[0]]["ParentShardId"])
            return chain

        seen: dict[str, list[tuple[str, int]]] = {}
        for s in shards:
            for record in read_all(streams, arn, s["ShardId"]):
                key = record["dynamodb"]["Keys"]["PK"]["S"]
                seen.setdefault(key, []).append((s["ShardId"], sequence(record)))
        assert len(seen) == 12 and all(len(v) == 4 for v in seen.values())
        for key, places in seen.items():
            # read parent before child, an item's records come in the order they were written
            leaf = max(places, key=lambda p: p[1])[0]
            order = {shard: n for n, shard in enumerate(lineage(leaf))}
            assert all(shard in order for shard, _ in places), key  # one lineage per partition key
            in_reading_order = sorted(places, key=lambda p: (order[p[0]], p[1]))
            assert [p[1] for p in in_reading_order] == sorted(p[1] for p in places)
    finally:
        server.close()


def test_a_third_reader_of_a_shard_is_refused(table):
    own, _, arn = table
    topology = Topology(own.client("dynamodbstreams"), arn, "PK", shards=2)
    shard = topology.open_shards()[0]
    view = ShardView(topology, shard)
    first, second, third = object(), object(), object()
    view.register(first, None, "TRIM_HORIZON")
    view.register(second, None, "TRIM_HORIZON")
    with pytest.raises(LimitExceeded, match="LimitExceededException"):
        view.register(third, None, "TRIM_HORIZON")
    view.release(first)
    view.register(third, None, "TRIM_HORIZON")  # a reader that left makes room


def test_records_past_the_retention_are_trimmed_for_readers_and_the_api(table):
    own, name, arn = table
    client = own.client()
    topology = Topology(own.client("dynamodbstreams"), arn, "PK", shards=1, retention_s=1.0)
    view = ShardView(topology, topology.open_shards()[0])
    reader = object()
    view.register(reader, None, "TRIM_HORIZON")
    put(client, name, "P#old", 1)
    topology.pump()
    first = topology.open_shards()[0].records[0]["dynamodb"]["SequenceNumber"]
    time.sleep(2.1)  # creation times are whole seconds
    put(client, name, "P#new", 1)
    with pytest.raises(TrimmedDataAccess) as trimmed:
        view.take(reader)
    assert [r["dynamodb"]["Keys"]["PK"]["S"] for r in trimmed.value.lost] == ["P#old"]
    taken, _ = view.take(reader)  # it goes on at the trim horizon
    assert [r["dynamodb"]["Keys"]["PK"]["S"] for r in taken] == ["P#new"]
    server = StreamsServer({arn: topology}, own.dynamodb_endpoint)
    try:
        streams = aws.client("dynamodbstreams", server.endpoint)
        shard = topology.open_shards()[0].id
        with pytest.raises(streams.exceptions.TrimmedDataAccessException):
            streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER",
                                       SequenceNumber=first)  # fmt: skip
    finally:
        server.close()


def test_a_failed_batch_outlives_the_stream_and_is_redriven_once_from_its_stored_records(
    cloud_assembly, stack, tmp_path
):
    """Every delivery fails until the records are older than the stream's 3 s retention: the batch goes
    to the failure bucket with its records, as Lambda stores an invocation record in an S3 destination
    (`aws/lambda/<mapping UUID>/<shard>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<uuid>`, Lambda developer guide,
    "Retain discarded batch records"; recorded: on_failure_s3_function_error). Once the stream has
    trimmed them, the redrive applies them from the stored payload, exactly once."""
    url, stop = local.start_postgres(tmp_path / "pg")  # its own: reconcile compares whole tables
    migrations.upgrade(url, "head")
    engine = db.create_engine(url)
    assembly = Assembly.load(cloud_assembly)
    endpoints = stack.endpoints() | {"database_url": url}
    app = LocalApp(assembly, **endpoints, state_dir=tmp_path, prefix=f"ret{uuid.uuid4().hex[:4]}",
                   faults=FaultPlan(fail_before=1.0), shards=2, retention_s=3)  # fmt: skip
    order_id = f"o-{uuid.uuid4().hex[:8]}"
    try:
        app.start(http_port=None, schedules=False)
        order = MODEL.entity("Order")
        values = {"OrderId": order_id, "CustomerId": "c-ret", "CreatedAt": "2026-11-23T10:00:00.000Z",
                  "Status": "OPEN", "Total": Decimal("12.50"), "Version": 1}  # fmt: skip
        app.client.put_item(TableName=app.table_names["main"], Item=marshal(order.item(values)))
        deadline = time.monotonic() + 30
        write_back = next(n for n in app.mapping_stats if n.startswith("WriteBack"))
        while app.mapping_stats[write_back].sent_to_failure_queue == 0 and time.monotonic() < deadline:
            time.sleep(0.25)
        assert app.mapping_stats[write_back].sent_to_failure_queue >= 1
        time.sleep(3.5)  # trimmed from the stream by now
        s3 = aws.client("s3", stack.services_endpoint)
        bucket = app.failure_environment()["FAILED_BATCHES_BUCKET"]
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="aws/lambda/")["Contents"]]
        mapping_id = app.lambda_api.uuid_of(write_back)  # type: ignore[union-attr]
        day, at = r"\d{4}/\d\d/\d\d", r"\d{4}-\d\d-\d\dT\d\d\.\d\d\.\d\d"
        pattern = rf"aws/lambda/{mapping_id}/[^/]+/{day}/{at}-[0-9a-f-]{{36}}"
        assert any(re.fullmatch(pattern, key) for key in keys), keys
        streams = aws.client("dynamodbstreams", app.streams_server.endpoint)  # type: ignore[union-attr]
        store = failed.BucketStore(s3, bucket)
        (batch,) = [b for b in store.pending() if b.consumer == "write_back"]
        assert batch.records and order_id in str(batch.records[0]["dynamodb"]["Keys"])
        with pytest.raises(failed.Gone):  # the stream alone could not redrive it any more
            failed.stream_records(streams, batch)
        assert order_id in str(
            reconcile.reconcile(app.client, app.table_names, engine, MODEL)["Order"].missing
        )
        done = failed.redrive([store], streams, client=app.client, tables=app.table_names, engine=engine,
                              model=MODEL)  # fmt: skip
        assert done.left == [] and done.batches >= 1 and done.applied >= 1
        assert reconcile.reconcile(app.client, app.table_names, engine, MODEL)["Order"].total == 0
        again = failed.redrive([store], streams, client=app.client, tables=app.table_names, engine=engine,
                               model=MODEL)  # fmt: skip
        assert again.batches == 0 and store.pending() == []  # removed once applied: redriven once
    finally:
        app.stop()
        engine.dispose()
        stop()
