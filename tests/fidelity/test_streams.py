"""The embedded DynamoDB's streams, read with the Streams API as any client reads them, against what
AWS recorded (`../shared/aws-recorded/localstack__test_dynamodb__*`): which writes make a record,
and the records' shape and sizes."""

from __future__ import annotations

import pytest

from tests.fidelity.conftest import SEQUENCE, Table


def S(value):
    return {"S": value}


def summary(records):
    return [
        (r["eventName"], next(iter(r["dynamodb"]["Keys"].values()))["S"], r["dynamodb"]["SizeBytes"])
        for r in records
    ]


def test_a_keys_only_stream_records_every_change_with_its_keys_alone(stack):
    """Follows localstack__test_dynamodb__dynamodb_stream_stream_view_type: a KEYS_ONLY stream; Fred
    and Alice each put, updated and deleted: six records with eventVersion "1.1", no images,
    SizeBytes 12 and 13 (the key's name and value)."""
    table = Table(stack, key="Username", view="KEYS_ONLY")
    for name in ("Fred", "Alice"):
        key = {"Username": S(name)}
        table.client.put_item(TableName=table.name, Item=key)
        table.client.update_item(
            TableName=table.name,
            Key=key,
            UpdateExpression="SET Age = :a",
            ExpressionAttributeValues={":a": {"N": "30"}},
        )
        table.client.delete_item(TableName=table.name, Key=key)
    records = table.records()
    assert summary(records) == [
        ("INSERT", "Fred", 12),
        ("MODIFY", "Fred", 12),
        ("REMOVE", "Fred", 12),
        ("INSERT", "Alice", 13),
        ("MODIFY", "Alice", 13),
        ("REMOVE", "Alice", 13),
    ]
    for record in records:
        assert (record["eventVersion"], record["eventSource"]) == ("1.1", "aws:dynamodb")
        assert set(record["dynamodb"]) == {
            "ApproximateCreationDateTime",
            "Keys",
            "SequenceNumber",
            "SizeBytes",
            "StreamViewType",
        }
        assert record["dynamodb"]["StreamViewType"] == "KEYS_ONLY"
        assert SEQUENCE.fullmatch(record["dynamodb"]["SequenceNumber"])


def test_an_identical_overwrite_in_a_batch_write_makes_no_record(stack):
    """Follows localstack__test_dynamodb__batch_write_items_streaming: Fred put; a BatchWriteItem that
    puts Fred again unchanged and a new key; one that deletes the new key and gives Fred a name:
    four records, not five (the identical overwrite makes none)."""
    table = Table(stack, key="id", view="NEW_AND_OLD_IMAGES")
    fred, new = {"id": S("Fred")}, {"id": S("NewKey")}
    table.put(fred)
    table.client.batch_write_item(
        RequestItems={table.name: [{"PutRequest": {"Item": fred}}, {"PutRequest": {"Item": new}}]}
    )
    table.client.batch_write_item(
        RequestItems={
            table.name: [
                {"DeleteRequest": {"Key": new}},
                {"PutRequest": {"Item": fred | {"name": S("Fred")}}},
            ]
        }
    )
    records = summary(table.records())
    assert records[:2] == [("INSERT", "Fred", 12), ("INSERT", "NewKey", 16)]
    # two items of one batch: AWS orders a stream per item, not across items
    assert sorted(records[2:]) == [("MODIFY", "Fred", 26), ("REMOVE", "NewKey", 16)]


def test_an_identical_overwrite_in_a_transaction_makes_no_record(stack):
    """Follows localstack__test_dynamodb__transact_write_items_streaming: the same as a transaction:
    Fred put, then a TransactWriteItems putting Fred unchanged and a new key; the identical
    overwrite makes no record, the new key an INSERT (16 bytes)."""
    table = Table(stack, key="id", view="NEW_AND_OLD_IMAGES")
    fred, new = {"id": S("Fred")}, {"id": S("NewKey")}
    table.put(fred)
    table.client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table.name, "Item": fred}},
            {"Put": {"TableName": table.name, "Item": new}},
        ]
    )
    table.client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table.name,
                    "Key": fred,
                    "UpdateExpression": "SET #n = :n",
                    "ExpressionAttributeNames": {"#n": "name"},
                    "ExpressionAttributeValues": {":n": S("Fred")},
                }
            },
        ]
    )
    assert summary(table.records()) == [
        ("INSERT", "Fred", 12),
        ("INSERT", "NewKey", 16),
        ("MODIFY", "Fred", 26),
    ]


@pytest.mark.parametrize("write", ["put", "update"])
def test_an_unchanged_write_of_any_kind_makes_no_record(stack, write):
    """Follows the two recordings above (an identical overwrite makes no stream record) for the
    other ways to write an item: a PutItem and an UpdateItem that change nothing."""
    table = Table(stack, key="id", view="NEW_AND_OLD_IMAGES")
    item = {"id": S("x"), "v": {"N": "1"}}
    table.put(item)
    if write == "put":
        table.put(item)
    else:
        table.client.update_item(
            TableName=table.name,
            Key={"id": S("x")},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
    assert summary(table.records()) == [("INSERT", "x", 9)]  # 9 bytes by DynamoDB's item size rules


def test_update_item_records_carry_both_images_and_their_sizes(stack):
    """Follows localstack__test_dynamodb__dynamodb_stream_records_with_update_item: an UpdateItem that
    creates an item, then one that changes both attributes, on a NEW_AND_OLD_IMAGES stream: an
    INSERT of 46 bytes with its new image, a MODIFY of 80 bytes with both images."""
    table = Table(stack, key="id", view="NEW_AND_OLD_IMAGES")
    key = {"id": S("my-item-id")}
    for first, second in (("value1", "value2"), ("value2", "value3")):
        table.client.update_item(
            TableName=table.name,
            Key=key,
            UpdateExpression="SET attr1 = :a, attr2 = :b",
            ExpressionAttributeValues={":a": S(first), ":b": S(second)},
        )
    insert, modify = table.records()
    assert summary([insert, modify]) == [("INSERT", "my-item-id", 46), ("MODIFY", "my-item-id", 80)]
    assert insert["dynamodb"]["NewImage"] == key | {"attr1": S("value1"), "attr2": S("value2")}
    assert "OldImage" not in insert["dynamodb"]
    assert modify["dynamodb"]["OldImage"] == insert["dynamodb"]["NewImage"]
    assert modify["dynamodb"]["NewImage"] == key | {"attr1": S("value2"), "attr2": S("value3")}
