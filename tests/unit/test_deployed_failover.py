"""`hybridsync failover --deployed` (sync/deployed_failover.py) on AWS's control plane as moto
gives it in process: home's pipeline stack and the standby stack as CloudFormation made them (stream
mappings, schedules, the operations function and its variables, outputs), home's CloudWatch with
the replication latency. The rebuild runs in the standby's operations function in AWS; here a
recorder stands in for it and says what the consumers were doing when it ran."""

from __future__ import annotations

import io
import json
import sys
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from moto import mock_aws

from hybridsync import cli
from hybridsync.sync import deployed_failover as handover

pytestmark = pytest.mark.unit
HOME, TO = "us-east-1", "us-west-2"
PREFIX = "App"  # each test's own (`aws`): moto's backends outlive it


@pytest.fixture(autouse=True)
def aws(monkeypatch) -> Iterator[None]:
    """moto in process, neither reset nor wiped on the way in or out: under xdist this worker may
    hold the session's moto server, in this process, whose buckets and secrets the same backends
    keep (as tests/unit/test_doctor.py); so every name here is the test's own."""
    monkeypatch.setattr(sys.modules[__name__], "PREFIX", f"App{uuid.uuid4().hex[:8]}")
    for name in ("AWS_ENDPOINT", "DYNAMODB_ENDPOINT", "LAMBDA_ENDPOINT", "DYNAMODB_STREAMS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(handover.time, "sleep", lambda _: None)  # switch's polls
    mocked = mock_aws()
    mocked.start(reset=False)
    try:
        yield
    finally:
        mocked.stop(remove_data=False)


TIMEOUT_S = 120  # the consumers' functions' Timeout (the pipeline's stream consumers: 2 minutes)
DRAIN_TIMEOUT_S = 180  # the outbox drain's under freshness=realtime (two periods and a minute)


def client(service: str, region: str) -> Any:
    return boto3.client(service, region_name=region)


def _stack(
    region: str, name: str, enabled: bool, consumers: tuple[str, ...] = ("WriteBack", "Aggregate")
) -> None:
    """A pipeline-shaped stack: the write-back's and the aggregation's mappings on the Region's
    replica stream, the drain's schedule and (home's) the sweep's, the operations function."""
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
    for function in (*consumers, "Operations", "SqlSync"):
        variables = {"PIPELINE_ENABLED": str(enabled).lower()} if function == "Operations" else {}
        timeout = DRAIN_TIMEOUT_S if function == "SqlSync" else TIMEOUT_S
        client("lambda", region).create_function(
            FunctionName=f"{name}-{function}", Runtime="python3.12", Role=role["Arn"], Timeout=timeout,
            Handler="handler.handle", Code={"ZipFile": code.getvalue()}, Environment={"Variables": variables},
        )  # fmt: skip
        if function in consumers:
            resources[f"{function}LiveDynamoDBEventSource1A2B"] = {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {"EventSourceArn": table["LatestStreamArn"], "Enabled": enabled,
                               "FunctionName": f"{name}-{function}", "StartingPosition": "TRIM_HORIZON"},
            }  # fmt: skip
    state = "ENABLED" if enabled else "DISABLED"
    for schedule in ("SqlSyncSchedule11A5", "SweepSchedule22B6"):
        properties = {"ScheduleExpression": "rate(1 minute)", "State": state}
        resources[schedule] = {"Type": "AWS::Events::Rule", "Properties": properties}
    outputs = {f"{f}FunctionName": {"Value": f"{name}-{f}"} for f in ("Operations", "SqlSync")}
    template = {"Resources": resources, "Outputs": outputs}
    client("cloudformation", region).create_stack(StackName=name, TemplateBody=json.dumps(template))


class Project:
    """cdk.json's standby entries, as the failover reads and saves them."""

    def __init__(self) -> None:
        self.standbys: dict[str, Any] = {TO: {"tables": {"main": {"name": f"{PREFIX}-data-Main"}}}}

    def save(self, entries: dict[str, Any]) -> None:
        self.standbys = json.loads(json.dumps(entries))


@pytest.fixture
def app():
    """Home consuming, the standby in us-west-2 deployed idle, its entry in cdk.json, and home's
    writes reaching us-west-2 in at most 300 ms lately."""
    _stack(HOME, f"{PREFIX}-pipeline", True)
    _stack(TO, f"{PREFIX}-standby-{TO}", False)
    client("cloudwatch", HOME).put_metric_data(Namespace="AWS/DynamoDB", MetricData=[{
        "MetricName": "ReplicationLatency", "Value": value, "Unit": "Milliseconds",
        "Timestamp": datetime.now(UTC),
        "Dimensions": [{"Name": "TableName", "Value": f"{PREFIX}-data-Main"},
                       {"Name": "ReceivingRegion", "Value": TO}],
    } for value in (120.0, 300.0)])  # fmt: skip
    yield Project()


def consuming(region: str, stack: str) -> dict[str, str]:
    """Each mapping's and schedule's state, by construct id, and what the operations function's
    rebuilds leave the aggregation as."""
    consumers = handover.Consumers.of(client, region, stack)
    lam, events = client("lambda", region), client("events", region)
    states = {
        k.split("Live")[0]: lam.get_event_source_mapping(UUID=u)["State"]
        for k, u in consumers.mappings.items()
    }
    listed = client("cloudformation", region).list_stack_resources(StackName=stack)["StackResourceSummaries"]
    for r in listed:
        if r["ResourceType"] == "AWS::Events::Rule":
            states[r["LogicalResourceId"].split("Schedule")[0]] = events.describe_rule(
                Name=r["PhysicalResourceId"]
            )["State"]
    variables = lam.get_function_configuration(FunctionName=f"{stack}-Operations")["Environment"]["Variables"]
    return states | {"rebuilds leave": variables["PIPELINE_ENABLED"]}


class Rebuild:
    """Stands in for the standby's operations function: what home and the standby were doing when
    the rebuild ran."""

    def __init__(self, fail: bool = False):
        self.seen: list[dict[str, Any]] = []
        self.fail = fail

    def __call__(self, standby: handover.Consumers, tables: dict[str, str]) -> dict[str, Any]:
        home, there = consuming(HOME, f"{PREFIX}-pipeline"), consuming(TO, standby.stack)
        self.seen.append({"home": home, "standby": there, "tables": tables,
                          "function": standby.outputs["OperationsFunctionName"]})  # fmt: skip
        if self.fail:
            raise RuntimeError("the operations function timed out")
        return {"written": 7}


def reached(standby: handover.Consumers) -> None:
    """Stands in for the probe: the standby's operations function answering from the database."""
    assert standby.outputs["OperationsFunctionName"] == f"{PREFIX}-standby-{TO}-Operations"


def run(project: Project, rebuild: Rebuild, *, live: bool = True, clients: Any = client,
        waited: list[float] | None = None, probe: Any = reached) -> handover.Handover:  # fmt: skip
    return handover.failover(
        clients, home=HOME, prefix=PREFIX, to=TO, standbys=json.loads(json.dumps(project.standbys)),
        save=project.save, probe=probe, rebuild=rebuild, live=live,
        wait=(waited if waited is not None else []).append,
    )  # fmt: skip


def test_a_live_failover_fences_home_lets_its_invocations_end_and_replication_settle_then_starts_the_standby(
    app,
):
    rebuild, waited = Rebuild(), []
    done = run(app, rebuild, waited=waited)
    assert done.fenced and done.rebuilt and done.rebuild == {"written": 7}
    # home's invocations under way end (its functions' timeout), then their writes replicate: ten
    # times the largest latency, 300 ms
    assert waited == [DRAIN_TIMEOUT_S, pytest.approx(3.0)] and done.waited_s == pytest.approx(3.0)
    # the rebuild ran with home fenced and the standby's rows settling, its aggregation still off,
    # and a rebuild run at home would leave home's off
    (seen,) = rebuild.seen
    assert seen["home"] == {"WriteBack": "Disabled", "Aggregate": "Disabled", "SqlSync": "DISABLED",
                            "Sweep": "ENABLED", "rebuilds leave": "false"}  # fmt: skip
    assert seen["standby"] == {"WriteBack": "Enabled", "Aggregate": "Disabled", "SqlSync": "ENABLED",
                               "Sweep": "DISABLED", "rebuilds leave": "false"}  # fmt: skip
    assert (
        seen["tables"] == {"main": f"{PREFIX}-data-Main"}
        and seen["function"] == f"{PREFIX}-standby-{TO}-Operations"
    )
    after = consuming(TO, f"{PREFIX}-standby-{TO}")
    assert after["Aggregate"] == "Enabled" and after["rebuilds leave"] == "true"
    # a later deploy keeps it so (cdk/standby.py: the active standby consumes, home's pipeline not)
    assert app.standbys[TO]["active"] is True and app.standbys[TO]["rebuilt"] is True
    # run again: nothing to do but fence home (still fenced, nothing under way: no wait but the
    # replication's); the aggregation runs, so no second rebuild
    again: list[float] = []
    assert not run(app, rebuild, waited=again).rebuilt and len(rebuild.seen) == 1
    assert again == [pytest.approx(3.0)]


def test_the_fence_waits_until_lambda_says_disabled(app, monkeypatch):
    """Disabling takes a while in AWS (Disabling, then Disabled); moto answers at once, so the
    client below says Disabling twice first."""
    asked: dict[str, list[str]] = {}

    class Slow:
        def __init__(self, region: str):
            self.real = client("lambda", region)

        def get_event_source_mapping(self, UUID: str) -> dict[str, Any]:  # boto3's argument name
            state = self.real.get_event_source_mapping(UUID=UUID)["State"]
            said = asked.setdefault(UUID, [])
            said.append({"Disabled": "Disabling", "Enabled": "Enabling"}[state] if len(said) < 2 else state)
            return {"State": said[-1], "FunctionArn": "x"}

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    slow = {region: Slow(region) for region in (HOME, TO)}
    consumers = handover.Consumers.of(client, HOME, f"{PREFIX}-pipeline")
    handover.switch(
        lambda service, region: slow[region], consumers, list(consumers.mappings.values()), enabled=False
    )
    assert all(said == ["Disabling", "Disabling", "Disabled"] for said in asked.values()) and len(asked) == 2


def test_a_failover_stopped_by_a_failed_rebuild_is_finished_by_running_it_again(app):
    with pytest.raises(RuntimeError, match="timed out"):
        run(app, Rebuild(fail=True))
    standby = consuming(TO, f"{PREFIX}-standby-{TO}")
    assert standby["WriteBack"] == "Enabled" and standby["Aggregate"] == "Disabled"  # never folds unrebuilt
    assert standby["rebuilds leave"] == "false"
    assert app.standbys[TO]["active"] is True and "rebuilt" not in app.standbys[TO]  # a deploy keeps it off
    # someone starts the aggregation meanwhile: the run again still rebuilds, which it pauses for
    consumers = handover.Consumers.of(client, TO, f"{PREFIX}-standby-{TO}")
    handover.switch(client, consumers, consumers.split()[0], enabled=True)
    again = Rebuild()
    assert run(app, again).rebuilt and len(again.seen) == 1
    assert consuming(TO, f"{PREFIX}-standby-{TO}")["Aggregate"] == "Enabled" and app.standbys[TO]["rebuilt"]


def test_home_down_refuses_a_live_failover_and_an_offline_one_goes_on(app):
    def home_down(service: str, region: str) -> Any:
        if region == HOME:
            raise EndpointConnectionError(endpoint_url=f"https://{service}.{HOME}.amazonaws.com")
        return client(service, region)

    with pytest.raises(handover.Refused, match="fail over --offline"):
        run(app, Rebuild(), clients=home_down)
    assert "active" not in app.standbys[TO]  # nothing changed
    assert consuming(TO, f"{PREFIX}-standby-{TO}")["WriteBack"] == "Disabled"
    done = run(app, Rebuild(), live=False, clients=home_down)
    assert not done.fenced and done.rebuilt and done.waited_s == 0
    # home answers again: the same command fences it, and rebuilds nothing more
    assert consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"] == "Enabled"
    later = run(app, Rebuild(), live=False)
    assert later.fenced and not later.rebuilt
    assert consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"] == "Disabled"


def test_a_standby_that_cannot_reach_its_database_or_a_rebuild_at_home_refuses_it(app):
    def unreachable(standby: handover.Consumers) -> None:
        raise RuntimeError("App-standby-us-west-2-Operations: OperationalError: connection timed out")

    with pytest.raises(handover.Refused, match=r"standby cannot work: .*connection timed out"):
        run(app, Rebuild(), probe=unreachable)
    # a rebuild under way at home paused its aggregation, and enables it when its unit ends
    home = handover.Consumers.of(client, HOME, f"{PREFIX}-pipeline")
    client("lambda", HOME).update_event_source_mapping(UUID=home.split()[0][0], Enabled=False)
    with pytest.raises(handover.Refused, match="a rebuild runs there"):
        run(app, Rebuild())
    assert (
        consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"] == "Enabled" and "active" not in app.standbys[TO]
    )


def test_what_cannot_fail_over_is_refused_before_anything_changes(app):
    with pytest.raises(handover.Refused, match="no standby prepared in eu-west-1"):
        handover.failover(client, home=HOME, prefix=PREFIX, to="eu-west-1", standbys=app.standbys,
                          save=app.save, probe=reached, rebuild=Rebuild())  # fmt: skip
    app.standbys["eu-west-1"] = {"tables": {}, "active": True}
    with pytest.raises(handover.Refused, match="eu-west-1 consumes since an earlier failover"):
        run(app, Rebuild())
    app.standbys.pop("eu-west-1")
    with pytest.raises(handover.Refused, match="no standby stack in us-west-2"):
        handover.failover(client, home=HOME, prefix="Other", to=TO, standbys=app.standbys, save=app.save,
                          probe=reached, rebuild=Rebuild())  # fmt: skip
    assert consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"] == "Enabled"


def test_the_command_reads_and_writes_cdk_json(app, tmp_path: Path, monkeypatch, capsys):
    """`hybridsync failover --to us-west-2 --deployed` in a project: home and the prefix from its
    cdk.json, the standby marked active there, its other settings kept."""
    settings = {
        "app": "python3 app.py",
        "context": {"prefix": PREFIX, "home_region": HOME, "standby": app.standbys,
                    "existing_db_secret_arn": f"arn:aws:secretsmanager:{HOME}:123456789012:secret:pg"},
    }  # fmt: skip
    (tmp_path / "cdk.json").write_text(json.dumps(settings))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYBRIDSYNC_MODEL", "shop.model:MODEL")
    rebuild = Rebuild()
    monkeypatch.setattr(handover, "rebuild_in", lambda clients, model: rebuild)
    monkeypatch.setattr(handover, "probe_in", lambda clients, model, tables, writer: reached)
    monkeypatch.setattr(handover.time, "sleep", lambda _: None)
    assert cli.main(["failover", "--to", TO, "--deployed"]) == 0
    out = capsys.readouterr().out
    assert f"fencing {HOME}" in out and "us-west-2 consumes" in out and len(rebuild.seen) == 1
    saved = json.loads((tmp_path / "cdk.json").read_text())
    assert saved["app"] == "python3 app.py" and saved["context"]["standby"][TO]["active"] is True
    with pytest.raises(SystemExit, match="us-east-1 is home"):
        cli.main(["failover", "--to", HOME, "--deployed"])


def test_doctor_judges_a_fenced_home_by_what_its_next_deploy_renders(tmp_path: Path, monkeypatch, capsys):
    """Never "enable it" for home's mappings a failover disabled (its deployed template says Enabled
    until home's stacks are deployed again)."""
    from hybridsync.cli.doctor import _fenced

    mapping = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"Enabled": True}}
    templates = {"App-pipeline": {"Resources": {"WriteBackLive": json.loads(json.dumps(mapping))}}}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"standby": {TO: {"tables": {}}}}}))
    _fenced(templates, "App-pipeline")
    assert templates["App-pipeline"]["Resources"]["WriteBackLive"]["Properties"]["Enabled"] is True
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"standby": {TO: {"active": True}}}}))
    _fenced(templates, "App-pipeline")
    assert templates["App-pipeline"]["Resources"]["WriteBackLive"]["Properties"]["Enabled"] is False
    assert "us-west-2 consumes since a deployed failover" in capsys.readouterr().out


def test_a_model_without_aggregates_fails_over_without_a_rebuild():
    """Nothing to count: the standby consumes once fenced and started, and a rerun has nothing to do."""
    _stack(HOME, f"{PREFIX}-pipeline", True, consumers=("WriteBack",))
    _stack(TO, f"{PREFIX}-standby-{TO}", False, consumers=("WriteBack",))
    project, rebuild = Project(), Rebuild()
    done = run(project, rebuild)
    assert not done.rebuilt and rebuild.seen == [] and project.standbys[TO]["rebuilt"] is True
    assert consuming(TO, f"{PREFIX}-standby-{TO}")["WriteBack"] == "Enabled"


def test_a_rebuild_under_way_is_found_in_the_standbys_replica():
    """The job items are in the global tables: the standby's replica lists home's job too."""
    from hybridsync.sync.jobs import JobStore, Unit
    from shop.model import MODEL

    dynamodb, table = client("dynamodb", TO), f"{PREFIX}-data-Main"
    dynamodb.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                   {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                              {"AttributeName": "SK", "AttributeType": "S"}],
    )  # fmt: skip
    store = JobStore(dynamodb, MODEL, {"main": table})
    assert handover.rebuild_under_way(dynamodb, MODEL, {"main": table}) is None
    job = store.create("rebuild", {}, 2)
    assert handover.rebuild_under_way(dynamodb, MODEL, {"main": table}) == f"{job} (0/2 units)"
    store.save(job, Unit(0, None, True))
    store.save(job, Unit(1, None, False, error="the database went away"))  # stopped, not running
    assert handover.rebuild_under_way(dynamodb, MODEL, {"main": table}) is None


# --- with the app's Aurora cluster: an Aurora Global Database whose writer moves too ---------------

GLOBAL = "app-database-global"
PRIMARY = f"arn:aws:rds:{HOME}:123456789012:cluster:app-database-cluster"
SECONDARY = f"arn:aws:rds:{TO}:123456789012:cluster:app-standby-cluster"


class GlobalDatabase:
    """Stands in for RDS's global database API, which moto lacks (no SwitchoverGlobalCluster nor
    FailoverGlobalCluster): each request is checked against botocore's model of RDS, each answer
    has RDS's shape, and a move takes two polls (FailoverState, then the new writer). It records
    what home and the standby were doing when the writer moved."""

    def __init__(self, secondary_status: str = "available") -> None:
        from botocore.validate import validate_parameters

        self.writer, self.polls, self.status = PRIMARY, 0, secondary_status
        self.cancel = False  # the next move ends with the writer where it was
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.seen: list[dict[str, Any]] = []
        model = boto3.client("rds", region_name=TO).meta.service_model
        self.valid = lambda operation, params: validate_parameters(
            params, model.operation_model(operation).input_shape
        )

    def describe_global_clusters(self, **params: Any) -> dict[str, Any]:
        self.valid("DescribeGlobalClusters", params)
        assert params == {"GlobalClusterIdentifier": GLOBAL}
        moving = {}
        if self.polls:
            self.polls -= 1
            moving = {"FailoverState": {"Status": "cancelling" if self.cancel else "switching-over",
                                        "ToDbClusterArn": SECONDARY}}  # fmt: skip
            if not self.polls:
                self.writer, self.cancel = (PRIMARY if self.cancel else SECONDARY), False
        members = [{"DBClusterArn": arn, "IsWriter": arn == self.writer} for arn in (PRIMARY, SECONDARY)]
        return {"GlobalClusters": [{"GlobalClusterIdentifier": GLOBAL, "Status": "available",
                                    "Endpoint": f"{GLOBAL}.global-abc123.global.rds.amazonaws.com",
                                    "GlobalClusterMembers": members, **moving}]}  # fmt: skip

    def describe_db_clusters(self, **params: Any) -> dict[str, Any]:
        self.valid("DescribeDBClusters", params)
        return {"DBClusters": [{"DBClusterArn": params["DBClusterIdentifier"], "Status": self.status}]}

    def _move(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.valid(operation, params)
        self.calls.append((operation, params))
        self.seen.append({"home": consuming(HOME, f"{PREFIX}-pipeline")["WriteBack"],
                          "standby": consuming(TO, f"{PREFIX}-standby-{TO}")["WriteBack"]})  # fmt: skip
        self.polls = 2
        return {"GlobalCluster": {"GlobalClusterIdentifier": GLOBAL}}

    def switchover_global_cluster(self, **params: Any) -> dict[str, Any]:
        return self._move("SwitchoverGlobalCluster", params)

    def failover_global_cluster(self, **params: Any) -> dict[str, Any]:
        return self._move("FailoverGlobalCluster", params)


def aurora(rds: GlobalDatabase, through: Any = client) -> Any:
    return lambda service, region: rds if service == "rds" else through(service, region)


def test_with_aurora_a_live_failover_switches_the_writer_over_between_home_fenced_and_the_standby_started(
    app,
):
    rds, probed = GlobalDatabase(), []
    writer = handover.Writer(TO, GLOBAL, SECONDARY)

    def probe(standby: handover.Consumers) -> None:  # before anything stops, and at the new writer
        probed.append(rds.writer)
        if len(probed) == 2:  # the proxy has yet to find its new writer: tried again
            raise RuntimeError("The target group doesn't have any associated read/write instances")

    done = handover.failover(
        aurora(rds), home=HOME, prefix=PREFIX, to=TO, standbys=app.standbys, save=app.save, probe=probe,
        rebuild=Rebuild(), writer=writer, wait=[].append,
    )  # fmt: skip
    # a switchover (no data lost: Aurora lets the secondary catch up), home fenced, the standby idle
    moved = {"GlobalClusterIdentifier": GLOBAL, "TargetDbClusterIdentifier": SECONDARY}
    assert rds.calls == [("SwitchoverGlobalCluster", moved)]
    assert rds.seen == [{"home": "Disabled", "standby": "Disabled"}]
    assert probed == [PRIMARY, SECONDARY, SECONDARY] and done.writer.startswith(f"{GLOBAL}.global-")
    assert consuming(TO, f"{PREFIX}-standby-{TO}")["WriteBack"] == "Enabled"
    # run again: the writer is there already, nothing moves twice
    handover.failover(aurora(rds), home=HOME, prefix=PREFIX, to=TO, standbys=app.standbys, save=app.save,
                      probe=probe, rebuild=Rebuild(), writer=writer, wait=[].append)  # fmt: skip
    assert len(rds.calls) == 1


def test_with_aurora_home_down_fails_the_writer_over_with_what_it_had_not_replicated_lost(app):
    def home_down(service: str, region: str) -> Any:
        if region == HOME:
            raise EndpointConnectionError(endpoint_url=f"https://{service}.{HOME}.amazonaws.com")
        return client(service, region)

    rds = GlobalDatabase()
    done = handover.failover(
        aurora(rds, home_down), home=HOME, prefix=PREFIX, to=TO, standbys=app.standbys, save=app.save,
        probe=reached, rebuild=Rebuild(), live=False, writer=handover.Writer(TO, GLOBAL, SECONDARY),
        wait=[].append,
    )  # fmt: skip
    assert rds.calls == [("FailoverGlobalCluster", {"GlobalClusterIdentifier": GLOBAL,
                          "TargetDbClusterIdentifier": SECONDARY, "AllowDataLoss": True})]  # fmt: skip
    assert not done.fenced and rds.writer == SECONDARY


def test_with_aurora_a_move_under_way_is_waited_for_and_a_secondary_not_ready_refuses_the_failover(app):
    rds = GlobalDatabase()
    rds.polls = 3  # a switchover someone started (or a run that stopped): waited for, never asked twice
    writer = handover.Writer(TO, GLOBAL, SECONDARY)
    assert writer.move(aurora(rds), live=True, say=print).endswith("rds.amazonaws.com") and rds.calls == []
    # one cancelled ("cancelling", then the writer still at home): asked again, once
    cancelled = GlobalDatabase()
    cancelled.polls, cancelled.cancel = 2, True
    writer.move(aurora(cancelled), live=True, say=print)
    assert [name for name, _ in cancelled.calls] == [
        "SwitchoverGlobalCluster"
    ] and cancelled.writer == SECONDARY
    with pytest.raises(RuntimeError, match="secondary cluster is creating"):  # Aurora still copies the data
        handover.Writer(TO, GLOBAL, SECONDARY).ready(aurora(GlobalDatabase(secondary_status="creating")))
    handover.Writer(TO, GLOBAL, SECONDARY).ready(aurora(GlobalDatabase()))
    with pytest.raises(RuntimeError, match="is no member of"):
        handover.Writer(TO, GLOBAL, SECONDARY.replace("standby", "other")).ready(aurora(GlobalDatabase()))


def test_with_aurora_the_writer_is_named_by_the_standbys_database_stack(app):
    stack = f"{PREFIX}-standby-{TO}-database"
    with pytest.raises(handover.Refused, match=f"no standby database in {TO}.*npx cdk deploy {stack}"):
        handover.Writer.of(client, TO, stack)
    outputs = {"GlobalClusterId": {"Value": GLOBAL}, "ClusterArn": {"Value": SECONDARY}}
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": outputs}
    client("cloudformation", TO).create_stack(StackName=stack, TemplateBody=json.dumps(template))
    assert handover.Writer.of(client, TO, stack) == handover.Writer(TO, GLOBAL, SECONDARY)


class Operations:
    """Stands in for the standby's operations function (moto runs a function's code in Docker, which
    this machine lacks): the events it was invoked with, its login's outcome."""

    def __init__(self, outcome: str = "connected") -> None:
        self.events: list[dict[str, Any]] = []
        self.outcome = outcome

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:
        event = json.loads(Payload)
        self.events.append(event)
        answer = (
            {"database": {"outcome": self.outcome, "detail": "FATAL: PAM authentication failed"}}
            if event.get("hybridsync") == "doctor"
            else {"revision": "0007"}
        )
        return {"Payload": io.BytesIO(json.dumps(answer).encode())}


def test_with_aurora_the_probe_logs_in_through_the_reader_endpoint_until_the_writer_moved(app):
    from shop.model import MODEL

    table = f"{PREFIX}-data-Main"
    client("dynamodb", TO).create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                              {"AttributeName": "SK", "AttributeType": "S"}],
    )  # fmt: skip
    rds, operations = GlobalDatabase(), Operations()
    clients = aurora(
        rds, lambda service, region: operations if service == "lambda" else client(service, region)
    )
    probe = handover.probe_in(clients, MODEL, {"main": table}, handover.Writer(TO, GLOBAL, SECONDARY))
    standby = handover.Consumers.of(client, TO, f"{PREFIX}-standby-{TO}")
    probe(standby)  # the writer at home: the standby's own login, through the read-only endpoint
    assert operations.events == [{"hybridsync": "doctor", "database": "reader"}]
    operations.outcome = "refused"
    with pytest.raises(RuntimeError, match="cannot log in: FATAL: PAM authentication failed"):
        probe(standby)
    rds.polls = 2  # a move under way (a run that stopped): nothing to prove, the failover waits for it
    probe(standby)
    assert len(operations.events) == 2
    rds.polls, rds.writer = 0, SECONDARY  # moved: the schema's revision, through the read/write one
    probe(standby)
    assert operations.events[-1] == {"operation": "migrations", "action": "current"}
