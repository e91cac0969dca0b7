"""Cache-aside reads of entities mastered in PostgreSQL (pattern 12).

Read DynamoDB; on a miss read PostgreSQL and populate DynamoDB with a conditional put that never
replaces a newer version (a propagation from SQL may race the populate); remember a missing row
for a short while so unknown ids do not reach PostgreSQL on every request.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from hybridsync import store
from hybridsync.model import ENTITY, EXPIRES_AT, ORIGIN, ORIGIN_SQL, VERSION, Entity
from hybridsync.schema import entity_tables
from hybridsync.sqlsync import CACHE_TTL_S, MISSING, item_values

NEGATIVE_TTL_S = 60


@dataclass
class Lookup:
    item: dict[str, Any] | None  # the entity's attributes and Version; None: no such row
    hit: bool
    conflict: bool = False  # the populate lost to a newer version already in DynamoDB


def public(entity: Entity, item: dict[str, Any]) -> dict[str, Any]:
    """The entity's own attributes (no keys, TTL or sync bookkeeping), JSON-ready: integral
    numbers as integers, others as exact decimal strings, sets as sorted lists."""
    return {f.attribute: _jsonable(item[f.attribute]) for f in entity.all_fields if f.attribute in item}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_jsonable(v) for v in value)
    return value


def _read_row(engine: sa.Engine, entity: Entity, key_values: dict[str, Any]) -> dict[str, Any] | None:
    table = entity_tables[entity.name]
    condition = sa.and_(*(table.c[entity.field(a).column] == key_values[a] for a in entity.sql_key))
    # as JSON text, so numbers stay exact whatever the column type
    query = sa.select(sa.func.to_jsonb(table.table_valued()).cast(sa.Text)).where(condition)
    with engine.connect() as conn:
        text = conn.execute(query).scalar_one_or_none()
    return None if text is None else json.loads(text, parse_float=Decimal)


def get(client: Any, table: str, engine: sa.Engine, entity: Entity, key_values: dict[str, Any]) -> Lookup:
    """One entity by key, through the cache."""
    now = int(time.time())
    got = client.get_item(TableName=table, Key=store.marshal(entity.key(key_values)))
    cached = store.unmarshal(got["Item"]) if "Item" in got else None
    # DynamoDB deletes expired items lazily (within days): an expired item is a miss
    if cached is not None and cached.get(EXPIRES_AT, now + 1) > now:
        return Lookup(None if cached.get(MISSING) else public(entity, cached), hit=True)

    row = _read_row(engine, entity, key_values)
    if row is None:
        version = int(cached[VERSION]) if cached else 0
        marker = entity.key(key_values) | {ENTITY: entity.name, VERSION: version, MISSING: True,
                                           ORIGIN: ORIGIN_SQL, EXPIRES_AT: now + NEGATIVE_TTL_S}  # fmt: skip
        stored = store.put_if_newer(client, table, marker, expired_before=now)
        return Lookup(None, hit=False, conflict=not stored)
    values = item_values(entity, row)
    version = int(row["version"])
    item = entity.item(values | {VERSION: version, ORIGIN: ORIGIN_SQL, EXPIRES_AT: now + CACHE_TTL_S})
    stored = store.put_if_newer(client, table, item, expired_before=now)
    return Lookup(public(entity, item), hit=False, conflict=not stored)
