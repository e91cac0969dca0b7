"""The stream of `hybridsync up` (its own embedded DynamoDB Local), read by a plain boto3 client in a
shell that sourced `.local/env`, as a team's tool would read it: the records are what AWS's look
like, and every expired item is deleted with the DynamoDB service's identity on its REMOVE."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from hybridsync.local.process import UpProcess

READER = textwrap.dedent("""
    import json, sys, time
    import boto3

    client, streams = boto3.client("dynamodb"), boto3.client("dynamodbstreams")  # nothing but the env
    table = sys.argv[1]
    item = {"PK": {"S": "STREAM#probe"}, "SK": {"S": "ONE"}, "Note": {"S": "same"}}
    client.put_item(TableName=table, Item=item)
    client.put_item(TableName=table, Item=item)  # identical: no record
    expired = str(int(time.time()) - 60)  # a minute ago, and no GSI key (DynamoDB Local keeps those)
    expiring = {"PK": {"S": "STREAM#ttl"}, "SK": {"S": "ONE"}, "ExpiresAt": {"N": expired}}
    client.put_item(TableName=table, Item=expiring)
    written = time.monotonic()
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    mine = []
    while time.monotonic() - written < 60 and not any(r["eventName"] == "REMOVE" for r in mine):
        mine = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            start = {"StreamArn": arn, "ShardId": shard["ShardId"], "ShardIteratorType": "TRIM_HORIZON"}
            iterator = streams.get_shard_iterator(**start)["ShardIterator"]
            while iterator:
                page = streams.get_records(ShardIterator=iterator)
                mine += [r for r in page["Records"] if r["dynamodb"]["Keys"]["PK"]["S"].startswith("STREAM#")]
                iterator = page.get("NextShardIterator") if page["Records"] else None
        time.sleep(1)
    print(json.dumps({"records": mine, "seconds": time.monotonic() - written}, default=str))
""")


def test_a_plain_boto3_client_reading_the_stream_of_up_sees_aws_records(cloud_assembly, stack, tmp_path):
    """Follows localstack__test_dynamodb__dynamodb_stream_stream_view_type (eventVersion "1.1"),
    ..._batch_write_items_streaming (an identical overwrite makes no record) and the Streams API's
    Identity ("For Time To Live, the principalId is dynamodb.amazonaws.com", type "Service"). The
    expiring item carries no GSI key, as most items of a table of sparse indexes: DynamoDB Local
    never expires one, AWS does (within days), and so does the local app (within its sweep)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYNAMODB_", "AWS_"))}
    env |= {"DATABASE_URL": stack.database_url}  # PostgreSQL from the session; DynamoDB up's own
    app = UpProcess(cloud_assembly, tmp_path / "state", env, prefix="stream")
    (tmp_path / "state").mkdir()
    app.start()
    try:
        table = app.environment()["TABLE_MAIN"]
        shell = {k: v for k, v in env.items() if k != "DATABASE_URL"}  # a new user's shell, then the file
        (tmp_path / "reader.py").write_text(READER)
        command = (
            f"source {tmp_path / 'state' / 'env'} && exec {sys.executable} {tmp_path / 'reader.py'} {table}"
        )
        done = subprocess.run(["bash", "-c", command], env=shell, capture_output=True, text=True, timeout=120)
    finally:
        app.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    mine = json.loads(done.stdout)["records"]
    assert [(r["eventName"], r["dynamodb"]["Keys"]["PK"]["S"]) for r in mine] == [
        ("INSERT", "STREAM#probe"),
        ("INSERT", "STREAM#ttl"),
        ("REMOVE", "STREAM#ttl"),
    ]
    assert {r["eventVersion"] for r in mine} == {"1.1"}
    assert mine[-1]["userIdentity"] == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
    assert "userIdentity" not in mine[0]
