"""The stream of `hybridsync up` (its own embedded DynamoDB Local), read by a client of its own with
boto3, as a team's tool would read it: the records are what AWS's look like."""

from __future__ import annotations

import os
import time

import boto3

from hybridsync.local.process import UpProcess
from shop.model import MAIN


def test_a_client_reading_the_stream_of_up_sees_aws_records(cloud_assembly, stack, tmp_path):
    """Follows localstack__test_dynamodb__dynamodb_stream_stream_view_type (eventVersion "1.1"),
    ..._batch_write_items_streaming (an identical overwrite makes no record) and the Streams API's
    Identity ("For Time To Live, the principalId is dynamodb.amazonaws.com", type "Service"). The
    expiring item carries every GSI key of the table: DynamoDB Local never expires one that lacks any
    (see the README's Fidelity section)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DYNAMODB_ENDPOINT", "AWS_ENDPOINT")}
    env |= {"DATABASE_URL": stack.database_url}  # PostgreSQL from the session; DynamoDB up's own
    app = UpProcess(cloud_assembly, tmp_path / "state", env, prefix="stream")
    (tmp_path / "state").mkdir()
    app.start()
    try:
        names = app.environment()
        options = {
            "endpoint_url": names["DYNAMODB_ENDPOINT"],
            "region_name": "us-east-1",
            "aws_access_key_id": "any",
            "aws_secret_access_key": "any",
        }
        client, streams = boto3.client("dynamodb", **options), boto3.client("dynamodbstreams", **options)
        table = names["TABLE_MAIN"]
        item = {"PK": {"S": "STREAM#probe"}, "SK": {"S": "ONE"}, "Note": {"S": "same"}}
        client.put_item(TableName=table, Item=item)
        client.put_item(TableName=table, Item=item)  # identical: no record
        expiring = {
            "PK": {"S": "STREAM#ttl"},
            "SK": {"S": "ONE"},
            "ExpiresAt": {"N": str(int(time.time()) - 5)},
        }
        for index in MAIN.indexes:  # every GSI key, whatever the model adds
            for key in filter(None, (index.partition, index.sort)):
                expiring[key.name] = {key.type: "1" if key.type == "N" else "x"}
        client.put_item(TableName=table, Item=expiring)
        arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        mine: list[dict] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(r["eventName"] == "REMOVE" for r in mine):
            start = {"StreamArn": arn, "ShardId": shard["ShardId"], "ShardIteratorType": "TRIM_HORIZON"}
            records = streams.get_records(ShardIterator=streams.get_shard_iterator(**start)["ShardIterator"])
            mine = [r for r in records["Records"] if r["dynamodb"]["Keys"]["PK"]["S"].startswith("STREAM#")]
            time.sleep(1)
    finally:
        app.stop()
    assert [(r["eventName"], r["dynamodb"]["Keys"]["PK"]["S"]) for r in mine] == [
        ("INSERT", "STREAM#probe"),
        ("INSERT", "STREAM#ttl"),
        ("REMOVE", "STREAM#ttl"),
    ]
    assert {r["eventVersion"] for r in mine} == {"1.1"}
    assert mine[-1]["userIdentity"] == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
    assert "userIdentity" not in mine[0]
