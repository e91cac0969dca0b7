"""What an operator can rely on without a stream: a failed batch's stored payload reads the same as an
object or as its JSON text; a rebuild leaves the aggregation paused when the stack pauses it."""

import json
from types import SimpleNamespace

import pytest

from hybridsync.sync import failed, rebuild

RECORD = {
    "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 3,
                       "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:WriteBack:live"},
    "DDBStreamBatchInfo": {"streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x",
                           "shardId": "shardId-1", "startSequenceNumber": "1", "endSequenceNumber": "2",
                           "batchSize": 1},
    "timestamp": "2026-11-27T12:00:00.000Z",
}  # fmt: skip
RECORDS = [{"eventID": "1", "eventName": "INSERT", "dynamodb": {"SequenceNumber": "1"}}]


@pytest.mark.parametrize("payload", [{"Records": RECORDS}, json.dumps({"Records": RECORDS})])
def test_a_stored_failed_batch_reads_its_records_from_an_object_or_its_json_text(payload):
    batch = failed.FailedBatch.parse("s3://bucket", "aws/lambda/x", "", RECORD | {"payload": payload})
    assert batch.records == RECORDS and batch.consumer == "write_back"


class _Lambda:
    def __init__(self):
        self.enabled: dict[str, bool] = {"m1": True}

    def list_event_source_mappings(self, FunctionName):
        return {"EventSourceMappings": [{"UUID": u} for u in self.enabled]}

    def update_event_source_mapping(self, UUID, Enabled):
        self.enabled[UUID] = Enabled

    def get_event_source_mapping(self, UUID):
        return {"State": "Enabled" if self.enabled[UUID] else "Disabled"}


@pytest.mark.parametrize(("declared", "after"), [(None, True), ("true", True), ("false", False)])
def test_a_rebuild_leaves_the_mappings_as_the_stack_declares_them(declared, after, monkeypatch):
    monkeypatch.setenv("AGGREGATE_FUNCTION", "Aggregate")
    if declared is None:
        monkeypatch.delenv("PIPELINE_ENABLED", raising=False)
    else:
        monkeypatch.setenv("PIPELINE_ENABLED", declared)
    lam = _Lambda()
    with rebuild.paused(SimpleNamespace(aws=lambda _service: lam)):  # type: ignore[arg-type]
        assert lam.enabled == {"m1": False}
    assert lam.enabled == {"m1": after}


def test_the_engines_clients_take_the_endpoint_names_the_stack_gives(monkeypatch):
    """A VPC function reaches DynamoDB and Streams by an interface endpoint's own name (neither has
    private DNS): the stacks set botocore's service-specific variables, which the engine's clients
    honour as boto3 does (no local endpoint set)."""
    from hybridsync import truth
    from hybridsync.runtime import aws

    for variable in ("DYNAMODB_ENDPOINT", "DYNAMODB_STREAMS_ENDPOINT", "AWS_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # as Lambda gives them (no IMDS)
        monkeypatch.setenv(variable, "test")
    for service, name in {"dynamodb": "dynamodb", "dynamodbstreams": "streams.dynamodb"}.items():
        url = f"https://vpce-0a1b-2c3d.{name}.eu-west-1.vpce.amazonaws.com"
        monkeypatch.setenv(truth.ENDPOINT_VARIABLE[service], url)
        assert aws.client(service).meta.endpoint_url == url
