"""`hybridsync failover --deployed` (sync/deployed_failover.py) on AWS's control plane as moto
gives it in process: home's pipeline stack and the standby stack as CloudFormation made them (stream
mappings, schedules, outputs), home's CloudWatch with the replication latency. The rebuild runs in
the standby's operations function in AWS; here a recorder stands in for it and says what the
consumers were doing when it ran."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from moto import mock_aws

from hybridsync.sync import deployed_failover as handover

pytestmark = pytest.mark.unit
HOME, TO, PREFIX = "us-east-1", "us-west-2", "App"


def client(service: str, region: str) -> Any:
    return boto3.client(service, region_name=region)


def _stack(region: str, name: str, enabled: bool, outputs: dict[str, str]) -> None:
    """A pipeline-shaped stack: the write-back's and the aggregation's mappings on the Region's
    replica stream, the drain's schedule and (home) the sweep's, the operations function's name."""
    role = client("iam", region).create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")["Role"]
    table = client("dynamodb", region).create_table(
        TableName=f"{name}-main", KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]  # fmt: skip
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handle(event, context): pass")
    resources: dict[str, Any] = {}
    for function in ("WriteBack", "Aggregate"):
        client("lambda", region).create_function(
            FunctionName=f"{name}-{function}", Runtime="python3.12", Role=role["Arn"],
            Handler="handler.handle", Code={"ZipFile": code.getvalue()},
        )  # fmt: skip
        resources[f"{function}LiveDynamoDBEventSource1A2B"] = {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": table["LatestStreamArn"], "FunctionName": f"{name}-{function}",
                           "StartingPosition": "TRIM_HORIZON", "Enabled": enabled},
        }  # fmt: skip
    state = "ENABLED" if enabled else "DISABLED"
    for schedule in ("SqlSyncSchedule11A5", "SweepSchedule22B6"):
        resources[schedule] = {"Type": "AWS::Events::Rule",
                               "Properties": {"ScheduleExpression": "rate(1 minute)", "State": state}}  # fmt: skip
    template = {"Resources": resources, "Outputs": {k: {"Value": v} for k, v in outputs.items()}}
    client("cloudformation", region).create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.fixture
def app(tmp_path: Path):
    """Home consuming, the standby in us-west-2 deployed idle, its entry in cdk.context.json, and
    home's writes reaching us-west-2 in at most 300 ms lately."""
    with mock_aws():
        _stack(HOME, f"{PREFIX}-pipeline", True, {"OperationsFunctionName": "home-ops"})
        _stack(TO, f"{PREFIX}-standby-{TO}", False, {"OperationsFunctionName": "standby-ops"})
        client("cloudwatch", HOME).put_metric_data(Namespace="AWS/DynamoDB", MetricData=[{
            "MetricName": "ReplicationLatency", "Value": value, "Unit": "Milliseconds",
            "Timestamp": datetime.now(UTC),
            "Dimensions": [{"Name": "TableName", "Value": "App-data-Main"},
                           {"Name": "ReceivingRegion", "Value": TO}],
        } for value in (120.0, 300.0)])  # fmt: skip
        context = tmp_path / "cdk.context.json"
        context.write_text(json.dumps({"standby": {TO: {"tables": {"main": {"name": "App-data-Main"}}}}}))
        yield context


def consuming(region: str, stack: str) -> dict[str, str]:
    """Each mapping's and schedule's state, by logical id."""
    consumers = handover.Consumers.of(client, region, stack)
    lam, events = client("lambda", region), client("events", region)
    states = {k: lam.get_event_source_mapping(UUID=u)["State"] for k, u in consumers.mappings.items()}
    resources = client("cloudformation", region).list_stack_resources(StackName=stack)["StackResourceSummaries"]
    rules = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::Events::Rule"}
    return {k.split("Live")[0].split("Schedule")[0]: v for k, v in states.items()} | {
        k.split("Schedule")[0]: events.describe_rule(Name=n)["State"] for k, n in rules.items()
    }  # fmt: skip


class Rebuild:
    """Stands in for the standby's operations function: what home and the standby were doing when
    the rebuild ran."""

    def __init__(self, fail: bool = False):
        self.seen: list[dict[str, Any]] = []
        self.fail = fail

    def __call__(self, standby: handover.Consumers, tables: dict[str, str]) -> dict[str, Any]:
        self.seen.append({"home": consuming(HOME, f"{PREFIX}-pipeline"), "standby": consuming(TO, standby.stack),
                          "tables": tables, "function": standby.outputs["OperationsFunctionName"]})  # fmt: skip
        if self.fail:
            raise RuntimeError("the operations function timed out")
        return {"written": 7}


def run(context: Path, rebuild: Rebuild, *, live: bool = True, clients: Any = client) -> handover.Handover:
    waited: list[float] = []
    done = handover.failover(clients, home=HOME, prefix=PREFIX, to=TO, context_file=context, rebuild=rebuild,
                             live=live, wait=waited.append)  # fmt: skip
    assert waited == ([done.waited_s] if live else [])
    return done


def test_a_live_failover_fences_home_lets_replication_settle_then_starts_the_standby(app):
    rebuild = Rebuild()
    done = run(app, rebuild)
    assert done.fenced and done.rebuilt and done.rebuild == {"written": 7}
    assert done.waited_s == pytest.approx(3.0)  # ten times the largest latency: 300 ms
    # the rebuild ran with home fenced and the standby's rows settling, its aggregation still off
    (seen,) = rebuild.seen
    assert seen["home"] == {"WriteBack": "Disabled", "Aggregate": "Disabled", "SqlSync": "DISABLED",
                            "Sweep": "ENABLED"}  # fmt: skip
    assert seen["standby"] == {"WriteBack": "Enabled", "Aggregate": "Disabled", "SqlSync": "ENABLED",
                               "Sweep": "DISABLED"}  # fmt: skip
    assert seen["tables"] == {"main": "App-data-Main"} and seen["function"] == "standby-ops"
    assert consuming(TO, f"{PREFIX}-standby-{TO}")["Aggregate"] == "Enabled"
    # a later deploy keeps it so (cdk/standby.py: the active standby consumes, home's pipeline not)
    assert json.loads(app.read_text())["standby"][TO]["active"] is True
    # run again: nothing to do but fence home (still fenced); the aggregation runs, so no second rebuild
    assert not run(app, rebuild).rebuilt and len(rebuild.seen) == 1


def test_a_failover_stopped_by_a_failed_rebuild_is_finished_by_running_it_again(app):
    with pytest.raises(RuntimeError, match="timed out"):
        run(app, Rebuild(fail=True))
    standby = consuming(TO, f"{PREFIX}-standby-{TO}")
    assert standby["WriteBack"] == "Enabled" and standby["Aggregate"] == "Disabled"  # never folds unrebuilt
    again = Rebuild()
    assert run(app, again).rebuilt and consuming(TO, f"{PREFIX}-standby-{TO}")["Aggregate"] == "Enabled"


def test_home_down_refuses_a_live_failover_and_an_offline_one_goes_on(app):
    def home_down(service: str, region: str) -> Any:
        if region == HOME:
            raise EndpointConnectionError(endpoint_url=f"https://{service}.{HOME}.amazonaws.com")
        return client(service, region)

    with pytest.raises(handover.Refused, match="fail over --offline"):
        run(app, Rebuild(), clients=home_down)
    assert "active" not in json.loads(app.read_text())["standby"][TO]  # nothing changed
    assert consuming(TO, f"{PREFIX}-standby-{TO}")["WriteBack"] == "Disabled"
    done = run(app, Rebuild(), live=False, clients=home_down)
    assert not done.fenced and done.rebuilt and done.waited_s == 0
    # home answers again: the same command fences it, and rebuilds nothing more
    assert consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"] == "Enabled"
    later = run(app, Rebuild(), live=False)
    assert later.fenced and not later.rebuilt
    assert consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"] == "Disabled"


def test_what_cannot_fail_over_is_refused_before_anything_changes(app):
    with pytest.raises(handover.Refused, match="no standby prepared in eu-west-1"):
        handover.failover(client, home=HOME, prefix=PREFIX, to="eu-west-1", context_file=app, rebuild=Rebuild())
    saved = json.loads(app.read_text())
    saved["standby"]["eu-west-1"] = {"tables": {}, "active": True}
    app.write_text(json.dumps(saved))
    with pytest.raises(handover.Refused, match="eu-west-1 consumes since an earlier failover"):
        run(app, Rebuild())
    assert consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"] == "Enabled"
