"""Stores under hierarchical keys (pattern 3): `STORES#<country>` / `<region>#<city>#<id>`, so
every level of the hierarchy (a country, a region, a city) is one Query with `begins_with`."""

from __future__ import annotations

from typing import Any

from hybridsync.dynamodb import store
from hybridsync.model import versions
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.errors import Invalid
from shop.model import STORE, VERSION

FIELDS = ("Country", "Region", "City", "StoreId", "Name", "Address")
LEVELS = ("Region", "City")


def put_store(client: Any, table: str, values: dict[str, Any]) -> dict[str, Any]:
    """Create or replace a store (a newer version always wins over an older one)."""
    for level in ("Country", "Region", "City", "StoreId"):
        if "#" in str(values.get(level, "")):
            raise Invalid(level, f"{level} must not contain '#', the hierarchy's separator")
    stored = store.get(client, table, STORE.key(values))
    item = STORE.item(values | {VERSION: versions.next_version(stored[VERSION] if stored else None)})
    if stored is None:
        store.transact(client, [store.put_action(table, item, new=True)])
    else:
        store.transact(client, [store.put_action(table, item, version=int(stored[VERSION]))])
    return STORE.values(item)


def stores(client: Any, table: str, country: str, region: str | None = None,
           city: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every store of a country, of a region in it, or of a city in that: one Query each, at
    whatever depth the caller stops. A city is only asked for within its region."""
    if city and not region:
        raise Invalid("region", "a city is looked up within its region: give the region too")
    for name, value in (("country", country), ("region", region), ("city", city)):
        if value is not None and (not value or "#" in value):
            raise Invalid(name, f"{name} must be non-empty and free of '#'")
    prefix = STORE.key_prefix("SK", {"Region": region, "City": city})
    condition = "PK = :pk" + (" AND begins_with(SK, :sk)" if prefix else "")
    values = {":pk": STORE.key_value("PK", {"Country": country})} | ({":sk": prefix} if prefix else {})
    pages = store.pages(client, "query", TableName=table, KeyConditionExpression=condition,
                        ExpressionAttributeValues=marshal(values))  # fmt: skip
    return [STORE.values(unmarshal(i)) for page in pages for i in page["Items"]]
