"""Distinct-key upkeep (pattern 20): every item collection the write path fills carries one
`#static` item (the engine's `Collection` entity of a table declaring a `distinct_index`), listed
by that small KEYS_ONLY index, so listing the collections never scans the table. It is created with
the collection's first member and deleted with its last, inside the same transaction as that
member's write. `marker` is `model.collection(table)`."""

from __future__ import annotations

from typing import Any

from hybridsync.dynamodb import store
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import Entity

MEMBERS = "Members"


def _key(marker: Entity, collection_pk: str) -> dict[str, Any]:
    return marker.key({"CollectionPK": collection_pk})


def joined(table: str, marker: Entity, collection_pk: str, version: int, members: int = 1) -> dict[str, Any]:
    """The transaction action counting `members` new members in: creates the #static item with
    the first one (ADD starts from zero)."""
    item = marker.item({"CollectionPK": collection_pk, MEMBERS: members, marker.names.version: version})
    table_keys = {a.name for a in marker.table.key_schema()}
    sets = {n: v for n, v in item.items() if n not in table_keys and n != MEMBERS}
    names = {f"#s{i}": n for i, n in enumerate(sets)} | {"#m": MEMBERS}
    values = {f":s{i}": v for i, v in enumerate(sets.values())} | {":m": members}
    return {"Update": {
        "TableName": table, "Key": marshal(_key(marker, collection_pk)),
        "UpdateExpression": "SET " + ", ".join(f"#s{i} = :s{i}" for i in range(len(sets))) + " ADD #m :m",
        "ExpressionAttributeNames": names, "ExpressionAttributeValues": marshal(values),
    }}  # fmt: skip


def left(client: Any, table: str, marker: Entity, collection_pk: str, version: int,
         members: int = 1) -> dict[str, Any]:  # fmt: skip
    """The transaction action counting `members` members out: deletes the #static item with the
    last one. Guarded by the count it read, so two concurrent removals cannot both miss the end."""
    stored = store.get(client, table, _key(marker, collection_pk))
    guard = {"ConditionExpression": "#m = :count", "ExpressionAttributeNames": {"#m": MEMBERS}}
    if stored is None or stored.get(MEMBERS) is None:
        # no count to take from: a collection another writer started has no #static item (or an
        # item of its own sits at that key); the transaction only checks it still has no count
        return {"ConditionCheck": {"TableName": table, "Key": marshal(_key(marker, collection_pk)),
                                   "ConditionExpression": "attribute_not_exists(#m)",
                                   "ExpressionAttributeNames": {"#m": MEMBERS}}}  # fmt: skip
    count = int(stored[MEMBERS])
    if count <= members:
        return {"Delete": {"TableName": table, "Key": marshal(_key(marker, collection_pk)), **guard,
                           "ExpressionAttributeValues": marshal({":count": count})}}  # fmt: skip
    return {"Update": {
        "TableName": table, "Key": marshal(_key(marker, collection_pk)), **guard,
        "UpdateExpression": "SET #v = :v ADD #m :less",
        "ExpressionAttributeNames": guard["ExpressionAttributeNames"] | {"#v": marker.names.version},
        "ExpressionAttributeValues": marshal({":count": count, ":less": -members, ":v": version}),
    }}  # fmt: skip


def distinct_keys(client: Any, table: str, marker: Entity) -> list[str]:
    """Every collection's partition key, read from the KEYS_ONLY index (one small Scan)."""
    index = marker.table.index(marker.table.distinct_index or "")
    pages = store.pages(client, "scan", TableName=table, IndexName=index.name)
    return sorted(unmarshal(i)[index.partition.name] for page in pages for i in page["Items"])


def members(client: Any, table: str, marker: Entity, collection_pk: str) -> int:
    stored = store.get(client, table, _key(marker, collection_pk))
    return int(stored[MEMBERS]) if stored and stored.get(marker.names.entity) == marker.name else 0
