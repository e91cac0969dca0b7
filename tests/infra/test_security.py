"""Security of the synthesized app: cdk-nag AwsSolutions, checkov, cfn-lint, IAM scope, synth
without AWS."""

import csv
import json
import subprocess
from pathlib import Path

from aws_cdk import App
from aws_cdk.assertions import Template

from hybridsync.cdk import build
from tests.conftest import load_template

STACKS = ("data", "database", "pipeline", "api", "monitoring")
ALLOWED_ON_ANY_RESOURCE = {  # actions AWS cannot scope to a resource
    "xray:PutTraceSegments", "xray:PutTelemetryRecords",
    "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
    "dynamodb:ListTables",  # the time-series rotation finds its tables by name
    "dynamodb:ListExports",  # ... and the exports that archive them
    "lambda:ListEventSourceMappings",  # a rebuild finds the aggregation's mappings to pause them
}  # fmt: skip


ROOT = Path(__file__).resolve().parents[2]
# cfn-lint warnings on what CDK itself writes: a DependsOn beside a GetAtt that already orders it.
CFN_LINT_IGNORED = {"W3005": "CDK adds DependsOn on the role a function's GetAtt already waits for"}


def templates(assembly: Path) -> list[Path]:
    return sorted(assembly.glob("*.template.json"))


def test_checkov_finds_nothing_but_explained_skips(cloud_assembly):
    """checkov, offline, on every template (its own venv: it pins an older boto3 than the app)."""
    files = [a for path in templates(cloud_assembly) for a in ("-f", str(path))]
    run = subprocess.run([str(ROOT / "scripts" / "checkov"), *files, "--framework", "cloudformation",
                          "--compact", "-o", "json"], capture_output=True, text=True)  # fmt: skip
    reports = json.loads(run.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = [(f["check_id"], f["resource"]) for r in reports for f in r["results"]["failed_checks"]]
    assert failed == []
    skipped = [s for r in reports for s in r["results"]["skipped_checks"]]
    assert skipped and all(len(s["check_result"].get("suppress_comment") or "") > 40 for s in skipped)
    assert sum(r["summary"]["passed"] for r in reports) > 200


def test_cfn_lint_finds_no_errors_and_no_unexplained_warnings(cloud_assembly):
    ignored = ",".join(CFN_LINT_IGNORED)
    run = subprocess.run(["cfn-lint", "--ignore-checks", ignored, "--", *map(str, templates(cloud_assembly))],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


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


def test_dev_flag_turns_off_deletion_protection():
    app = App(context={"dev": "true", "aws:cdk:bundling-stacks": []})
    data = Template.from_stack(build(app)["data"])
    for resource in data.find_resources("AWS::DynamoDB::GlobalTable").values():
        assert resource["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] is False
        assert resource["DeletionPolicy"] == "Delete"


def test_what_checkov_asked_for_is_in_place(cloud_assembly):
    pipeline = Template.from_json(load_template(cloud_assembly, "pipeline"))
    functions = {k: r["Properties"] for k, r in pipeline.find_resources("AWS::Lambda::Function").items()}
    reserved = {k.split("Function")[0]: p["ReservedConcurrentExecutions"]
                for k, p in functions.items() if "ReservedConcurrentExecutions" in p}  # fmt: skip
    # the two that can load PostgreSQL on demand; the drain's second: the run taking over (freshness)
    assert reserved == {"Api": 20, "SqlSync": 2}
    with_dlq = {k.split("Function")[0] for k, p in functions.items() if "DeadLetterConfig" in p}
    assert with_dlq == {"Sweep", "Rotate", "SqlSync"}  # the asynchronously invoked (scheduled) ones
    queues = pipeline.find_resources("AWS::SQS::Queue").values()  # the stream consumers store in S3
    assert len(queues) == 1 and all(q["Properties"]["KmsMasterKeyId"] == "alias/aws/sqs" for q in queues)
    database = Template.from_json(load_template(cloud_assembly, "database"))
    database.has_resource_properties("AWS::RDS::DBInstance", {"MonitoringInterval": 60})
