"""The write path's pure parts: item sizes as DynamoDB counts them, updates that recompute the
derived keys, hierarchical keys, and request bodies checked against the model."""

from __future__ import annotations

from decimal import Decimal

import pytest

from hybridsync.dynamodb import capacity, store
from hybridsync.model import keys
from hybridsync.model.convert import from_json
from hybridsync.model.errors import Invalid
from shop.model import ORDER, ORDER_LINE, STORE


@pytest.mark.parametrize(
    ("item", "size"),
    [
        ({"a": "xyz"}, 4),  # name + UTF-8 bytes
        ({"é": "ü"}, 4),  # two bytes each
        ({"n": Decimal("12345")}, 1 + 4),  # (5 digits + 1) // 2 + 1
        ({"n": Decimal("1.50")}, 1 + 2),  # trailing zeros trimmed: 15
        ({"b": b"\x00" * 10}, 11),
        ({"t": True, "z": None}, 4),
        ({"m": {"k": "v"}}, 1 + 3 + 1 + 1 + 1),  # map overhead, name, element overhead, value
        ({"l": ["ab", "c"]}, 1 + 3 + (1 + 2) + (1 + 1)),
    ],
)
def test_item_sizes_follow_dynamodbs_rules(item, size):
    assert capacity.item_size(item) == size


def test_write_and_read_units():
    assert capacity.write_units({"a": "x" * 1000}) == 1
    assert capacity.write_units({"a": "x" * 1100}) == 2
    assert capacity.write_units({"a": "x" * 1100}, transactional=True) == 4
    assert capacity.read_units(4096) == 1 and capacity.read_units(4097, consistent=False) == 1


def open_order():
    return ORDER.item({"OrderId": "o-1", "CustomerId": "c-1", "CreatedAt": "2026-11-22T07:00:00.000Z",
                       "Status": "OPEN", "Total": Decimal("10"), "Version": 5})  # fmt: skip


def test_an_update_that_leaves_open_moves_the_order_to_the_complement_index():
    update = store.update_action("t", ORDER, open_order(), {"Status": "SHIPPED"}, 6)["Update"]
    names = update["ExpressionAttributeNames"]
    removed = update["UpdateExpression"].split(" REMOVE ")[1].split(", ")
    assert sorted(names[a] for a in removed) == ["OpenShard", "OrderOpenDate"]
    status_shard = next(a for a, n in names.items() if n == "StatusShard")
    value = update["ExpressionAttributeValues"][status_shard.replace("#", ":")]
    assert value == {"S": keys.sharded("SHIPPED", "o-1", 4)}
    assert update["ConditionExpression"] == "#gv = :gv" and update["ExpressionAttributeValues"][":gv"] == {
        "N": "5"
    }
    assert update["Key"] == {"PK": {"S": "CUSTOMER#c-1"}, "SK": {"S": "ORDER#2026-11-22T07:00:00.000Z#o-1"}}


def test_an_update_that_reopens_sets_the_sparse_keys_again():
    shipped = ORDER.item(ORDER.values(open_order()) | {"Status": "SHIPPED"})
    update = store.update_action("t", ORDER, shipped, {"Status": "OPEN"}, 7)["Update"]
    names = update["ExpressionAttributeNames"]
    assert {"OpenShard", "OrderOpenDate", "Status", "Version"} <= set(names.values())
    removed = update["UpdateExpression"].split(" REMOVE ")[1].split(", ")
    assert [names[a] for a in removed] == ["StatusShard"]  # one status index at a time


def test_hierarchical_keys_refuse_the_separator_and_prefix_whole_levels():
    values = {"Country": "CH", "Region": "ZH", "City": "Zürich", "StoreId": "s1", "Name": "x", "Version": 1}
    item = STORE.item(values)
    assert (item["PK"], item["SK"]) == ("STORES#CH", "ZH#Zürich#s1")
    assert STORE.key_prefix("SK", {"Region": "ZH"}) == "ZH#"
    assert STORE.key_prefix("SK", {"Region": "ZH", "City": "Zürich"}) == "ZH#Zürich#"
    assert STORE.key_prefix("SK", {"City": "Zürich"}) == ""  # a city only within its region
    with pytest.raises(ValueError, match="free of"):
        STORE.item(values | {"City": "A#B"})


def test_a_request_body_is_checked_against_the_model_naming_the_field():
    line = from_json(ORDER_LINE, {"ProductId": "p", "Quantity": Decimal(2), "UnitPrice": Decimal("1.5")},
                     ("ProductId", "Quantity", "UnitPrice"))  # fmt: skip
    assert line == {"ProductId": "p", "Quantity": 2, "UnitPrice": Decimal("1.5")}
    for body, field in [
        ({"ProductId": "p", "Quantity": Decimal("1.5"), "UnitPrice": Decimal(1)}, "Quantity"),
        ({"ProductId": "p" * 200, "Quantity": Decimal(1), "UnitPrice": Decimal(1)}, "ProductId"),
        ({"ProductId": "p", "Quantity": Decimal(1)}, "UnitPrice"),
        ({"ProductId": "p", "Quantity": Decimal(1), "UnitPrice": Decimal(1), "Discount": 1}, "Discount"),
    ]:
        with pytest.raises(Invalid) as error:
            from_json(ORDER_LINE, body, ("ProductId", "Quantity", "UnitPrice"))
        assert error.value.field == field and field in str(error.value)
    assert from_json(ORDER, {"Status": "OPEN"}, ("Status", "Total"), partial=True) == {"Status": "OPEN"}
