"""A Kinesis mapping's output against what AWS recorded for Lambda's Kinesis event source mapping
(`../shared/aws-recorded/localstack__test_lambda_integration_kinesis__*`): the event's records and
the on-failure record (`KinesisBatchInfo`), on a Kinesis-sourced table's changes (local/kinesis/models.py)."""

from __future__ import annotations

import re
import time

from hybridsync.local.awslambda.functions import FunctionError
from tests.fidelity.conftest import SECONDS, UUID, Function
from tests.integration.test_kinesis_local import poller, pump, source  # noqa: F401 (fixture)
from tests.integration.test_mappings import put_scores

KINESIS_SEQUENCE = re.compile(r"\d{56}")  # the Lambda guide's sample: 56 digits


def test_the_kinesis_record_has_the_recorded_fields(stack, source, tmp_path):  # noqa: F811
    """report_batch_item_failures' `kinesis_records`: awsRegion, eventID `<shardId>:<sequence>`,
    eventName aws:kinesis:record, eventSource aws:kinesis, eventSourceARN the stream, eventVersion
    1.0, invokeIdentityArn a role; kinesis {approximateArrivalTimestamp, data, kinesisSchemaVersion
    1.0, partitionKey, sequenceNumber}."""
    put_scores(source[0], source[1], ["p"])
    pump(stack, source, tmp_path).pump()
    function = Function({"batchItemFailures": []})
    p = poller(stack, source, function, tmp_path)
    p.read()
    p.deliver_due(draining=True)
    (record,) = function.events[0]["Records"]
    assert sorted(record) == ["awsRegion", "eventID", "eventName", "eventSource", "eventSourceARN",
                              "eventVersion", "invokeIdentityArn", "kinesis"]  # fmt: skip
    assert sorted(record["kinesis"]) == ["approximateArrivalTimestamp", "data", "kinesisSchemaVersion",
                                         "partitionKey", "sequenceNumber"]  # fmt: skip
    shard, _, number = record["eventID"].partition(":")
    assert shard == "shardId-000000000000" and KINESIS_SEQUENCE.fullmatch(number)
    assert record["invokeIdentityArn"].startswith("arn:aws:iam::") and ":role/" in record["invokeIdentityArn"]


def test_the_failure_record_names_a_kinesis_batch(stack, source, tmp_path):  # noqa: F811
    """record_age_exceeded_discard_records and report_batch_item_failures: `KinesisBatchInfo`
    {shardId, startSequenceNumber, endSequenceNumber, approximateArrivalOfFirstRecord,
    approximateArrivalOfLastRecord (seconds), batchSize, streamArn}; RecordAgeExceeded has no
    responseContext and approximateInvokeCount 1; RetryAttemptsExhausted counts the tries."""
    put_scores(source[0], source[1], ["old"])
    pump(stack, source, tmp_path).pump()
    time.sleep(1.1)
    sent: list[dict] = []
    p = poller(stack, source, Function(), tmp_path, on_failure=lambda info, _: sent.append(info), max_age_s=1)
    p.read()
    p.deliver_due(draining=True)
    put_scores(source[0], source[1], ["new"])
    pump(stack, source, tmp_path).pump()
    p.settings = type(p.settings)(name="k", max_retries=3)
    p.invoke = Function(FunctionError("Unhandled", "boom"))
    p.read()
    p.deliver_due(draining=True)
    aged, exhausted = sent
    assert "responseContext" not in aged and aged["requestContext"]["approximateInvokeCount"] == 1
    assert aged["requestContext"]["condition"] == "RecordAgeExceeded" and UUID.fullmatch(
        aged["requestContext"]["requestId"])  # fmt: skip
    assert exhausted["requestContext"]["approximateInvokeCount"] == 4
    for body in (aged, exhausted):
        info = body["KinesisBatchInfo"]
        assert list(info) == ["shardId", "startSequenceNumber", "endSequenceNumber",
                              "approximateArrivalOfFirstRecord", "approximateArrivalOfLastRecord",
                              "batchSize", "streamArn"]  # fmt: skip
        assert KINESIS_SEQUENCE.fullmatch(info["startSequenceNumber"]) and info["batchSize"] == 1
        assert SECONDS.fullmatch(info["approximateArrivalOfFirstRecord"]) and info["streamArn"] == source[3]
