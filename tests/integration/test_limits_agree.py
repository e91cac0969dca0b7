"""The value contract (hybridsync.model.limits) against the real components: at each boundary, DynamoDB
Local accepts exactly what `limits` accepts, and PostgreSQL refuses what it says PostgreSQL
cannot store. One definition of the limits, checked where it is a claim about a server."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync.model import limits
from hybridsync.model.convert import marshal
from hybridsync.model.errors import Rejected
from hybridsync.testing.fuzz import nested

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def table(dynamodb):
    name = f"limits-{uuid.uuid4().hex[:6]}"
    dynamodb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                              {"AttributeName": "SK", "AttributeType": "S"}],
    )  # fmt: skip
    return name


def accepted(dynamodb, table, item) -> bool:
    raw = {k: ({"N": str(v)} if isinstance(v, Decimal) else marshal({k: v})[k]) for k, v in item.items()}
    try:
        dynamodb.put_item(TableName=table, Item=raw)
    except dynamodb.exceptions.ClientError as error:
        assert error.response["Error"]["Code"] == "ValidationException", error
        return False
    return True


def ours(item) -> bool:
    try:
        limits.check_item(item, {"PK"}, {"SK"})
    except Rejected:
        return False
    return True


CASES = {
    "38 digits": {"N": Decimal("1" * 38)},
    "39 digits": {"N": Decimal("1" * 39)},
    "largest magnitude": {"N": Decimal("9.9999999999999999999999999999999999999E+125")},
    "past the largest": {"N": Decimal("1E+126")},
    "smallest magnitude": {"N": Decimal("-1E-130")},
    "under the smallest": {"N": Decimal("1E-131")},
    "partition key of 2048 bytes": {"PK": "p" * 2048},
    "partition key of 2049 bytes": {"PK": "p" * 2049},
    "sort key of 1024 bytes": {"SK": "é" * 512},
    "sort key of 1025 bytes": {"SK": "é" * 512 + "s"},
    "nested 32 levels": {"M": nested(32)},
    "nested 33 levels": {"M": nested(33)},
    "an empty name in a map": {"M": {"": 1}},
    "a name of one byte in a map": {"M": {"a": 1}},
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_dynamodb_local_accepts_exactly_what_the_limits_accept(dynamodb, table, case):
    item = {"PK": f"k-{uuid.uuid4().hex[:6]}", "SK": "s"} | CASES[case]
    assert accepted(dynamodb, table, item) == ours(item)


def test_the_item_size_limit_is_dynamodbs_byte_for_byte(dynamodb, table):
    base = {"PK": f"k-{uuid.uuid4().hex[:6]}", "SK": "s", "Body": ""}
    fits = base | {"Body": "x" * (limits.ITEM_BYTES - limits.item_size(base))}
    over = fits | {"Body": fits["Body"] + "x"}
    assert limits.item_size(fits) == limits.ITEM_BYTES
    assert (accepted(dynamodb, table, fits), ours(fits)) == (True, True)
    assert (accepted(dynamodb, table, over), ours(over)) == (False, False)


@pytest.mark.parametrize("text", ["a\x00b", "a\ud800b"], ids=["NUL", "lone surrogate"])
def test_postgresql_cannot_store_the_text_the_limits_refuse(engine, text):
    assert limits.text_problem(text) is not None
    with pytest.raises((sa.exc.DataError, UnicodeEncodeError)), engine.connect() as conn:
        conn.execute(sa.text("SELECT CAST(:t AS text)"), {"t": text})
    assert limits.text_problem("Zürich 💥 \t") is None
