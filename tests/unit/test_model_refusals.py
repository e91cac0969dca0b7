"""Mistakes a model is refused for when it is built, each naming the field and what to write
instead (issue 51, items 7 and 8): a field whose column is one the engine keeps (`UpdatedAt` ->
`updated_at` ended `migrations generate` in a DuplicateColumnError), a key template naming no field
(it passed `Model()`, `hybridsync model` and `migrations check`, then failed at the first write
with `cannot build PK`, naming nothing), a default its own field would refuse."""

from __future__ import annotations

from decimal import Decimal

import pytest

from hybridsync.model.declare import (
    ENGINE_COLUMNS,
    Aggregate,
    Count,
    Entity,
    Field,
    FieldType,
    Model,
    Period,
    Side,
    Sum,
    Template,
    When,
)
from hybridsync.sql.schema import table_of
from shop.model import MAIN


def entity(
    *extra: Field, master: Side = Side.DYNAMODB, keys: dict | None = None, name: str = "Shipment"
) -> Entity:
    fields = (Field("ShipmentId", FieldType.STRING), Field("ShippedAt", FieldType.TIMESTAMP), *extra)
    return Entity(name, MAIN, master, fields=fields,
                  keys=keys or {"PK": Template("SHIPMENT#{ShipmentId}"), "SK": Template("DETAILS")},
                  sql_table="shipments", sql_key=("ShipmentId",))  # fmt: skip


def model(*entities: Entity) -> Model:
    return Model(tables=(MAIN,), entities=entities)


# --- item 7: the engine's own columns ---------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "column"),
    [
        (Field("UpdatedAt", FieldType.TIMESTAMP), "updated_at"),
        (Field("Deleted", FieldType.BOOLEAN), "deleted"),
        (Field("StreamPosition", FieldType.STRING), "stream_position"),
        (Field("Revision", FieldType.INTEGER, column="version"), "version"),  # a column= that collides
        (Field("Changed", FieldType.TIMESTAMP, column="updated_at"), "updated_at"),
    ],
)
def test_a_field_on_one_of_the_engines_columns_is_refused_naming_column(field, column):
    with pytest.raises(ValueError) as refused:
        model(entity(field))
    message = str(refused.value)
    assert (
        f"Shipment.{field.attribute}: its column {column!r} is one the engine keeps in shipments" in message
    )
    assert "column=" in message and "updated_at, " not in message.split("reserved: ")[0]
    assert all(name in message for name in ENGINE_COLUMNS[Side.DYNAMODB])


def test_the_way_out_the_refusal_names_builds_and_renders():
    """`column=` as the refusal suggests: the model builds and its table has both columns."""
    fine = entity(Field("UpdatedAt", FieldType.TIMESTAMP, column="shipment_updated_at"))
    model(fine)
    columns = [c.name for c in table_of(fine).columns]
    assert "shipment_updated_at" in columns and columns.count("updated_at") == 1


def test_a_table_mastered_in_postgresql_keeps_fewer_columns_of_its_own():
    """Its rows have no tombstone or stream position: a `Deleted` field of its own is its column."""
    model(entity(Field("Deleted", FieldType.BOOLEAN), master=Side.POSTGRESQL))
    with pytest.raises(ValueError, match="UpdatedAt: its column 'updated_at'"):
        model(entity(Field("UpdatedAt", FieldType.TIMESTAMP), master=Side.POSTGRESQL))


def test_two_fields_on_one_column_are_refused():
    with pytest.raises(
        ValueError, match=r"Shipment.Shipped: its column 'shipped_at' is Shipment.ShippedAt's"
    ):
        model(entity(Field("Shipped", FieldType.TIMESTAMP, column="shipped_at")))


@pytest.mark.parametrize("master", [Side.DYNAMODB, Side.POSTGRESQL])
def test_the_reserved_columns_are_the_ones_the_schema_adds(master):
    """ENGINE_COLUMNS (what the model refuses) and table_of (what the schema adds) in step."""
    added = [c.name for c in table_of(entity(master=master)).columns][len(entity().fields) :]
    assert sorted(added) == sorted(ENGINE_COLUMNS[master])


# --- item 8: key templates naming no field; defaults their field refuses ----------------------


def test_a_key_template_naming_no_field_is_refused_naming_it():
    keys = {"PK": Template("SHIPMENT#{ShipId}"), "SK": Template("DETAILS")}
    with pytest.raises(ValueError) as refused:
        model(entity(keys=keys))
    message = str(refused.value)
    assert "Shipment.PK" in message and "names ShipId, which is not a field of Shipment" in message
    assert "did you mean ShipmentId?" in message


def test_an_index_key_naming_no_field_is_refused_too():
    keys = {"PK": Template("SHIPMENT#{ShipmentId}"), "SK": Template("DETAILS"),
            "GSI1PK": When("Status", ("OPEN",), Template("OPEN#{ShipmentId}"))}  # fmt: skip
    with pytest.raises(ValueError, match=r"Shipment.GSI1PK: .* names Status"):
        model(entity(keys=keys))


def test_a_placeholder_padded_as_an_integer_must_be_one():
    keys = {"PK": Template("SHIPMENT#{ShipmentId:04d}"), "SK": Template("DETAILS")}
    with pytest.raises(
        ValueError, match=r"formats ShipmentId as an integer \(\{ShipmentId:04d\}\), but it is a STRING"
    ):
        model(entity(keys=keys))


def test_an_aggregate_keyed_on_what_it_does_not_group_is_refused():
    source = entity(Field("Carrier", FieldType.STRING), Field("Weight", FieldType.DECIMAL))
    aggregate = Aggregate("Shipped", sources=(source,), group_by=("Carrier",), time="ShippedAt",
                          periods=(Period.DAY,), measures=(Sum("Weight", of="Weight"), Count("Shipments")),
                          partition="CARRIER#{CarrierId}", sort="SHIPPED#{Period}")  # fmt: skip
    with pytest.raises(ValueError, match=r"Shipped.PK: .* names CarrierId, which is not a field of Shipped"):
        Model(tables=(MAIN,), entities=(source,), aggregates=(aggregate,))


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (
            lambda: Field("Quantity", FieldType.INTEGER, default=0, min=1),
            "Quantity: its default 0 is under its min 1",
        ),
        (
            lambda: Field("Quantity", FieldType.INTEGER, default=11, max=10),
            "Quantity: its default 11 is over its max 10",
        ),
        (
            lambda: Field("Price", FieldType.DECIMAL, scale=2, default=Decimal("1.234")),
            "Price: .* than its scale, 2",
        ),
        (lambda: Field("Price", FieldType.DECIMAL, default=Decimal("1e200")), "Price: .* magnitude over"),
        (
            lambda: Field("Code", FieldType.STRING, max_length=2, default="abc"),
            "Code: its default 'abc' is 3 characters",
        ),
        (lambda: Field("Code", FieldType.STRING, default="a\x00"), r"Code: .* NUL"),
        (lambda: Field("Quantity", FieldType.INTEGER, min=5, max=1), "Quantity: its min 5 is over its max 1"),
    ],
)
def test_a_default_its_own_field_would_refuse_is_refused_naming_the_field(field, message):
    with pytest.raises(ValueError, match=message):
        field()


def test_a_default_within_its_field_is_kept():
    assert Field("Quantity", FieldType.INTEGER, default=1, min=1, max=10).default == 1
    assert Field("Price", FieldType.DECIMAL, scale=2, default=Decimal("1.50")).default == Decimal("1.50")
