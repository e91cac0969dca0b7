"""One JSON type per field type (issue 51), offline: `web.shown` renders a field by its declared type,
never by its value, from raw values (Decimal) or JSON-ready ones alike, and `web.respond` writes a
JSON field's numbers as the numbers stored."""

from __future__ import annotations

import json
from decimal import Decimal

import jsonschema
import pytest
from boto3.dynamodb.types import Binary

from hybridsync.api import openapi, web
from hybridsync.model.declare import Entity, Field, FieldType, KeyAttribute, Side, Table, Template

TABLE = Table("t", partition=KeyAttribute("PK"), sort=KeyAttribute("SK"))
THING = Entity(
    "Thing",
    TABLE,
    Side.DYNAMODB,
    fields=(
        Field("ThingId", FieldType.STRING),
        Field("Count", FieldType.INTEGER),
        Field("Amount", FieldType.DECIMAL),
        Field("Price", FieldType.DECIMAL, scale=2),
        Field("Doc", FieldType.JSON, required=False),
        Field("Blob", FieldType.BINARY, required=False),
    ),
    keys={"PK": Template("THING#{ThingId}"), "SK": Template("THING")},
)


@pytest.mark.parametrize(
    ("amount", "price", "shown_amount", "shown_price"),
    [
        (Decimal(120), Decimal(120), "120", "120.00"),
        (Decimal("12.5"), Decimal("12.5"), "12.5", "12.50"),
        (Decimal("1.2E+2"), Decimal("0.1"), "120", "0.10"),
        (Decimal("12.50"), Decimal("-3"), "12.5", "-3.00"),
        (Decimal("1E-7"), Decimal(0), "0.0000001", "0.00"),
        (120, "12.5", "120", "12.50"),  # already JSON-ready (`views.public`): the same answer
        (
            Decimal("12345678901234567890.123456789"),
            Decimal("0.01"),
            "12345678901234567890.123456789",
            "0.01",
        ),
    ],
)
def test_a_decimal_is_an_exact_string_whatever_its_value(amount, price, shown_amount, shown_price):
    item = {"PK": "THING#t", "SK": "THING", "Entity": "Thing", "ThingId": "t", "Count": Decimal(3),
            "Amount": amount, "Price": price}  # fmt: skip
    answer = web.shown(THING, item)
    assert answer == {"ThingId": "t", "Count": 3, "Amount": shown_amount, "Price": shown_price}
    assert type(answer["Count"]) is int
    # the schema the document gives it (`openapi.shape`, not called: it registers a component)
    schema = {"type": "object", "properties": openapi.shown_properties(THING), "additionalProperties": False}
    jsonschema.Draft202012Validator(schema).validate(json.loads(web.respond(answer).body))


def test_a_json_fields_numbers_are_the_numbers_stored():
    doc = {
        "weight": Decimal("1.5"),
        "n": Decimal(3),
        "tiny": Decimal("1E-7"),
        "list": [Decimal("0.1"), True, None],
    }
    answer = web.respond(web.shown(THING, {"ThingId": "t", "Doc": doc}))
    assert answer.body == '{"ThingId":"t","Doc":{"weight":1.5,"n":3,"tiny":1E-7,"list":[0.1,true,null]}}'
    assert json.loads(answer.body, parse_float=Decimal)["Doc"]["tiny"] == Decimal("1E-7")


def test_binary_is_base64_and_no_body_is_no_body():
    assert web.shown(THING, {"Blob": Binary(b"\x00\xff")}) == {"Blob": "AP8="}
    assert web.respond(None, status=204).body is None
    assert json.loads(web.respond({"a": Decimal("2.5"), "b": [Decimal(2)]}).body) == {"a": "2.5", "b": [2]}


def test_a_decimal_an_answer_gives_is_taken_back_exactly_and_nothing_else_that_python_reads():
    from hybridsync.model.convert import from_json
    from hybridsync.model.errors import Invalid

    answered = web.shown(THING, {"ThingId": "t", "Count": Decimal(2), "Amount": Decimal("12.5"),
                                 "Price": Decimal("3.10")})  # fmt: skip
    body = json.loads(json.dumps(answered), parse_float=Decimal, parse_int=Decimal)  # as a request's
    sent = from_json(THING, body, ("ThingId", "Count", "Amount", "Price"))
    assert (sent["Amount"], sent["Price"]) == (Decimal("12.5"), Decimal("3.10"))
    schema = openapi.field_schema(THING.field("Amount"))
    for text in ("12.5", "-0.01", "1E+3", "120"):
        jsonschema.validate(text, schema)
        assert from_json(THING, {"Amount": text}, ("Amount",), partial=True)["Amount"] == Decimal(text)
    for text in ("NaN", "Infinity", "1_000", " 1", "0x10", "1.", ".5", "twelve"):  # Decimal reads some
        with pytest.raises(Invalid, match="Amount"):
            from_json(THING, {"Amount": text}, ("Amount",), partial=True)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(text, schema)
