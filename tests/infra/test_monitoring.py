"""The monitoring the synthesized app ships (real `cdk synth`): every alarm reaches the topic, every
function has its errors and throttles alarmed, every mapping its failed batches, every table and GSI
its throttles; the dashboard shows each part; every function is a version behind its alias."""

import json
from collections import defaultdict

from aws_cdk import App

from hybridsync.cdk import build
from shop.model import MODEL
from tests.conftest import ROOT, load_template

# each direction's function -> its service (the `service` dimension is `hybridsync-<service>`)
DIRECTIONS = {"WriteBack": "write_back", "Aggregate": "aggregate", "SqlSync": "sql_sync"}


def of_type(template, kind):
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == kind}


def watched(alarm):
    """What an alarm watches: its metric and the resource its dimensions name (an import's export)."""
    dimensions = {d["Name"]: json.dumps(d["Value"]) for d in alarm.get("Dimensions", [])}
    return alarm.get("MetricName") or "math", dimensions


def test_every_alarm_has_an_action_and_every_function_its_alarms(monitoring, pipeline):
    alarms = of_type(monitoring, "AWS::CloudWatch::Alarm")
    (topic,) = of_type(monitoring, "AWS::SNS::Topic")
    lacking = [
        k
        for k, a in alarms.items()
        if a.get("AlarmActions") != [{"Ref": topic}] or a.get("OKActions") != [{"Ref": topic}]
    ]
    assert lacking == []
    per_resource = defaultdict(set)  # the alarms per resource, as the operator reads them
    for alarm in alarms.values():
        metric, dimensions = watched(alarm)
        for value in dimensions.values():
            per_resource[value].add(metric)
    functions = [
        k
        for k in of_type(pipeline, "AWS::Lambda::Function")
        if not k.startswith(("Schema", "TimeSeries", "DatabaseUsers"))  # CDK's custom resource framework
    ]
    assert len(functions) == 9
    for function in functions:
        found = [metrics for resource, metrics in per_resource.items() if function in resource]
        assert found and {"Errors", "Throttles"} <= set().union(*found), function
    for consumer in ("WriteBack", "Aggregate"):
        found = set().union(*[m for r, m in per_resource.items() if f"{consumer}Function" in r])
        assert {"IteratorAge", "DestinationDeliveryFailures"} <= found
    mappings = of_type(pipeline, "AWS::Lambda::EventSourceMapping")
    for mapping in mappings:
        assert "OnFailureDestinationDeliveredEventCount" in set().union(
            *[m for r, m in per_resource.items() if mapping in r]
        ), mapping
    iterator = [a for a in alarms.values() if a.get("MetricName") == "IteratorAge"]
    assert sorted({a["Threshold"] for a in iterator}) == [60_000, 300_000]  # a warning and a critical level


def test_throttles_are_alarmed_per_table_and_per_index(monitoring):
    alarms = of_type(monitoring, "AWS::CloudWatch::Alarm").values()
    indexes = {
        (d["Value"])
        for a in alarms
        if a.get("MetricName") == "WriteThrottleEvents"
        for d in a["Dimensions"]
        if d["Name"] == "GlobalSecondaryIndexName"
    }
    assert indexes == {i.name for t in MODEL.tables for i in t.indexes}
    names = {a.get("MetricName") for a in alarms}
    assert {
        "5xx",
        "Latency",
        "DatabaseConnectionsBorrowLatency",
        "ClientConnectionsSetupFailedAuth",
        "AvailabilityPercentage",
        "ACUUtilization",
        "OutboxAge",
        "ApproximateAgeOfOldestMessage",
    } <= names


def test_the_dashboard_shows_lag_failures_capacity_and_the_database(monitoring):
    (dashboard,) = of_type(monitoring, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["DashboardBody"])
    for shown in (
        "IteratorAge",
        "OnFailureDestinationDeliveredEventCount",
        "DeadLetters",
        "OutboxDepth",
        "OutboxAge",
        "ConsumedWriteCapacityUnits",
        "GlobalSecondaryIndexName",
        "DatabaseConnections",
        "ServerlessDatabaseCapacity",
        "5xx",
        "Alarms",
    ):
        assert shown in body, shown
    assert "DashboardUrl" in monitoring["Outputs"]


def test_mappings_api_and_schedules_invoke_the_alias_and_sql_functions_wait_for_the_schema(
    pipeline, cloud_assembly
):
    aliases = of_type(pipeline, "AWS::Lambda::Alias")
    assert {a["Name"] for a in aliases.values()} == {"live"}
    assert all(
        "Fn::GetAtt" in json.dumps(a["FunctionVersion"]) for a in aliases.values()
    )  # a published version
    for mapping in of_type(pipeline, "AWS::Lambda::EventSourceMapping").values():
        # `<function>:live`, CDK's spelling of the alias a mapping invokes
        assert any(a in json.dumps(mapping["FunctionName"]) for a in aliases) and ":live" in json.dumps(
            mapping
        )
    for rule in of_type(pipeline, "AWS::Events::Rule").values():
        assert all(t["Arn"]["Ref"] in aliases for t in rule["Targets"])
    api = load_template(cloud_assembly, "api")
    (integration,) = of_type(api, "AWS::ApiGatewayV2::Integration").values()
    assert "ApiLive" in json.dumps(integration["IntegrationUri"])
    (stage,) = of_type(api, "AWS::ApiGatewayV2::Stage").values()
    assert json.loads(stage["AccessLogSettings"]["Format"])["requestId"] == "$context.requestId"
    schema = next(
        k for k in of_type(pipeline, "AWS::CloudFormation::CustomResource") if k.startswith("Schema")
    )
    sql = [k for k, f in of_type(pipeline, "AWS::Lambda::Function").items() if "VpcConfig" in f]
    waiting = [k for k in sql if schema in pipeline["Resources"][k].get("DependsOn", [])]
    assert sorted(waiting) == sorted(k for k in sql if not k.startswith(("Migrate", "Users")))
    functions = of_type(pipeline, "AWS::Lambda::Function").values()
    assert all(f.get("TracingConfig") == {"Mode": "Active"} for f in functions if "Layers" in f)


def test_each_direction_alarms_when_its_p99_freshness_passes_5_s_and_no_traffic_is_not_stale(monitoring):
    """freshness=realtime (the default): a write reaches the other side within 5 s at p99 over 5
    minutes (three periods in a row), each of the three directions alarmed on its own function's
    `Freshness` (ms); a quiet period emits nothing, and that is not stale."""
    alarms = of_type(monitoring, "AWS::CloudWatch::Alarm")
    fresh = {k: a for k, a in alarms.items() if a.get("MetricName") == "Freshness"}
    assert sorted(k.split("FreshnessP99")[0] for k in fresh) == sorted(DIRECTIONS)
    (topic,) = of_type(monitoring, "AWS::SNS::Topic")
    for logical, alarm in fresh.items():
        service = DIRECTIONS[logical.split("FreshnessP99")[0]]
        assert alarm["Dimensions"] == [{"Name": "service", "Value": f"hybridsync-{service}"}]
        assert (alarm["Namespace"], alarm["ExtendedStatistic"], alarm["Period"]) == ("hybridsync", "p99", 300)
        assert "Statistic" not in alarm
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (5000, "GreaterThanThreshold")
        # one value per batch: three slow periods in a row, not one slow batch, page
        assert (alarm["EvaluationPeriods"], alarm["TreatMissingData"]) == (3, "notBreaching")
        assert alarm["AlarmActions"] == alarm["OKActions"] == [{"Ref": topic}]
        assert alarm["AlarmDescription"].startswith(f"{service}: ")  # its runbook: where to look
    runbooks = {k.split("FreshnessP99")[0]: a["AlarmDescription"] for k, a in fresh.items()}
    assert "IteratorAge" in runbooks["WriteBack"] and "IteratorAge" in runbooks["Aggregate"]
    assert "OutboxAge" in runbooks["SqlSync"] and "errors and duration" in runbooks["SqlSync"]


def test_the_dashboard_shows_each_directions_freshness_p50_and_p99(monitoring):
    (dashboard,) = of_type(monitoring, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["DashboardBody"])
    assert "Freshness (p50, p99)" in body
    for service in DIRECTIONS.values():
        for stat in ("p50", "p99"):
            assert f"{service} {stat} (ms)" in body, (service, stat)


def test_the_freshness_threshold_follows_its_setting_and_the_freshness_mode():
    """`-c freshness_p99_alarm_s=3` makes it 3 s; unset under `-c freshness=economy`, 120 s. Built in
    process, read from the alarms' own properties: no synth."""
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    cases = (({"freshness_p99_alarm_s": "3"}, 3000), ({"freshness": "economy"}, 120_000))
    for context, threshold_ms in cases:
        monitoring = build(App(context={**flags, **context, "aws:cdk:bundling-stacks": []}))["monitoring"]
        thresholds = {
            id: alarm.node.default_child.threshold  # type: ignore[attr-defined]
            for id, alarm in monitoring.alarms.items()  # type: ignore[attr-defined]
            if "Freshness" in id
        }
        assert thresholds == {f"{d}FreshnessP99": threshold_ms for d in DIRECTIONS}, context
