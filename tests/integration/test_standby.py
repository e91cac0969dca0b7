"""`hybridsync standby REGION` against deployed stacks (moto server's CloudFormation stands in for
home's, its DynamoDB for the replica Region's): what it writes into cdk.json is what the standby
stack's synth takes."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from aws_cdk import App

from hybridsync import cli
from hybridsync.cdk.standby import prepared
from hybridsync.runtime import aws
from hybridsync.sql.roles import ROLES
from shop.model import MODEL

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:{role}-AbCdEf"


@pytest.fixture
def deployed(handler_env, tmp_path, monkeypatch):
    """Home's data and database stacks' outputs, the main table's replica with its stream in
    us-west-2 only (the chunks table has none there), a project folder with its cdk.json. DynamoDB is
    moto's here: DynamoDB Local shares one database across Regions (-sharedDb), and the command
    must read the replica's stream in the standby's Region, never home's."""
    monkeypatch.setenv("DYNAMODB_ENDPOINT", os.environ["AWS_ENDPOINT"])
    prefix = f"S{uuid.uuid4().hex[:6]}"
    main = f"{prefix}-data-MainTable-1A2B"
    west = aws.client("dynamodb", region="us-west-2")
    west.create_table(
        TableName=main,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    cloudformation = aws.client("cloudformation", region="us-east-1")
    outputs = {
        "data": {"MainTableName": main, "ChunksTableName": f"{prefix}-data-ChunksTable-3C4D",
                 "BodiesBucketName": "bodies-1a2b"},
        "database": {f"{r.title()}SecretArn": SECRET.format(role=r) for r in ROLES},
    }  # fmt: skip
    for stack, values in outputs.items():
        template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                    "Outputs": {k: {"Value": v} for k, v in values.items()}}  # fmt: skip
        cloudformation.create_stack(StackName=f"{prefix}-{stack}", TemplateBody=json.dumps(template))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYBRIDSYNC_MODEL", "shop.model:MODEL")
    context = {"prefix": prefix, "home_region": "us-east-1", "@aws-cdk/core:checkSecretUsage": True,
               "existing_db_secret_arn": SECRET.format(role="admin")}  # fmt: skip
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "python3 app.py", "context": context}))
    yield prefix, main, west.describe_table(TableName=main)["Table"]["LatestStreamArn"]
    west.delete_table(TableName=main)


def settings(root) -> dict:
    return json.loads((root / "cdk.json").read_text())


def test_standby_writes_what_the_regions_stack_is_built_from(deployed, tmp_path, capsys):
    prefix, main, stream = deployed
    argv = ["standby", "us-west-2", "--vpc", "vpc-0abc", "--subnets", "subnet-0a,subnet-0b"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "reads main there" in out and f"{prefix}-standby-us-west-2" in out
    saved = settings(tmp_path)
    assert saved["app"] == "python3 app.py" and saved["context"]["@aws-cdk/core:checkSecretUsage"] is True
    entry = saved["context"]["standby"]["us-west-2"]
    assert entry["tables"] == {"main": {"name": main, "stream_arn": stream}}  # no chunks replica there
    assert ":us-west-2:" in stream  # the replica's own stream
    # the replicas of home's secrets: the same ARN but the Region
    assert entry["secrets"]["writer"] == "arn:aws:secretsmanager:us-west-2:123456789012:secret:writer-AbCdEf"
    assert entry["vpc_id"] == "vpc-0abc" and entry["subnet_ids"] == ["subnet-0a", "subnet-0b"]
    assert entry["bodies_bucket"] == "bodies-1a2b"
    # what the synth takes: -c replica_regions replicates the chunks table too, whose replica is missing
    context = {"standby": saved["context"]["standby"], "replica_regions": "us-west-2",
               "home_region": "us-east-1", "existing_db_secret_arn": SECRET.format(role="admin")}  # fmt: skip
    with pytest.raises(ValueError, match=r"lacks tables\.chunks"):
        prepared(App(context=context), MODEL)
    entry["tables"]["chunks"] = {"name": f"{prefix}-data-ChunksTable-3C4D"}
    assert prepared(App(context=context), MODEL)["us-west-2"] == entry


def test_standby_run_again_keeps_what_a_failover_said(deployed, tmp_path):
    """New subnets after a deployed failover: the standby stays the active one."""
    argv = ["standby", "us-west-2", "--vpc", "vpc-0abc", "--subnets", "subnet-0a"]
    assert cli.main(argv) == 0
    saved = settings(tmp_path)
    saved["context"]["standby"]["us-west-2"] |= {"active": True, "rebuilt": True}
    (tmp_path / "cdk.json").write_text(json.dumps(saved))
    assert cli.main([*argv[:-1], "subnet-0c"]) == 0
    entry = settings(tmp_path)["context"]["standby"]["us-west-2"]
    assert entry["active"] is True and entry["rebuilt"] is True and entry["subnet_ids"] == ["subnet-0c"]


def test_standby_says_what_is_missing(deployed, tmp_path):
    prefix, _, _ = deployed
    with pytest.raises(SystemExit, match="us-east-1 is home"):
        cli.main(["standby", "us-east-1", "--vpc", "vpc-0abc", "--subnets", "subnet-0a"])
    with pytest.raises(SystemExit, match="deployed in us-east-1"):
        cli.main(["standby", "us-west-2", "--vpc", "v", "--subnets", "s", "--prefix", "NoSuchApp"])
    with pytest.raises(SystemExit, match=r"no table of .* has a replica in eu-west-1"):
        cli.main(["standby", "eu-west-1", "--vpc", "v", "--subnets", "s"])
    with pytest.raises(SystemExit, match="needs the standby's network in us-west-2"):
        cli.main(["standby", "us-west-2"])
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"prefix": prefix}}))
    with pytest.raises(SystemExit, match="no home Region"):
        cli.main(["standby", "us-west-2", "--vpc", "vpc-0abc", "--subnets", "subnet-0a"])
    assert "standby" not in settings(tmp_path)["context"]


def test_with_the_apps_aurora_the_standby_takes_no_network_and_its_synth_makes_one(
    deployed, tmp_path, capsys
):
    """Home's Aurora cluster: the standby Region gets a VPC of its own and a secondary cluster of an
    Aurora Global Database (cdk/standby.py StandbyAuroraStack), so the command takes no network."""
    prefix, main, stream = deployed
    saved = settings(tmp_path)
    del saved["context"]["existing_db_secret_arn"]
    (tmp_path / "cdk.json").write_text(json.dumps(saved))
    with pytest.raises(SystemExit, match="drop --vpc, --subnets"):
        cli.main(["standby", "us-west-2", "--vpc", "vpc-0abc", "--subnets", "subnet-0a"])
    assert cli.main(["standby", "us-west-2"]) == 0
    assert f"{prefix}-standby-us-west-2-database adds a secondary cluster" in capsys.readouterr().out
    entry = settings(tmp_path)["context"]["standby"]["us-west-2"]
    assert "vpc_id" not in entry and entry["tables"]["main"] == {"name": main, "stream_arn": stream}
    entry["tables"]["chunks"] = {"name": f"{prefix}-data-ChunksTable-3C4D"}
    context = {"standby": {"us-west-2": entry}, "replica_regions": "us-west-2", "home_region": "us-east-1"}
    assert prepared(App(context=context), MODEL)["us-west-2"] == entry
    with pytest.raises(ValueError, match="lacks vpc_id, subnet_ids"):  # your own database needs them
        prepared(App(context=context | {"existing_db_secret_arn": SECRET.format(role="admin")}), MODEL)


def test_standby_says_a_wrong_region_in_a_sentence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="'nowhere' is not an AWS Region"):
        cli.main(["standby", "nowhere", "--vpc", "v", "--subnets", "s", "--home", "us-east-1"])
