"""Adoption's pieces that need no server: recognising items written before hybridsync by their
keys, the local mapping switch's states, the IAM resources of the operations function's calls,
the commands' refusals."""

from __future__ import annotations

import pytest

from hybridsync import cli
from hybridsync.local.awslambda.responses import Switch
from hybridsync.local.iam import policies as iam
from hybridsync.model import placing
from shop.model import MODEL

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("keys", "entity"),
    [
        ({"PK": "CUSTOMER#c1", "SK": "ORDER#2026-11-22T10:00:00.000Z#o1"}, "Order"),
        ({"PK": "CUSTOMER#c1", "SK": "ORDER#2026-11-22T10:00:00.000Z#o1#LINE#0001"}, "OrderLine"),
        ({"PK": "CUSTOMER#c1", "SK": "PROFILE"}, "Customer"),
        ({"PK": "PRODUCT#p1", "SK": "AVAILABILITY"}, "ProductAvailability"),
        ({"PK": "NOTHING#x", "SK": "X"}, None),
        ({"PK": "CUSTOMER#c1"}, None),  # a key missing
    ],
)
def test_an_item_without_a_tag_is_the_entity_whose_templates_fix_most(keys, entity):
    found = placing.place(MODEL, keys, table="main")
    assert (found.name if found else None) == entity


def test_a_disabled_mapping_is_disabling_until_its_pollers_are_idle():
    switch, pollers = Switch(), (object(), object())
    for poller in pollers:
        switch.join(poller)
    assert switch.state == "Enabled" and switch.may_poll(pollers[0])
    switch.enabled = False
    assert switch.state == "Disabling"
    assert not switch.may_poll(pollers[0]) and switch.state == "Disabling"  # one still mid-batch
    assert not switch.may_poll(pollers[1]) and switch.state == "Disabled"
    switch.enabled = True
    assert switch.may_poll(pollers[0]) and switch.state == "Enabled"


def test_the_operations_calls_are_authorized_on_the_resources_aws_names():
    region, account = "us-east-1", "123456789012"
    (update,) = iam.requested("lambda", "UpdateEventSourceMapping", {"UUID": "u-1"}, region, account)
    assert update[:2] == (
        "lambda:UpdateEventSourceMapping",
        f"arn:aws:lambda:{region}:{account}:event-source-mapping:u-1",
    )
    (listing,) = iam.requested("lambda", "ListEventSourceMappings", {"FunctionName": "f"}, region, account)
    assert listing[1] == "*"
    (invoke,) = iam.requested("lambda", "Invoke", {"FunctionName": "Operations"}, region, account)
    assert invoke[:2] == ("lambda:InvokeFunction", f"arn:aws:lambda:{region}:{account}:function:Operations")
    stream = "arn:aws:dynamodb:ddblocal:000000000000:table/t/stream/2026-11-25T22:47:22.999"
    (records,) = iam.requested(
        "dynamodb", "GetRecords", {"ShardIterator": f"{stream}|001|abc"}, region, account
    )
    assert records[1] == stream


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["load", "items", "Order", "OrderLine"], "name one entity mastered in DynamoDB"),
        (["load", "items", "Customer"], "name one entity mastered in DynamoDB"),
        (["load", "views", "Order"], "not mastered in PostgreSQL"),
        (["load", "rows", "NoSuch"], "no entity 'NoSuch'"),
    ],
)
def test_the_load_commands_refuse_what_they_cannot_load_in_one_line(argv, says, monkeypatch):
    with pytest.raises(SystemExit) as refused:
        cli.main(argv)
    assert says in str(refused.value)


def test_every_adoption_command_says_what_it_does_and_shows_an_example(capsys):
    for command in (["load"], ["aggregates"], ["jobs"]):
        with pytest.raises(SystemExit):
            cli.main([*command, "--help"])
        shown = capsys.readouterr().out
        assert "example: hybridsync" in shown and "--json" in shown
