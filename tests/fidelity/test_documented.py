"""What AWS documents where nothing was recorded: tumbling windows (the Lambda developer guide's
sample event, copied into Powertools: `../shared/aws-recorded/not-recorded-doc-samples/`, not a
recording), ParallelizationFactor, API Gateway's payload format 2.0, DynamoDB's table names; and
the mapping errors a deploy meets (recorded: api_errors), met by `hybridsync up`."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
import uuid

import pytest

from hybridsync.local.apigateway import responses as apigateway
from hybridsync.local.app import LocalApp
from hybridsync.local.template import Assembly, TemplateError
from tests.fidelity.conftest import Function, Table, run_mapping

ITEM = {"my_partition_key": {"S": "k"}}


def test_a_window_event_has_the_documented_shape(table, tmp_path):
    """Lambda developer guide, "Implementing stateful DynamoDB stream processing" (the sample
    DynamodbTimeWindowEvent, not a recording): Records, window {start, end} in seconds, state,
    shardId, eventSourceARN, isFinalInvokeForWindow, isWindowTerminatedEarly."""
    table.put(ITEM)
    function = Function(lambda event: {"state": {"1": "state1"}})
    poller = run_mapping(table, function, None, tmp_path, batch_size=10, tumbling_window_s=300)
    (event,) = function.events
    assert list(event) == [
        "Records",
        "window",
        "state",
        "shardId",
        "eventSourceARN",
        "isFinalInvokeForWindow",
        "isWindowTerminatedEarly",
    ]
    assert list(event["window"]) == ["start", "end"] and event["window"]["start"].endswith(":00Z")
    assert (event["state"], event["shardId"], event["eventSourceARN"]) == ({}, table.shard, table.stream_arn)
    assert (event["isFinalInvokeForWindow"], event["isWindowTerminatedEarly"]) == (False, False)
    assert poller.state == {"1": "state1"}  # carried to the window's next invocation


def test_a_window_whose_state_passes_1_mb_ends_early_and_goes_on_afresh(stack, tmp_path):
    """Lambda developer guide: "Your state can be a maximum of 1 MB per shard. If it exceeds that
    size, Lambda terminates the window early"; the final invocation says isWindowTerminatedEarly,
    and the next invocation continues the same window with a fresh state."""
    table = Table(stack)
    table.put({"my_partition_key": {"S": "a"}})
    big = {"blob": "x" * (1024 * 1024 + 1)}
    function = Function(lambda event: {"state": big if len(function.events) == 1 else {"n": 1}})
    poller = run_mapping(table, function, None, tmp_path, batch_size=1, tumbling_window_s=3600)
    table.put({"my_partition_key": {"S": "b"}})
    poller.read()
    poller.deliver_due(draining=True)
    first, final, second = function.events
    assert final["isFinalInvokeForWindow"] and final["isWindowTerminatedEarly"] and final["Records"] == []
    assert final["state"] == big
    assert (
        second["window"] == first["window"]
        and second["state"] == {}
        and not second["isWindowTerminatedEarly"]
    )


def test_parallel_batches_keep_each_items_order_not_each_partitions(stack, tmp_path):
    """Lambda developer guide (DynamoDB, parallelization factor): "Lambda still ensures in-order
    processing at the item (partition and sort key) level": two items of one partition may run
    in different lanes at once; each item's versions arrive in order."""
    client, name = stack.client(), f"par-{uuid.uuid4().hex[:8]}"
    keys = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
    client.create_table(
        TableName=name,
        KeySchema=keys,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": k["AttributeName"], "AttributeType": "S"} for k in keys],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    for version in range(1, 4):
        for sort in range(8):
            client.put_item(
                TableName=name, Item={"pk": {"S": "one"}, "sk": {"S": f"s{sort}"}, "v": {"N": str(version)}}
            )
    table = Table.__new__(Table)
    table.client, table.name, table.streams = client, name, stack.client("dynamodbstreams")
    table.stream_arn = client.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    (shard,) = table.streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"]
    table.shard = shard["ShardId"]
    running, most, lock = [0], [0], threading.Lock()

    def slow(event):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1

    function = Function(slow)
    poller = run_mapping(table, function, None, tmp_path, batch_size=4, parallelization=4)
    seen: dict[str, list[int]] = {}
    for event in function.events:
        for record in event["Records"]:
            image = record["dynamodb"]["NewImage"]
            seen.setdefault(image["sk"]["S"], []).append(int(image["v"]["N"]))
    assert seen == {f"s{n}": [1, 2, 3] for n in range(8)}
    assert most[0] > 1  # one partition key, several lanes at once
    delivered = [int(r["dynamodb"]["SequenceNumber"]) for e in function.events for r in e["Records"]]
    assert int(poller.stats.position) == max(delivered)  # the shard moved once every lane was done


def test_a_table_name_of_one_character_is_refused(stack):
    """DynamoDB developer guide, naming rules: table names are 3 to 255 characters (a
    ValidationException otherwise; DynamoDB Local enforces it as AWS does)."""
    client = stack.client()
    with pytest.raises(client.exceptions.ClientError, match="between 3 and 255 characters"):
        client.create_table(
            TableName="f",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )


def test_http_api_payload_2_0_as_api_gateway_documents_it():
    """API Gateway developer guide, "Create AWS Lambda proxy integrations for HTTP APIs": duplicate
    headers and query strings combined with commas, cookies in `cookies`, the matched route's key,
    a binary body base64-encoded; an answer without statusCode is a 200 JSON body."""
    seen = []
    routes = [
        apigateway.Route("GET /items/{id}", lambda event: seen.append(event) or ["an", "answer"]),
        apigateway.Route("ANY /{proxy+}", lambda event: seen.append(event) or {"statusCode": 204}),
    ]
    server = apigateway.serve(routes, 0, RuntimeError)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        request = urllib.request.Request(f"{base}/items/7?a=&b=1&b=2", headers={"Cookie": "c1=v1; c2=v2"})
        with urllib.request.urlopen(request) as response:
            assert (response.status, json.loads(response.read())) == (200, ["an", "answer"])
            assert response.headers["content-type"] == "application/json"
        binary = urllib.request.Request(
            f"{base}/upload",
            data=b"\x00\xff\xfe",
            method="POST",
            headers={"Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(binary) as response:
            assert response.status == 204
    finally:
        server.shutdown()
    get, post = seen
    assert (get["routeKey"], get["requestContext"]["routeKey"]) == ("GET /items/{id}", "GET /items/{id}")
    assert get["queryStringParameters"] == {"a": "", "b": "1,2"} and get["pathParameters"] == {"id": "7"}
    assert get["cookies"] == ["c1=v1", "c2=v2"] and "cookie" not in get["headers"]
    assert post["routeKey"] == "ANY /{proxy+}"
    assert post["isBase64Encoded"] and post["body"] == "AP/+"
    event = apigateway.http_event("GET", "/x", [("X-Dup", "1"), ("x-dup", "2")], None)
    assert event["headers"]["x-dup"] == "1,2"


@pytest.fixture
def assembly(cloud_assembly):
    return Assembly.load(cloud_assembly)


def mapping_of(assembly, function):
    (found,) = [
        m
        for m in assembly.resources("AWS::Lambda::EventSourceMapping")
        if f'"{function}Live' in json.dumps(m.properties["FunctionName"])
    ]
    return found


def start(assembly, stack, tmp_path):
    app = LocalApp(assembly, **stack.endpoints(), state_dir=tmp_path, prefix=f"deny{uuid.uuid4().hex[:4]}")
    try:
        app.start(http_port=None, schedules=False)
    finally:
        app.stop()


def test_up_refuses_an_invalid_filter_as_the_deploy_would(assembly, stack, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__api_errors
    (test_dynamodb_invalid_event_filter): CreateEventSourceMapping answers
    InvalidParameterValueException "Invalid filter pattern definition."; locally the app does not start."""
    mapping_of(assembly, "WriteBack").properties["FilterCriteria"] = {
        "Filters": [{"Pattern": "single-string"}]
    }
    with pytest.raises(
        TemplateError, match=r"InvalidParameterValueException: Invalid filter pattern definition\."
    ):
        start(assembly, stack, tmp_path)


def test_up_refuses_a_second_mapping_of_one_function_on_one_stream(assembly, stack, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__api_errors
    (test_duplicate_event_source_mappings): ResourceConflictException, "... provided mapping
    already exists"."""
    original = mapping_of(assembly, "WriteBack")
    assembly.templates[original.stack]["Resources"][original.logical_id + "Twin"] = {
        "Type": "AWS::Lambda::EventSourceMapping",
        "Properties": dict(original.properties),
    }
    with pytest.raises(TemplateError, match=r"ResourceConflictException: .* provided mapping already exists"):
        start(assembly, stack, tmp_path)


def test_up_refuses_a_mapping_on_a_stream_that_does_not_exist(assembly, stack, tmp_path):
    """Follows localstack__test_lambda_integration_dynamodbstreams__api_errors
    (test_esm_with_not_existing_dynamodb_stream): InvalidParameterValueException "Stream not found: <arn>"."""
    missing = "arn:aws:dynamodb:us-east-1:123456789012:table/nothing/stream/2025-02-22T03:03:25.490"
    mapping_of(assembly, "WriteBack").properties["EventSourceArn"] = missing
    with pytest.raises(
        TemplateError, match=re.escape(f"InvalidParameterValueException: Stream not found: {missing}")
    ):
        start(assembly, stack, tmp_path)


def test_a_disabled_mapping_stops_polling_and_resumes_where_it_stopped(table, tmp_path):
    """Lambda API reference, UpdateEventSourceMapping: "If you disable the event source mapping,
    AWS Lambda stops polling. If you enable again, it will resume polling from the time it had
    stopped polling, so you don't lose processing of any records." (not recorded: documented)."""
    from hybridsync.local.awslambda.mappings import Checkpoints, Settings, ShardPoller
    from hybridsync.local.awslambda.responses import Switch

    function, switch, stop = Function({}), Switch(), threading.Event()
    poller = ShardPoller(Settings(name="switched", batch_size=10), function, table.streams, table.stream_arn,
                         table.shard, Checkpoints(tmp_path / "positions.json"), switch=switch)  # fmt: skip
    runner = threading.Thread(target=poller.run, args=(stop,))
    runner.start()
    try:

        def delivered() -> list[str]:
            return [key for batch in function.delivered() for key in batch]

        def until(check, timeout_s: float = 10.0) -> None:
            deadline = time.monotonic() + timeout_s
            while not check() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert check()

        table.put({"my_partition_key": {"S": "before"}})
        until(lambda: delivered() == ["before"])
        switch.enabled = False
        until(lambda: switch.state == "Disabled")
        for n in range(3):
            table.put({"my_partition_key": {"S": f"while-{n}"}})
        time.sleep(1.0)
        assert delivered() == ["before"]  # not polled while disabled
        switch.enabled = True
        until(lambda: delivered() == ["before", "while-0", "while-1", "while-2"])
    finally:
        stop.set()
        runner.join()
