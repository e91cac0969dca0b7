"""Routes out of a VPC, enforced locally (hybridsync/local/vpc/network.py): a call to a service the function
has no route to fails at once as a connect timeout, naming the route, before IAM is asked."""

from __future__ import annotations

import json
import time

import botocore.config
import botocore.exceptions
import botocore.session
import pytest

from hybridsync.local.iam import policies as iam
from hybridsync.local.vpc import network

SPEC = {
    "function": "HybridSync-pipeline/OperationsFunction3C34C2B4",
    "region": "us-east-1",
    "reachable": {"dynamodb": "gateway endpoint HybridSync-database/VpcDynamoDb"},
    "needed": {
        "dynamodb": "dynamodb:GetItem in its role",
        "dynamodbstreams": "dynamodb:DescribeStream in its role",
    },
}


def session_with(*hooks: tuple[object, dict]) -> botocore.session.Session:
    session = botocore.session.get_session()
    for module, spec in hooks:
        module.install(session.get_component("event_emitter"), json.dumps(spec))  # type: ignore[attr-defined]
    return session


def client(session: botocore.session.Session, service: str, attempts: int = 8):
    # a real timeout's settings: the check must not wait for them (sockets are off in this tier anyway)
    config = botocore.config.Config(
        connect_timeout=60, retries={"mode": "standard", "max_attempts": attempts}
    )
    return session.create_client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                                 aws_access_key_id="x", aws_secret_access_key="x", config=config)  # fmt: skip


def test_a_service_without_a_route_fails_at_once_as_a_connect_timeout_naming_the_route():
    streams = client(session_with((network, SPEC)), "dynamodbstreams")
    started = time.monotonic()
    with pytest.raises(botocore.exceptions.ConnectTimeoutError) as failed:
        streams.describe_stream(StreamArn="arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x")
    assert time.monotonic() - started < 1  # no 60 s connect timeout, no retries
    message = str(failed.value)
    assert message.startswith(
        'Connect timeout on endpoint URL: "https://streams.dynamodb.us-east-1.amazonaws.com"'
    )
    assert "HybridSync-pipeline/OperationsFunction3C34C2B4 cannot reach dynamodbstreams" in message
    assert network.MISSING in message and "dynamodb:DescribeStream in its role" in message
    assert type(failed.value).__name__ == "ConnectTimeoutError"  # what the function's error reads, as in AWS
    assert isinstance(failed.value, botocore.exceptions.ConnectionError)  # what a caller's handling catches


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_a_reachable_service_goes_on_to_the_request():
    dynamodb = client(session_with((network, SPEC)), "dynamodb", attempts=1)
    with pytest.raises(Exception) as sent:  # past the check, the (disabled) socket refuses
        dynamodb.describe_table(TableName="t")
    assert not isinstance(sent.value, botocore.exceptions.ConnectTimeoutError)


def test_the_route_is_checked_before_iam():
    """A connection that never opens is never authorized: with no grant and no route, the route's
    error, whichever hook was installed first."""
    role = {"role": "R", "function": "Operations", "region": "us-east-1", "account": "123456789012",
            "statements": []}  # fmt: skip
    for hooks in (((network, SPEC), (iam, role)), ((iam, role), (network, SPEC))):
        streams = client(session_with(*hooks), "dynamodbstreams")
        with pytest.raises(botocore.exceptions.ConnectTimeoutError):
            streams.list_streams()
    dynamodb = client(session_with((network, SPEC), (iam, role)), "dynamodb")
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        dynamodb.describe_table(TableName="t")  # reachable: IAM decides


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_a_route_to_everything_reaches_every_service():
    """A NAT (or the team's own routes, `hybridsync:routes`): nothing is refused."""
    spec = SPEC | {"reachable": {"*": "the VPC's NAT gateway"}}
    streams = client(session_with((network, spec)), "dynamodbstreams", attempts=1)
    with pytest.raises(Exception) as sent:
        streams.list_streams()
    assert not isinstance(sent.value, botocore.exceptions.ConnectTimeoutError)
