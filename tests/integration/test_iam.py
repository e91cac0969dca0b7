"""IAM, enforced locally: a function missing a grant is refused as in AWS, on the app of the session's
`cdk synth` with one grant taken away; the whole suite, the demo and the chaos run pass with every
grant as synthesized, which shows the grants suffice."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest

from hybridsync.local.app import LocalApp
from hybridsync.local.template import Assembly, TemplateError


def policy_of(assembly, role_prefix):
    (found,) = [p for p in assembly.resources("AWS::IAM::Policy")
                if p.properties["Roles"][0]["Ref"].startswith(role_prefix)]  # fmt: skip
    return found.properties["PolicyDocument"]["Statement"]


def without(value, text):
    """A policy's Resource with the entries naming `text` taken out."""
    entries = value if isinstance(value, list) else [value]
    return [entry for entry in entries if text not in json.dumps(entry)]


@pytest.fixture
def assembly(cloud_assembly):
    return Assembly.load(cloud_assembly)


def test_a_query_on_an_index_the_role_does_not_name_is_access_denied(assembly, stack, tmp_path):
    """What adding a GSI without its grant does in AWS: the read that uses it fails with
    AccessDeniedException naming the index; the API answers 500 and its log says which grant."""
    for statement in policy_of(assembly, "ApiFunction"):
        if "dynamodb:Query" in statement["Action"]:
            statement["Resource"] = without(statement["Resource"], "/index/Rankings")
    app = LocalApp(assembly, **stack.endpoints(), state_dir=tmp_path, prefix=f"iam{uuid.uuid4().hex[:4]}")
    app.start(http_port=0, schedules=False, mappings=False)
    try:
        base = f"http://127.0.0.1:{app.http.server_address[1]}"
        with urllib.request.urlopen(f"{base}/orders/recent?n=1") as response:
            assert response.status == 200  # the index it still names
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/leaderboard?n=3")
        assert refused.value.code == 500
    finally:
        app.stop()
    log = (tmp_path / "logs" / "Api.log").read_text()
    assert "AccessDeniedException" in log
    index = f"arn:aws:dynamodb:us-east-1:123456789012:table/{app.tables['MainTable']}/index/Rankings"
    assert f"dynamodb:Query on resource: {index}" in log


def test_a_mapping_whose_role_cannot_read_the_stream_is_refused(assembly, stack, tmp_path):
    """Lambda checks the execution role when the mapping is created: without the stream grant
    the deploy fails (InvalidParameterValueException), and so does `hybridsync up`."""
    statements = policy_of(assembly, "WriteBackFunction")
    statements[:] = [s for s in statements if "dynamodb:GetRecords" not in s["Action"]]
    app = LocalApp(assembly, **stack.endpoints(), state_dir=tmp_path, prefix=f"iam{uuid.uuid4().hex[:4]}")
    try:
        with pytest.raises(TemplateError, match="InvalidParameterValueException: Cannot access stream"):
            app.start(http_port=None, schedules=False)
    finally:
        app.stop()


def test_with_iam_off_the_same_call_goes_through(assembly, stack, tmp_path):
    for statement in policy_of(assembly, "ApiFunction"):
        if "dynamodb:Query" in statement["Action"]:
            statement["Resource"] = without(statement["Resource"], "/index/Rankings")
    app = LocalApp(
        assembly, **stack.endpoints(), state_dir=tmp_path, prefix=f"iam{uuid.uuid4().hex[:4]}", iam=False
    )
    app.start(http_port=0, schedules=False, mappings=False)
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{app.http.server_address[1]}/leaderboard?n=3"
        ) as response:
            assert response.status == 200
    finally:
        app.stop()
