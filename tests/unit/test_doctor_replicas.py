"""`hybridsync doctor` on a global table's replicas (truth/doctor/replicas.py). Deployed: DescribeTable
and GetMetricStatistics answers in the shapes botocore's models define (its Stubber checks both
requests and answers against them; moto has no replicas). Locally: the twin's figures."""

from __future__ import annotations

import pytest
from botocore.stub import ANY, Stubber

from hybridsync.runtime import aws
from hybridsync.truth.doctor import replicas

TABLE = "hybridsync-main"


def stubbed(replica_states: dict[str, str], averages: list[float] | None) -> tuple:
    dynamodb, cloudwatch = (
        aws.client("dynamodb", "http://127.0.0.1:9"),
        aws.client("cloudwatch", "http://127.0.0.1:9"),
    )
    tables, metrics = Stubber(dynamodb), Stubber(cloudwatch)
    described = [{"RegionName": r, "ReplicaStatus": s} for r, s in replica_states.items()]
    tables.add_response(
        "describe_table", {"Table": {"TableName": TABLE, "Replicas": described}}, {"TableName": TABLE}
    )
    if averages is not None:
        dimensions = [
            {"Name": "TableName", "Value": TABLE},
            {"Name": "ReceivingRegion", "Value": "us-west-2"},
        ]
        request = {"Namespace": "AWS/DynamoDB", "MetricName": "ReplicationLatency", "StartTime": ANY,
                   "EndTime": ANY, "Period": 900, "Statistics": ["Average"],
                   "Dimensions": dimensions}  # fmt: skip
        answer = {"Datapoints": [{"Average": a, "Unit": "Milliseconds"} for a in averages]}
        metrics.add_response("get_metric_statistics", answer, request)
    tables.activate()
    metrics.activate()
    return dynamodb, cloudwatch


@pytest.mark.parametrize(
    ("states", "averages", "ok", "said"),
    [
        ({"us-west-2": "ACTIVE", "us-east-1": "ACTIVE"}, [850.0], True, "replication 850 ms on average"),
        ({"us-west-2": "ACTIVE"}, [], True, "no replication in 15 minutes"),
        ({"us-west-2": "ACTIVE"}, [95_000.0], False, "replication 95 s on average"),
        ({"us-west-2": "CREATING"}, None, False, "CREATING"),
        ({"us-east-1": "ACTIVE"}, None, False, "no replica there"),
    ],
)
def test_a_deployed_replica_is_active_and_replicating_within_a_minute(states, averages, ok, said):
    (check,) = replicas.deployed(*stubbed(states, averages), TABLE, ["us-west-2"])
    assert (check.ok, check.subject) == (ok, f"{TABLE} in us-west-2") and said in check.message, check


def test_the_twins_figures_say_each_regions_state():
    behind = {"us-east-1": 0, "us-west-2": 2, "eu-west-1": 0}
    figures = {"home": "us-east-1", "down": ["eu-west-1"], "cut_off": [], "behind": behind,
               "latency": {"us-east-1->us-west-2": {"p50_ms": 320.5, "max_ms": 400.0}}}  # fmt: skip
    west, ireland, tokyo = replicas.local(figures, TABLE, ["us-west-2", "eu-west-1", "ap-northeast-1"])
    assert west.ok and west.message == "running, 2 item(s) behind, replication p50 320.5 ms"
    assert not ireland.ok and "stopped" in ireland.message
    assert not tokyo.ok and "not in the twin" in tokyo.message
    (untwinned,) = replicas.local(None, TABLE, ["us-west-2"])
    assert untwinned.ok and "up --regions" in untwinned.message
