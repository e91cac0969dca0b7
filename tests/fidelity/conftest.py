"""The fidelity tier: the local app's own output held against AWS's behaviour as recorded against
real AWS (`../shared/aws-recorded/`, LocalStack's snapshot suite) or, where nothing was recorded, as
AWS documents it. Each test names what it follows; the expectations are written here, in the tests'
own words, so the tier runs on a plain clone. Recorded placeholders are asserted by shape."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from hybridsync.local.awslambda import mappings
from hybridsync.local.awslambda.mappings import Checkpoints, Settings, ShardPoller

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SEQUENCE = re.compile(r"\d{21}")  # DynamoDB Streams sequence numbers, as recorded: 21 digits
MILLISECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")  # <timestamp:2022-07-13T13:48:01.000Z>
SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")  # <timestamp:2022-07-13T13:48:01Z>


class Function:
    """A function that records each invocation's event and answers as scripted: a response, or
    an exception to raise (what Lambda counts as a function error)."""

    def __init__(self, answer: Any = None):
        self.events: list[dict[str, Any]] = []
        self.answer = answer if callable(answer) else (lambda event: answer)

    def __call__(self, event: dict[str, Any]) -> Any:
        self.events.append(json.loads(json.dumps(event)))
        outcome = self.answer(event)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def delivered(self) -> list[list[str]]:
        """Each invocation's records, by their (one, string) key."""
        return [[next(iter(r["dynamodb"]["Keys"].values()))["S"] for r in e["Records"]] for e in self.events]


class Table:
    """A table of the recordings' shape on the session's DynamoDB Local: one string hash key."""

    def __init__(self, stack: Any, key: str = "my_partition_key", view: str = "NEW_IMAGE"):
        self.client, self.key = stack.client(), key
        self.name = f"rec-{uuid.uuid4().hex[:8]}"
        self.client.create_table(
            TableName=self.name, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": view},
        )  # fmt: skip
        self.stream_arn = self.client.describe_table(TableName=self.name)["Table"]["LatestStreamArn"]
        self.streams = stack.client("dynamodbstreams")
        (shard,) = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
        self.shard = shard["ShardId"]

    def put(self, *items: dict[str, Any]) -> None:
        for item in items:
            self.client.put_item(TableName=self.name, Item=item)

    def records(self) -> list[dict[str, Any]]:
        """GetRecords from the start, as a client of the Streams API sees them."""
        start = {"StreamArn": self.stream_arn, "ShardId": self.shard, "ShardIteratorType": "TRIM_HORIZON"}
        iterator = self.streams.get_shard_iterator(**start)["ShardIterator"]
        return self.streams.get_records(ShardIterator=iterator)["Records"]


class Destination:
    """An on-failure SQS queue on the session's moto server, read back as a consumer would."""

    def __init__(self, stack: Any):
        self.sqs = stack.client("sqs")
        self.url = self.sqs.create_queue(QueueName=f"failures-{uuid.uuid4().hex[:8]}")["QueueUrl"]

    @property
    def arn(self) -> str:
        return self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]

    def messages(self) -> list[dict[str, Any]]:
        got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in got.get("Messages", [])]


@pytest.fixture
def table(stack):
    return Table(stack)


@pytest.fixture
def destination(stack):
    return Destination(stack)


FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:recorded"


def run_mapping(table: Table, function: Function, destination: Destination | None, tmp_path: Any,
                **settings: Any) -> ShardPoller:  # fmt: skip
    """The local event source mapping over the table's stream until it has nothing more to do."""
    send = mappings.destination(destination.arn, lambda _: destination.sqs, "m") if destination else None
    poller = ShardPoller(Settings(name="recorded", **settings), function, table.streams, table.stream_arn,
                         table.shard, Checkpoints(tmp_path / f"{uuid.uuid4().hex}.json"), send,
                         FUNCTION_ARN)  # fmt: skip
    poller.read()
    poller.deliver_due(draining=True)
    return poller
