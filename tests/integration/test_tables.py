"""Tables created on DynamoDB Local from the declaration accept every entity (the engine's own too);
sparse GSIs stay sparse."""

from collections import Counter

import pytest
from boto3.dynamodb.types import TypeSerializer

from hybridsync.dynamodb.large import BODY_ATTRIBUTES
from shop.model import MODEL
from tests.samples import SAMPLES

serializer = TypeSerializer()


def marshal(item):
    return {k: serializer.serialize(v) for k, v in item.items()}


@pytest.fixture(scope="module")
def loaded(stack, dynamodb):
    """Every sample of every entity, written through `Entity.item`."""
    for entity in MODEL.all_entities:
        for values in SAMPLES[entity.name]:
            values = values | ({"Version": 1} if entity.versioned else {})
            dynamodb.put_item(
                TableName=stack.table_names[entity.table.name], Item=marshal(entity.item(values))
            )
    return stack.table_names


def index_entities(dynamodb, table, index):
    """What an index holds: the kinds of the items the model's writes tagged, and every item. The
    table is shared with other tests, so callers check kinds and the samples' presence, not totals;
    and those tests' plain writers leave items with no `Entity` (any writer's items are the app's
    too: docs/writers.md), which an index holds wherever they carry its keys. A keys-only index
    holds no `Entity` at all: its kinds are empty."""
    pages = dynamodb.get_paginator("scan").paginate(TableName=table, IndexName=index)
    items = [item for page in pages for item in page["Items"]]
    return Counter(item["Entity"]["S"] for item in items if "Entity" in item), items


def test_tables_match_the_declaration(stack, dynamodb):
    for table in MODEL.tables:
        description = dynamodb.describe_table(TableName=stack.table_names[table.name])["Table"]
        assert [k["AttributeName"] for k in description["KeySchema"]] == [a.name for a in table.key_schema()]
        assert {g["IndexName"] for g in description.get("GlobalSecondaryIndexes", [])} == {
            i.name for i in table.indexes
        }
        if table.stream:
            assert description["StreamSpecification"]["StreamViewType"] == table.stream.value
        ttl = dynamodb.describe_time_to_live(TableName=stack.table_names[table.name])
        if table.ttl_attribute:
            assert ttl["TimeToLiveDescription"]["AttributeName"] == table.ttl_attribute


def test_every_entity_item_is_stored_and_read_back(loaded, dynamodb):
    for entity in MODEL.all_entities:
        for values in SAMPLES[entity.name]:
            key = entity.key(values)
            got = dynamodb.get_item(
                TableName=loaded[entity.table.name], Key=marshal(key), ConsistentRead=True
            )
            assert got["Item"]["Entity"]["S"] == entity.name


def test_open_orders_index_holds_only_open_orders(loaded, dynamodb):
    counts, items = index_entities(dynamodb, loaded["main"], "OpenOrders")
    assert set(counts) == {"Order"}
    assert {i["Status"]["S"] for i in items} == {"OPEN"}
    ids = {i["OrderId"]["S"] for i in items}
    assert "o-1" in ids and "o-2" not in ids  # o-2 is shipped


def test_status_index_holds_every_order_no_longer_open_by_status(loaded, dynamodb):
    counts, items = index_entities(dynamodb, loaded["main"], "OrdersByStatus")
    assert set(counts) == {"Order"}
    by_id = {i["OrderId"]["S"]: i for i in items}
    assert "o-1" not in by_id and by_id["o-2"]["StatusShard"]["S"].startswith("SHIPPED#")  # o-1 is open


def test_rankings_index_holds_only_aggregates_and_scores(loaded, dynamodb):
    counts, items = index_entities(dynamodb, loaded["main"], "Rankings")
    assert set(counts) <= {"PlayerScore", "Sales", "CustomerSpend"}
    keys = {(i["PK"]["S"], i["SK"]["S"]) for i in items}
    assert {
        ("PLAYER#c-1", "SCORE"),
        ("PRODUCT#p-1", "SALES#2026-11-22"),
        ("CUSTOMER#c-1", "SPEND#2026-11"),
    } <= keys


def test_time_index_holds_every_order_and_nothing_else(loaded, dynamodb):
    counts, items = index_entities(dynamodb, loaded["main"], "OrdersByTime")
    assert set(counts) == {"Order"}
    assert {"o-1", "o-2"} <= {i["OrderId"]["S"] for i in items}


def test_inverted_index_answers_who_follows_a(loaded, dynamodb):
    counts, items = index_entities(dynamodb, loaded["main"], "Inverted")
    assert set(counts) == {"Follow", "Review", "TitleTag", "Order"}  # overloaded: four meanings
    assert not any(set(i) & set(BODY_ATTRIBUTES) for i in items)  # projected, never a review's body
    followers = dynamodb.query(
        TableName=loaded["main"],
        IndexName="Inverted",
        KeyConditionExpression="GSI1PK = :a",
        ExpressionAttributeValues={":a": {"S": "FOLLOWS#c-1"}},
    )["Items"]
    assert [f["FollowerId"]["S"] for f in followers] == ["c-2"]


def test_distinct_keys_index_is_keys_only_and_lists_collections(loaded, dynamodb):
    _, items = index_entities(dynamodb, loaded["main"], "DistinctKeys")
    assert {"CUSTOMER#c-1", "PRODUCT#p-1"} <= {i["StaticPK"]["S"] for i in items}
    assert all(set(i) == {"PK", "SK", "StaticPK"} for i in items)


def test_customer_orders_in_a_date_range_are_one_query(loaded, dynamodb):
    result = dynamodb.query(
        TableName=loaded["main"],
        KeyConditionExpression="PK = :pk AND SK BETWEEN :from AND :to",
        ExpressionAttributeValues={
            ":pk": {"S": "CUSTOMER#c-1"},
            ":from": {"S": "ORDER#2026-11-22"},
            ":to": {"S": "ORDER#2026-11-23"},
        },
    )["Items"]
    assert Counter(i["Entity"]["S"] for i in result) == Counter({"Order": 1, "OrderLine": 1})


def test_stream_delivers_new_and_old_images(loaded, stack, dynamodb):
    streams = stack.client("dynamodbstreams")
    arn = dynamodb.describe_table(TableName=loaded["main"])["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert records and records[0]["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert {r["eventName"] for r in records} >= {"INSERT"}


def test_a_cancelled_transaction_leaves_no_items_and_no_stream_records(stack, dynamodb):
    """The embedded server's transactions roll back with an undo log (hybridsync.local): a failed
    one must leave the table and its stream exactly as they were."""
    from hybridsync.local.dynamodb.streams import StreamReader

    name = "rollback-main"
    dynamodb.create_table(**MODEL.table("main").create_request(name))
    dynamodb.put_item(TableName=name, Item=marshal({"PK": "A", "SK": "1", "n": 1}))
    arn = dynamodb.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    reader = StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
    reader.read()
    items = [
        {"Put": {"TableName": name, "Item": marshal({"PK": "A", "SK": "2", "n": 2})}},
        {"Update": {"TableName": name, "Key": marshal({"PK": "A", "SK": "1"}),
                    "UpdateExpression": "SET n = :v", "ExpressionAttributeValues": marshal({":v": 5})}},
        {"ConditionCheck": {"TableName": name, "Key": marshal({"PK": "B", "SK": "1"}),
                            "ConditionExpression": "attribute_exists(PK)"}},
    ]  # fmt: skip
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(TransactItems=items)
    rows = dynamodb.scan(TableName=name)["Items"]
    assert [(r["SK"]["S"], r["n"]["N"]) for r in rows] == [("1", "1")]
    assert reader.read() == []
    dynamodb.transact_write_items(TransactItems=items[:2])  # without the failing check it commits
    assert len(dynamodb.scan(TableName=name)["Items"]) == 2 and len(reader.read()) == 2
