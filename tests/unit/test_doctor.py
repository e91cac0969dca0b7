"""`hybridsync doctor`: the probe a function answers (each call classified, one attempt, no secret
value kept), every handler answering it first, and the checks of a deployed app read from its
stacks: moto for Lambda's mappings, RDS Proxy's targets and SNS's subscriptions; botocore's Stubber
for CloudFormation's templates and CloudWatch's alarm history (moto has no DescribeAlarmHistory)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.stub import ANY, Stubber
from moto import mock_aws

from hybridsync import truth
from hybridsync.cli import doctor as cli
from hybridsync.cli import main
from hybridsync.runtime import doctor
from hybridsync.truth import doctor as engine

ROOT = Path(__file__).resolve().parents[2]
Templates = truth.Templates
REGION = "us-east-1"


def refused(code: str, message: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Call")


class FakeClient:
    """A client whose every call raises `error` (or answers {}): what a function's client meets."""

    def __init__(self, error: Exception | None = None):
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def call(**_: Any) -> dict[str, Any]:
            if self.error is not None:
                raise self.error
            return {"SecretString": "s3cr3t"}

        return call


# --- the probe -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (None, "reached"),
        (refused("AccessDeniedException", "not authorized"), "reached"),  # the route works
        (ConnectTimeoutError(endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com"), "unreachable"),
        (EndpointConnectionError(endpoint_url="https://sqs.us-east-1.amazonaws.com"), "unreachable"),
        (ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"), "error"),
        (ValueError("boom"), "error"),
    ],
)
def test_a_service_is_reached_by_any_answer_even_a_refusal_and_unreachable_without_a_connection(
    error, outcome
):
    assert doctor.reach("dynamodbstreams", lambda _: FakeClient(error))["outcome"] == outcome


def test_an_unreachable_service_is_tried_once_not_retried(monkeypatch):
    """aws.client retries 8 times; the probe's client makes one attempt (a timeout each, else)."""
    monkeypatch.setenv("DYNAMODB_ENDPOINT", "http://127.0.0.1:1")
    attempts = []

    def no_route(**kwargs: Any) -> None:
        attempts.append(kwargs["request"].url)
        raise ConnectTimeoutError(endpoint_url=kwargs["request"].url)

    def make(service: str) -> Any:
        made = doctor.client(service)
        made.meta.events.register("before-send", no_route)
        assert made.meta.config.connect_timeout == doctor.CONNECT_TIMEOUT_S
        return made

    result = doctor.reach("dynamodbstreams", make)
    assert result["outcome"] == "unreachable" and len(attempts) == 1, (result, attempts)


def test_a_service_without_a_known_call_is_probed_by_an_argument_free_listing():
    def make(service: str) -> Any:
        return boto3.client(service, region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")

    operation, params = doctor._any_listing(make, "ecs")
    assert operation.startswith(("list_", "describe_")) and params == {}


def test_secrets_are_those_the_functions_variables_name_and_no_value_is_kept(monkeypatch):
    roles = {
        "writer": "arn:aws:secretsmanager:us-east-1:1:secret:w",
        "reader": "arn:aws:secretsmanager:us-east-1:1:secret:r",
    }
    monkeypatch.setenv("DB_ROLE_SECRETS", json.dumps(roles))
    monkeypatch.setenv("CURSOR_KEY_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:1:secret:c")
    monkeypatch.delenv("DB_SECRET_ARN", raising=False)
    kms = refused("AccessDeniedException", "Access to KMS is not allowed")

    class Secrets:
        def get_secret_value(self, SecretId: str) -> dict[str, str]:
            if SecretId.endswith(":c"):  # under a customer key the role may not use
                raise kms
            return {"SecretString": "s3cr3t"}

    wanted = ["DB_ROLE_SECRETS", "CURSOR_KEY_SECRET_ARN", "DB_SECRET_ARN"]
    answer = doctor.probe({"hybridsync": "doctor", "secrets": wanted}, lambda _: Secrets())
    secrets = answer["secrets"]
    assert set(secrets) == {
        "DB_ROLE_SECRETS.writer",
        "DB_ROLE_SECRETS.reader",
        "CURSOR_KEY_SECRET_ARN",
        "DB_SECRET_ARN",
    }
    assert secrets["DB_SECRET_ARN"]["outcome"] == "missing"
    outcomes = sorted(s["outcome"] for label, s in secrets.items() if label != "DB_SECRET_ARN")
    assert outcomes == ["readable", "readable", "refused"]
    assert "s3cr3t" not in json.dumps(answer)  # the value never leaves the function
    (kms_refusal,) = [s for s in secrets.values() if s["outcome"] == "refused"]
    assert "Access to KMS is not allowed" in kms_refusal["detail"]


def test_the_handler_runs_for_any_event_but_the_probe():
    ran = []
    handler = doctor.answers(lambda event, context: ran.append(event) or "handled")
    assert handler({"Records": []}, None) == "handled" and ran == [{"Records": []}]
    answer = handler({"hybridsync": "doctor", "services": []}, None)
    assert answer["services"] == {} and ran == [{"Records": []}]


# --- the checks, on a deployed app ---------------------------------------------------------------

PREFIX = "Shop"


def _path(stack: str, construct: str) -> dict[str, Any]:
    return {"aws:cdk:path": f"{stack}/{construct}/Resource"}


def templates(canary: bool = True) -> dict[str, dict[str, Any]]:
    """The five stacks, cut down to what doctor reads: a VPC function with a secret and a login, its
    alias and two stream mappings, the proxy, the alarm topic and alarms (a canary among them)."""
    pipeline, database, monitoring = f"{PREFIX}-pipeline", f"{PREFIX}-database", f"{PREFIX}-monitoring"
    function = {
        "Type": "AWS::Lambda::Function",
        "Metadata": _path(pipeline, "Operations/Function"),
        "Properties": {
            "Handler": "hybridsync.functions.operations.handler",
            "VpcConfig": {"SecurityGroupIds": ["sg-1"], "SubnetIds": ["subnet-1"]},
            "Environment": {
                "Variables": {
                    "DB_ROLE": "writer",
                    "CURSOR_KEY_SECRET_ARN": {"Ref": "Key"},
                    "TABLE_MAIN": "main",
                }
            },
        },
    }
    mapping = {
        "Type": "AWS::Lambda::EventSourceMapping",
        "Metadata": _path(pipeline, "Operations/Live/Source"),
        "Properties": {"FunctionName": {"Ref": "Live"}, "Enabled": True},
    }
    alarm = {
        "Type": "AWS::CloudWatch::Alarm",
        "Metadata": _path(monitoring, "OperationsErrors"),
        "Properties": {"AlarmActions": [{"Ref": "Topic"}], "OKActions": [{"Ref": "Topic"}]},
    }
    alarms = {"Errors": alarm, "Silent": {**alarm, "Properties": {}, "Metadata": _path(monitoring, "Silent")}}
    if canary:
        alarms["Canary"] = {**alarm, "Metadata": _path(monitoring, "DoctorCanary")}
    return {
        f"{PREFIX}-data": {"Resources": {}},
        f"{PREFIX}-api": {"Resources": {}},
        database: {
            "Resources": {
                "Proxy": {"Type": "AWS::RDS::DBProxy", "Metadata": _path(database, "Proxy"), "Properties": {}}
            }
        },
        pipeline: {
            "Resources": {
                "Function": function,
                "Key": {"Type": "AWS::SecretsManager::Secret", "Properties": {}},
                "Live": {"Type": "AWS::Lambda::Alias", "Properties": {"FunctionName": {"Ref": "Function"}}},
                "Kept": mapping,
                "Paused": {**mapping, "Properties": {**mapping["Properties"], "Enabled": False}},
                "HandPaused": mapping,
            }
        },
        monitoring: {"Resources": {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {}}, **alarms}},
    }


class Invoker:
    """The function's side of Invoke: its probe answered with clients that reach DynamoDB and not
    DynamoDB Streams (no endpoint for it in its VPC)."""

    def __init__(self, environment: dict[str, str]):
        self.environment, self.events = environment, []

    def invoke(self, FunctionName: str, Qualifier: str, Payload: bytes) -> dict[str, Any]:
        assert Qualifier == "live"
        event = json.loads(Payload)
        self.events.append((FunctionName, event))
        unreachable = ConnectTimeoutError(endpoint_url="https://streams.dynamodb.us-east-1.amazonaws.com")
        with pytest.MonkeyPatch.context() as patch:
            for name, value in self.environment.items():
                patch.setenv(name, value)
            answer = doctor.probe(
                {**event, "database": False},
                lambda s: FakeClient(unreachable if s == "dynamodbstreams" else None),
            )
        answer["database"] = {"outcome": "connected", "detail": "logged in as hybridsync_writer"}
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


def network(templates: Any, stack: str, logical_id: str) -> Any:
    """What truth.network says of the function: it needs DynamoDB and its Streams, and only
    DynamoDB has an endpoint in its VPC."""
    return SimpleNamespace(
        needed={
            "dynamodb": "dynamodb:GetItem in its role",
            "dynamodbstreams": "dynamodb:DescribeStream in its role",
        },
        reachable={"dynamodb": "gateway endpoint Shop-database/VpcDynamoDb"},
    )


@pytest.fixture
def deployed(monkeypatch):
    """Moto's Lambda (a function, three mappings: one paused by the template, one by hand), RDS (a
    proxy and its cluster) and SNS (the alarm topic, one email subscriber); CloudFormation's
    templates and resources, and CloudWatch's alarm history, stubbed."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT", "DYNAMODB_ENDPOINT", "LAMBDA_ENDPOINT", "DYNAMODB_STREAMS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    # Neither reset nor wipe moto's backends on the way in or out: under xdist this worker may hold
    # the session's moto server, in this process, whose buckets and secrets the same backends keep.
    mocked = mock_aws()
    mocked.start(reset=False)
    made: list[Callable[[], Any]] = []
    try:
        iam = boto3.client("iam")
        role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        made.append(lambda: iam.delete_role(RoleName="r"))
        functions = boto3.client("lambda")
        functions.create_function(
            FunctionName="Shop-Operations-1",
            Runtime="python3.12",
            Role=role,
            Handler="x.handler",
            Code={"ZipFile": b"not run"},
        )
        made.append(lambda: functions.delete_function(FunctionName="Shop-Operations-1"))
        dynamodb = boto3.client("dynamodb")
        stream = dynamodb.create_table(
            TableName="main",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        made.append(lambda: dynamodb.delete_table(TableName="main"))
        uuids = {}
        for logical, enabled in (("Kept", True), ("Paused", False), ("HandPaused", False)):
            uuids[logical] = functions.create_event_source_mapping(
                FunctionName="Shop-Operations-1",
                EventSourceArn=stream,
                StartingPosition="TRIM_HORIZON",
                Enabled=enabled,
            )["UUID"]
            made.append(lambda uuid=uuids[logical]: functions.delete_event_source_mapping(UUID=uuid))
        rds, ec2 = boto3.client("rds"), boto3.client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        made.append(lambda: ec2.delete_vpc(VpcId=vpc))
        subnets = [
            ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{n}.0/24")["Subnet"]["SubnetId"] for n in (1, 2)
        ]
        made += [lambda subnet=subnet: ec2.delete_subnet(SubnetId=subnet) for subnet in subnets]
        rds.create_db_cluster(
            DBClusterIdentifier="cluster",
            Engine="aurora-postgresql",
            MasterUsername="a",
            MasterUserPassword="password123",
        )
        made.append(lambda: rds.delete_db_cluster(DBClusterIdentifier="cluster", SkipFinalSnapshot=True))
        made.append(
            lambda: [
                rds.delete_db_cluster_snapshot(DBClusterSnapshotIdentifier=x["DBClusterSnapshotIdentifier"])
                for x in rds.describe_db_cluster_snapshots(DBClusterIdentifier="cluster")[
                    "DBClusterSnapshots"
                ]
            ]
        )  # moto's automated one
        rds.create_db_proxy(
            DBProxyName="shop-proxy",
            EngineFamily="POSTGRESQL",
            RoleArn=role,
            VpcSubnetIds=subnets,
            Auth=[
                {
                    "AuthScheme": "SECRETS",
                    "IAMAuth": "REQUIRED",
                    "SecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:admin",
                }
            ],
        )
        made.append(lambda: rds.delete_db_proxy(DBProxyName="shop-proxy"))
        rds.register_db_proxy_targets(DBProxyName="shop-proxy", DBClusterIdentifiers=["cluster"])
        sns = boto3.client("sns")
        topic = sns.create_topic(Name="alarms")["TopicArn"]
        made.append(lambda: sns.delete_topic(TopicArn=topic))
        physical = {
            "Function": "Shop-Operations-1",
            "Kept": uuids["Kept"],
            "Paused": uuids["Paused"],
            "HandPaused": uuids["HandPaused"],
            "Proxy": "shop-proxy",
            "Topic": topic,
            "Canary": "Shop-DoctorCanary-X",
            "Errors": "Shop-OperationsErrors-X",
            "Silent": "Shop-Silent-X",
        }
        yield SimpleNamespace(sns=sns, topic=topic, physical=physical)
    finally:  # what it made, removed, whatever failed (the backends are that server's: no reset)
        for undo in reversed(made):
            with contextlib.suppress(Exception):
                undo()
        mocked.stop(remove_data=False)


def stubbed_cloudformation(stacks: dict[str, dict[str, Any]], physical: dict[str, str]) -> Any:
    client = boto3.client("cloudformation")
    stubber = Stubber(client)
    for stack in (f"{PREFIX}-{suffix}" for suffix in engine.STACKS):  # read in this order
        template = stacks[stack]
        stubber.add_response(
            "get_template",
            {"TemplateBody": json.dumps(template)},
            {"StackName": stack, "TemplateStage": "Original"},
        )
        summaries = [
            {
                "LogicalResourceId": logical,
                "PhysicalResourceId": physical.get(logical, logical),
                "ResourceType": r["Type"],
                "LastUpdatedTimestamp": datetime.now(UTC),
                "ResourceStatus": "CREATE_COMPLETE",
            }
            for logical, r in template["Resources"].items()
        ]
        stubber.add_response(
            "list_stack_resources", {"StackResourceSummaries": summaries}, {"StackName": stack}
        )
    stubber.activate()
    return client


def stubbed_cloudwatch(alarm: str, summary: str) -> Any:
    client = boto3.client("cloudwatch")
    stubber = Stubber(client)
    for state in ("OK", "ALARM"):  # from OK, so that the change runs the alarm's action
        stubber.add_response(
            "set_alarm_state", {}, {"AlarmName": alarm, "StateValue": state, "StateReason": ANY}
        )
    item = {
        "AlarmName": alarm,
        "Timestamp": datetime.now(UTC),
        "HistoryItemType": "Action",
        "HistorySummary": summary,
        "HistoryData": "{}",
    }
    stubber.add_response(
        "describe_alarm_history",
        {"AlarmHistoryItems": [item]},
        {
            "AlarmName": alarm,
            "HistoryItemType": "Action",
            "StartDate": ANY,
            "ScanBy": "TimestampDescending",
            "MaxRecords": 20,
        },
    )
    stubber.add_response("set_alarm_state", {}, {"AlarmName": alarm, "StateValue": "OK", "StateReason": ANY})
    stubber.activate()
    return client


def check_deployed(deployed, stacks, summary="Successfully executed action arn:aws:sns:us-east-1:1:alarms"):
    invoker = Invoker({"CURSOR_KEY_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:key"})
    cloudwatch = stubbed_cloudwatch(deployed.physical["Canary"], summary)
    clients = {"cloudformation": stubbed_cloudformation(stacks, deployed.physical), "cloudwatch": cloudwatch}

    def client(service: str, **config: Any) -> Any:
        if service == "lambda" and "read_timeout" in config:  # the one that invokes
            return invoker
        return clients.get(service) or boto3.client(service)

    target = engine.Deployed(PREFIX, client)
    out = io.StringIO()
    code = engine.report(
        engine.run_checks(engine.App(Templates(target.templates)), target, network, canary_wait_s=1),
        False,
        target.where,
        out,
    )
    return code, out.getvalue().splitlines(), invoker


def test_a_deployed_app_is_checked_one_line_each_and_fails_naming_what_is_broken(deployed):
    deployed.sns.subscribe(TopicArn=deployed.topic, Protocol="email", Endpoint="ops@example.com")
    code, lines, invoker = check_deployed(deployed, templates())
    ((function, event),) = invoker.events  # its live alias, asked for what the templates say it needs
    assert function == "Shop-Operations-1"
    assert event == {
        "hybridsync": "doctor",
        "services": ["dynamodb", "dynamodbstreams"],
        "secrets": ["CURSOR_KEY_SECRET_ARN"],
        "database": True,
    }
    failed = [line for line in lines if line.startswith("FAIL")]
    assert code == 1 and len(failed) == 3, lines
    streams, hand_paused, silent = failed
    assert streams.startswith("FAIL network  Shop-pipeline/Operations cannot reach dynamodbstreams")
    assert "no route to dynamodbstreams" in streams
    assert "--uuid" in hand_paused and "--enabled" in hand_paused
    assert hand_paused.startswith(
        "FAIL mapping  Shop-pipeline/Operations HandPaused Disabled, but the template says Enabled"
    )
    assert silent.startswith("FAIL alarm    Shop-monitoring/Silent has no action")
    passed = "\n".join(line for line in lines if line.startswith("ok"))
    assert "Shop-pipeline/Operations reaches dynamodb (gateway endpoint Shop-database/VpcDynamoDb)" in passed
    assert "reads CURSOR_KEY_SECRET_ARN" in passed and "logs in (logged in as hybridsync_writer)" in passed
    assert "Shop-database/shop-proxy target cluster AVAILABLE" in passed
    assert "Paused Disabled on purpose" in passed and "Kept Enabled" in passed
    assert (
        f"ok   alarm    {deployed.topic} heard by 1 confirmed subscription(s) (email); 2 alarm(s)" in passed
    )
    assert "ok   canary   Shop-DoctorCanary-X to ALARM and back: Successfully executed action" in passed
    assert (
        lines[-1]
        == f"{len(lines) - 1} checks of the deployed stacks Shop-*: 3 FAILED (alarm, mapping, network)"
    )


def test_a_topic_nobody_confirmed_and_a_canary_whose_notification_failed_fail(deployed):
    summary = (
        "Failed to execute action arn:aws:sns:us-east-1:1:alarms. Received error: "
        '"CloudWatch Alarms does not have authorization to access the SNS topic encryption key."'
    )
    code, lines, _ = check_deployed(deployed, templates(), summary)
    failed = {line.split()[1]: line for line in lines if line.startswith("FAIL")}
    assert code == 1 and {"alarm", "canary"} <= set(failed)
    assert "no confirmed subscription: nobody hears the alarms" in failed["alarm"]
    assert "aws sns subscribe" in failed["alarm"]
    assert "Failed to execute action" in failed["canary"] and "encryption key" in failed["canary"]


def test_stacks_without_the_canary_fail_its_check():
    checks = list(engine.canary(engine.App(Templates(templates(canary=False))), target=None, wait_s=1))  # type: ignore[arg-type]
    assert [(c.kind, c.ok) for c in checks] == [("canary", False)] and "DoctorCanary" in checks[0].message


class LocalTarget:
    """The local app's answers, canned: a canary whose notification is never recorded."""

    where = "the local app"

    def __init__(self) -> None:
        self.states: list[str] = []

    def alarm_name(self, alarm: Any) -> str:
        return "hybridsync-DoctorCanary"

    def set_alarm_state(self, alarm: Any, state: str, reason: str) -> None:
        self.states.append(state)

    def alarm_history(self, alarm: Any, since: datetime) -> list[dict[str, Any]]:
        return [{"HistoryItemType": "StateUpdate", "HistorySummary": "Alarm updated from OK to ALARM"}]


def test_a_canary_with_no_action_in_time_fails_and_goes_back_to_ok():
    target = LocalTarget()
    (check,) = engine.canary(engine.App(Templates(templates())), target, wait_s=0.2, poll_s=0.05)  # type: ignore[arg-type]
    assert not check.ok and "no action in its history within 0.2 s" in check.message
    assert target.states == ["OK", "ALARM", "OK"]


def test_the_report_is_one_line_per_check_or_json_and_exits_1_on_a_failure():
    checks = [
        engine.Check("proxy", "P", True, "not emulated locally"),
        engine.Check("mapping", "M", False, "Disabled", "enable it"),
    ]
    out = io.StringIO()
    assert engine.report(iter(checks), False, "the local app", out) == 1
    assert out.getvalue().splitlines() == [
        "ok   proxy    P not emulated locally",
        "FAIL mapping  M Disabled; enable it",
        "2 checks of the local app: 1 FAILED (mapping)",
    ]
    out = io.StringIO()
    assert engine.report(iter(checks[:1]), True, "the local app", out) == 0
    assert json.loads(out.getvalue()) == {
        "where": "the local app",
        "ok": True,
        "checks": [
            {"kind": "proxy", "subject": "P", "ok": True, "message": "not emulated locally", "fix": ""}
        ],
    }


def test_the_command_is_listed_with_its_help_and_example():
    from hybridsync.cli.reference import cli_markdown, commands

    assert "doctor" in commands()
    help_text = commands()["doctor"].format_help()
    assert (
        "--deployed" in help_text
        and "--json" in help_text
        and "example: hybridsync doctor --deployed" in help_text
    )
    assert "## hybridsync doctor" in cli_markdown()


def test_a_teams_own_topic_is_checked_by_its_arn():
    """`-c alarm_topic_arn=`: the alarms name a topic of the team's, outside the stacks."""
    stacks = templates()
    pager = "arn:aws:sns:us-east-1:123456789012:pager"
    for alarm in stacks[f"{PREFIX}-monitoring"]["Resources"].values():
        if alarm["Type"] == "AWS::CloudWatch::Alarm" and alarm["Properties"]:
            alarm["Properties"] = {"AlarmActions": [pager], "OKActions": [pager]}
    asked = []

    class Target:
        def subscribers(self, topic: Any) -> engine.Check:
            asked.append(topic)
            return engine.Check("alarm", str(topic), True, "heard by 1 confirmed subscription(s) (https)")

    checks = list(engine.topics(engine.App(Templates(stacks)), Target()))  # type: ignore[arg-type]
    assert asked == [pager]
    assert [c.line() for c in checks if c.ok] == [
        f"ok   alarm    {pager} heard by 1 confirmed subscription(s) (https); 2 alarm(s) act on it"
    ]


@pytest.mark.filterwarnings("ignore:A test tried to use socket")  # the one call, refused as a stopped app's
def test_doctor_without_a_running_local_app_says_so_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"is `hybridsync up` running"):
        cli.local_environment(tmp_path)
    (tmp_path / "env").write_text("export LAMBDA_ENDPOINT='http://127.0.0.1:9'\n")
    assert cli.local_environment(tmp_path) == {"LAMBDA_ENDPOINT": "http://127.0.0.1:9"}
    assembly = ROOT / "tests" / "minimal_model"  # any folder: the app's Lambda API is asked first
    with pytest.raises(SystemExit, match=r"does not answer .*is `hybridsync up` running"):
        main(["doctor", "--state-dir", str(tmp_path), "--assembly", str(assembly)])
