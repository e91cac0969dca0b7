"""The deploy truth (hybridsync.truth): every documented variant synthesizes with no finding, each
of the issue's eight defects is held by a test, and each rule, shown a template broken on purpose,
refuses it (and `synth` refuses the app)."""

import copy
import json

import pytest
from aws_cdk import App

from hybridsync import truth
from hybridsync.cdk import DeployTruthError, build, synth
from hybridsync.sql import roles
from tests.conftest import ROOT
from tests.infra.test_database_access import ADMIN_SECRET, KEY, NETWORK, functions, of_type, synthesize

pytestmark = pytest.mark.infra
STACKS = ("data", "database", "pipeline", "api", "monitoring")


def templates(stacks: dict[str, dict]) -> truth.Templates:
    return truth.Templates({f"HybridSync-{name}": copy.deepcopy(t) for name, t in stacks.items()})


def found(stacks: dict[str, dict], rule: str) -> list[truth.Finding]:
    return [f for f in truth.check(templates(stacks)) if f.rule == rule]


def resource(stacks: dict[str, dict], stack: str, prefix: str, kind: str | None = None) -> dict:
    return next(r for k, r in stacks[stack]["Resources"].items()
                if k.startswith(prefix) and (kind is None or r["Type"] == kind))  # fmt: skip


def env(stacks: dict[str, dict], name: str) -> dict:
    return functions(stacks["pipeline"])[name]


def test_every_documented_variant_has_no_finding(variants):
    for name, stacks in variants.items():
        assert truth.check(templates(stacks)) == [], name


def test_every_rule_cites_an_aws_page():
    pages = truth.PAGES.values()
    assert all(page.startswith(("https://docs.aws.amazon.com/", "https://repost.aws/")) for page in pages)


# --- the eight, each as AWS documents it ----------------------------------------------------------


def test_1_the_alarm_topic_lets_this_accounts_cloudwatch_publish(variants):
    (policy,) = of_type(variants["default"]["monitoring"], "AWS::SNS::TopicPolicy").values()
    (publish,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"]
                  if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]  # fmt: skip
    assert publish["Effect"] == "Allow" and publish["Action"] == "sns:Publish"
    assert set(publish["Condition"]) == {"StringEquals", "ArnLike"}
    assert "aws:SourceAccount" in publish["Condition"]["StringEquals"]


def test_1_an_encrypted_topic_uses_a_key_cloudwatch_may_use(variants):
    monitoring = variants["kms"]["monitoring"]
    (topic,) = of_type(monitoring, "AWS::SNS::Topic").values()
    (key_id,) = [k for k, r in monitoring["Resources"].items() if r["Type"] == "AWS::KMS::Key"]
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    statements = monitoring["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    (cloudwatch,) = [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert set(cloudwatch["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}


def test_2_the_proxy_availability_alarm_watches_a_published_metric(variants):
    alarm = resource(variants["default"], "monitoring", "ProxyAvailability")["Properties"]
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"] if d["Name"] != "ProxyName"} == {
        "TargetGroup": "default",
        "TargetRole": "READ_WRITE",
    }


def test_3_the_operations_function_reaches_the_stream_by_its_endpoint(variants):
    for name in ("default", "existing"):
        stacks = variants[name]
        found_ = templates(stacks)
        (ops,) = [
            k for k in of_type(stacks["pipeline"], "AWS::Lambda::Function") if k.startswith("Operations")
        ]
        network = truth.network(found_, "HybridSync-pipeline", ops)
        assert network is not None and "dynamodbstreams" in network.needed, name
        assert "AWS_ENDPOINT_URL_DYNAMODB_STREAMS" in network.reachable["dynamodbstreams"], name
        (streams,) = [e["Properties"] for e in of_type(stacks["database"], "AWS::EC2::VPCEndpoint").values()
                      if "dynamodb-streams" in json.dumps(e["Properties"]["ServiceName"])]  # fmt: skip
        assert streams["VpcEndpointType"] == "Interface" and streams["PrivateDnsEnabled"] is False


def test_4_the_users_step_may_decrypt_the_role_secrets_under_the_customer_key(variants):
    pipeline = variants["kms"]["pipeline"]
    kms = [s for k, p in of_type(pipeline, "AWS::IAM::Policy").items() if k.startswith("UsersFunction")
           for s in p["Properties"]["PolicyDocument"]["Statement"]
           if "kms:Decrypt" in json.dumps(s["Action"])]  # fmt: skip
    assert kms and KEY in json.dumps(kms)


def test_5_dead_letters_of_scheduled_functions_and_time_series_tables_under_the_key(variants):
    pipeline = variants["kms"]["pipeline"]
    for name in ("Sweep", "SqlSync", "Rotate"):
        policies = of_type(pipeline, "AWS::IAM::Policy").items()
        said = json.dumps(
            [p["Properties"]["PolicyDocument"] for k, p in policies if k.startswith(f"{name}Function")]
        )
        assert "kms:GenerateDataKey" in said and "kms:Decrypt" in said and KEY in said, name
    assert env(variants["kms"], "Rotate")["TIMESERIES_KMS_KEY_ARN"] == KEY
    assert "TIMESERIES_KMS_KEY_ARN" not in env(variants["default"], "Rotate")


def test_5_a_time_series_table_is_created_under_the_customer_key():
    from datetime import UTC, datetime

    from hybridsync.dynamodb import timeseries
    from shop.model import MODEL

    class Client:
        created: list[dict] = []

        def get_paginator(self, _name):
            return type("P", (), {"paginate": lambda *_: [{"TableNames": []}]})()

        def create_table(self, **request):
            self.created.append(request)

        def update_continuous_backups(self, **_):
            return {}

        def __getattr__(self, _name):
            return lambda **_: {"Table": {"TableStatus": "ACTIVE"}, "ContinuousBackupsDescription": {}}

    (series,) = MODEL.time_series
    client = Client()
    timeseries.rotate(client, None, "bucket", "p", datetime(2026, 11, 27, tzinfo=UTC), series, kms_key=KEY)
    assert client.created and all(
        r["SSESpecification"] == {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": KEY}
        for r in client.created
    )


def test_6_an_existing_vpc_reaches_dynamodb_by_its_endpoints_name(variants):
    database = variants["existing"]["database"]
    endpoints = {json.dumps(e["Properties"]["ServiceName"]).split(".")[-1].strip('"]}'): e["Properties"]
                 for e in of_type(database, "AWS::EC2::VPCEndpoint").values()}  # fmt: skip
    assert endpoints["dynamodb"]["PrivateDnsEnabled"] is False
    assert endpoints["s3"]["DnsOptions"] == {"PrivateDnsOnlyForInboundResolverEndpoint": "AllResolvers"}
    for name in ("Api", "SqlSync", "Operations", "Aggregate"):
        assert "AWS_ENDPOINT_URL_DYNAMODB" in env(variants["existing"], name), name


def test_7_the_rotations_reach_secrets_manager_in_an_existing_vpc(variants):
    database = variants["existing"]["database"]
    (endpoint,) = [
        k for k, e in of_type(database, "AWS::EC2::VPCEndpoint").items() if k.startswith("SecretsManager")
    ]
    group = database["Resources"][endpoint]["Properties"]["SecurityGroupIds"][0]["Fn::GetAtt"][0]
    sources = {json.dumps(i["Properties"]["SourceSecurityGroupId"])
               for i in of_type(database, "AWS::EC2::SecurityGroupIngress").values()
               if i["Properties"]["GroupId"] == {"Fn::GetAtt": [group, "GroupId"]}}  # fmt: skip
    assert sum("RotationGroup" in s for s in sources) == 3 and any("DatabaseClients" in s for s in sources)


def test_8_a_direct_connection_trusts_the_rds_bundle_and_one_through_the_proxy_amazons_roots(
    variants, bundle
):
    with pytest.raises(ValueError, match="db_root_certificates"):
        synthesize(existing_db_secret_arn=ADMIN_SECRET, **NETWORK)
    direct, proxied = (
        functions(variants["existing"]["pipeline"]),
        functions(variants["existing_proxy"]["pipeline"]),
    )
    for name, variables in direct.items():
        if "DB_ROLE" in variables:
            assert variables["DB_SSLROOTCERT"] == "/var/task/hybridsync-trust.pem", name
    for name, variables in proxied.items():
        if "DB_ROLE" in variables:  # the Users step alone reaches the database straight
            assert ("DB_SSLROOTCERT" in variables) == (name == "Users"), name


# --- each rule refuses a template broken on purpose -----------------------------------------------


def test_a_topic_policy_without_cloudwatch_is_refused(variants):
    stacks = copy.deepcopy(variants["default"])
    (policy,) = of_type(stacks["monitoring"], "AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    publish = next(s for s in statements if "Principal" in s and s["Principal"] != "*")
    publish.pop("Condition")
    assert [f.message for f in found(stacks, "alarm-topic-policy")] == [
        "CloudWatch may publish without an aws:SourceAccount or aws:SourceArn condition (confused deputy)"
    ]
    statements.remove(publish)  # as on main: enforce_ssl's Deny alone
    (finding,) = found(stacks, "alarm-topic-policy")
    assert "no alarm can notify" in finding.message and finding.resource.startswith(
        "HybridSync-monitoring/AlarmTopic"
    )


def test_a_topic_key_cloudwatch_may_not_use_is_refused(variants):
    stacks = copy.deepcopy(variants["kms"])
    (key,) = of_type(stacks["monitoring"], "AWS::KMS::Key").values()
    key["Properties"]["KeyPolicy"]["Statement"] = key["Properties"]["KeyPolicy"]["Statement"][:1]
    assert len(found(stacks, "alarm-topic-key")) == 2  # Decrypt and GenerateDataKey
    (topic,) = of_type(stacks["monitoring"], "AWS::SNS::Topic").values()
    for key_id, reason in ((KEY, "whose policy is not in the templates"), ("alias/aws/sns", "AWS-managed")):
        topic["Properties"]["KmsMasterKeyId"] = key_id
        (finding,) = found(stacks, "alarm-topic-key")
        assert reason in finding.message


def test_an_alarm_on_an_unpublished_dimension_set_or_a_metric_no_function_emits_is_refused(variants):
    stacks = copy.deepcopy(variants["default"])
    alarm = resource(stacks, "monitoring", "ProxyAvailability")["Properties"]
    alarm["Dimensions"] = [d for d in alarm["Dimensions"] if d["Name"] != "TargetRole"]  # as on main
    (finding,) = found(stacks, "alarm-metric")
    assert "never with [ProxyName, TargetGroup]" in finding.message
    stacks = copy.deepcopy(variants["default"])
    resource(stacks, "monitoring", "OutboxAge")["Properties"]["MetricName"] = "OutboxAgeTypo"
    (finding,) = found(stacks, "alarm-metric")
    assert "OutboxAgeTypo" in finding.message
    assert {"OutboxAge", "DeadLetters", "WriteBackApplied"} <= truth.engine_metrics()
    assert "OutboxDrained" in truth.engine_metrics() and "TABLE_MAIN" not in truth.engine_metrics()
    stacks = copy.deepcopy(variants["default"])
    for mapping in of_type(stacks["pipeline"], "AWS::Lambda::EventSourceMapping").values():
        mapping["Properties"].pop("MetricsConfig")  # Lambda then publishes no metric of the mapping
    findings = found(stacks, "alarm-metric")
    assert len(findings) == 2 and all("no MetricsConfig EventCount" in f.message for f in findings)
    assert {f.source for f in findings} == {truth.PAGES["mapping-metrics"]}
    stacks = copy.deepcopy(variants["default"])
    errors = resource(stacks, "monitoring", "MainSystemErrors")["Properties"]["Metrics"]
    dimensions = [d for m in errors if "MetricStat" in m for d in m["MetricStat"]["Metric"]["Dimensions"]]
    operations = {d["Value"] for d in dimensions if d["Name"] == "Operation"}
    assert operations >= {"GetItem", "TransactWriteItems"}  # DynamoDB's API names
    for query in errors:  # as a first fix had it: the CDK enum's member names, a series that never exists
        for dimension in query.get("MetricStat", {}).get("Metric", {}).get("Dimensions", []):
            if dimension["Name"] == "Operation":
                dimension["Value"] = "GET_ITEM"
    findings = found(stacks, "alarm-metric")
    assert findings and all("never published with Operation=GET_ITEM" in f.message for f in findings)
    assert {f.resource.split("/")[1][:16] for f in findings} == {"MainSystemErrors"}


def test_a_vpc_function_without_a_route_to_a_service_it_calls_is_refused(variants):
    stacks = copy.deepcopy(variants["default"])
    (streams,) = [
        k for k, e in of_type(stacks["database"], "AWS::EC2::VPCEndpoint").items() if "Streams" in k
    ]
    del stacks["database"]["Resources"][streams]  # as on main: no Streams endpoint at all
    (finding,) = found(stacks, "vpc-route")
    assert (
        finding.resource.startswith("HybridSync-pipeline/Operations") and "dynamodbstreams" in finding.message
    )
    stacks = copy.deepcopy(variants["default"])
    (ops,) = [
        f
        for k, f in of_type(stacks["pipeline"], "AWS::Lambda::Function").items()
        if k.startswith("Operations")
    ]
    del ops["Properties"]["Environment"]["Variables"][
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS"
    ]  # not told its name
    (finding,) = found(stacks, "vpc-route")
    assert "dynamodbstreams" in finding.message


def test_private_dns_where_the_service_has_none_is_refused(variants):
    stacks = copy.deepcopy(variants["existing"])
    for name, endpoint in of_type(stacks["database"], "AWS::EC2::VPCEndpoint").items():
        if name.startswith("DynamoDbEndpoint"):
            endpoint["Properties"]["PrivateDnsEnabled"] = True  # as on main
        if name.startswith("S3Endpoint"):
            del endpoint["Properties"]["DnsOptions"]
    assert {f.resource.split("/")[1][:10] for f in found(stacks, "vpc-endpoint-dns")} == {
        "DynamoDbEn",
        "S3Endpoint",
    }


def test_a_rotation_the_secrets_endpoint_does_not_admit_is_refused(variants):
    stacks = copy.deepcopy(variants["existing"])
    resources = stacks["database"]["Resources"]
    for name in [k for k, r in resources.items() if r["Type"] == "AWS::EC2::SecurityGroupIngress"
                 and "RotationGroup" in json.dumps(r["Properties"].get("SourceSecurityGroupId"))
                 and "SecretsManagerEndpoint" in json.dumps(r["Properties"]["GroupId"])]:  # fmt: skip
        del resources[name]  # as on main: the endpoint admits the functions' group alone
    assert len(found(stacks, "vpc-route")) == 3


def test_a_role_without_the_kms_actions_its_resources_need_is_refused(variants):
    stacks = copy.deepcopy(variants["kms"])
    for name, policy in of_type(stacks["pipeline"], "AWS::IAM::Policy").items():
        if name.startswith(("UsersFunction", "SqlSyncFunction")):
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            statements[:] = [s for s in statements if "kms:" not in json.dumps(s["Action"])]  # as on main
    findings = found(stacks, "kms-actions")
    users = [f for f in findings if f.resource.startswith("HybridSync-pipeline/Users")]
    sql_sync = [f for f in findings if f.resource.startswith("HybridSync-pipeline/SqlSync")]
    assert len(users) == len(roles.ROLES) and all("kms:Decrypt" in f.message for f in users)
    assert {m for f in sql_sync for m in ("kms:GenerateDataKey", "kms:Decrypt") if m in f.message} == {
        "kms:GenerateDataKey",
        "kms:Decrypt",
    }


def test_a_direct_connection_trusting_certifi_alone_is_refused(variants):
    stacks = copy.deepcopy(variants["existing"])
    for function in of_type(stacks["pipeline"], "AWS::Lambda::Function").values():
        function["Properties"].get("Environment", {}).get("Variables", {}).pop("DB_SSLROOTCERT", None)
    assert len(found(stacks, "database-trust")) == 7  # every function with a login


def test_a_login_rotated_before_it_exists_is_refused(variants):
    stacks = copy.deepcopy(variants["default"])
    for schedule in of_type(stacks["pipeline"], "AWS::SecretsManager::RotationSchedule").values():
        schedule.pop("DependsOn")  # as on main: nothing orders it after the Users step
    findings = found(stacks, "rotation-order")
    assert len(findings) == len(roles.ROLES)  # the admin's login exists with its cluster
    assert all("HybridSync-pipeline/DatabaseUsers" in f.message for f in findings)


def test_a_third_reader_of_a_tables_stream_is_refused(variants):
    """The write-back and the aggregation already are the two readers AWS advises per stream shard:
    a team's own mapping on the same stream is refused, naming the table and its readers; a paused
    one reads nothing and passes."""
    stacks = copy.deepcopy(variants["default"])
    mappings = of_type(stacks["pipeline"], "AWS::Lambda::EventSourceMapping")
    own = copy.deepcopy(next(m for k, m in mappings.items() if k.startswith("WriteBack")))
    stacks["pipeline"]["Resources"]["TeamsOwnConsumer"] = own
    (finding,) = found(stacks, "stream-readers")
    assert finding.resource.startswith("HybridSync-data/") and "3 readers" in finding.message
    assert "HybridSync-pipeline/TeamsOwnConsumer" in finding.message
    own["Properties"]["Enabled"] = False
    assert found(stacks, "stream-readers") == []


def test_a_wait_under_freshness_realtime_is_refused(variants):
    """freshness=realtime promises a change on the other side within a second: a mapping that waits
    to fill a batch, or a drain that runs once a minute without polling until the next run, breaks
    it and is refused; the same under economy passes, and economy's own windows are its choice."""
    stacks = copy.deepcopy(variants["default"])
    mappings = of_type(stacks["pipeline"], "AWS::Lambda::EventSourceMapping")
    writing = next(m for k, m in mappings.items() if k.startswith("WriteBack"))
    writing["Properties"]["MaximumBatchingWindowInSeconds"] = 5
    drain = resource(stacks, "pipeline", "SqlSync", "AWS::Lambda::Function")
    del drain["Properties"]["Environment"]["Variables"]["OUTBOX_POLL_MS"]
    drain["Properties"]["ReservedConcurrentExecutions"] = 1  # the next run cannot take over
    findings = found(stacks, "freshness")
    assert len(findings) == 3 and "waits up to 5 s" in findings[0].message
    assert "reserves one concurrent run" in findings[1].message
    findings.pop(1)
    assert findings[1].resource.startswith("HybridSync-pipeline/SqlSync")
    assert "every 60 s" in findings[1].message
    for function in of_type(stacks["pipeline"], "AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if variables.get("HYBRIDSYNC_FRESHNESS") == "realtime":
            variables["HYBRIDSYNC_FRESHNESS"] = "economy"
    assert found(stacks, "freshness") == []
    economy = of_type(variants["economy"]["pipeline"], "AWS::Lambda::EventSourceMapping").values()
    assert sorted(m["Properties"]["MaximumBatchingWindowInSeconds"] for m in economy) == [5, 30]


def test_a_realtime_drain_period_no_run_can_outlive_is_refused():
    """A run polls until the next one starts, and Lambda runs at most 900 s: under realtime the
    drain's period is at most 14 minutes, and its timeout never past 900 s."""
    with pytest.raises(ValueError, match="at most 14 minutes"):
        synthesize(outbox_drain_minutes="15")


def test_the_synth_refuses_an_app_that_breaks_a_rule():
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = App(context={**flags, "aws:cdk:bundling-stacks": []})
    stacks = build(app)
    vpc = stacks["database"].node.find_child("Vpc")
    vpc.node.try_remove_child("DynamoDbStreams")  # type: ignore[attr-defined]
    with pytest.raises(DeployTruthError, match=r"\[vpc-route\] HybridSync-pipeline/Operations"):
        synth(app)


def test_the_teams_own_routes_can_name_their_streams_endpoint(bundle):
    """With `existing_db_endpoints=false` and no NAT, Streams is reached only by the name of the
    team's own interface endpoint (no gateway endpoint, no private DNS): the functions are given it."""
    url = "https://vpce-0a1b2c3d-4e5f.streams.dynamodb.eu-west-1.vpce.amazonaws.com"
    stacks = synthesize(existing_db_secret_arn=ADMIN_SECRET, db_root_certificates=bundle, **NETWORK,
                        existing_db_endpoints="false", existing_db_streams_endpoint=url)  # fmt: skip
    assert env(stacks, "Operations")["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"] == url
    assert not of_type(stacks["database"], "AWS::EC2::VPCEndpoint")
