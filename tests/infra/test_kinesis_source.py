"""Kinesis Data Streams for DynamoDB as the change source (`-c change_source=kinesis`): the stream and
the table's destination, the engine's mappings on enhanced fan-out consumers with the DynamoDB
mappings' knobs, their grants and alarms, and a team's own consumer beside them, which the DynamoDB
stream refuses (stream-readers). Synthesized in process, without asset bundling; cdk-nag errors and
deploy-truth findings fail the synth."""

import copy
import json

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk.assertions import Template
from cdk_nag import NagSuppressions

from hybridsync import truth
from hybridsync.cdk import build, grants
from hybridsync.cdk.data import DataStack
from hybridsync.model import config
from tests.conftest import ROOT
from tests.infra.test_database_access import functions, of_type, statements, synthesized

pytestmark = pytest.mark.infra
ENGINE = ("WriteBack", "Aggregate")


def own_consumer(stacks: dict, source: str) -> None:
    """What a team adds in app.py, between `build(app)` and `synth_or_exit(app)`: its own function on
    the main table's changes (docs/deploying.md, "Your own consumer of a table's changes")."""
    team = Stack(stacks["data"].node.scope, "Search")
    code = lambda_.Code.from_inline("def handler(event, context):\n    return {}")
    indexer = lambda_.Function(team, "Indexer", runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
                               code=code)  # fmt: skip
    NagSuppressions.add_stack_suppressions(team, [
        {"id": "AwsSolutions-IAM4", "reason": "The test's function logs with the basic execution role."},
        {"id": "AwsSolutions-L1", "reason": "The test's function's runtime is pinned with its code."},
    ])  # fmt: skip
    start = lambda_.StartingPosition.TRIM_HORIZON
    if source == "kinesis":
        stream = stacks["data"].kinesis_streams["main"]
        consumer = kinesis.StreamConsumer(team, "IndexerConsumer", stream=stream,
                                          stream_consumer_name="search-indexer")  # fmt: skip
        indexer.add_event_source(sources.KinesisConsumerEventSource(consumer, starting_position=start))
    else:
        indexer.add_event_source(
            sources.DynamoEventSource(stacks["data"].tables["main"], starting_position=start)
        )


def synthesize(source: str) -> tuple[dict[str, dict], list[truth.Finding], DataStack]:
    """The shop with `-c change_source=<source>` and a team's own consumer: every stack's template (no
    cdk-nag error in any) and the deploy truth's findings."""
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = App(context={**flags, "change_source": source, "aws:cdk:bundling-stacks": []})
    stacks = build(app)
    own_consumer(stacks, source)
    every = [
        *stacks.values(),
        *(c for c in app.node.children if isinstance(c, Stack) and c.stack_name == "Search"),
    ]
    templates = {s.stack_name: t for s, t in zip(every, synthesized(app, every), strict=True)}
    findings = truth.check(truth.Templates(templates))
    return {name.split("-")[-1]: t for name, t in templates.items()}, findings, stacks["data"]


@pytest.fixture(scope="module")
def kinesis_app():
    stacks, findings, _ = synthesize("kinesis")
    assert findings == [], "\n".join(map(str, findings))
    return stacks


@pytest.fixture(scope="module")
def dynamodb_app():
    """The same app on DynamoDB Streams, with the team's consumer: (templates, findings, data stack)."""
    return synthesize("dynamodb")


def one(template: dict, kind: str) -> tuple[str, dict]:
    (found,) = of_type(template, kind).items()
    return found


def engine_mappings(pipeline: dict) -> dict[str, dict]:
    mappings = of_type(pipeline, "AWS::Lambda::EventSourceMapping")
    return {name: m["Properties"] for name, m in mappings.items() if name.startswith(ENGINE)}


def test_the_stream_on_demand_encrypted_and_the_tables_destination_at_microseconds(kinesis_app):
    stream_id, stream = one(kinesis_app["data"], "AWS::Kinesis::Stream")
    assert stream["Properties"] == {
        "RetentionPeriodHours": 24,
        "StreamEncryption": {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"},
        "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
    }
    assert stream["Metadata"]["hybridsync:table"] == "main"
    tables = of_type(kinesis_app["data"], "AWS::DynamoDB::GlobalTable")
    main = next(t for t in tables.values() if t["Metadata"].get("hybridsync:table") == "main")
    assert main["Properties"]["Replicas"][0]["KinesisStreamSpecification"] == {
        "StreamArn": {"Fn::GetAtt": [stream_id, "Arn"]},
        "ApproximateCreationDateTimePrecision": "MICROSECOND",
    }
    assert "MainChangeStreamArn" in kinesis_app["data"]["Outputs"]


def test_provisioned_shards_retention_and_the_customer_key_are_settings():
    key = "arn:aws:kms:eu-west-1:123456789012:key/0b0b0b0b-1111-2222-3333-444444444444"
    app = App(context={"change_source": "kinesis", "kinesis_shards": "4", "kinesis_retention_h": "168",
                       "kms_key_arn": key})  # fmt: skip
    pinned = Environment(account="123456789012", region="eu-west-1")  # a customer key's (app._environment)
    data = Template.from_stack(DataStack(app, "Data", model=config.model(None), env=pinned))
    data.has_resource_properties("AWS::Kinesis::Stream", {
        "ShardCount": 4, "RetentionPeriodHours": 168, "StreamModeDetails": {"StreamMode": "PROVISIONED"},
        "StreamEncryption": {"EncryptionType": "KMS", "KeyId": key},
    })  # fmt: skip
    with pytest.raises(ValueError, match="24 to 8760 hours"):
        DataStack(App(context={"change_source": "kinesis", "kinesis_retention_h": "9000"}), "Data",
                  model=config.model(None))  # fmt: skip


def test_each_engine_consumer_reads_through_its_own_fan_out_consumer_with_the_streams_knobs(kinesis_app):
    pipeline = kinesis_app["pipeline"]
    consumers = of_type(pipeline, "AWS::Kinesis::StreamConsumer")
    assert sorted(c["Properties"]["ConsumerName"] for c in consumers.values()) == [
        "HybridSync-pipeline-Aggregate", "HybridSync-pipeline-WriteBack"
    ]  # fmt: skip
    mappings = engine_mappings(pipeline)
    assert len(mappings) == 2
    for name, mapping in mappings.items():
        (source,) = mapping["EventSourceArn"]["Fn::GetAtt"][:1]
        assert source in consumers and mapping["EventSourceArn"]["Fn::GetAtt"][1] == "ConsumerARN"
        assert source.startswith(name[: name.index("Live")])  # its own
        assert mapping["StartingPosition"] == "TRIM_HORIZON" and mapping["Enabled"] is True
        assert mapping["BisectBatchOnFunctionError"] is True and mapping["MaximumRetryAttempts"] == 10
        assert mapping["MaximumRecordAgeInSeconds"] == 86400 and mapping["ParallelizationFactor"] == 1
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["MetricsConfig"] == {"Metrics": ["EventCount"]}
        assert mapping["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0].startswith(
            "FailedBatchesBucket"
        )
        patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
        assert patterns and all(list(p) == ["data"] for p in patterns)  # Kinesis filters on `data` only
        aggregate = name.startswith("Aggregate")
        assert mapping.get("TumblingWindowInSeconds") == (60 if aggregate else None)
        assert mapping["BatchSize"] == (5000 if aggregate else 1000)


def test_the_filters_are_the_dynamodb_mappings_wrapped_in_data(kinesis_app):
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = App(context={**flags, "aws:cdk:bundling-stacks": []})
    dynamodb = Template.from_stack(build(app)["pipeline"]).to_json()  # type: ignore[arg-type]

    def patterns(pipeline: dict) -> dict[str, list]:
        return {name[: name.index("Live")]: [json.loads(f["Pattern"]) for f in m["FilterCriteria"]["Filters"]]
                for name, m in engine_mappings(pipeline).items()}  # fmt: skip

    wrapped = {k: [{"data": p} for p in v] for k, v in patterns(dynamodb).items()}
    assert patterns(kinesis_app["pipeline"]) == wrapped


def test_the_consumers_roles_read_the_stream_and_subscribe_through_their_consumer_only(kinesis_app):
    pipeline = kinesis_app["pipeline"]
    for consumer in ENGINE:
        granted = [s for s in statements(pipeline, f"{consumer}FunctionServiceRole")
                   if any(str(a).startswith("kinesis:") for a in s["Action"])]  # fmt: skip
        by_resource = {json.dumps(s["Resource"]): sorted(s["Action"]) for s in granted}
        stream = next(r for r in by_resource if "MainChangeStream" in r)
        assert by_resource.pop(stream) == sorted(grants.KINESIS_READ)
        ((resource, actions),) = by_resource.items()
        assert f"{consumer}MainConsumer" in resource and "ConsumerARN" in resource
        assert actions == ["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"]


def test_the_operations_function_is_told_of_the_kinesis_stream_and_calls_none(kinesis_app):
    """It reads no Kinesis stream (a Kinesis batch is redriven from the failure bucket's copy, a
    rebuild refuses a Kinesis-sourced table): no Kinesis grant, and no Kinesis endpoint in the VPC
    to pay for by the hour."""
    pipeline = kinesis_app["pipeline"]
    variable = functions(pipeline)["Operations"]["CHANGE_STREAMS"]
    assert "main" in json.dumps(variable) and "MainChangeStream" in json.dumps(variable)
    granted = statements(pipeline, "OperationsFunctionServiceRole")
    actions = {a for s in granted for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    assert not any(a.startswith("kinesis:") for a in actions)
    assert {"lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"} <= actions
    assert "kinesis-streams" not in json.dumps(of_type(pipeline, "AWS::EC2::VPCEndpoint"))


def imports(value: object) -> set[str]:
    """Every export name a template imports (`Fn::ImportValue`)."""
    if isinstance(value, dict):
        if isinstance(value.get("Fn::ImportValue"), str):
            return {value["Fn::ImportValue"]}
        return {name for v in value.values() for name in imports(v)}
    if isinstance(value, list):
        return {name for v in value for name in imports(v)}
    return set()


def exports(template: dict) -> set[str]:
    return {o["Export"]["Name"] for o in template.get("Outputs", {}).values() if "Export" in o}


def test_switching_to_kinesis_removes_no_export_the_deployed_pipeline_imports(kinesis_app, dynamodb_app):
    """`cdk deploy` updates the data stack first; CloudFormation refuses to remove an export another
    stack imports (Fn::ImportValue). Every export the DynamoDB-mode pipeline and monitoring import
    is still exported in Kinesis mode. (Back from Kinesis, the Kinesis stream's export goes: deploy
    the pipeline and monitoring stacks first, docs/deploying.md.)"""
    dynamodb_stacks, _, _ = dynamodb_app
    needed = {name for stack in ("pipeline", "monitoring") for name in imports(dynamodb_stacks[stack])}
    from_data = needed & exports(dynamodb_stacks["data"])
    assert any("StreamArn" in name for name in from_data)
    assert from_data <= exports(kinesis_app["data"]), sorted(from_data - exports(kinesis_app["data"]))


def test_a_change_stream_dynamodb_stopped_writing_to_alarms(kinesis_app):
    """No consumer fails and no iterator ages when DynamoDB stops putting into the stream (a key
    policy, a throttling stream): the writes that reached no record alarm, and the throttles. The
    writes are the table's successful write requests: a conditional write refused (the engine's
    version guards) consumes write capacity and makes no record, so capacity would page for nothing."""
    alarms = of_type(kinesis_app["monitoring"], "AWS::CloudWatch::Alarm")
    stalled = next(a for logical, a in alarms.items() if "ChangesNotReachingKinesis" in logical)
    expression = json.dumps(stalled["Properties"]["Metrics"])
    assert "ConsumedWriteCapacityUnits" not in expression and "IncomingRecords" in expression
    writes = [q["MetricStat"] for q in stalled["Properties"]["Metrics"] if "MetricStat" in q
              and q["MetricStat"]["Metric"]["MetricName"] == "SuccessfulRequestLatency"]  # fmt: skip
    assert {w["Stat"] for w in writes} == {"SampleCount"}
    operations = {d["Value"] for w in writes for d in w["Metric"]["Dimensions"] if d["Name"] == "Operation"}
    assert operations == {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
    assert stalled["Properties"]["EvaluationPeriods"] == 3
    assert any("ChangeStreamThrottled" in logical for logical in alarms)


def test_every_kinesis_mapping_has_its_failed_batches_alarm(kinesis_app):
    alarms = json.dumps(of_type(kinesis_app["monitoring"], "AWS::CloudWatch::Alarm"))
    for name in engine_mappings(kinesis_app["pipeline"]):
        assert name in alarms
    assert "IteratorAge" in alarms


def test_a_teams_own_consumer_on_the_kinesis_stream_passes_and_on_the_dynamodb_stream_is_refused(
    kinesis_app, dynamodb_app
):
    """The write-back and the aggregation read the table's Kinesis stream through consumers of their
    own: a team's third consumer fits (the fixture's synth has it, with no finding). On the DynamoDB
    stream it is the third reader, refused, pointing at the Kinesis change source."""
    assert len(of_type(kinesis_app["Search"], "AWS::Kinesis::StreamConsumer")) == 1
    _, findings, _ = dynamodb_app
    (finding,) = [f for f in findings if f.rule == "stream-readers"]
    assert "3 readers" in finding.message and "-c change_source=kinesis" in finding.message


def test_too_many_fan_out_consumers_or_shared_readers_on_a_kinesis_stream_are_refused(kinesis_app):
    stacks = {f"HybridSync-{k}" if k != "Search" else k: copy.deepcopy(t) for k, t in kinesis_app.items()}
    pipeline = stacks["HybridSync-pipeline"]["Resources"]
    consumer_id, consumer = next(
        iter(of_type(stacks["HybridSync-pipeline"], "AWS::Kinesis::StreamConsumer").items())
    )
    for i in range(18):  # 2 of the engine's + the team's + 18 = 21
        pipeline[f"Extra{i}"] = copy.deepcopy(consumer)

    def found(rule: str) -> list[truth.Finding]:
        return [f for f in truth.check(truth.Templates(stacks)) if f.rule == rule]

    (finding,) = found("kinesis-fan-out")
    assert "21 enhanced fan-out consumers" in finding.message and "MainChangeStream" in finding.resource
    stream = consumer["Properties"]["StreamARN"]
    mapping = next(
        m for k, m in pipeline.items() if k.startswith("WriteBack") and m["Type"].endswith("Mapping")
    )
    for i in range(6):  # shared-throughput mappings: each polls every shard once a second
        shared = pipeline[f"Shared{i}"] = copy.deepcopy(mapping)
        shared["Properties"]["EventSourceArn"] = stream
    (finding,) = found("kinesis-shared-readers")
    assert "6 shared-throughput mappings" in finding.message
    pipeline["Shared0"]["Properties"]["Enabled"] = False  # a paused mapping polls nothing
    assert found("kinesis-shared-readers") == []
    assert consumer_id


def test_a_table_without_a_change_stream_says_how_to_give_it_one(dynamodb_app):
    """A team's app.py reaching for a Kinesis stream the table does not have (docs/deploying.md)."""
    _, _, data = dynamodb_app
    with pytest.raises(KeyError, match='change_source=kinesis, or declare it with change_source="kinesis"'):
        data.kinesis_streams["main"]
