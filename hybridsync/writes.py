"""The application-side write API: how an application writes an item of an entity mastered in
DynamoDB so the pipeline takes it (written back to PostgreSQL, folded into the aggregates).

An item the pipeline accepts carries its keys as the model derives them, its entity tag, and a
version that grows on every write of its key, across a delete and a re-create too (the write-back
orders two images of one item by it, whatever order they arrive in); it carries no origin (that
marks what the SQL side wrote). `put` and `delete` do all of it: each reads the stored version
(strongly consistent), writes one past it (the clock's millisecond, or the stored one plus one),
and makes the write conditional on that version, so two writers of one item never write the
same version, nor an older one over a newer one (a writer overtaken reads the version again and
writes after it: the last write wins, in a version order every side agrees on). Cost: a
strongly consistent read (1 read unit up to 4 KB) beside each write.

    from hybridsync import writes
    writes.put(client, "hybridsync-main", INVOICE, {"InvoiceId": "i-1", ...})
"""

from __future__ import annotations

from typing import Any

from hybridsync import store, versions
from hybridsync.convert import marshal
from hybridsync.declare import Entity
from hybridsync.errors import Conflict

RETRIES = 5  # writes raced by another writer of the same item before giving up (Conflict)


def put(client: Any, table: str, entity: Entity, values: dict[str, Any]) -> dict[str, Any]:
    """Write the item with these values (its version set here); returns them with the version."""
    names = entity.names
    for _ in range(RETRIES):
        stored = store.get(client, table, entity.key(values))
        held = None if stored is None else int(stored[names.version])
        written = {k: v for k, v in values.items() if k != names.origin}
        written[names.version] = versions.next_version(held)
        try:
            client.put_item(TableName=table, Item=marshal(entity.item(written)), **_still(held, entity))
            return written
        except client.exceptions.ConditionalCheckFailedException:
            continue  # another writer got there first: read it again
    raise Conflict(f"{entity.name}: the item kept changing while it was written ({RETRIES} tries)")


def delete(client: Any, table: str, entity: Entity, values: dict[str, Any]) -> bool:
    """Delete the item these values name (its REMOVE carries the version it held); False when
    there is none."""
    for _ in range(RETRIES):
        stored = store.get(client, table, entity.key(values))
        if stored is None:
            return False
        held = int(stored[entity.names.version])
        try:
            client.delete_item(TableName=table, Key=marshal(entity.key(values)), **_still(held, entity))
            return True
        except client.exceptions.ConditionalCheckFailedException:
            continue
    raise Conflict(f"{entity.name}: the item kept changing while it was deleted ({RETRIES} tries)")


def _still(held: int | None, entity: Entity) -> dict[str, Any]:
    """The condition that the item is as it was read: absent, or at the version read."""
    if held is None:
        return {
            "ConditionExpression": "attribute_not_exists(#v)",
            "ExpressionAttributeNames": {"#v": entity.names.version},
        }
    return {
        "ConditionExpression": "#v = :v",
        "ExpressionAttributeNames": {"#v": entity.names.version},
        "ExpressionAttributeValues": {":v": {"N": str(held)}},
    }
