"""Replicas as declared (a table's own, or the app's `-c replica_regions`), and the local app in the
Region a replicated app's stacks are pinned to (its home Region)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hybridsync.local.template import Assembly
from hybridsync.model.declare import NEW_AND_OLD_IMAGES, KeyAttribute, Table, partition_of
from hybridsync.truth import context, home_replica


def table(**replicas: object) -> Table:
    return Table("t", KeyAttribute("pk"), stream=NEW_AND_OLD_IMAGES, **replicas)  # type: ignore[arg-type]


def scope(**given: str) -> SimpleNamespace:
    """What the settings read from a construct: its node's context."""
    return SimpleNamespace(node=SimpleNamespace(try_get_context=given.get))


def test_a_table_takes_its_replicas_as_region_names():
    assert table(replicas=["us-west-2", "eu-west-1"]).replicas == ("us-west-2", "eu-west-1")
    assert table(replicas=("us-gov-west-1",)).replicas == ("us-gov-west-1",)
    assert table().replicas == ()
    # a table the engine does not read may be replicated too (CDK turns its streams on)
    assert Table("t", KeyAttribute("pk"), replicas=("us-west-2",)).replicas == ("us-west-2",)


@pytest.mark.parametrize(
    ("region", "partition"),
    [("us-east-1", "aws"), ("ap-southeast-5", "aws"), ("mx-central-1", "aws"), ("cn-north-1", "aws-cn"),
     ("us-gov-east-1", "aws-us-gov"), ("eusc-de-east-1", "aws-eusc"), ("us-isob-east-1", "aws-iso-b"),
     ("il-central-9", "aws"),  # newer than the SDK's list: its partition's pattern
     ("Oregon", None), ("xx-nowhere-1", None), ("us-east-1\n", None), ("eu-west", None)],
)  # fmt: skip
def test_a_regions_partition_is_the_sdks(region, partition):
    assert partition_of(region) == partition


@pytest.mark.parametrize(
    ("replicas", "refused"),
    [
        (("us-west-2", "Oregon"), "'Oregon' is not an AWS Region"),
        (("us-west-2", "us-west-2"), "a Region is named twice"),
    ],
)
def test_a_replica_that_is_no_region_is_refused_naming_the_table(replicas, refused):
    with pytest.raises(ValueError, match=f"table 't': replicas: {refused}"):
        table(replicas=replicas)


def test_a_tables_own_replicas_come_before_the_apps():
    app = scope(replica_regions="us-west-2, eu-west-1")
    assert context.replicas(app, table()) == ("us-west-2", "eu-west-1")
    assert context.replicas(app, table(replicas=("ap-south-1",))) == ("ap-south-1",)
    assert context.replicas(scope(), table()) == ()
    with pytest.raises(ValueError, match="-c replica_regions: 'west' is not an AWS Region"):
        context.replicas(scope(replica_regions="west"), table())


def test_the_home_replica_is_the_stacks_own_else_the_last():
    own = {"Region": {"Ref": "AWS::Region"}, "SSESpecification": {"KMSMasterKeyId": "k"}}
    assert home_replica({"Replicas": [own]}) is own
    pinned = [{"Region": "us-west-2"}, {"Region": "eu-west-1", "KinesisStreamSpecification": {}}]
    assert home_replica({"Replicas": pinned}) is pinned[-1]
    written = [own, {"Region": "us-west-2"}]  # a template written by hand: the stack's own comes first
    assert home_replica({"Replicas": written}) is own
    assert home_replica({"TableName": "plain"}) == {}


def assembly(folder: Path, *environments: str) -> Path:
    artifacts = {}
    for n, environment in enumerate(environments):
        (folder / f"s{n}.template.json").write_text(json.dumps({"Resources": {}}))
        artifacts[f"s{n}"] = {"type": "aws:cloudformation:stack", "environment": environment,
                              "properties": {"templateFile": f"s{n}.template.json"}}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))
    return folder


def test_the_local_app_runs_in_the_region_its_stacks_are_pinned_to(tmp_path):
    for name, environments, region in (
        ("agnostic", ["aws://unknown-account/unknown-region"] * 2, "us-east-1"),
        ("home", ["aws://unknown-account/eu-west-1"] * 2, "eu-west-1"),
        ("key", ["aws://123456789012/ap-south-1"], "ap-south-1"),
    ):
        (tmp_path / name).mkdir()
        assert Assembly.load(assembly(tmp_path / name, *environments)).region == region, name
    assert Assembly.load(tmp_path / "home", region="us-west-2").region == "us-west-2"  # as asked


def test_strong_consistency_is_refused_with_its_reason():
    """MRSC global tables take no transactions and have no TTL (GlobalTables.html): the aggregation
    folds each batch in a TransactWriteItems, and TTL expires what PostgreSQL keeps."""
    with pytest.raises(
        ValueError, match=r"table 'main': multi-Region strong consistency \(MRSC\) is refused"
    ):
        Table("main", KeyAttribute("pk"), replicas=("us-west-2",), consistency="strong")
    with pytest.raises(ValueError, match="consistency is 'eventual'"):
        Table("main", KeyAttribute("pk"), consistency="Strong")
    assert Table("main", KeyAttribute("pk"), replicas=("us-west-2",)).consistency == "eventual"
