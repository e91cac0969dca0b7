"""The shape of a DynamoDB view of a PostgreSQL row, shared by the cache-aside reads and the outbox
drain: a view item, a short-lived "no such row" marker, and what a reader may see of either.

Views carry the row's version (conditional writes never replace a newer one), the origin `sql`
(the write-back never echoes them) and, in a table with TTL, an expiry: they are a cache of PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from hybridsync.model.convert import fixed, jsonable
from hybridsync.model.declare import Entity

# a view expires a day after it was loaded or last changed: a hit does not renew it (that would
# turn every read into a write); the outbox rewrites it on every change
CACHE_TTL_S = 24 * 3600
TOMBSTONE_TTL_S = 3600  # a deleted row's marker outlives any populate that could race it
NEGATIVE_TTL_S = 60  # a cached miss: unknown ids do not reach PostgreSQL on every request
MISSING = "Missing"  # marks "no such row": a delete's tombstone, or a cached miss


def view_item(
    entity: Entity, values: dict[str, Any], version: int, *, now: int, ttl_s: int
) -> dict[str, Any]:
    """The item that caches a row with these values."""
    names = entity.names
    return entity.item(
        values | {names.version: version, names.origin: names.origin_sql} | _expiry(entity, now + ttl_s)
    )


def missing_item(
    entity: Entity, key_values: dict[str, Any], version: int, *, now: int, ttl_s: int
) -> dict[str, Any]:
    """A marker for "no such row" carrying the version that decided it, so an older populate
    cannot bring the row back while it lives."""
    names = entity.names
    return (
        entity.key(key_values)
        | {
            names.entity: entity.name,
            names.version: version,
            names.origin: names.origin_sql,
            MISSING: True,
        }
        | _expiry(entity, now + ttl_s)
    )


def _expiry(entity: Entity, at: int) -> dict[str, int]:
    ttl = entity.table.ttl_attribute
    return {ttl: at} if ttl else {}


def is_missing(item: dict[str, Any]) -> bool:
    return bool(item.get(MISSING))


def is_live(entity: Entity, item: dict[str, Any], now: int) -> bool:
    """DynamoDB deletes expired items lazily (within days): an expired item is as good as absent."""
    ttl = entity.table.ttl_attribute
    return not ttl or item.get(ttl, now + 1) > now


def public(entity: Entity, item: dict[str, Any]) -> dict[str, Any]:
    """The entity's own attributes (no keys, TTL or sync bookkeeping), JSON-ready."""
    return {
        f.attribute: fixed(item[f.attribute], f.scale) if f.scale is not None else jsonable(item[f.attribute])
        for f in entity.all_fields
        if f.attribute in item
    }
