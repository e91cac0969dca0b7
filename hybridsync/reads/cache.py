"""Cache-aside reads of entities mastered in PostgreSQL (pattern 12).

Read DynamoDB; on a miss read PostgreSQL and populate DynamoDB with a conditional put that never
replaces a newer version (a propagation from SQL may race the populate); remember a missing row
for a short while so unknown ids do not reach PostgreSQL on every request.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from hybridsync.dynamodb import store
from hybridsync.dynamodb.views import (
    CACHE_TTL_S,
    NEGATIVE_TTL_S,
    is_live,
    is_missing,
    missing_item,
    view_item,
)
from hybridsync.model.convert import item_values, marshal, unmarshal
from hybridsync.model.declare import Entity
from hybridsync.model.errors import Rejected
from hybridsync.sql.schema import table_of

log = logging.getLogger(__name__)


@dataclass
class Lookup:
    # the entity's own attributes and version, numbers as Decimal (a route shows them with
    # `hybridsync.api.web.shown`: one JSON type per field type); None: no such row
    item: dict[str, Any] | None
    hit: bool
    conflict: bool = False  # the populate lost to a newer version already in DynamoDB


def _read_row(engine: sa.Engine, entity: Entity, key_values: dict[str, Any]) -> dict[str, Any] | None:
    table = table_of(entity)
    condition = sa.and_(*(table.c[entity.field(a).column] == key_values[a] for a in entity.sql_key))
    # as JSON text, so numbers stay exact whatever the column type
    query = sa.select(sa.func.to_jsonb(table.table_valued()).cast(sa.Text)).where(condition)
    with engine.connect() as conn:
        text = conn.execute(query).scalar_one_or_none()
    return None if text is None else json.loads(text, parse_float=Decimal)


def _unstorable(error: Exception) -> bool:
    """A row DynamoDB cannot hold: past the value contract (Rejected), or past what it foresees
    (DynamoDB's ValidationException). Served from PostgreSQL, uncached, never a 500."""
    code = getattr(error, "response", {}).get("Error", {}).get("Code")
    return isinstance(error, Rejected) or code == "ValidationException"


def get(client: Any, table: str, engine: sa.Engine, entity: Entity, key_values: dict[str, Any]) -> Lookup:
    """One entity by key, through the cache."""
    now = int(time.time())
    got = client.get_item(TableName=table, Key=marshal(entity.key(key_values)))
    cached = unmarshal(got["Item"]) if "Item" in got else None
    if cached is not None and is_live(entity, cached, now):
        return Lookup(None if is_missing(cached) else entity.values(cached), hit=True)

    row = _read_row(engine, entity, key_values)
    if row is None:
        version = int(cached[entity.names.version]) if cached else 0
        item = missing_item(entity, key_values, version, now=now, ttl_s=NEGATIVE_TTL_S)
        stored = store.put_if_newer(client, table, entity, item, expired_before=now)
        return Lookup(None, hit=False, conflict=not stored)
    values = item_values(entity, row)
    try:
        item = view_item(entity, values, int(row["version"]), now=now, ttl_s=CACHE_TTL_S)
        stored = store.put_if_newer(client, table, entity, item, expired_before=now)
    except Exception as refused:
        if not _unstorable(refused):
            raise
        log.warning("served uncached: %s %s: %s", entity.name, key_values, refused)
        return Lookup(values | {entity.names.version: int(row["version"])}, hit=False)
    return Lookup(entity.values(item), hit=False, conflict=not stored)
