"""The value contract (hybridsync.model.limits), one test per limit, and where the engine applies it: the
declared item (`Entity.item`), the converters (`Field(min=, max=)`), the arithmetic, the cursors."""

from __future__ import annotations

import base64
from dataclasses import replace
from decimal import Decimal

import pytest

from hybridsync.dynamodb import cursors
from hybridsync.model import limits
from hybridsync.model.convert import from_json, to_values
from hybridsync.model.declare import Field, FieldType
from hybridsync.model.errors import Invalid, Rejected
from hybridsync.testing.fuzz import nested
from shop.model import ORDER_LINE, PRODUCT_AVAILABILITY, TITLE_TAG


@pytest.mark.parametrize(
    ("number", "fits"),
    [
        ("1" * 38, True), ("1" * 39, False), ("1" * 38 + "000", True),  # trailing zeros are dropped
        ("9.9999999999999999999999999999999999999E+125", True), ("1E+126", False),
        ("1E-130", True), ("1E-131", False), ("0", True), ("-1E+125", True), ("NaN", False),
        ("Infinity", False), ("9" * 5_000, False),
    ],
)  # fmt: skip
def test_a_number_fits_dynamodb_within_38_digits_and_its_magnitudes(number, fits):
    assert (limits.number_problem(Decimal(number)) is None) == fits


@pytest.mark.parametrize(
    ("text", "problem"), [("Zürich 💥", None), ("a\x00b", "NUL"), ("a\ud800b", "surrogate")]
)
def test_text_is_valid_unicode_without_nul(text, problem):
    found = limits.text_problem(text)
    assert found is None if problem is None else problem in found


def test_nesting_counts_the_attribute_as_level_one_and_stops_at_32():
    assert limits.depth(nested(32)) == 32 and limits.value_problem("A", nested(32)) is None
    assert "nested deeper than DynamoDB's 32 levels" in limits.value_problem("A", nested(33))
    assert limits.depth(nested(100_000)) == 33  # iterative, and it stops early: no RecursionError


def test_a_problem_inside_a_value_names_where_it_is():
    value = {"size": [1, Decimal("1e400")], "name": "ok"}
    assert limits.value_problem("Attributes", value) == (
        "Attributes.size[1] has a magnitude over DynamoDB's 9.99...E+125"
    )


def test_key_sizes_are_2048_bytes_for_a_partition_key_and_1024_for_a_sort_key():
    limits.check_item({"PK": "p" * 2048, "SK": "s" * 1024}, {"PK"}, {"SK"})
    with pytest.raises(Rejected, match="PK is 2049 bytes, over DynamoDB's 2048 for a partition key"):
        limits.check_item({"PK": "p" * 2049, "SK": "s"}, {"PK"}, {"SK"})
    with pytest.raises(Rejected, match="SK is 1025 bytes, over DynamoDB's 1024 for a sort key"):
        limits.check_item({"PK": "p", "SK": "é" * 512 + "s"}, {"PK"}, {"SK"})  # bytes, not characters


def test_an_item_is_at_most_400_kb_with_its_attribute_names():
    limits.check_item({"PK": "p", "Body": "x" * (limits.ITEM_BYTES - 7)}, {"PK"}, ())  # 2 + 1 + 4 + ...
    with pytest.raises(Rejected, match=r"over DynamoDB's 409600 \(its largest attribute is Body"):
        limits.check_item({"PK": "p", "Body": "x" * (limits.ITEM_BYTES - 6)}, {"PK"}, ())


def test_sizes_measure_a_hostile_item_instead_of_crashing():
    assert limits.value_size("\ud800") == 3  # a tool meeting a lone surrogate counts it


def test_the_engine_arithmetic_raises_where_a_sum_would_round():
    with pytest.raises(ArithmeticError):
        limits.ARITHMETIC.add(Decimal("24.99"), Decimal("1E+37"))
    assert limits.ARITHMETIC.add(Decimal("1E+37"), Decimal("1E+37")) == Decimal("2E+37")


def test_every_declared_item_is_checked_when_it_is_built():
    line = {"OrderId": "o", "CustomerId": "c" * 128, "CreatedAt": "2026-11-22T10:00:00.000Z",
            "Status": "OPEN", "LineNo": 1, "ProductId": "p", "Quantity": 1, "UnitPrice": Decimal("1"),
            "Version": 1}  # fmt: skip
    ORDER_LINE.item(line)
    with pytest.raises(Rejected, match="UnitPrice has 40 significant digits"):
        ORDER_LINE.item(line | {"UnitPrice": Decimal("1" * 40)})
    with pytest.raises(Rejected, match="ProductId is not valid Unicode"):
        ORDER_LINE.item(line | {"ProductId": "p\ud800"})


def test_min_and_max_are_checked_on_every_side():
    with pytest.raises(Invalid, match="Quantity must be at least 1, got 0"):
        from_json(ORDER_LINE, {"ProductId": "p", "Quantity": Decimal(0), "UnitPrice": Decimal(1)},
                  ("ProductId", "Quantity", "UnitPrice"))  # fmt: skip
    with pytest.raises(Invalid, match="Price must be at most 1000000"):
        from_json(PRODUCT_AVAILABILITY, {"Price": Decimal("1e7")}, ("Price",))
    with pytest.raises(Rejected, match="Stock must be at least 0"):  # a stream record or a row, the same
        to_values(
            PRODUCT_AVAILABILITY,
            {"ProductId": "p", "Price": Decimal(1), "Stock": Decimal(-1), "Version": Decimal(1)},
        )
    with pytest.raises(ValueError, match="min is a number's"):
        Field("Name", FieldType.STRING, min=1)


def test_a_body_whose_fields_alone_are_over_400_kb_is_refused_naming_the_largest():
    unbounded = replace(TITLE_TAG, fields=tuple(replace(f, max_length=None) for f in TITLE_TAG.fields))
    with pytest.raises(Invalid, match="Tag: its item would be over DynamoDB's 409600 bytes"):
        from_json(unbounded, {"Tag": "t" * 420_000}, ("Tag",))


def test_a_cursor_is_valid_only_for_the_request_it_was_made_for():
    with cursors.bound("GET /users/<user_id>/follows u-1"):
        token = cursors.encode({"PK": {"S": "USER#u-1"}, "SK": {"S": "FOLLOWS#u-9"}})
        assert cursors.decode(token) == {"PK": {"S": "USER#u-1"}, "SK": {"S": "FOLLOWS#u-9"}}
        payload, _, signature = token.rpartition(".")
        forged = cursors.encode({"PK": {"S": "USER#someone-else"}}).rpartition(".")[0] + "." + signature
        for bad in (forged, payload, "e30", "e30.AAAA", "", "x" * 5_000, token + "x"):
            with pytest.raises(Invalid, match="cursor is not one this API gave out"):
                cursors.decode(bad)
    with cursors.bound("GET /users/<user_id>/followers u-1"), pytest.raises(Invalid):
        cursors.decode(token)  # another route's cursor


def test_the_local_gateway_sends_a_body_that_is_not_utf8_base64_as_api_gateway_does():
    from hybridsync.local.apigateway.responses import http_event

    event = http_event("PUT", "/x", [("content-type", "application/json")], b'{"a": "\xff"}')
    assert event["isBase64Encoded"] and base64.b64decode(event["body"]) == b'{"a": "\xff"}'
    assert http_event("PUT", "/x", [("content-type", "application/json")], b'{"a": 1}')["body"] == '{"a": 1}'
