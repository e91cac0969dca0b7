from decimal import Decimal

import pytest

from hybridsync import keys
from hybridsync.local import create_table_request
from hybridsync.model import MAIN, MODEL, ORDER, ORDER_LINE, PLAYER_SCORE, SALES, Side, Template
from tests.samples import SAMPLES


def values(entity_name, n=0):
    entity = MODEL.entity(entity_name)
    sample = dict(SAMPLES[entity_name][n])
    return sample | ({"Version": 1} if entity.versioned else {})


def test_every_entity_has_a_sample():
    assert {e.name for e in MODEL.entities} == set(SAMPLES)


def test_open_order_carries_the_sparse_and_sharded_keys():
    item = ORDER.item(values("Order", 0))
    assert item["PK"] == "CUSTOMER#c-1"
    assert item["SK"] == "ORDER#2026-11-22T07:00:00.000Z#o-1"
    assert item["TimeShard"] == keys.sharded("ORDERS", "o-1", 8)
    assert item["OpenShard"] == keys.sharded("OPEN", "o-1", 4)
    assert item["OrderOpenDate"] == item["CreatedAt"]
    assert item["Entity"] == "Order"


def test_shipped_order_leaves_the_open_orders_index():
    item = ORDER.item(values("Order", 1))
    assert "OpenShard" not in item and "OrderOpenDate" not in item
    assert "TimeShard" in item


def test_order_line_sorts_after_its_order_and_pads_the_line_number():
    line = ORDER_LINE.item(values("OrderLine") | {"LineNo": Decimal("3")})
    order = ORDER.item(values("Order", 0))
    assert line["SK"] == order["SK"] + "#LINE#0003"
    assert line["SK"].startswith(order["SK"])


def test_string_ids_that_look_numeric_keep_their_digits():
    assert Template("CUSTOMER#{CustomerId}")({"CustomerId": "007"}) == "CUSTOMER#007"


def test_leaderboard_key_is_computable_for_one_player():
    item = PLAYER_SCORE.item(values("PlayerScore"))
    assert item["RankPK"] == keys.sharded("LEADERBOARD", "c-1", 8)
    assert item["RankSK"] == 1200


def test_aggregate_rank_partition_is_sharded_per_period():
    item = SALES.item(values("Sales"))
    assert item["RankPK"].startswith("SALES#2026-11-22#")


def test_missing_required_or_unknown_attributes_are_named():
    with pytest.raises(ValueError, match="missing required attribute 'Total'"):
        ORDER.item({k: v for k, v in values("Order").items() if k != "Total"})
    with pytest.raises(ValueError, match=r"unknown attribute\(s\) \['Colour'\]"):
        ORDER.item(values("Order") | {"Colour": "red"})


def test_masters_and_sql_mappings():
    assert {e.name for e in MODEL.mastered_in(Side.DYNAMODB) if e.sql_table} == {
        "Order",
        "OrderLine",
        "PlayerScore",
        "Follow",
    }
    assert {e.sql_table for e in MODEL.mastered_in(Side.POSTGRESQL)} == {
        "customers",
        "products",
        "product_availability",
    }
    assert all(e.sql_key for e in MODEL.synced())


def test_every_index_key_is_built_by_some_entity():
    built = {name for e in MODEL.entities for name in e.keys}
    for index in MAIN.indexes:
        assert index.partition.name in built, index.name
        assert index.sort is None or index.sort.name in built or index.sort.name == "CreatedAt"


def test_create_table_request_renders_the_declaration():
    request = create_table_request(MAIN, "t")
    assert request["KeySchema"] == [
        {"AttributeName": "PK", "KeyType": "HASH"},
        {"AttributeName": "SK", "KeyType": "RANGE"},
    ]
    assert {g["IndexName"] for g in request["GlobalSecondaryIndexes"]} == {i.name for i in MAIN.indexes}
    assert {"AttributeName": "RankSK", "AttributeType": "N"} in request["AttributeDefinitions"]
    assert request["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
