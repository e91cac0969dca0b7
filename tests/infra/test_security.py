"""Security of the synthesized app: cdk-nag AwsSolutions, IAM scope, synth without AWS."""

import csv
import json

from aws_cdk import App
from aws_cdk.assertions import Annotations, Match, Template

from stacks import build
from tests.conftest import load_template

STACKS = ("data", "database", "pipeline", "api")
ALLOWED_ON_ANY_RESOURCE = {  # actions AWS cannot scope to a resource
    "xray:PutTraceSegments", "xray:PutTelemetryRecords",
    "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
    "dynamodb:ListTables",  # the time-series rotation finds its tables by name
}  # fmt: skip


def nag_rows(assembly):
    for path in assembly.glob("AwsSolutions-*-NagReport.csv"):
        with path.open() as report:
            yield from csv.DictReader(report)


def test_nag_reports_cover_every_stack(cloud_assembly):
    reports = {p.name for p in cloud_assembly.glob("AwsSolutions-*-NagReport.csv")}
    assert len(reports) == len(STACKS)


def test_no_unsuppressed_nag_errors_and_every_suppression_has_a_reason(cloud_assembly):
    rows = list(nag_rows(cloud_assembly))
    assert rows
    failing = [r for r in rows if r["Compliance"] == "Non-Compliant" and r["Rule Level"] == "Error"]
    assert failing == []
    for row in rows:
        if row["Compliance"] == "Suppressed":
            assert len(row["Exception Reason"]) > 20, row


def test_no_error_annotations_in_the_assembly(cloud_assembly):
    manifest = json.loads((cloud_assembly / "manifest.json").read_text())
    errors = [
        entry
        for artifact in manifest["artifacts"].values()
        for entries in artifact.get("metadata", {}).values()
        for entry in entries
        if entry["type"] == "aws:cdk:error"
    ]
    assert errors == []


def test_synth_needed_no_lookups(cloud_assembly):
    manifest = json.loads((cloud_assembly / "manifest.json").read_text())
    assert not manifest.get("missing")  # a context lookup would need AWS credentials


def statements(template):
    for resource in template["Resources"].values():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            yield from resource["Properties"]["PolicyDocument"]["Statement"]
        if resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                yield from policy["PolicyDocument"]["Statement"]


def as_list(value):
    return value if isinstance(value, list) else [value]


def test_no_iam_statement_grants_wildcards_on_data(cloud_assembly):
    for stack in STACKS:
        for statement in statements(load_template(cloud_assembly, stack)):
            if statement["Effect"] != "Allow":
                continue
            actions = as_list(statement["Action"])
            assert "*" not in actions and "dynamodb:*" not in actions, statement
            if "*" in as_list(statement.get("Resource")):
                assert set(actions) <= ALLOWED_ON_ANY_RESOURCE, statement


def test_existing_database_variant_has_no_cluster_and_uses_the_given_secret():
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pg-AbCdEf"
    # In-process synth of the variant; asset bundling is skipped (the session synth covers it).
    app = App(context={"existing_db_secret_arn": arn, "aws:cdk:bundling-stacks": []})
    stacks = build(app)
    database = Template.from_stack(stacks["database"])
    pipeline = Template.from_stack(stacks["pipeline"])
    for absent in ("AWS::RDS::DBCluster", "AWS::RDS::DBProxy", "AWS::EC2::VPC"):
        database.resource_count_is(absent, 0)
    pipeline.has_resource_properties(
        "AWS::Lambda::Function",
        {"Environment": {"Variables": Match.object_like({"DB_SECRET_ARN": arn})},
         "VpcConfig": Match.absent()},
    )  # fmt: skip
    for stack in stacks.values():
        assert Annotations.from_stack(stack).find_error("*", Match.any_value()) == []


def test_dev_flag_turns_off_deletion_protection():
    app = App(context={"dev": "true", "aws:cdk:bundling-stacks": []})
    data = Template.from_stack(build(app)["data"])
    for resource in data.find_resources("AWS::DynamoDB::GlobalTable").values():
        assert resource["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] is False
        assert resource["DeletionPolicy"] == "Delete"
