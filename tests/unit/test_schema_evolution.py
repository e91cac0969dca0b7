"""Adding a field to an entity that already has rows and items: defaults, and what `generate` writes
or refuses (expand, then contract)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
import sqlalchemy as sa
from alembic.operations import ops

from hybridsync.model import convert
from hybridsync.model.declare import Entity, Field, FieldType, Model, Side, Template
from hybridsync.model.errors import Rejected
from hybridsync.sql import migrations
from hybridsync.sql.schema import server_default, table_of
from shop.model import MAIN


def invoice(*extra: Field) -> Entity:
    fields = (Field("InvoiceId", FieldType.STRING), Field("Amount", FieldType.DECIMAL, scale=2), *extra)
    return Entity("Invoice", MAIN, Side.DYNAMODB, fields=fields,
                  keys={"PK": Template("INVOICE#{InvoiceId}"), "SK": Template("DETAILS")},
                  sql_table="invoices", sql_key=("InvoiceId",))  # fmt: skip


def test_an_item_written_before_a_field_existed_is_written_back_with_its_default():
    reference = Field("Reference", FieldType.STRING, default="none")
    entity = invoice(reference, Field("Priority", FieldType.INTEGER, default=3))
    row = convert.to_row(entity, {"InvoiceId": "i-1", "Amount": Decimal("12.3")})
    assert (row["reference"], row["priority"]) == ("none", 3)
    with pytest.raises(Rejected, match="missing required attribute Reference"):
        convert.to_row(
            invoice(Field("Reference", FieldType.STRING)), {"InvoiceId": "i-1", "Amount": Decimal(1)}
        )


def test_new_writes_carry_the_default_and_a_request_may_leave_it_out():
    entity = invoice(Field("Reference", FieldType.STRING, default="none"))
    assert entity.item({"InvoiceId": "i-1", "Amount": Decimal(1), "Version": 1})["Reference"] == "none"
    asked = ("InvoiceId", "Amount", "Reference")
    assert "Reference" not in convert.from_json(entity, {"InvoiceId": "i-1", "Amount": Decimal(1)}, asked)


@pytest.mark.parametrize(
    ("kind", "default", "column_default"),
    [
        (FieldType.STRING, "it's", "it's"),
        (FieldType.INTEGER, 7, "7"),
        (FieldType.DECIMAL, Decimal("1.50"), "1.50"),
        (FieldType.BOOLEAN, False, "false"),
        (FieldType.JSON, {"a": [1]}, '{"a":[1]}'),
        (FieldType.TIMESTAMP, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000Z"),
        (FieldType.BINARY, b"\x01", "\\x01"),
    ],
)
def test_a_default_becomes_its_columns_server_default(kind, default, column_default):
    assert server_default(Field("X", kind, default=default)) == column_default


@pytest.mark.parametrize(
    ("kind", "default"),
    [
        (FieldType.STRING, 1),
        (FieldType.INTEGER, True),
        (FieldType.INTEGER, "1"),
        (FieldType.TIMESTAMP, "today"),
        (FieldType.JSON, "{}"),
    ],
)
def test_a_default_of_the_wrong_type_is_refused_where_it_is_declared(kind, default):
    with pytest.raises(ValueError, match="X"):
        Field("X", kind, default=default)


def test_a_declared_scale_keeps_its_digits_and_refuses_more():
    entity = invoice()
    assert (
        isinstance(table_of(entity).c.amount.type, sa.Numeric) and table_of(entity).c.amount.type.scale == 2
    )
    assert convert.fixed(Decimal("12.3"), 2) == "12.30"  # DynamoDB keeps 12.3; shown as declared
    with pytest.raises(Rejected, match="more digits after the point than its scale, 2"):
        convert.to_row(entity, {"InvoiceId": "i-1", "Amount": Decimal("12.345")})
    with pytest.raises(ValueError, match="scale"):
        Field("Name", FieldType.STRING, scale=2)


def revision(table: str, *operations: ops.MigrateOperation) -> ops.UpgradeOps:
    return ops.UpgradeOps(ops=[ops.ModifyTableOps(table, list(operations))])


def test_generate_refuses_a_required_column_without_a_default_on_an_existing_table():
    model = Model(tables=(MAIN,), entities=(invoice(Field("Reference", FieldType.STRING)),))
    added = ops.AddColumnOp("invoices", sa.Column("reference", sa.Text(), nullable=False))
    with pytest.raises(migrations.Refused, match=r"Invoice.Reference is required and has no default"):
        migrations.expand_only(revision("invoices", added), model)
    with_default = invoice(Field("Reference", FieldType.STRING, default="none"))
    fine = ops.AddColumnOp("invoices", table_of(with_default).c.reference._copy())
    migrations.expand_only(revision("invoices", fine), Model(tables=(MAIN,), entities=(with_default,)))
    optional = ops.AddColumnOp("invoices", sa.Column("reference", sa.Text(), nullable=True))
    migrations.expand_only(revision("invoices", optional), model)


def test_a_column_made_required_is_filled_with_its_default_first():
    entity = invoice(Field("Reference", FieldType.STRING, default="n'a"))
    model = Model(tables=(MAIN,), entities=(entity,))
    altered = ops.AlterColumnOp("invoices", "reference", modify_nullable=False)
    upgrade = revision("invoices", altered)
    migrations.expand_only(upgrade, model)
    fill, alter = upgrade.ops[0].ops
    assert (
        fill.sqltext == "UPDATE invoices SET reference = 'n''a' WHERE reference IS NULL" and alter is altered
    )
    no_default = replace(entity, fields=(*entity.fields[:2], Field("Reference", FieldType.STRING)))
    altered = ops.AlterColumnOp("invoices", "reference", modify_nullable=False)
    with pytest.raises(migrations.Refused):
        migrations.expand_only(revision("invoices", altered), Model(tables=(MAIN,), entities=(no_default,)))
