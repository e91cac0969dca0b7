"""`hybridsync check ASSEMBLY_DIR` on synthesized assemblies: every documented variant (and the
session's real `cdk synth`) reports nothing, and a mutation of each rule's fact, one template copy
broken on purpose, is reported with that rule (a mutation test of the deploy truth, kept in the
suite: a rule that stops refusing its mutation fails here)."""

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from hybridsync import truth
from hybridsync.cli import main
from tests.infra.test_database_access import of_type

pytestmark = pytest.mark.infra
Stacks = dict[str, dict]


def write(stacks: Stacks, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, template in stacks.items():
        (directory / f"HybridSync-{name}.template.json").write_text(json.dumps(template))
    return directory


def check(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["check", str(directory), "--json"])
    return code, json.loads(capsys.readouterr().out)


def named(stacks: Stacks, stack: str, prefix: str, kind: str | None = None) -> dict:
    return next(r for k, r in stacks[stack]["Resources"].items()
                if k.startswith(prefix) and (kind is None or r["Type"] == kind))  # fmt: skip


def test_every_documented_variant_and_the_real_synth_report_nothing(
    variants, cloud_assembly, tmp_path, capsys
):
    for name, stacks in variants.items():
        code, report = check(write(stacks, tmp_path / name), capsys)
        assert (code, report["findings"]) == (0, []), name
        assert report["stacks"] == 5 + sum(s.startswith("standby-") for s in stacks), name
    assert main(["check", str(cloud_assembly)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "0 finding(s)" in err


# --- the mutations: (variant, what breaks, the rule that must report it, a word of its message) ----


def topic_policy_without_cloudwatch(stacks: Stacks) -> None:
    (policy,) = of_type(stacks["monitoring"], "AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    statements[:] = [s for s in statements if s["Effect"] == "Deny"]  # enforce_ssl's Deny alone


def topic_policy_denying_cloudwatch_under_a_condition(stacks: Stacks) -> None:
    (policy,) = of_type(stacks["monitoring"], "AWS::SNS::TopicPolicy").values()
    topic = policy["Properties"]["Topics"][0]
    policy["Properties"]["PolicyDocument"]["Statement"].append({
        "Sid": "NoAlarmsAtNight", "Effect": "Deny", "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": "sns:Publish", "Resource": topic,
        "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2026-01-01T22:00:00Z"}},
    })  # fmt: skip


def topic_policy_denying_all_but_s3(stacks: Stacks) -> None:
    (policy,) = of_type(stacks["monitoring"], "AWS::SNS::TopicPolicy").values()
    policy["Properties"]["PolicyDocument"]["Statement"].append({
        "Effect": "Deny", "NotPrincipal": {"Service": "s3.amazonaws.com"}, "Action": "sns:Publish",
        "Resource": policy["Properties"]["Topics"][0],
    })  # fmt: skip


def topic_policy_denying_other_accounts_but_naming_the_wrong_one(stacks: Stacks) -> None:
    (policy,) = of_type(stacks["monitoring"], "AWS::SNS::TopicPolicy").values()
    policy["Properties"]["PolicyDocument"]["Statement"].append({
        "Effect": "Deny", "Principal": "*", "Action": "sns:Publish",
        "Resource": policy["Properties"]["Topics"][0],
        "Condition": {"StringNotEquals": {"aws:SourceAccount": "111122223333"}},
    })  # fmt: skip


def topic_under_the_aws_managed_key(stacks: Stacks) -> None:
    (topic,) = of_type(stacks["monitoring"], "AWS::SNS::Topic").values()
    topic["Properties"]["KmsMasterKeyId"] = "alias/aws/sns"


def proxy_alarm_role_misspelt(stacks: Stacks) -> None:
    alarm = named(stacks, "monitoring", "ProxyAvailability")["Properties"]
    next(d for d in alarm["Dimensions"] if d["Name"] == "TargetRole")["Value"] = "READ_WRTIE"


def proxy_alarm_group_renamed(stacks: Stacks) -> None:
    alarm = named(stacks, "monitoring", "ProxyAvailability")["Properties"]
    next(d for d in alarm["Dimensions"] if d["Name"] == "TargetGroup")["Value"] = "primary"


def queue_alarm_on_the_queues_url(stacks: Stacks) -> None:
    for alarm in of_type(stacks["monitoring"], "AWS::CloudWatch::Alarm").values():
        for dimension in alarm["Properties"].get("Dimensions", []):
            if dimension["Name"] == "QueueName":  # the export of its GetAtt QueueName, as its Ref (URL)
                exported = dimension["Value"]["Fn::ImportValue"]
                for output in stacks["pipeline"]["Outputs"].values():
                    if output.get("Export", {}).get("Name") == exported and "Fn::GetAtt" in output["Value"]:
                        output["Value"] = {"Ref": output["Value"]["Fn::GetAtt"][0]}


def index_alarm_on_a_missing_index(stacks: Stacks) -> None:
    for alarm in of_type(stacks["monitoring"], "AWS::CloudWatch::Alarm").values():
        for dimension in alarm["Properties"].get("Dimensions", []):
            if dimension["Name"] == "GlobalSecondaryIndexName":
                dimension["Value"] = "OrdersByTme"


def latency_alarm_on_a_region_without_a_replica(stacks: Stacks) -> None:
    for alarm in of_type(stacks["monitoring"], "AWS::CloudWatch::Alarm").values():
        for dimension in alarm["Properties"].get("Dimensions", []):
            if dimension["Name"] == "ReceivingRegion":
                dimension["Value"] = "ap-south-1"


def no_streams_endpoint(stacks: Stacks) -> None:
    (streams,) = [k for k in of_type(stacks["database"], "AWS::EC2::VPCEndpoint") if "Streams" in k]
    del stacks["database"]["Resources"][streams]


def dynamodb_gateway_on_one_subnet(stacks: Stacks) -> None:
    gateway = named(stacks, "database", "VpcDynamoDb", "AWS::EC2::VPCEndpoint")["Properties"]
    assert len(gateway["RouteTableIds"]) == 2
    gateway["RouteTableIds"] = gateway["RouteTableIds"][:1]


def dynamodb_endpoint_with_private_dns(stacks: Stacks) -> None:
    endpoint = named(stacks, "database", "DynamoDbEndpoint", "AWS::EC2::VPCEndpoint")
    endpoint["Properties"]["PrivateDnsEnabled"] = True


def vpc_without_dns_hostnames(stacks: Stacks) -> None:
    (vpc,) = of_type(stacks["database"], "AWS::EC2::VPC").values()
    del vpc["Properties"]["EnableDnsHostnames"]  # CloudFormation's default: false


def role_without_kms(stacks: Stacks) -> None:
    for name, policy in of_type(stacks["pipeline"], "AWS::IAM::Policy").items():
        if name.startswith("UsersFunction"):
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            statements[:] = [s for s in statements if "kms:" not in json.dumps(s["Action"])]


def role_denying_kms_decrypt(stacks: Stacks) -> None:
    policy = named(stacks, "pipeline", "UsersFunction", "AWS::IAM::Policy")
    policy["Properties"]["PolicyDocument"]["Statement"].append(
        {"Effect": "Deny", "Action": "kms:Decrypt", "Resource": "*"}
    )


def direct_connection_on_certifi(stacks: Stacks) -> None:
    for function in of_type(stacks["pipeline"], "AWS::Lambda::Function").values():
        function["Properties"].get("Environment", {}).get("Variables", {}).pop("DB_SSLROOTCERT", None)


def role_rotated_before_its_login(stacks: Stacks) -> None:
    for schedule in of_type(stacks["pipeline"], "AWS::SecretsManager::RotationSchedule").values():
        schedule.pop("DependsOn")


def admin_rotated_before_the_writer(stacks: Stacks) -> None:
    (schedule,) = of_type(stacks["database"], "AWS::SecretsManager::RotationSchedule").values()
    assert any(d.startswith("ClusterWriter") for d in schedule["DependsOn"])
    schedule.pop("DependsOn")


def third_stream_reader(stacks: Stacks) -> None:
    mappings = of_type(stacks["pipeline"], "AWS::Lambda::EventSourceMapping")
    own = copy.deepcopy(next(m for k, m in mappings.items() if k.startswith("WriteBack")))
    stacks["pipeline"]["Resources"]["TeamsOwnConsumer"] = own


def replicas_without_streams(stacks: Stacks) -> None:
    for table in of_type(stacks["data"], "AWS::DynamoDB::GlobalTable").values():
        table["Properties"].pop("StreamSpecification")


def consumer_of_a_replicas_stream(stacks: Stacks) -> None:
    """A team's consumer of the Oregon replica's stream (the aggregation's mapping, moved there)."""
    mappings = of_type(stacks["pipeline"], "AWS::Lambda::EventSourceMapping")
    mapping = next(m for k, m in mappings.items() if k.startswith("Aggregate"))
    stream = "arn:aws:dynamodb:us-west-2:123456789012:table/HybridSync-main/stream/2026-11-29T00:00:00.000"
    mapping["Properties"]["EventSourceArn"] = stream


def standby_mapping_enabled(stacks: Stacks) -> None:
    """A standby's mapping deployed enabled: it would consume beside home's."""
    mappings = of_type(stacks["standby-us-west-2"], "AWS::Lambda::EventSourceMapping")
    next(m for k, m in mappings.items() if k.startswith("WriteBack"))["Properties"]["Enabled"] = True


def standby_without_its_mark(stacks: Stacks) -> None:
    """A stack reading the Oregon replica's stream that is no standby (its metadata gone)."""
    stacks["standby-us-west-2"].pop("Metadata")


def _secondary(stacks: Stacks) -> dict:
    (cluster,) = of_type(stacks["standby-us-west-2-database"], "AWS::RDS::DBCluster").values()
    return cluster["Properties"]  # type: ignore[no-any-return]


def secondary_with_a_master_login(stacks: Stacks) -> None:
    _secondary(stacks)["MasterUsername"] = "hybridsync"


def secondary_of_another_global_database(stacks: Stacks) -> None:
    _secondary(stacks)["GlobalClusterIdentifier"] = "hybridsync-global"


def secondary_without_its_key(stacks: Stacks) -> None:
    _secondary(stacks).pop("KmsKeyId")


def secondary_of_another_version(stacks: Stacks) -> None:
    _secondary(stacks)["EngineVersion"] = "16.4"


def _kinesis_stream(stacks: Stacks) -> dict:
    resources = stacks["data"]["Resources"]
    resources["ChangeStream"] = {"Type": "AWS::Kinesis::Stream", "Properties": {}}
    return resources


def twenty_one_fan_out_consumers(stacks: Stacks) -> None:
    resources = _kinesis_stream(stacks)
    for i in range(21):
        resources[f"Consumer{i}"] = {"Type": "AWS::Kinesis::StreamConsumer", "Properties": {
            "ConsumerName": f"c{i}", "StreamARN": {"Fn::GetAtt": ["ChangeStream", "Arn"]}}}  # fmt: skip


def six_shared_readers(stacks: Stacks) -> None:
    resources = _kinesis_stream(stacks)
    for i in range(6):
        resources[f"Reader{i}"] = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {
            "FunctionName": f"reader-{i}", "EventSourceArn": {"Fn::GetAtt": ["ChangeStream", "Arn"]},
        }}  # fmt: skip


def realtime_mapping_with_a_window(stacks: Stacks) -> None:
    mappings = of_type(stacks["pipeline"], "AWS::Lambda::EventSourceMapping")
    next(m for k, m in mappings.items() if k.startswith("WriteBack"))["Properties"][
        "MaximumBatchingWindowInSeconds"
    ] = 5


MUTATIONS: dict[str, tuple[str, Callable[[Stacks], None], str, str]] = {
    "topic policy without CloudWatch": ("default", topic_policy_without_cloudwatch, "alarm-topic-policy",
                                        "no alarm can notify"),
    "topic policy denying CloudWatch": ("default", topic_policy_denying_cloudwatch_under_a_condition,
                                        "alarm-topic-policy", "denies cloudwatch.amazonaws.com sns:Publish"),
    "topic policy denying all but S3": ("default", topic_policy_denying_all_but_s3, "alarm-topic-policy",
                                        "denies cloudwatch.amazonaws.com sns:Publish"),
    "topic policy denying another account's": ("default",
                                               topic_policy_denying_other_accounts_but_naming_the_wrong_one,
                                               "alarm-topic-policy", "denies cloudwatch.amazonaws.com"),
    "topic under AWS's key": ("default", topic_under_the_aws_managed_key, "alarm-topic-key", "AWS-managed"),
    "proxy alarm's TargetRole": ("default", proxy_alarm_role_misspelt, "alarm-metric",
                                 "TargetRole=READ_WRTIE"),
    "proxy alarm's TargetGroup": ("default", proxy_alarm_group_renamed, "alarm-metric",
                                  "TargetGroup=primary"),
    "queue alarm on the queue's URL": ("default", queue_alarm_on_the_queues_url, "alarm-metric",
                                       "AWS publishes it with the QueueName"),
    "index alarm on a missing index": ("default", index_alarm_on_a_missing_index, "alarm-metric",
                                       "has no such index"),
    "latency alarm on a Region without a replica": ("replicas", latency_alarm_on_a_region_without_a_replica,
                                                    "alarm-metric", "ReceivingRegion=ap-south-1"),
    "no Streams endpoint": ("default", no_streams_endpoint, "vpc-route", "dynamodbstreams"),
    "DynamoDB gateway on one subnet": ("default", dynamodb_gateway_on_one_subnet, "vpc-route",
                                       "calls dynamodb"),
    "DynamoDB private DNS": ("existing", dynamodb_endpoint_with_private_dns, "vpc-endpoint-dns",
                             "does not support it"),
    "VPC without DNS hostnames": ("default", vpc_without_dns_hostnames, "vpc-endpoint-dns",
                                  "EnableDnsHostnames"),
    "role without KMS": ("kms", role_without_kms, "kms-actions", "which its role lacks"),
    "role denying kms:Decrypt": ("kms", role_denying_kms_decrypt, "kms-actions", "which its role denies"),
    "direct connection on certifi": ("existing", direct_connection_on_certifi, "database-trust", "certifi"),
    "role rotated before its login": ("default", role_rotated_before_its_login, "rotation-order",
                                      "makes its login"),
    "admin rotated before the writer": ("default", admin_rotated_before_the_writer, "rotation-order",
                                        "takes logins"),
    "third stream reader": ("default", third_stream_reader, "stream-readers", "3 readers"),
    "21 fan-out consumers": ("default", twenty_one_fan_out_consumers, "kinesis-fan-out", "21 enhanced"),
    "6 shared readers": ("default", six_shared_readers, "kinesis-shared-readers", "6 shared-throughput"),
    "realtime window": ("default", realtime_mapping_with_a_window, "freshness", "waits up to 5 s"),
    "replicas without streams": ("replicas", replicas_without_streams, "replica-stream", "3 replicas"),
    "a replica's consumer": ("replicas", consumer_of_a_replicas_stream, "replica-consumer", "in us-west-2"),
    "a standby consuming": ("standby", standby_mapping_enabled, "replica-consumer", "both consume"),
    "a standby unmarked": ("standby", standby_without_its_mark, "replica-consumer", "in us-west-2"),
    "a secondary with a master login": ("standby_active", secondary_with_a_master_login, "aurora-secondary",
                                        "names MasterUsername"),
    "a secondary of another global database": ("standby_active", secondary_of_another_global_database,
                                               "aurora-secondary", "no stack declares"),
    "a secondary without its key": ("standby_active", secondary_without_its_key, "aurora-secondary",
                                    "names no KmsKeyId"),
    "a secondary of another version": ("standby_active", secondary_of_another_version, "aurora-secondary",
                                       "EngineVersion '16.4'"),
}  # fmt: skip


def test_every_rule_has_a_mutation():
    source = "".join(p.read_text() for p in sorted(Path(truth.__file__).parent.rglob("*.py")))
    said = set(re.findall(r'Finding\(\s*"([a-z-]+)"', source))
    assert said == {rule for _, _, rule, _ in MUTATIONS.values()}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_mutation_is_reported_with_its_rule(mutation, variants, tmp_path, capsys):
    variant, mutate, rule, word = MUTATIONS[mutation]
    stacks = copy.deepcopy(variants[variant])
    mutate(stacks)
    code, report = check(write(stacks, tmp_path), capsys)
    assert code == 1 and not report["ok"]
    assert {f["rule"] for f in report["findings"]} == {rule}, report["findings"]
    assert any(word in f["message"] for f in report["findings"]), report["findings"]
    assert all(f["source"].startswith("https://") for f in report["findings"])
