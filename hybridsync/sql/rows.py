"""Writes of entities mastered in PostgreSQL, by their declaration: plain SQL upserts, updates and
deletes. The outbox triggers record each change and the SQL -> DynamoDB drain carries it into the
views; the row's `version` comes back from the database (its trigger sets it)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, insert

from hybridsync.model.convert import json_text
from hybridsync.model.declare import Entity, Field, FieldType, Side
from hybridsync.model.errors import Invalid, NotFound
from hybridsync.sql.schema import table_of


def _table(entity: Entity) -> sa.Table:
    if entity.master is not Side.POSTGRESQL:
        raise ValueError(f"{entity.name} is not mastered in PostgreSQL")
    return table_of(entity)


def _row(entity: Entity, values: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(values) - {f.attribute for f in entity.fields})
    if unknown:
        raise Invalid(unknown[0], f"{unknown[0]} is not a field of {entity.name}")
    return {entity.field(a).column: _value(entity.field(a), v) for a, v in values.items()}


def _value(f: Field, value: Any) -> Any:
    """JSON as exact text cast to jsonb (numbers keep every digit: no float on the way)."""
    if f.type is FieldType.JSON and value is not None:
        return sa.cast(sa.literal(json_text(value), sa.Text), JSONB)
    return value


def _where(entity: Entity, table: sa.Table, key_values: dict[str, Any]) -> sa.ColumnElement[bool]:
    return sa.and_(*(table.c[entity.field(a).column] == key_values[a] for a in entity.sql_key))


def upsert(conn: sa.Connection, entity: Entity, values: dict[str, Any]) -> int:
    """Insert or replace a row (every field given; an absent one takes its declared default, as an
    item does, else NULL); its version."""
    defaults = {f.attribute: f.default for f in entity.fields if f.default is not None}
    values = defaults | {a: v for a, v in values.items() if v is not None or a not in defaults}
    for f in entity.fields:
        if f.required and values.get(f.attribute) is None:
            raise Invalid(f.attribute, f"{f.attribute} is required")
    table = _table(entity)
    row = _row(entity, {f.attribute: values.get(f.attribute) for f in entity.fields})
    key_columns = [entity.field(a).column for a in entity.sql_key]
    statement = insert(table).values(row)
    statement = statement.on_conflict_do_update(
        index_elements=key_columns,
        set_={c: statement.excluded[c] for c in row if c not in key_columns},
    ).returning(table.c.version)
    return int(conn.execute(statement).scalar_one())


def update(conn: sa.Connection, entity: Entity, key_values: dict[str, Any], changes: dict[str, Any]) -> int:
    """Change some fields of an existing row; its new version. NotFound when there is no row."""
    if not changes:
        raise Invalid("body", "nothing to change")
    table = _table(entity)
    statement = (
        sa.update(table).where(_where(entity, table, key_values)).values(_row(entity, changes))
    ).returning(table.c.version)
    version = conn.execute(statement).scalar_one_or_none()
    if version is None:
        raise NotFound(f"no {entity.name} {key_values!r}")
    return int(version)


def delete(conn: sa.Connection, entity: Entity, key_values: dict[str, Any]) -> None:
    table = _table(entity)
    if conn.execute(sa.delete(table).where(_where(entity, table, key_values))).rowcount == 0:
        raise NotFound(f"no {entity.name} {key_values!r}")
