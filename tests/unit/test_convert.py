"""The one decoder and the conversions between DynamoDB items and SQL rows."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from boto3.dynamodb.types import Binary
from hypothesis import given
from hypothesis import strategies as st

from hybridsync.model import convert
from hybridsync.model.declare import Field, FieldType
from hybridsync.model.errors import Rejected
from hybridsync.streams import records
from shop.model import ORDER, ORDER_LINE, PRODUCT_AVAILABILITY
from tests import events


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ({"S": "Zoë"}, "Zoë"),
        ({"N": "12345678901234567890123456789012345678"}, Decimal("12345678901234567890123456789012345678")),
        ({"BOOL": False}, False),
        ({"NULL": True}, None),
        ({"SS": ["b", "a"]}, {"a", "b"}),
        ({"L": [{"N": "1"}, {"S": "x"}]}, [Decimal(1), "x"]),
        ({"M": {"k": {"N": "-0.5"}}}, {"k": Decimal("-0.5")}),
    ],
)
def test_attribute_values_decode_exactly(attribute, value):
    assert convert.attribute_value(attribute) == value


def test_a_malformed_number_raises_instead_of_becoming_nan():
    with pytest.raises(ArithmeticError):
        convert.attribute_value({"N": "twelve"})


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6, min_value=-(10**20), max_value=10**20))
def test_marshal_and_unmarshal_round_trip_numbers(number):
    assert convert.unmarshal(convert.marshal({"n": number})) == {"n": number}


def test_a_number_dynamodb_gives_back_with_its_zeros_goes_back_as_the_same_number():
    """DynamoDB stores 1E+38 (one digit) and a reader may hold it as 39 digits of zeros: it is sent
    again as 1E+38, while a number of 39 significant digits is still refused, naming its attribute."""
    assert convert.marshal({"p": Decimal("100000000000000000000000000000000000000")}) == {"p": {"N": "1E+38"}}
    assert convert.marshal({"m": {"a": [Decimal("1000000000000000000000000000000000000000")]}}) == {
        "m": {"M": {"a": {"L": [{"N": "1E+39"}]}}}
    }
    with pytest.raises(Rejected, match="p holds a number DynamoDB cannot store"):
        convert.marshal({"p": Decimal("1000000000000000000000000000000000000001")})


STRING, INTEGER = Field("Name", FieldType.STRING, max_length=5), Field("Count", FieldType.INTEGER)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (STRING, "abc", "abc"),
        (INTEGER, Decimal("7"), 7),
        (INTEGER, Decimal("7E+1"), 70),
        (Field("Price", FieldType.DECIMAL), Decimal("2.50"), Decimal("2.50")),
        (Field("At", FieldType.TIMESTAMP), "2026-11-22T08:00+01:00", datetime(2026, 11, 22, 7, tzinfo=UTC)),
        (Field("Flag", FieldType.BOOLEAN), True, True),
        (Field("Doc", FieldType.JSON), {"n": Decimal("1.10"), "s": {"b", "a"}}, '{"n":1.10,"s":["a","b"]}'),
    ],
)
def test_converters_accept_their_type(field, value, expected):
    assert convert.CONVERTERS[field.type](field, value) == expected


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        (STRING, 5, "Name must be a string, got int 5"),
        (STRING, "toolong", "Name is 7 characters long, over its limit of 5"),
        (INTEGER, Decimal("1.5"), "Count must be an integer"),
        (INTEGER, Decimal(2**63), "outside the 64-bit range"),
        (INTEGER, "7", "Count must be an integer, got str '7'"),
        (Field("Price", FieldType.DECIMAL), Decimal("NaN"), "Price must be a number"),
        (Field("At", FieldType.TIMESTAMP), "2026-11-22T08:00:00", "At must be an ISO-8601 timestamp"),
        (Field("Flag", FieldType.BOOLEAN), "true", "Flag must be a boolean"),
        (Field("Doc", FieldType.JSON), "{}", "Doc must be a map, list or set"),
    ],
)
def test_converters_reject_what_the_column_cannot_hold(field, value, reason):
    with pytest.raises(Rejected, match=reason.replace("(", r"\(")):
        convert.CONVERTERS[field.type](field, value)


def test_json_text_keeps_numbers_and_encodes_binary():
    value = {"huge": Decimal("1E+38"), "bin": Binary(b"\x00\xff"), "list": [None, True, "é"]}
    assert convert.json_text(value) == '{"huge":1E+38,"bin":"AP8=","list":[null,true,"é"]}'


def test_a_row_and_its_item_values_convert_both_ways():
    image = convert.unmarshal(events.record("order_line_insert")["dynamodb"]["NewImage"])
    row = convert.to_row(ORDER_LINE, image)
    values = convert.item_values(ORDER_LINE, row)
    assert values == {f.attribute: image[f.attribute] for f in ORDER_LINE.fields}


def test_item_values_read_sql_json_rows():
    row = {"product_id": "p-1", "price": "24.99", "stock": 12, "version": 5}
    assert convert.item_values(PRODUCT_AVAILABILITY, row) == {
        "ProductId": "p-1", "Price": Decimal("24.99"), "Stock": Decimal(12),
    }  # fmt: skip


def test_a_missing_required_attribute_is_named():
    image = convert.unmarshal(events.record("order_insert")["dynamodb"]["NewImage"])
    del image["Total"]
    with pytest.raises(Rejected, match="Order: missing required attribute Total"):
        convert.to_row(ORDER, image)


def test_jsonable_gives_exact_json_values_in_dynamodbs_canonical_form():
    values = {"a": Decimal("2"), "b": Decimal("2.50"), "c": {Decimal(2), Decimal(1)}, "d": Decimal("1E-7")}
    assert convert.jsonable(values) == {"a": 2, "b": "2.5", "c": [1, 2], "d": "0.0000001"}


def test_triage_turns_rejections_into_dead_letters_and_counts_the_rest():
    def parse(record):
        if record["n"] < 0:
            raise Rejected("negative")
        return record["n"] or None

    parsed, rejected, skipped = records.triage([{"n": 1}, {"n": -1}, {"n": 0}, {"n": 2}], parse)
    assert (parsed, skipped) == ([1, 2], 1)
    assert [(d.record, d.reason) for d in rejected] == [({"n": -1}, "negative")]


def test_ttl_expiries_are_told_apart_from_deletes():
    assert records.is_ttl_expiry(events.record("order_remove_ttl_expiry"))
    assert not records.is_ttl_expiry(events.record("order_remove"))


def test_records_become_json_whatever_produced_them():
    raw = {"dynamodb": {"ApproximateCreationDateTime": datetime(2026, 11, 22, tzinfo=UTC),
                        "NewImage": {"B": {"B": b"\x01"}}, "S": {"b", "a"}}}  # fmt: skip
    assert records.as_json(raw) == {
        "dynamodb": {"ApproximateCreationDateTime": 1795305600.0, "NewImage": {"B": {"B": "AQ=="}},
                     "S": ["a", "b"]}
    }  # fmt: skip
