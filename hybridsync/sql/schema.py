"""The PostgreSQL schema as SQLAlchemy Core metadata: the engine's own tables (outbox, dead
letters), and the tables of a model's SQL mappings, rendered from its declaration.

Alembic migrations create and upgrade it (the engine's in its own branch, a project's tables in
the project's); `hybridsync migrations check` compares a database with it.
"""

from __future__ import annotations

import functools
import json

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSON, JSONB

from hybridsync.model.declare import Entity, Field, FieldType, Model, Side

SQL_TYPES: dict[FieldType, sa.types.TypeEngine] = {
    FieldType.STRING: sa.Text(),
    FieldType.INTEGER: sa.BigInteger(),
    FieldType.DECIMAL: sa.Numeric(),  # unbounded: DynamoDB numbers carry 38 digits
    FieldType.TIMESTAMP: sa.DateTime(timezone=True),
    FieldType.BOOLEAN: sa.Boolean(),
    FieldType.JSON: JSONB(),
    FieldType.BINARY: sa.LargeBinary(),
}
NAMING = {
    "pk": "pk_%(table_name)s",
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
}

engine_metadata = sa.MetaData(naming_convention=NAMING)  # the engine's own tables

# Epoch milliseconds: the unit of every `version` (a hybrid logical clock on the DynamoDB side).
NOW_MS = sa.text("(extract(epoch from clock_timestamp()) * 1000)::bigint")


def server_default(f: Field) -> str | None:
    """A field's default as its column's DEFAULT (text PostgreSQL casts to the column's type)."""
    value = f.default
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, separators=(",", ":"))
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    return str(value)


@functools.cache
def table_of(entity: Entity) -> sa.Table:
    """The SQL table of an entity with a SQL mapping."""
    if not entity.sql_table:
        raise KeyError(f"{entity.name} has no SQL table")
    columns = [
        sa.Column(
            f.column,
            sa.Numeric(38, f.scale) if f.scale is not None else SQL_TYPES[f.type],
            primary_key=f.attribute in entity.sql_key,
            nullable=not f.required,
            server_default=server_default(f),
        )
        for f in entity.fields
    ]
    if entity.master is Side.DYNAMODB:
        # Written back: the stream position a row last applied orders every upsert (a tombstone
        # keeps it, so a late replay of an older image cannot resurrect the row); the writer's own
        # version, when it keeps one, is carried as it is (hybridsync.sync.writeback).
        columns += [
            sa.Column("version", sa.BigInteger, nullable=True),
            sa.Column("deleted", sa.Boolean, nullable=False, server_default=sa.false()),
            sa.Column("stream_position", sa.Numeric(40, 0), nullable=True),
        ]
    else:
        columns += [sa.Column("version", sa.BigInteger, nullable=False, server_default=NOW_MS)]
    columns.append(
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())
    )
    return sa.Table(
        entity.sql_table, sa.MetaData(naming_convention=NAMING), *columns, comment=entity.description
    )


@functools.cache
def metadata(model: Model, *, managed_only: bool = False) -> sa.MetaData:
    """The whole schema of a model: the engine's tables and its entities' (with `managed_only`,
    not those the project manages itself)."""
    whole = sa.MetaData(naming_convention=NAMING)
    for table in engine_metadata.tables.values():
        table.to_metadata(whole)
    for entity in model.synced():
        if entity.managed or not managed_only:
            table_of(entity).to_metadata(whole)
    return whole


outbox = sa.Table(
    "outbox",
    engine_metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
    sa.Column("table_name", sa.Text, nullable=False),
    sa.Column("operation", sa.Text, nullable=False),  # INSERT | UPDATE | DELETE
    sa.Column("row_key", JSONB, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("payload", JSONB, nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    comment="one row per change of a table mastered in PostgreSQL, drained into DynamoDB",
)

dead_letters = sa.Table(
    "dead_letters",
    engine_metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
    sa.Column("source", sa.Text, nullable=False),  # which consumer gave up on it
    sa.Column("event_id", sa.Text, nullable=True),  # the stream record's eventID: a replay stores it once
    sa.Column("reason", sa.Text, nullable=False),
    # json, not jsonb: json keeps the text as received, including \u0000 that jsonb refuses.
    sa.Column("record", JSON, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    sa.Column("redriven_at", sa.DateTime(timezone=True), nullable=True),
    sa.Index("ix_dead_letters_pending", "source", "id", postgresql_where=sa.text("redriven_at IS NULL")),
    sa.UniqueConstraint("source", "event_id", name="uq_dead_letters_source_event"),
    comment="records a consumer could not apply, with the reason; redriven by the CLI",
)
