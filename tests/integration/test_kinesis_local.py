"""Kinesis Data Streams for DynamoDB, locally (local/kinesis/models.py): a table's changes pumped into a
Kinesis stream of the session's moto server, and read by a Kinesis mapping's poller."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections import Counter

import pytest

from hybridsync.local.awslambda import mappings
from hybridsync.local.awslambda.functions import FunctionError
from hybridsync.local.awslambda.mappings import Checkpoints, Settings, ShardPoller
from hybridsync.local.kinesis.models import KinesisShardReader, Pump, seeded
from hybridsync.streams import filters
from shop.model import MODEL
from tests.integration.test_mappings import Scripted, put_scores

ROLE = "arn:aws:iam::123456789012:role/f"


@pytest.fixture
def source(stack):
    """A table of its own and a one-shard Kinesis stream (one shard: the order is observable)."""
    client, kinesis = stack.client(), stack.client("kinesis")
    name = f"kin-{uuid.uuid4().hex[:8]}"
    client.create_table(**MODEL.table("main").create_request(name))
    kinesis.create_stream(StreamName=name, ShardCount=1)
    arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    return client, name, client.describe_table(TableName=name)["Table"]["LatestStreamArn"], arn


def pump(stack, source, tmp_path, **faults):
    made = Pump(stack.client("dynamodbstreams"), stack.client("kinesis"), stream_arn=source[2],
                table=source[1], kinesis_arn=source[3], checkpoints=Checkpoints(tmp_path / "pump.json"),
                faults=seeded(7, source[1], faults, lambda kind: None) if faults else None)  # fmt: skip
    made.hold_s = 0.0  # what is held goes out at the pass's end
    return made


def poller(stack, source, function, tmp_path, on_failure=None, **settings):
    kinesis = stack.client("kinesis")
    (shard,) = kinesis.list_shards(StreamName=source[1])["Shards"]
    reader = KinesisShardReader(kinesis, source[3], shard["ShardId"], role=ROLE)
    return ShardPoller(Settings(name="k", **settings), function, reader, source[3], shard["ShardId"],
                       Checkpoints(tmp_path / "positions.json"), on_failure, "arn:aws:lambda:f")  # fmt: skip


def changes(function):
    """The DynamoDB changes the function was given, decoded from the Kinesis records' data."""
    return [json.loads(base64.b64decode(r["kinesis"]["data"])) for e in function.events for r in e["Records"]]


def test_a_change_reaches_the_function_in_aws_kinesis_shape(stack, source, tmp_path):
    put_scores(source[0], source[1], ["p1"])
    pump(stack, source, tmp_path).pump()
    function = Scripted()
    p = poller(stack, source, function, tmp_path)
    p.read()
    p.deliver_due(draining=True)
    (record,) = function.events[0]["Records"]
    assert {k: record[k] for k in ("eventName", "eventSource", "eventSourceARN", "eventVersion",
                                   "invokeIdentityArn")} == {
        "eventName": "aws:kinesis:record", "eventSource": "aws:kinesis", "eventSourceARN": source[3],
        "eventVersion": "1.0", "invokeIdentityArn": ROLE}  # fmt: skip
    kinesis = record["kinesis"]
    assert re.fullmatch(r"49\d{54}", kinesis["sequenceNumber"])
    assert record["eventID"] == f"shardId-000000000000:{kinesis['sequenceNumber']}"
    assert re.fullmatch(r"[0-9A-F]{32}", kinesis["partitionKey"]) and kinesis["kinesisSchemaVersion"] == "1.0"
    assert isinstance(kinesis["approximateArrivalTimestamp"], float)
    (change,) = changes(function)
    assert set(change) == {"awsRegion", "eventID", "eventName", "userIdentity", "recordFormat", "tableName",
                           "dynamodb", "eventSource"}  # fmt: skip
    assert (change["eventName"], change["recordFormat"], change["tableName"], change["userIdentity"]) == (
        "INSERT", "application/json", source[1], None)  # fmt: skip
    assert uuid.UUID(change["eventID"]) and change["eventSource"] == "aws:dynamodb"
    data = change["dynamodb"]
    assert set(data) == {"ApproximateCreationDateTime", "Keys", "NewImage", "SizeBytes"}
    assert re.fullmatch(r"\d{16}", str(data["ApproximateCreationDateTime"]))  # microseconds
    assert data["NewImage"]["PlayerId"] == {"S": "p1"}


def test_filters_see_the_decoded_data(stack, source, tmp_path):
    put_scores(source[0], source[1], ["a", "b"])
    put_scores(source[0], source[1], ["a"], version=2)
    pump(stack, source, tmp_path).pump()
    function = Scripted()
    pattern = filters.parse(json.dumps({"data": {"eventName": ["MODIFY"]}}))
    p = poller(stack, source, function, tmp_path, patterns=(pattern,))
    p.read()
    p.deliver_due(draining=True)
    assert [c["eventName"] for c in changes(function)] == ["MODIFY"]
    assert p.stats.filtered == 2


def test_a_failing_record_goes_to_s3_with_kinesis_batch_info(stack, source, tmp_path):
    put_scores(source[0], source[1], ["x"])
    pump(stack, source, tmp_path).pump()
    s3 = stack.client("s3")
    bucket = f"kin-failed-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    send = mappings.destination(f"arn:aws:s3:::{bucket}", stack.client, "mapping-id")
    function = Scripted(lambda event: FunctionError("Unhandled", "boom"))
    p = poller(stack, source, function, tmp_path, on_failure=send, max_retries=0)
    p.read()
    p.deliver_due(draining=True)
    (listed,) = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert listed["Key"].startswith("aws/lambda/mapping-id/shardId-000000000000/")
    body = json.loads(s3.get_object(Bucket=bucket, Key=listed["Key"])["Body"].read())
    info = body["KinesisBatchInfo"]
    (record,) = body["payload"]["Records"]
    assert "DDBStreamBatchInfo" not in body
    assert body["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == record["kinesis"]["sequenceNumber"]
    assert (info["batchSize"], info["streamArn"], info["shardId"]) == (1, source[3], "shardId-000000000000")


def test_duplicate_put_puts_each_change_twice_the_copy_later(stack, source, tmp_path):
    put_scores(source[0], source[1], ["a", "b", "c"])
    pumped = pump(stack, source, tmp_path, duplicate_put=1.0)
    pumped.pump()
    function = Scripted()
    p = poller(stack, source, function, tmp_path)
    p.read()
    p.deliver_due(draining=True)
    players = [c["dynamodb"]["Keys"]["PK"]["S"][-1] for c in changes(function)]
    ids = Counter(c["eventID"] for c in changes(function))
    assert len(ids) == 3 and set(ids.values()) == {2}  # each change twice, the same record
    assert players == ["a", "b", "a", "c", "b", "c"]  # each copy after the next change
    sequences = [int(r["kinesis"]["sequenceNumber"]) for e in function.events for r in e["Records"]]
    assert sequences == sorted(set(sequences))  # each copy its own sequence number


def test_reorder_puts_a_change_after_the_next_one(stack, source, tmp_path):
    put_scores(source[0], source[1], ["a", "b", "c"])
    pump(stack, source, tmp_path, reorder=1.0).pump()
    function = Scripted()
    p = poller(stack, source, function, tmp_path)
    p.read()
    p.deliver_due(draining=True)
    times = [c["dynamodb"]["ApproximateCreationDateTime"] for c in changes(function)]
    assert len(set(times)) == 3 and times != sorted(times)  # each once, one out of order
    assert [c["dynamodb"]["Keys"]["PK"]["S"][-1] for c in changes(function)] == ["b", "a", "c"]


def test_a_change_put_again_after_a_restart_keeps_its_time(stack, source, tmp_path, monkeypatch):
    """A change's time is when the destination first read it (DynamoDB Local rounds its own down to
    the minute), to the microsecond and increasing; a pump killed after its put, before it saved its
    position, puts the change again on restart with the same time, as AWS's duplicates carry theirs."""
    import time

    before = time.time()
    put_scores(source[0], source[1], ["a", "b"])
    crashed = pump(stack, source, tmp_path)
    monkeypatch.setattr(crashed, "_save", lambda: None)  # killed between its put and its position
    crashed.pump()
    pump(stack, source, tmp_path).pump()  # the restart: the same checkpoints, read again
    function = Scripted()
    p = poller(stack, source, function, tmp_path)
    p.read()
    p.deliver_due(draining=True)
    times = [c["dynamodb"]["ApproximateCreationDateTime"] for c in changes(function)]
    assert len(times) == 4 and times[:2] == times[2:] and times[0] < times[1]  # each put twice, same time
    assert before * 1e6 <= times[0] <= time.time() * 1e6  # the read's own microsecond, not its minute
