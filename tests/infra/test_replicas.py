"""Replicas (DynamoDB global tables, version 2019.11.21): a synth with replicas renders one global
table per table, its replicas in the other Regions and the home one, each with its stream; the
consumers (every stream mapping) only in the home Region, where the stacks deploy. What cannot be
rendered is refused at synth in one sentence."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App

from hybridsync.cdk import build
from hybridsync.truth import home_replica
from shop.model import MODEL
from tests.infra.test_database_access import KEY, ROOT, of_type

pytestmark = pytest.mark.infra


def tables(stacks: dict) -> dict[str, dict]:
    return {k: r["Properties"] for k, r in of_type(stacks["data"], "AWS::DynamoDB::GlobalTable").items()}


def test_two_replicas_render_one_global_table_each_with_every_stream_and_the_mappings_at_home(variants):
    rendered = tables(variants["replicas"])
    assert len(rendered) == len(MODEL.tables)
    for properties in rendered.values():
        # the home Region's replica last, as TableV2 renders a pinned stack's own
        assert [r["Region"] for r in properties["Replicas"]] == ["us-west-2", "eu-west-1", "us-east-1"]
        # MREC with more than one replica needs StreamSpecification: every replica's stream is on
        assert properties["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    # TTL is the global table's: every replica's
    (main,) = [p for p in rendered.values() if "TimeToLiveSpecification" in p]
    assert main["TimeToLiveSpecification"] == {"AttributeName": "ExpiresAt", "Enabled": True}
    # the mappings read the stream of the stack's own Region: GetAtt StreamArn of the global table
    outputs = variants["replicas"]["data"]["Outputs"].values()
    exports = {o["Export"]["Name"]: o["Value"] for o in outputs if "Export" in o}
    mappings = of_type(variants["replicas"]["pipeline"], "AWS::Lambda::EventSourceMapping")
    assert mappings, "no stream mapping"
    for mapping in mappings.values():
        source = exports[mapping["Properties"]["EventSourceArn"]["Fn::ImportValue"]]
        assert source["Fn::GetAtt"][1] == "StreamArn" and source["Fn::GetAtt"][0] in rendered
    # pinned to the home Region: what the template names of a Region is the home one, never a replica's
    pipeline = json.dumps(variants["replicas"]["pipeline"])
    assert "us-west-2" not in pipeline and "eu-west-1" not in pipeline


def test_the_kinesis_precision_is_set_on_the_home_replica(variants):
    streamed = 0
    for properties in tables(variants["replicas_kinesis"]).values():
        replicas = properties["Replicas"]
        assert [r["Region"] for r in replicas] == ["us-west-2", "eu-central-1"]
        assert home_replica(properties)["Region"] == "eu-central-1"
        assert "KinesisStreamSpecification" not in replicas[0]  # the home replica alone feeds Kinesis
        if destination := replicas[-1].get("KinesisStreamSpecification"):
            assert destination["ApproximateCreationDateTimePrecision"] == "MICROSECOND"
            streamed += 1
    assert streamed  # the main table's changes, at least


def test_a_plain_table_s_replica_is_its_stacks_own(variants):
    for properties in tables(variants["default"]).values():
        assert home_replica(properties)["Region"] == {"Ref": "AWS::Region"}


@pytest.mark.parametrize(
    ("context", "refused"),
    [
        ({"replica_regions": "us-west-2", "kms_key_arn": KEY}, "replicas with -c kms_key_arn"),
        ({"replica_regions": "us-west-2"}, "replicas need a home Region"),
        ({"replica_regions": "us-west-2,us-east-1", "home_region": "us-east-1"}, "the home Region us-east-1"),
        ({"replica_regions": "us-west-2,west", "home_region": "us-east-1"}, "'west' is not an AWS Region"),
        ({"replica_regions": "us-west-2", "home_region": "Ohio"}, "home_region: 'Ohio' is not an AWS Region"),
        ({"replica_regions": "cn-north-1", "home_region": "us-east-1"}, "different AWS partitions"),
    ],
)
def test_what_cannot_be_rendered_is_refused_in_one_sentence(context, refused):
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    with pytest.raises(ValueError, match=refused):
        build(App(context={**flags, **context, "aws:cdk:bundling-stacks": []}))


def test_the_home_region_is_said_never_taken_from_the_cli_profile(monkeypatch):
    """The stacks hold the data: a synth run under another profile must not move them."""
    monkeypatch.setenv("CDK_DEFAULT_REGION", "ap-southeast-2")
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    with pytest.raises(ValueError, match="replicas need a home Region"):
        build(App(context={**flags, "replica_regions": "us-west-2", "aws:cdk:bundling-stacks": []}))
    stacks = build(App(context={**flags, "replica_regions": "us-west-2", "home_region": "eu-west-1",
                                "aws:cdk:bundling-stacks": []}))  # fmt: skip
    assert {stack.region for stack in stacks.values()} == {"eu-west-1"}  # type: ignore[attr-defined]


def test_each_replica_region_has_its_replication_latency_alarm(variants):
    """DynamoDB's ReplicationLatency, per table and ReceivingRegion, from the home Region: over a
    minute on average for 15 minutes, home's writes are not reaching that Region."""
    alarms = of_type(variants["replicas"]["monitoring"], "AWS::CloudWatch::Alarm").values()
    latency = [a["Properties"] for a in alarms if a["Properties"].get("MetricName") == "ReplicationLatency"]
    receiving = sorted(
        next(d["Value"] for d in a["Dimensions"] if d["Name"] == "ReceivingRegion") for a in latency
    )
    assert receiving == sorted(["us-west-2", "eu-west-1"] * len(MODEL.tables))
    assert {(a["Statistic"], a["Threshold"], a["EvaluationPeriods"]) for a in latency} == {
        ("Average", 60000, 3)
    }
    assert all("operating.md" in a["AlarmDescription"] for a in latency)
    default = of_type(variants["default"]["monitoring"], "AWS::CloudWatch::Alarm").values()
    assert not [a for a in default if a["Properties"].get("MetricName") == "ReplicationLatency"]
