"""The synthesized templates (real `cdk synth`) render exactly the model's declaration."""

import json
import subprocess
from pathlib import Path

import pytest
from aws_cdk.assertions import Match, Template

from hybridsync.sync.aggregate import Aggregation
from shop.model import MODEL
from tests.conftest import load_template

AGGREGATION = Aggregation(MODEL)


def table_resource(template, logical_name):
    (props,) = [
        r["Properties"]
        for rid, r in template["Resources"].items()
        if r["Type"] == "AWS::DynamoDB::GlobalTable" and rid.startswith(f"{logical_name.title()}Table")
    ]
    return props


def by_name(items, key="AttributeName"):
    return {i[key]: i for i in items}


@pytest.mark.parametrize("table", MODEL.tables, ids=lambda t: t.name)
def test_template_table_equals_the_declaration(data, table):
    props = table_resource(data, table.name)
    declared = table.create_request("x")
    assert props["KeySchema"] == declared["KeySchema"]
    assert by_name(props["AttributeDefinitions"]) == by_name(declared["AttributeDefinitions"])
    rendered = {g["IndexName"]: g for g in props.get("GlobalSecondaryIndexes", [])}
    expected = {g["IndexName"]: g for g in declared.get("GlobalSecondaryIndexes", [])}
    assert rendered.keys() == expected.keys()
    for name, index in expected.items():
        assert rendered[name]["KeySchema"] == index["KeySchema"], name
        assert rendered[name]["Projection"]["ProjectionType"] == index["Projection"]["ProjectionType"]
        assert rendered[name]["Projection"].get("NonKeyAttributes", []) == index["Projection"].get(
            "NonKeyAttributes", []
        )
    if table.stream:
        assert props["StreamSpecification"] == {"StreamViewType": table.stream.value}
    else:
        assert "StreamSpecification" not in props
    if table.ttl_attribute:
        assert props["TimeToLiveSpecification"] == {"AttributeName": table.ttl_attribute, "Enabled": True}


def test_tables_are_protected_encrypted_and_recoverable(data):
    tables = Template.from_json(data).find_resources("AWS::DynamoDB::GlobalTable")
    assert len(tables) == len(MODEL.tables)
    for resource in tables.values():
        props = resource["Properties"]
        assert props["SSESpecification"]["SSEEnabled"] is True
        (replica,) = props["Replicas"]
        assert replica["DeletionProtectionEnabled"] is True
        assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert resource["DeletionPolicy"] == "Retain"


def test_database_is_aurora_serverless_behind_a_tls_proxy_in_a_natless_vpc(database):
    template = Template.from_json(database)
    template.has_resource_properties(
        "AWS::RDS::DBCluster",
        {"Engine": "aurora-postgresql", "StorageEncrypted": True, "DeletionProtection": True,
         "ServerlessV2ScalingConfiguration": Match.object_like({"MinCapacity": 0.5})},
    )  # fmt: skip
    template.has_resource_properties("AWS::RDS::DBInstance", {"DBInstanceClass": "db.serverless"})
    template.has_resource_properties("AWS::RDS::DBProxy", {"RequireTLS": True, "EngineFamily": "POSTGRESQL"})
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    template.has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {"VpcEndpointType": "Gateway", "ServiceName": Match.object_like({"Fn::Join": Match.any_value()})},
    )
    template.resource_count_is("AWS::SecretsManager::Secret", 4)  # the admin's and each role's


def test_function_construct_defaults(pipeline):
    template = Template.from_json(pipeline)
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Runtime": "python3.12", "Handler": "hybridsync.functions.write_back.handler",
         "Architectures": ["x86_64"],
         "Layers": Match.any_value(), "TracingConfig": {"Mode": "Active"},  # tracing is on by default
         "VpcConfig": Match.object_like({"SubnetIds": Match.any_value()}),
         "Environment": {"Variables": Match.object_like({
             "TABLE_MAIN": Match.any_value(), "TABLE_CHUNKS": Match.any_value(),
             "HYBRIDSYNC_MODEL": "shop.model:MODEL", "HYBRIDSYNC_ROUTES": "shop.routes",
             "DB_IAM_AUTH": "true", "DB_USER": "hybridsync_writer", "DB_HOST": Match.any_value()})}},
    )  # fmt: skip
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})
    template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.12"], "CompatibleArchitectures": ["x86_64"]},
    )
    template.has_resource_properties(
        "AWS::CloudFormation::CustomResource", {"MigrationsDigest": Match.any_value()}
    )


def test_layer_was_bundled_without_docker_for_the_lambda_platform(cloud_assembly):
    layers = [p for p in cloud_assembly.glob("asset.*/python") if (p / "psycopg_binary").is_dir()]
    assert layers, "the dependency layer asset is missing"
    (layer,) = layers
    assert list((layer / "psycopg_binary").glob("_psycopg.cpython-312-x86_64-linux-gnu.so"))
    for package in ("aws_lambda_powertools", "sqlalchemy", "alembic", "psycopg", "certifi"):
        assert (layer / package).is_dir(), package
    assert "Amazon Root CA 1" in (layer / "certifi" / "cacert.pem").read_text()  # verify-full's roots


def test_the_layer_is_resolved_once_per_requirements_and_copied_into_each_fresh_cdk_out(
    tmp_path, monkeypatch
):
    """A synth into a fresh `cdk.out` (a CI job, a new clone, a new project) copies the layer
    resolved before; a changed requirements text resolves again; a failed resolution keeps nothing."""
    from hybridsync.cdk import assets

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    resolutions = []

    def pip(command: list[str], check: bool) -> None:  # what `pip install --target` leaves
        resolutions.append(command)
        if "fails" in Path(command[-1]).read_text():
            raise subprocess.CalledProcessError(1, command)
        target = Path(command[command.index("--target") + 1])
        (target / "certifi").mkdir(parents=True)
        (target / "certifi" / "cacert.pem").write_text(Path(command[-1]).read_text())

    monkeypatch.setattr(assets.subprocess, "run", pip)
    requirements = tmp_path / "requirements-runtime.txt"
    requirements.write_text("certifi>=2024.2.2\n")
    layer = assets._PipInstallLayer(requirements)
    for n in range(2):
        assert layer.try_bundle(str(tmp_path / f"cdk.out{n}" / "asset.layer"))
        copied = tmp_path / f"cdk.out{n}" / "asset.layer" / "python" / "certifi" / "cacert.pem"
        assert copied.read_text() == "certifi>=2024.2.2\n"
    assert len(resolutions) == 1 and "--only-binary=:all:" in resolutions[0]
    requirements.write_text("certifi>=2025.1.1\n")
    assert layer.try_bundle(str(tmp_path / "cdk.out2" / "asset.layer")) and len(resolutions) == 2
    requirements.write_text("fails\n")
    with pytest.raises(subprocess.CalledProcessError):
        layer.try_bundle(str(tmp_path / "cdk.out3" / "asset.layer"))
    assert len(list(assets.layer_cache().iterdir())) == 2  # the two resolved; no draft left behind
    (entry,) = [
        e for e in assets.layer_cache().iterdir() if "2025" in (e / "python/certifi/cacert.pem").read_text()
    ]
    (entry / "complete").unlink()  # an entry a cache cleaner cut short: resolved again, copied whole
    requirements.write_text("certifi>=2025.1.1\n")
    assert layer.try_bundle(str(tmp_path / "cdk.out5" / "asset.layer")) and len(resolutions) == 4
    assert (tmp_path / "cdk.out5" / "asset.layer" / "python" / "certifi" / "cacert.pem").is_file()
    (tmp_path / "a-file").write_text("")  # no cache can be made there (as in a read-only home)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    requirements.write_text("certifi>=2026.1.1\n")
    assert layer.try_bundle(str(tmp_path / "cdk.out4" / "asset.layer")) and len(resolutions) == 5
    copied = tmp_path / "cdk.out4" / "asset.layer" / "python" / "certifi" / "cacert.pem"
    assert copied.read_text() == "certifi>=2026.1.1\n"  # resolved straight into the cdk.out


def test_one_bundle_ships_exactly_the_engines_packages_and_the_shops(cloud_assembly, pipeline):
    """Chosen by package: the engine's shipped packages and the model's; never the local app, the
    CLI, the CDK app, the workloads or the test kit. Every function runs from the one asset."""
    from hybridsync.cdk.assets import SHIPPED

    bundles = [p.parents[3] for p in cloud_assembly.glob("asset.*/hybridsync/model/declare/__init__.py")]
    assert len(bundles) == 1
    (bundle,) = bundles
    shipped = {
        p.parent.relative_to(bundle / "hybridsync").as_posix() for p in (bundle / "hybridsync").rglob("*.py")
    }
    assert {"." if s == "" else s for s in SHIPPED} == shipped
    engine = Path(__file__).resolve().parents[2] / "hybridsync"
    for package in SHIPPED:
        assert {p.name for p in (engine / package).glob("*.py")} == {
            p.name for p in (bundle / "hybridsync" / package).glob("*.py")
        }
    assert (bundle / "hybridsync" / "sql" / "migrations" / "script.py.mako").is_file()
    assert (bundle / "shop" / "model.py").is_file() and list(
        (bundle / "shop" / "migrations" / "versions").glob("0001_*.py")
    )
    assert not (bundle / "shop_workloads").exists()  # the demo and chaos: a package apart, never shipped
    codes = {
        json.dumps(f["Properties"]["Code"], sort_keys=True)
        for f in Template.from_json(pipeline).find_resources("AWS::Lambda::Function").values()
        if "hybridsync.functions" in f["Properties"].get("Handler", "")
    }
    assert len(codes) == 1  # every engine function: the same asset


def test_write_back_consumes_the_stream_with_safe_retry_settings(pipeline):
    from hybridsync.sync import writeback

    template = Template.from_json(pipeline)
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"StartingPosition": "TRIM_HORIZON", "BatchSize": 1000, "MaximumBatchingWindowInSeconds": 0,
         "BisectBatchOnFunctionError": True, "MaximumRetryAttempts": 10, "MaximumRecordAgeInSeconds": 86400,
         "FunctionResponseTypes": ["ReportBatchItemFailures"], "ParallelizationFactor": 1,
         "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [Match.string_like_regexp(
             "^FailedBatches"), "Arn"]}}},
         "MetricsConfig": {"Metrics": ["EventCount"]},
         "FilterCriteria": {"Filters": [{"Pattern": json.dumps(f, separators=(",", ":"))}
                                        for f in writeback.event_filters(MODEL)]}},
    )  # fmt: skip
    # failed batches, records included, outlive the stream: kept by the bucket's lifecycle
    expiry = Match.object_like({"Prefix": "aws/lambda/", "ExpirationInDays": 30, "Status": "Enabled"})
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {"BucketEncryption": Match.any_value(), "LifecycleConfiguration": {"Rules": [expiry]}},
    )


def test_write_back_role_reads_the_stream_logs_in_as_the_writer_and_nothing_more(pipeline):
    policies = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for rid, r in pipeline["Resources"].items()
        if r["Type"] == "AWS::IAM::Policy" and rid.startswith("WriteBack")
    ]
    actions = {a for statements in policies for s in statements
               for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}  # fmt: skip
    assert actions == {
        "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
        "dynamodb:BatchGetItem",  # settles a change the stream cannot order from the item itself
        "rds-db:connect",  # as hybridsync_writer through the proxy (tests/infra/test_database_access.py)
        "s3:PutObject", "s3:ListBucket",  # its mappings' failed batches (Lambda's S3 destination)
        "xray:PutTraceSegments", "xray:PutTelemetryRecords",  # tracing
    }  # fmt: skip


def test_aggregate_consumes_only_order_lines_and_may_only_update_the_table(pipeline):

    template = Template.from_json(pipeline)
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"BisectBatchOnFunctionError": True, "FunctionResponseTypes": ["ReportBatchItemFailures"],
         "BatchSize": 5000, "MaximumBatchingWindowInSeconds": 0, "StartingPosition": "TRIM_HORIZON",
         "TumblingWindowInSeconds": 60,
         "FilterCriteria": {"Filters": [{"Pattern": json.dumps(f, separators=(",", ":"))}
                                        for f in AGGREGATION.event_filters()]}},
    )  # fmt: skip
    statements = [
        s
        for rid, r in pipeline["Resources"].items()
        if r["Type"] == "AWS::IAM::Policy" and rid.startswith("Aggregate")
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    table_actions = {a for s in statements for a in s["Action"] if a.startswith("dynamodb:")}
    assert table_actions == {
        "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:PutItem",
        "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem",
        "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
    }  # fmt: skip


@pytest.fixture(scope="module")
def api(cloud_assembly):
    return load_template(cloud_assembly, "api")


def test_read_api_is_an_iam_authorized_http_api_with_access_logs(api):
    template = Template.from_json(api)
    template.has_resource_properties("AWS::ApiGatewayV2::Api", {"ProtocolType": "HTTP"})
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Route", {"RouteKey": "ANY /{proxy+}", "AuthorizationType": "AWS_IAM"}
    )
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {"AccessLogSettings": Match.object_like({"DestinationArn": Match.any_value()}),
         "DefaultRouteSettings": Match.object_like({"ThrottlingRateLimit": 500})},
    )  # fmt: skip


def test_api_and_sync_functions_get_only_what_they_use(pipeline):
    def actions(prefix, service="dynamodb:", resource=""):
        return {
            a
            for rid, r in pipeline["Resources"].items()
            if r["Type"] == "AWS::IAM::Policy" and rid.startswith(prefix)
            for s in r["Properties"]["PolicyDocument"]["Statement"]
            if resource in json.dumps(s["Resource"])
            for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
            if a.startswith(service)
        }

    assert actions("Api", resource="MainTable") == {
        "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query",
        "dynamodb:UpdateItem", "dynamodb:DeleteItem",
    }  # fmt: skip
    assert actions("Api", resource="ChunksTable") == {"dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"}
    for index in MODEL.table("main").indexes:  # derived from the model: no second list of indexes
        assert actions("Api", resource=f"/index/{index.name}") >= {"dynamodb:Query"}, index.name
    assert actions("Api", "s3:", "/reviews/*") == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
    assert actions("Api", "s3:") == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
    assert actions("Sweep") == {"dynamodb:GetItem", "dynamodb:Scan", "dynamodb:BatchWriteItem"}
    assert actions("Sweep", "s3:") == {"s3:DeleteObject", "s3:ListBucket"}
    assert actions("SqlSync") == {"dynamodb:PutItem"}
    # rotation: the series' tables by name prefix, ListTables (no resource-level permission), archives
    assert actions("Rotate", resource="table/hybridsync-events-*") == {
        "dynamodb:CreateTable", "dynamodb:DescribeTable", "dynamodb:UpdateTable", "dynamodb:DeleteTable",
        "dynamodb:Scan", "dynamodb:UpdateContinuousBackups", "dynamodb:ExportTableToPointInTime",
        "dynamodb:DescribeExport"}  # fmt: skip
    assert actions("Rotate", resource="MainTable") == set()
    archives = {"s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"}
    assert actions("Rotate", "s3:", "/timeseries/*") == actions("Rotate", "s3:") == archives
    resources = pipeline["Resources"].values()
    schedules = {r["Properties"]["ScheduleExpression"] for r in resources if r["Type"] == "AWS::Events::Rule"}
    assert {"rate(6 hours)", "rate(1 day)", "rate(1 minute)"} <= schedules
    custom = [r["Properties"] for r in pipeline["Resources"].values()
              if r["Type"] == "AWS::CloudFormation::CustomResource"]  # fmt: skip
    assert {"Prefix": "hybridsync"}.items() <= next(c for c in custom if "Prefix" in c).items()
    template = Template.from_json(pipeline)
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(1 minute)"})


def test_the_outbox_drain_is_alarmed_when_it_fails_dead_letters_or_never_runs(cloud_assembly):
    """The drain emits OutboxAge on every run, a failed one included: no point at all means no drain
    ran to its end, which breaches. Its dead letters, its errors and what the schedules fail past
    their retries each have an alarm too."""
    monitoring = load_template(cloud_assembly, "monitoring")
    alarms = [
        a["Properties"] for a in monitoring["Resources"].values() if a["Type"] == "AWS::CloudWatch::Alarm"
    ]

    def alarm(metric, service=None):
        dimension = {"Name": "service", "Value": service}
        (found,) = [a for a in alarms if a.get("MetricName") == metric
                    and (service is None or dimension in a.get("Dimensions", []))]  # fmt: skip
        return found

    assert alarm("OutboxAge")["TreatMissingData"] == "breaching"
    assert alarm("DeadLetters", "hybridsync-sql_sync")["Threshold"] == 0
    errors = [a for a in alarms if a.get("MetricName") == "Errors" and a["Namespace"] == "AWS/Lambda"]
    assert any("SqlSync" in json.dumps(a["Dimensions"]) for a in errors)
    queue_alarms = [a for a in alarms if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"]
    assert any("ScheduledFailures" in json.dumps(a["Dimensions"]) for a in queue_alarms)
