"""`hybridsync standby REGION` against deployed stacks (moto's CloudFormation stands in for home's,
the session's DynamoDB Local for the replica Region): what it writes to cdk.context.json is what the
standby stack's synth takes."""

from __future__ import annotations

import json
import uuid

import pytest
from aws_cdk import App

from hybridsync import cli
from hybridsync.cdk.standby import prepared
from shop.model import MODEL

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:{role}-AbCdEf"


@pytest.fixture
def deployed(handler_env, dynamodb, tmp_path, monkeypatch):
    """Home's data and database stacks' outputs, the main table's replica with its stream in the
    Region (the chunks table has none there), a project folder with its cdk.json."""
    prefix = f"S{uuid.uuid4().hex[:6]}"
    main = f"{prefix}-data-MainTable-1A2B"
    dynamodb.create_table(
        TableName=main,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    cloudformation = handler_env.client("cloudformation")
    outputs = {
        "data": {"MainTableName": main, "ChunksTableName": f"{prefix}-data-ChunksTable-3C4D",
                 "BodiesBucketName": "bodies-1a2b"},
        "database": {f"{r.title()}SecretArn": SECRET.format(role=r) for r in ("reader", "writer", "migrator")},
    }  # fmt: skip
    for stack, values in outputs.items():
        template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                    "Outputs": {k: {"Value": v} for k, v in values.items()}}  # fmt: skip
        cloudformation.create_stack(StackName=f"{prefix}-{stack}", TemplateBody=json.dumps(template))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYBRIDSYNC_MODEL", "shop.model:MODEL")
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"prefix": prefix, "home_region": "us-east-1"}}))
    yield prefix, main, dynamodb.describe_table(TableName=main)["Table"]["LatestStreamArn"]
    dynamodb.delete_table(TableName=main)


def test_standby_writes_what_the_regions_stack_is_built_from(deployed, tmp_path, capsys):
    prefix, main, stream = deployed
    (tmp_path / "cdk.context.json").write_text(json.dumps({"availability-zones:account=1:region=x": ["x1a"]}))
    argv = ["standby", "us-west-2", "--vpc", "vpc-0abc", "--subnets", "subnet-0a,subnet-0b"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "reads main there" in out and f"{prefix}-standby-us-west-2" in out
    saved = json.loads((tmp_path / "cdk.context.json").read_text())
    assert saved["availability-zones:account=1:region=x"] == ["x1a"]  # the CDK's own lookups kept
    entry = saved["standby"]["us-west-2"]
    assert entry["tables"] == {"main": {"name": main, "stream_arn": stream}}  # no chunks replica there
    # the replicas of home's secrets: the same ARN but the Region
    assert entry["secrets"]["writer"] == "arn:aws:secretsmanager:us-west-2:123456789012:secret:writer-AbCdEf"
    assert entry["vpc_id"] == "vpc-0abc" and entry["subnet_ids"] == ["subnet-0a", "subnet-0b"]
    assert entry["bodies_bucket"] == "bodies-1a2b"
    # what the synth takes (the chunks table declared with replicas of its own would be missed)
    context = {"standby": saved["standby"], "replica_regions": "us-west-2", "home_region": "us-east-1",
               "existing_db_secret_arn": SECRET.format(role="admin")}  # fmt: skip
    with pytest.raises(ValueError, match="lacks tables.chunks"):
        prepared(App(context=context), MODEL)
    chunks = f"{prefix}-data-ChunksTable-3C4D"
    entry["tables"]["chunks"] = {"name": chunks}
    assert prepared(App(context=context), MODEL)["us-west-2"] == entry


def test_standby_says_what_is_missing(deployed, tmp_path):
    prefix, _, _ = deployed
    with pytest.raises(SystemExit, match="us-east-1 is home"):
        cli.main(["standby", "us-east-1", "--vpc", "vpc-0abc", "--subnets", "subnet-0a"])
    with pytest.raises(SystemExit, match="deployed in us-east-1"):
        cli.main(["standby", "us-west-2", "--vpc", "v", "--subnets", "s", "--prefix", "NoSuchApp"])
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"prefix": prefix}}))
    with pytest.raises(SystemExit, match="no home Region"):
        cli.main(["standby", "us-west-2", "--vpc", "vpc-0abc", "--subnets", "subnet-0a"])
    assert not (tmp_path / "cdk.context.json").exists()
