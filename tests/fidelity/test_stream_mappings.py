"""The local DynamoDB stream event source mapping against what AWS recorded for Lambda's
(`../shared/aws-recorded/localstack__test_lambda_integration_*`): the events it delivers, how often
it invokes, and the invocation record it sends to an on-failure destination."""

from __future__ import annotations

import time

import pytest

from hybridsync.local.awslambda.functions import FunctionError
from tests.fidelity.conftest import FUNCTION_ARN, MILLISECONDS, SECONDS, SEQUENCE, UUID, Function, run_mapping

HELLO = {"my_partition_key": {"S": "hello world"}, "binary_key": {"B": b"foobar"}}


def raises(event):
    return FunctionError("ZeroDivisionError", "division by zero")


def test_the_record_of_a_batch_out_of_retries_after_the_function_raised(table, destination, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__on_failure_sqs_function_error:
    BatchSize 1, MaximumRetryAttempts 1, the function raises: two invocations, then one record with
    condition RetryAttemptsExhausted, approximateInvokeCount 2, functionError "Unhandled", metadata
    only, arrival times to the second and the record's time to the millisecond."""
    table.put(HELLO)
    function = Function(raises)
    run_mapping(table, function, destination, tmp_path, batch_size=1, max_retries=1)
    assert len(function.events) == 2
    (body,) = destination.messages()
    assert list(body) == ["requestContext", "responseContext", "version", "timestamp", "DDBStreamBatchInfo"]
    context = body["requestContext"]
    assert UUID.fullmatch(context["requestId"])
    assert (context["functionArn"], context["condition"], context["approximateInvokeCount"]) == (
        FUNCTION_ARN, "RetryAttemptsExhausted", 2)  # fmt: skip
    assert body["responseContext"] == {
        "statusCode": 200,
        "executedVersion": "$LATEST",
        "functionError": "Unhandled",
    }
    assert body["version"] == "1.0" and MILLISECONDS.fullmatch(body["timestamp"])
    info = body["DDBStreamBatchInfo"]
    assert list(info) == ["shardId", "startSequenceNumber", "endSequenceNumber",
                          "approximateArrivalOfFirstRecord", "approximateArrivalOfLastRecord", "batchSize",
                          "streamArn"]  # fmt: skip
    assert info["shardId"] == table.shard and info["streamArn"] == table.stream_arn and info["batchSize"] == 1
    assert (
        SEQUENCE.fullmatch(info["startSequenceNumber"])
        and info["endSequenceNumber"] == info["startSequenceNumber"]
    )
    assert SECONDS.fullmatch(info["approximateArrivalOfFirstRecord"])
    assert SECONDS.fullmatch(info["approximateArrivalOfLastRecord"])


def test_the_record_reaches_an_sns_topic_as_its_message(stack, table, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__on_failure_sns_function_error:
    the same record, as the `Message` of an SNS notification (read here through a subscribed queue)."""
    import json

    sns, sqs = stack.client("sns"), stack.client("sqs")
    topic = sns.create_topic(Name=f"failures-{table.name}")["TopicArn"]
    url = sqs.create_queue(QueueName=f"via-{table.name}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    from hybridsync.local.awslambda import mappings
    from hybridsync.local.awslambda.mappings import Checkpoints, Settings, ShardPoller

    table.put(HELLO)
    send = mappings.destination(topic, lambda service: stack.client(service), "m")
    poller = ShardPoller(Settings("recorded", batch_size=1, max_retries=1), Function(raises), table.streams,
                         table.stream_arn, table.shard, Checkpoints(None), send, FUNCTION_ARN)  # fmt: skip
    poller.read()
    poller.deliver_due(draining=True)
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    notification = json.loads(message["Body"])
    assert notification["Type"] == "Notification" and notification["TopicArn"] == topic
    body = json.loads(notification["Message"])
    assert body["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert body["requestContext"]["approximateInvokeCount"] == 2
    assert body["responseContext"]["functionError"] == "Unhandled" and "DDBStreamBatchInfo" in body


def test_the_record_in_an_s3_bucket_also_carries_the_batch(stack, table, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__on_failure_s3_function_error:
    an S3 destination's object holds the same record plus `payload.Records`, the batch as delivered
    (eventVersion 1.1, the binary attribute in base64); its key is named as the Lambda developer
    guide, "Retain discarded batch records" (kinesis-on-failure-destination), says of an S3
    destination: `aws/lambda/<ESM-UUID>/<shardID>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<Random UUID>`."""
    import json
    import re
    import uuid

    from hybridsync.local.awslambda import mappings
    from hybridsync.local.awslambda.mappings import Checkpoints, Settings, ShardPoller

    s3 = stack.client("s3")
    bucket = f"failures-{table.name}"
    s3.create_bucket(Bucket=bucket)
    table.put(HELLO)
    mapping = str(uuid.uuid4())
    send = mappings.destination(f"arn:aws:s3:::{bucket}", lambda service: stack.client(service), mapping)
    poller = ShardPoller(Settings("recorded", batch_size=1, max_retries=1), Function(raises), table.streams,
                         table.stream_arn, table.shard, Checkpoints(None), send, FUNCTION_ARN)  # fmt: skip
    poller.read()
    poller.deliver_due(draining=True)
    (entry,) = s3.list_objects_v2(Bucket=bucket)["Contents"]
    day, at = r"(\d{4})/(\d\d)/(\d\d)", r"(\d{4})-(\d\d)-(\d\d)T\d\d\.\d\d\.\d\d"
    key = re.fullmatch(
        rf"aws/lambda/{mapping}/{re.escape(table.shard)}/{day}/{at}-[0-9a-f-]{{36}}", entry["Key"]
    )
    assert key and key.groups()[:3] == key.groups()[3:], entry["Key"]  # the folder's date is the name's
    body = json.loads(s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read())
    assert body["requestContext"]["approximateInvokeCount"] == 2
    assert body["responseContext"]["functionError"] == "Unhandled"
    (record,) = body["payload"]["Records"]
    assert record["eventVersion"] == "1.1" and record["dynamodb"]["NewImage"]["binary_key"] == {
        "B": "Zm9vYmFy"
    }


def test_a_reported_item_failure_is_retried_alone_and_its_record_says_function_error_null(
    table, destination, tmp_path
):
    """Follows localstack__test_lambda_integration_dynamodbstreams__report_batch_item_failures (and its
    Kinesis counterpart, localstack__test_lambda_integration_kinesis__report_batch_item_failures):
    six records, BatchSize 3, MaximumRetryAttempts 3, ReportBatchItemFailures, the sixth always
    reported failed. Every record is delivered, the sixth once in its batch and four times alone
    (ten deliveries); its record: batchSize 1, approximateInvokeCount 4, functionError null."""
    table.put(*({"my_partition_key": {"S": f"testId{n}"}, "should_fail": {"BOOL": n == 5}} for n in range(6)))

    def report(event):
        failing = [r for r in event["Records"] if r["dynamodb"]["NewImage"]["should_fail"]["BOOL"]]
        return {"batchItemFailures": [{"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in failing]}

    function = Function(report)
    run_mapping(table, function, destination, tmp_path, batch_size=3, max_retries=3, report_failures=True)
    delivered = sorted(key for batch in function.delivered() for key in batch)
    assert delivered == [f"testId{n}" for n in range(5)] + ["testId5"] * 5
    (body,) = destination.messages()
    assert body["requestContext"]["approximateInvokeCount"] == 4
    assert body["responseContext"]["functionError"] is None
    assert body["DDBStreamBatchInfo"]["batchSize"] == 1


@pytest.mark.parametrize(
    ("scenario", "response", "function_error"),
    [
        ("item_identifier_not_present_failure", {"batchItemFailures": [{"itemIdentifier": 123}]}, None),
        ("empty_string_item_identifier_failure", {"batchItemFailures": [{"itemIdentifier": ""}]}, None),
        ("null_item_identifier_failure", {"batchItemFailures": [{"itemIdentifier": None}]}, None),
        ("invalid_key_foo_failure", {"batchItemFailures": [{"foo": 123}]}, None),
        ("invalid_key_foo_null_value_failure", {"batchItemFailures": [{"foo": None}]}, None),
        ("unhandled_exception_in_function", "raise", "Unhandled"),
    ],
)
def test_a_malformed_item_failure_report_fails_the_whole_batch(scenario, response, function_error, table,
                                                                destination, tmp_path):  # fmt: skip
    """Follows localstack__test_lambda_integration_dynamodbstreams__report_batch_item_failure_scenarios
    (each scenario by its recorded name): BatchSize 3, MaximumRetryAttempts 3: four invocations of
    the whole batch, then its record, with functionError null unless the function raised."""
    table.put(HELLO)
    function = Function(raises if response == "raise" else response)
    run_mapping(table, function, destination, tmp_path, batch_size=3, max_retries=3, report_failures=True)
    assert function.delivered() == [["hello world"]] * 4, scenario
    (body,) = destination.messages()
    assert body["requestContext"]["approximateInvokeCount"] == 4
    assert body["responseContext"]["functionError"] == function_error


@pytest.mark.parametrize(
    ("scenario", "response"),
    [("empty_list_success", []), ("null_success", None), ("empty_dict_success", {}),
     ("empty_batch_item_failure_success", {"batchItemFailures": []}),
     ("null_batch_item_failure_success", {"batchItemFailures": None})],
)  # fmt: skip
def test_an_empty_failure_report_is_a_success(scenario, response, table, destination, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__report_batch_item_success_scenarios:
    BatchSize 1, MaximumRetryAttempts 2, ReportBatchItemFailures: one invocation, nothing sent."""
    table.put(HELLO)
    function = Function(response)
    run_mapping(table, function, destination, tmp_path, batch_size=1, max_retries=2, report_failures=True)
    assert len(function.events) == 1, scenario
    assert destination.messages() == []


def test_the_event_record_of_an_insert(table, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__event_insert_new_image: the
    record Lambda delivers for an INSERT into a NEW_IMAGE stream: eventVersion "1.1", the table's
    region, a 10-digit epoch-second creation time, binary as base64, SizeBytes 70."""
    table.put(HELLO)
    function = Function()
    run_mapping(table, function, None, tmp_path, batch_size=1)
    ((record,),) = [event["Records"] for event in function.events]
    assert list(record) == ["eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "dynamodb",
                            "eventSourceARN"]  # fmt: skip
    assert (record["eventName"], record["eventVersion"], record["eventSource"]) == (
        "INSERT",
        "1.1",
        "aws:dynamodb",
    )
    assert record["awsRegion"] == "us-east-1" and record["eventSourceARN"] == table.stream_arn
    data = record["dynamodb"]
    assert list(data) == ["ApproximateCreationDateTime", "Keys", "NewImage", "SequenceNumber", "SizeBytes",
                          "StreamViewType"]  # fmt: skip
    created = data["ApproximateCreationDateTime"]
    assert isinstance(created, int) and len(str(created)) == 10 and abs(created - time.time()) < 120
    assert data["Keys"] == {"my_partition_key": {"S": "hello world"}}
    assert data["NewImage"] == {"my_partition_key": {"S": "hello world"}, "binary_key": {"B": "Zm9vYmFy"}}
    assert SEQUENCE.fullmatch(data["SequenceNumber"])
    assert (data["SizeBytes"], data["StreamViewType"]) == (70, "NEW_IMAGE")


FILTER_CASES = {  # case: (first item, second item, pattern, invocations AWS recorded)
    "insert_same_entry_twice": ({"id": "id_value", "id2": "id2_value"},
                                {"id": "id_value", "id2": "id2_value"}, {"eventName": ["INSERT"]}, 1),
    "content_or_filter": ({"id": "id_value"}, {"id": "id_value", "id2": "id2_new_value"},
                          {"eventName": ["INSERT", "MODIFY"]}, 2),
    "content_filter_type": ({"id": "id_value_1", "presentKey": "presentValue"}, {"id": "id_value_2"},
                            {"dynamodb": {"NewImage": {"presentKey": {"S": ["presentValue"]}}}}, 1),
    "exists_filter_type": ({"id": "id_value_1", "presentKey": "presentValue"}, {"id": "id_value_2"},
                           {"dynamodb": {"NewImage": {"presentKey": {"S": [{"exists": True}]}}}}, 1),
    "exists_false_filter": ({"id": "id_value_1"}, {"id": "id_value_2", "presentKey": "presentValue"},
                            {"dynamodb": {"NewImage": {"presentKey": [{"exists": False}]}}}, 2),
    "numeric_filter": ({"id": "id_value_1", "numericFilter": 42}, {"id": "id_value_2", "numericFilter": 101},
                       {"dynamodb": {"NewImage": {"numericFilter": {"N": [{"numeric": [">", 100]},
                                                                          {"anything-but": "101"}]}}}}, 1),
    "prefix_filter": ({"id": "id_value_1", "prefix": "us-1-other-suffix"},
                      {"id": "id_value_1", "prefix": "other-suffix"},
                      {"dynamodb": {"NewImage": {"prefix": {"S": [{"prefix": "us-1"}]}}}}, 1),
    "date_time_conversion": ({"id": "id_value_1"}, {"id": "id_value_2"},
                             {"dynamodb": {"ApproximateCreationDateTime": [{"numeric": [">", 0]}]}}, 2),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FILTER_CASES))
def test_filter_criteria_invoke_as_often_as_aws(case, stack, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__event_filter_cases (each case by
    its recorded name): two items put one after the other into a NEW_AND_OLD_IMAGES stream, one
    FilterCriteria pattern, and the number of invocations AWS recorded."""
    import json

    from hybridsync.streams import filters
    from tests.fidelity.conftest import Table

    first, second, pattern, invocations = FILTER_CASES[case]
    table = Table(stack, key="id", view="NEW_AND_OLD_IMAGES")

    def item(values):
        return {k: {"N": str(v)} if isinstance(v, int) else {"S": v} for k, v in values.items()}

    table.put(item(first), item(second))
    function = Function()
    run_mapping(table, function, None, tmp_path, batch_size=1, patterns=(filters.parse(json.dumps(pattern)),))
    assert len(function.events) == invocations


def test_records_too_old_before_any_invocation(table, destination, tmp_path, monkeypatch):
    """Follows localstack__test_lambda_integration_kinesis__record_age_exceeded_expire_before_ingestion
    and ..._discard_records (the same poller serves Kinesis and DynamoDB streams): MaximumRecordAgeInSeconds
    60, MaximumRetryAttempts 0, a record older than that when first polled: no invocation; its record
    says condition RecordAgeExceeded, approximateInvokeCount 1, and has no responseContext."""
    table.put(HELLO)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 120)
    function = Function()
    run_mapping(table, function, destination, tmp_path, batch_size=10, max_retries=0, max_age_s=60)
    assert function.events == []
    (body,) = destination.messages()
    assert list(body) == ["requestContext", "version", "timestamp", "DDBStreamBatchInfo"]
    assert (body["requestContext"]["condition"], body["requestContext"]["approximateInvokeCount"]) == (
        "RecordAgeExceeded", 1)  # fmt: skip


def test_records_that_grow_too_old_while_retried(table, destination, tmp_path, monkeypatch):
    """Follows localstack__test_lambda_integration_kinesis__record_age_exceeded_expire_while_retrying:
    MaximumRetryAttempts -1 (until the record expires), the function always fails; the record grows
    past MaximumRecordAgeInSeconds after 8 invocations, and its record says approximateInvokeCount 8."""
    table.put(HELLO)
    real, shift = time.time, [0.0]
    monkeypatch.setattr(time, "time", lambda: real() + shift[0])

    def fail_and_age(event):
        if len(function.events) == 8:
            shift[0] = 120.0  # the record is now two minutes old
        return FunctionError("RuntimeError", "still failing")

    function = Function(fail_and_age)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # the backoff between retries
    run_mapping(table, function, destination, tmp_path, batch_size=1, max_retries=-1, max_age_s=60)
    assert len(function.events) == 8
    (body,) = destination.messages()
    assert (body["requestContext"]["condition"], body["requestContext"]["approximateInvokeCount"]) == (
        "RecordAgeExceeded", 8)  # fmt: skip
    assert "responseContext" not in body


@pytest.mark.parametrize("pattern", ["single-string", '[{"eventName": ["INSERT"=123}]'])
def test_an_invalid_filter_is_refused_when_the_mapping_is_created(pattern):
    """Follows localstack__test_lambda_integration_dynamodbstreams__api_errors
    (test_dynamodb_invalid_event_filter, both recorded inputs): InvalidParameterValueException,
    "Invalid filter pattern definition.", before any record is read."""
    from hybridsync.local.awslambda.mappings import Settings
    from hybridsync.streams import filters

    with pytest.raises(filters.InvalidPattern, match=r"^Invalid filter pattern definition\.$"):
        Settings.from_properties("m", {"FilterCriteria": {"Filters": [{"Pattern": pattern}]}})
