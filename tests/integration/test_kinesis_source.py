"""Issue 44: Kinesis Data Streams for DynamoDB as a table's change source, on real components. The
changes are DynamoDB Local's real stream records, carried as AWS carries them through Kinesis (a
Lambda `aws:kinesis` record whose base64 `data` is the change, `ApproximateCreationDateTime` in
microseconds: kds.html), then delivered as Kinesis delivers them: a change twice (a producer's
retry: each copy its own sequence number), out of order, in any batches, replayed. The write-back
converges to the newest image and the aggregates stay exact."""

from __future__ import annotations

import base64
import json
import random
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridsync.model.convert import marshal
from hybridsync.model.errors import Rejected
from hybridsync.streams import kinesis
from hybridsync.streams.records import table_of_arn
from hybridsync.sync import writeback
from shop.model import MODEL
from tests.integration.test_aggregate import AGGREGATION, Shop, recount, stored
from tests.integration.test_write_back import clear, dead_letters, last_dead_letter_id, orders, snapshot

pytestmark = pytest.mark.integration
STREAM = "arn:aws:kinesis:us-east-1:000000000000:stream/hybridsync-main-changes"
T0 = 1_795_000_000_000_000  # microseconds


class Carrier:
    """DynamoDB's streaming destination, as kds.html describes it: each change put into a Kinesis
    stream as JSON; the Lambda records Kinesis then delivers."""

    def __init__(self, shards: int = 2):
        self.sequence = 49_600_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000  # 56 digits
        self.micros = T0
        self.shards = shards

    def data(self, record: dict) -> dict:
        """The change as DynamoDB puts it into Kinesis: no SequenceNumber, its time in microseconds."""
        self.micros += 7
        dynamodb = {
            k: v for k, v in record["dynamodb"].items() if k not in ("SequenceNumber", "StreamViewType")
        }
        return {"awsRegion": "us-east-1", "eventID": record["eventID"], "eventName": record["eventName"],
                "userIdentity": record.get("userIdentity"), "recordFormat": "application/json",
                "tableName": table_of_arn(record["eventSourceARN"]), "eventSource": "aws:dynamodb",
                "dynamodb": dynamodb | {"ApproximateCreationDateTime": self.micros}}  # fmt: skip

    def deliver(self, data: dict, shard: int = 0) -> dict:
        """One Kinesis record of `data` (a copy put again gets a sequence number of its own)."""
        self.sequence += 1000
        shard_id = f"shardId-{shard:012d}"
        return {"eventSource": "aws:kinesis", "eventVersion": "1.0", "eventName": "aws:kinesis:record",
                "eventID": f"{shard_id}:{self.sequence}", "eventSourceARN": STREAM, "awsRegion": "us-east-1",
                "invokeIdentityArn": "arn:aws:iam::000000000000:role/r",
                "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": "A" * 32,
                            "sequenceNumber": str(self.sequence), "approximateArrivalTimestamp": 1795000000.5,
                            "data": base64.b64encode(json.dumps(data).encode()).decode()}}  # fmt: skip


def as_kinesis(records: list[dict]) -> list[dict]:
    carrier = Carrier()
    return [carrier.deliver(carrier.data(r)) for r in records]


# --- the record ---------------------------------------------------------------------------------


def test_a_kinesis_record_is_read_as_the_change_it_carries(stream, workload):
    workload.order(workload.id("k"), Total=Decimal("3.00"))
    (raw,) = [r for r in stream.read() if r["eventName"] == "INSERT"][:1]
    carrier = Carrier()
    record = carrier.deliver(carrier.data(raw))
    change = kinesis.as_change(record)
    assert change["dynamodb"]["Keys"] == raw["dynamodb"]["Keys"]
    assert change["dynamodb"]["NewImage"] == raw["dynamodb"]["NewImage"]
    assert (
        change["dynamodb"]["SequenceNumber"] == record["kinesis"]["sequenceNumber"]
    )  # its place in the shard
    assert change["eventSourceARN"].endswith(f":table/{table_of_arn(raw['eventSourceARN'])}")
    assert kinesis.position(change) == kinesis.KINESIS_POSITIONS + carrier.micros
    # milliseconds (MILLISECOND precision) and seconds read as microseconds
    assert kinesis.microseconds(1_795_000_000_123) == 1_795_000_000_123_000
    assert kinesis.microseconds(1_795_000_000) == 1_795_000_000_000_000
    assert kinesis.as_change(raw) is raw  # a DynamoDB stream record stays as it is


@pytest.mark.parametrize("data", [b"not json", b'{"eventSource": "aws:dynamodb"}', b'{"hello": 1}'])
def test_a_kinesis_record_that_carries_no_change_is_refused(data):
    record = Carrier().deliver({})
    record["kinesis"]["data"] = base64.b64encode(data).decode()
    with pytest.raises(Rejected, match=r"not a DynamoDB change|not JSON"):
        kinesis.as_change(record)


def test_another_producers_record_is_a_dead_letter_and_the_rest_lands(engine, workload, stream, truth):
    oid = workload.id("k")
    workload.order(oid, Total=Decimal("4.00"))
    records = as_kinesis(stream.read())
    stray = Carrier().deliver({})
    stray["kinesis"]["data"] = base64.b64encode(b'{"clicks": 3}').decode()
    before = last_dead_letter_id(engine)
    outcome = writeback.write_back([stray, *records], engine, MODEL, truth=truth)
    assert [d.reason for d in outcome.rejected] == [
        "kinesis record whose data is not a DynamoDB change (eventSource aws:dynamodb)"
    ]
    assert orders(engine, oid)[oid].total == Decimal("4.00")
    assert [letter.source for letter in dead_letters(engine, before)] == ["write_back"]


# --- write-back ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def history(stack, dynamodb):
    """Orders created, changed and deleted by the engine's writer and by a plain one, as Kinesis
    records in the order the changes were made."""
    from hybridsync.local.dynamodb import streams
    from tests.integration.conftest import Workload

    workload = Workload(stack)
    arn = dynamodb.describe_table(TableName=stack.table_names["main"])["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
    reader.read()
    p = workload.prefix
    table = stack.table_names["main"]
    for round_ in range(3):
        for n in range(3):
            order = workload.order(f"{p}-o{n}", Total=Decimal(round_ * 10 + n))
        plain = MODEL.entity("Order").item({"OrderId": f"{p}-plain", "CustomerId": "c", "Status": "OPEN",
                                            "Total": Decimal(round_), "CreatedAt": "2026-11-22T07:00:00.000Z",
                                            "Version": 1})  # fmt: skip
        plain.pop(MODEL.names.entity), plain.pop(MODEL.names.version)
        dynamodb.put_item(TableName=table, Item=marshal(plain))  # no version: ordered by its time
        if round_ < 2:
            workload.delete("Order", **order)
    return p, as_kinesis(reader.read())


@pytest.fixture(scope="module")
def clean_pass(history, engine, truth):
    prefix, records = history
    clear(engine, prefix)
    for record in records:  # one change per batch, in the order they were made
        writeback.write_back([record], engine, MODEL, truth=truth)
    expected = snapshot(engine, prefix)
    assert len(expected["orders"]) == 4
    return expected


def delivered(records: list[dict], rng: random.Random) -> list[dict]:
    """As Kinesis may deliver them: some changes twice (the copy later, its own sequence number,
    maybe on another shard) and the whole out of order."""
    carrier = Carrier()
    out = list(records)
    for record in records:
        if rng.random() < 0.4:
            data = json.loads(base64.b64decode(record["kinesis"]["data"]))
            out.append(carrier.deliver(data, shard=rng.randrange(2)))
    rng.shuffle(out)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32), cuts=st.lists(st.integers(1, 6), min_size=1, max_size=12))
def test_duplicated_and_reordered_changes_converge_to_the_newest_image(
    history, clean_pass, engine, truth, seed, cuts
):
    prefix, records = history
    clear(engine, prefix)
    before = last_dead_letter_id(engine)
    rng = random.Random(seed)
    deliveries = delivered(records, rng)
    start = 0
    for size in [*cuts, len(deliveries)]:
        batch = deliveries[start : start + size]
        writeback.write_back(batch, engine, MODEL, truth=truth)
        if rng.random() < 0.3:  # a retried batch, late
            writeback.write_back(batch, engine, MODEL, truth=truth)
        start += size
    assert snapshot(engine, prefix) == clean_pass
    assert dead_letters(engine, before) == []


def test_two_changes_of_one_item_at_one_microsecond_are_settled_from_the_item(
    stack, dynamodb, engine, workload, stream, truth
):
    """The tie rule: a position equal to the row's and other content cannot be ordered by time,
    so the item is read, whichever of the two came last."""
    oid = workload.id("tie")
    workload.order(oid, Total=Decimal("1.00"))
    workload.order(oid, Total=Decimal("2.00"))
    carrier = Carrier()
    first, second = (carrier.data(r) for r in stream.read())
    second["dynamodb"]["ApproximateCreationDateTime"] = first["dynamodb"]["ApproximateCreationDateTime"]
    outcome = writeback.write_back([carrier.deliver(second)], engine, MODEL, truth=truth)
    assert orders(engine, oid)[oid].total == Decimal("2.00") and outcome.read == 0
    outcome = writeback.write_back([carrier.deliver(first)], engine, MODEL, truth=truth)  # the tie, late
    assert orders(engine, oid)[oid].total == Decimal("2.00") and outcome.read == 1  # settled
    outcome = writeback.write_back([carrier.deliver(second)], engine, MODEL, truth=truth)  # a duplicate
    assert outcome.read == 0  # the row holds it already: no read


def test_a_row_written_from_the_other_source_is_settled_not_compared(
    stack, dynamodb, engine, workload, stream, truth
):
    """Switching a table's change source: DynamoDB Streams positions and Kinesis ones never
    compare; the first record of the new source is settled from the item, and takes its position."""
    oid = workload.id("switch")
    workload.order(oid, Total=Decimal("1.00"))
    streamed = stream.read()
    writeback.write_back(streamed, engine, MODEL, truth=truth)
    workload.order(oid, Total=Decimal("2.00"))
    carried = as_kinesis(stream.read())
    outcome = writeback.write_back(carried, engine, MODEL, truth=truth)
    assert (orders(engine, oid)[oid].total, outcome.read) == (Decimal("2.00"), 1)
    assert writeback.write_back(carried, engine, MODEL, truth=truth).read == 0  # a replay: same source now
    workload.order(oid, Total=Decimal("3.00"))  # ... and back to the DynamoDB stream
    outcome = writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert (orders(engine, oid)[oid].total, outcome.read) == (Decimal("3.00"), 1)
    workload.order(oid, Total=Decimal("4.00"))  # the row took the stream's position: ordered again
    outcome = writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert (orders(engine, oid)[oid].total, outcome.read) == (Decimal("4.00"), 0)


# --- aggregation --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def aggregates(stack):
    """Aggregates in tables of their own, without a stream (see test_aggregate's `target`)."""
    return stack.with_tables("kagg", streams=False)


def test_aggregates_count_each_change_once_however_kinesis_delivers_it(
    stack, dynamodb, aggregates, workload, stream
):
    """Each change put twice (the copy on the other shard) and the puts in another order than the
    changes were made; each shard delivered in order, in batches, each batch retried: the
    aggregates equal a recount of the items. A change is known across its copies by its item,
    ApproximateCreationDateTime and images (kds.html), not by its Kinesis sequence number."""
    shop, agg = Shop(workload), aggregates.client("dynamodb")
    for order in range(6):
        shop.line(f"o{order}", 1, product=order % 2, quantity=order + 1)
        shop.line(f"o{order}", 1, product=order % 2, quantity=order + 2)  # an edit: a MODIFY
    shop.line("o0", 1, product=0, quantity=1, Status="CANCELLED")
    carrier = Carrier()
    changes = [carrier.data(r) for r in stream.read()]
    puts = [(change, 0) for change in changes] + [(change, 1) for change in changes]
    random.Random(44).shuffle(puts)
    shards: dict[int, list[dict]] = {0: [], 1: []}
    for change, shard in puts:
        shards[shard].append(carrier.deliver(change, shard))
    out = aggregates.table_names["main"]
    for start in range(0, len(changes) * 2, 4):
        for shard, records in shards.items():
            batch = records[start : start + 4]
            if batch:
                first = AGGREGATION.aggregate(batch, agg, out, f"shardId-{shard:012d}")
                assert first.rejected == []
                assert AGGREGATION.aggregate(batch, agg, out, f"shardId-{shard:012d}").applied == 0  # retried
    assert stored(agg, out, shop.tag, shop) == recount(dynamodb, stack.table_names["main"], shop.tag)


# --- failed batches ------------------------------------------------------------------------------


def test_failed_kinesis_batches_are_redriven_from_the_bucket_once(
    stack, dynamodb, engine, workload, stream, truth, aggregates
):
    """What a Kinesis mapping gave up on lands in the failure bucket (`KinesisBatchInfo`, the
    records as `payload`: recorded). Redriven, each consumer applies it once: the write-back's row
    is the item, the aggregates equal a recount, and a second redrive (a copy of the batch) changes
    nothing."""
    from hybridsync.local.awslambda.mappings import destination, failure_record
    from hybridsync.local.kinesis.models import KINESIS
    from hybridsync.sync import failed

    oid = workload.id("redrive")
    workload.order(oid, Total=Decimal("5.00"))
    orders_batch = as_kinesis(stream.read())
    shop, agg = Shop(workload), aggregates.client("dynamodb")
    shop.line("o1", 1, product=1, quantity=3)
    lines_batch = as_kinesis(stream.read())
    s3 = stack.client("s3")
    bucket = f"kin-redrive-{shop.tag}"
    s3.create_bucket(Bucket=bucket)
    for name, batch in (("WriteBack", orders_batch), ("Aggregate", lines_batch)):
        send = destination(f"arn:aws:s3:::{bucket}", stack.client, f"{name}-mapping")
        for _ in range(2):  # the batch given up twice (a copy): applied once
            info = failure_record(batch, stream_arn=STREAM, shard="shardId-000000000000", invokes=11,
                                  function_arn=f"arn:aws:lambda:us-east-1:0:function:HybridSync-{name}",
                                  condition="RetryAttemptsExhausted", shape=KINESIS)  # fmt: skip
            send(info, batch)
    store = failed.BucketStore(s3, bucket)
    assert sorted(b.consumer for b in store.pending()) == [
        "aggregate",
        "aggregate",
        "write_back",
        "write_back",
    ]
    tables = {"main": aggregates.table_names["main"]}
    for consumer, client, names in (("write_back", dynamodb, stack.table_names), ("aggregate", agg, tables)):
        batches = [b for b in store.pending() if b.consumer == consumer]
        first = failed.apply(batches[0], batches[0].records or [], client=client, tables=names, engine=engine,
                             model=MODEL)  # fmt: skip
        again = failed.apply(batches[1], batches[1].records or [], client=client, tables=names, engine=engine,
                             model=MODEL)  # fmt: skip
        assert (first > 0, again) == (True, 0), consumer
    assert orders(engine, oid)[oid].total == Decimal("5.00")
    assert stored(agg, tables["main"], shop.tag, shop) == recount(
        dynamodb, stack.table_names["main"], shop.tag
    )


def test_a_poison_change_put_twice_is_one_dead_letter_of_each_consumer_naming_its_item(
    stack, dynamodb, engine, workload, stream, truth, aggregates
):
    """Its copies have sequence numbers of their own (and maybe eventIDs); the dead letter is the
    change's, stored once, and holds the change (its keys and images), not the Kinesis envelope."""
    shop, agg = Shop(workload), aggregates.client("dynamodb")
    shop.line("o1", 1, product=1, quantity=2)
    carrier = Carrier()
    (change,) = [carrier.data(r) for r in stream.read()]
    change["dynamodb"]["NewImage"]["Quantity"] = {"S": "two"}
    # AWS does not say a copy keeps the change's eventID: this one has another
    first, copy_ = carrier.deliver(change, 0), carrier.deliver(change | {"eventID": "another"}, 1)
    before = last_dead_letter_id(engine)
    writeback.write_back([first], engine, MODEL, truth=truth)
    writeback.write_back([copy_], engine, MODEL, truth=truth)

    def store(letters):
        from hybridsync.sql import deadletters

        with engine.begin() as conn:
            deadletters.store(conn, "aggregate", letters)

    out = aggregates.table_names["main"]
    AGGREGATION.aggregate([first], agg, out, "shardId-000000000000", dead_letter=store)
    AGGREGATION.aggregate([copy_], agg, out, "shardId-000000000001", dead_letter=store)
    letters = dead_letters(engine, before)
    assert sorted(letter.source for letter in letters) == ["aggregate", "write_back"]
    for letter in letters:
        assert letter.record["dynamodb"]["Keys"] == change["dynamodb"]["Keys"]
        assert "Quantity" in letter.reason
