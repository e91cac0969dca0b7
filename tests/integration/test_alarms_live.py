"""The synthesized alarms, evaluated on `hybridsync up` (`--alarm-period 2`: each alarm's periods
shortened alike) against what the running app really emits: each kind goes to ALARM and back to OK,
`hybridsync status` shows it, and what the alarm topic's subscribers would receive is written to
`.local/notifications/`."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from decimal import Decimal

import boto3
import pytest
import sqlalchemy as sa

from hybridsync.dynamodb import store
from hybridsync.runtime import db
from shop.model import MODEL
from tests.integration.conftest import started_up

pytestmark = pytest.mark.integration
PREFIX = "alarms"


@pytest.fixture(scope="module")
def up(cloud_assembly, tmp_path_factory):
    app = started_up(cloud_assembly, tmp_path_factory.mktemp("alarms"), PREFIX, "--alarm-period", "2",
                     MaximumBatchingWindowInSeconds=0)  # fmt: skip
    yield app
    app.stop()


def client(up, service):
    names = up.environment()
    endpoint = {"dynamodb": "DYNAMODB_ENDPOINT", "lambda": "LAMBDA_ENDPOINT"}.get(service, "AWS_ENDPOINT")
    return boto3.client(service, endpoint_url=names[endpoint], region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip


def state(up, alarm: str) -> str:
    return ((up.status() or {}).get("alarms") or {}).get(f"{PREFIX}-{alarm}", {}).get("state", "?")


def wait_for(up, alarm: str, wanted: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while state(up, alarm) != wanted:
        status = up.status() or {}
        assert time.monotonic() < deadline, (alarm, wanted, status.get("alarms", {}).get(f"{PREFIX}-{alarm}"),
                                             status.get("outbox"), status.get("mappings"))  # fmt: skip
        time.sleep(0.5)


def notified(up, alarm: str) -> list[str]:
    """The states the topic's subscribers were told of, in order."""
    files = sorted((up.state / "notifications").glob(f"*-{PREFIX}-{alarm}-*.json"))
    return [json.loads(json.loads(f.read_text())["Message"])["NewStateValue"] for f in files]


def goes_and_comes_back(up, alarm: str, timeout_s: float = 60) -> None:
    """The topic's subscribers are told ALARM, then OK (an alarm of one 2-second period may go
    and come back between two status files)."""
    deadline = time.monotonic() + timeout_s
    while notified(up, alarm)[-2:] != ["ALARM", "OK"]:
        assert time.monotonic() < deadline, (alarm, notified(up, alarm), state(up, alarm))
        time.sleep(0.5)
    latest = sorted((up.state / "notifications").glob(f"*-{PREFIX}-{alarm}-ALARM.json"))[-1]
    message = json.loads(json.loads(latest.read_text())["Message"])
    assert message["AlarmName"] == f"{PREFIX}-{alarm}"
    assert message["NewStateReason"].startswith("Threshold Crossed")
    assert message["AlarmDescription"]  # its runbook line


def test_the_app_starts_with_every_alarm_evaluated(up):
    alarms = up.status()["alarms"]
    assert len(alarms) > 40
    assert {a["state"] for a in alarms.values()} <= {"OK", "INSUFFICIENT_DATA"}
    unmeasured = [n for n, a in alarms.items() if a["state"] == "INSUFFICIENT_DATA"]
    assert all(alarms[n]["reason"].startswith("not evaluated locally") for n in unmeasured), {
        n: alarms[n] for n in unmeasured if not alarms[n]["reason"].startswith("not evaluated")
    }
    for measured in (
        "WriteBackErrors",
        "SqlSyncDeadLetters",
        "ApiThrottles",
        "OutboxAge",
        "ScheduledFailures",
    ):
        assert alarms[f"{PREFIX}-{measured}"]["state"] == "OK", measured


def test_a_poison_outbox_row_alarms_then_clears(up):
    engine = db.create_engine(up.environment()["DATABASE_URL"])
    with engine.begin() as conn:  # a price past DynamoDB's 38 digits: dead-lettered by the drain
        row = "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1e130, 1)"
        conn.execute(sa.text(row), {"p": f"{uuid.uuid4().hex[:6]}-overflow"})
    engine.dispose()
    goes_and_comes_back(up, "SqlSyncDeadLetters")


def test_a_poison_stream_record_alarms_then_clears(up):
    names = up.environment()
    order = MODEL.entity("Order")
    values = {
        "OrderId": "x" * 200,
        "CustomerId": "c",
        "CreatedAt": "2026-01-01T00:00:00.000Z",
        "Status": "OPEN",
        "Version": 1,
        "Total": Decimal(1),
    }  # an id over its 128 characters
    client(up, "dynamodb").put_item(TableName=names["TABLE_MAIN"], Item=store.marshal(order.item(values)))
    goes_and_comes_back(up, "WriteBackDeadLetters")


def test_a_function_that_raises_alarms_then_clears(up):
    answer = client(up, "lambda").invoke(FunctionName="Operations", Payload=b'{"operation": "no-such"}')
    assert answer["FunctionError"] == "Unhandled"
    goes_and_comes_back(up, "OperationsErrors")


def test_a_throttled_function_alarms_then_clears(up):
    lam = client(up, "lambda")
    lam.put_function_concurrency(FunctionName="Api", ReservedConcurrentExecutions=0)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{up.status()['http']}/products/p1", timeout=30)
        assert refused.value.code == 500  # API Gateway: the integration failed
        time.sleep(3)
        print(
            "DEBUG",
            up.status()["alarms"][f"{PREFIX}-Api5xx"],
            up.status()["alarms"][f"{PREFIX}-ApiLatencyP99"],
        )
        with pytest.raises(lam.exceptions.TooManyRequestsException):
            lam.invoke(FunctionName="Api", Payload=b"{}")
    finally:
        lam.delete_function_concurrency(FunctionName="Api")
    goes_and_comes_back(up, "ApiThrottles")
    goes_and_comes_back(up, "Api5xx")


def test_a_failure_queue_left_undrained_alarms_until_drained(up):
    """Reserved concurrency 0 sends an asynchronous invocation's event straight to the function's
    dead-letter queue (Lambda developer guide, "Capturing records of asynchronous invocations")."""
    lam, sqs = client(up, "lambda"), client(up, "sqs")
    lam.put_function_concurrency(FunctionName="Sweep", ReservedConcurrentExecutions=0)
    try:
        assert (
            lam.invoke(FunctionName="Sweep", InvocationType="Event", Payload=b'{"n": 1}')["StatusCode"] == 202
        )
        wait_for(up, "ScheduledFailures", "ALARM")
        time.sleep(6)  # still there: the alarm holds
        assert state(up, "ScheduledFailures") == "ALARM"
        status = up.cli("status", "--state-dir", str(up.state))
        assert f"ALARM {PREFIX}-ScheduledFailures:" in status.stdout, status.stdout
        as_json = json.loads(up.cli("status", "--state-dir", str(up.state), "--json").stdout)
        assert as_json["alarms"][f"{PREFIX}-ScheduledFailures"]["state"] == "ALARM"
    finally:
        lam.delete_function_concurrency(FunctionName="Sweep")
    (url,) = [u for u in sqs.list_queues()["QueueUrls"] if u.endswith(f"{PREFIX}-ScheduledFailures")]
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert json.loads(message["Body"]) == {"n": 1} and message["MessageAttributes"]["ErrorMessage"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    wait_for(up, "ScheduledFailures", "OK")
    assert notified(up, "ScheduledFailures")[-2:] == ["ALARM", "OK"]
