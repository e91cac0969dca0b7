"""Conflict-checked writes of an item of an entity mastered in DynamoDB. Any writer's items are
synced (placed by their keys, ordered by the stream: docs/writers.md); what these add is that
two writers of one item never overwrite each other unseen.

The item carries its keys as the model derives them, its entity tag, and a version that grows on
every write of its key, across a delete and a re-create too; it carries no origin (that marks
what the SQL side wrote). `put` and `delete` do all of it: each reads the stored version
(strongly consistent), writes one past it (the clock's millisecond, or the stored one plus one),
and makes the write conditional on that version, so two writers of one item never write the
same version, nor an older one over a newer one (a writer overtaken reads the version again and
writes after it: the last write wins, in a version order every side agrees on). An item another
writer stored without a version is written on the condition that it still has none (a writer
that keeps no version is not seen changing it). Cost: a strongly consistent read (1 read unit up
to 4 KB) beside each write.

    from hybridsync.dynamodb import writes
    writes.put(client, "hybridsync-main", INVOICE, {"InvoiceId": "i-1", ...})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from hybridsync.dynamodb import store
from hybridsync.model import versions
from hybridsync.model.convert import marshal
from hybridsync.model.declare import Entity
from hybridsync.model.errors import Conflict

RETRIES = 5  # writes raced by another writer of the same item before giving up (Conflict)


class ItemClient(Protocol):
    """The calls `put` and `delete` make of a DynamoDB client (boto3's `client("dynamodb")` is one).
    Requests and answers are DynamoDB's wire shapes, AttributeValues included."""

    exceptions: Any  # boto3's modelled errors: ConditionalCheckFailedException is caught

    def get_item(self, **request: Any) -> dict[str, Any]: ...

    def put_item(self, **request: Any) -> dict[str, Any]: ...

    def delete_item(self, **request: Any) -> dict[str, Any]: ...


def put(client: ItemClient, table: str, entity: Entity, values: Mapping[str, Any]) -> dict[str, Any]:
    """Write the item with these values (its version set here); returns them with the version."""
    names = entity.names
    for _ in range(RETRIES):
        stored = store.get(client, table, entity.key(values))
        held = None if stored is None else _version(stored, entity)
        written = {k: v for k, v in values.items() if k != names.origin}
        written[names.version] = versions.next_version(held)
        try:
            client.put_item(TableName=table, Item=marshal(entity.item(written)), **_still(held, entity))
            return written
        except client.exceptions.ConditionalCheckFailedException:
            continue  # another writer got there first: read it again
    raise Conflict(f"{entity.name}: the item kept changing while it was written ({RETRIES} tries)")


def delete(client: ItemClient, table: str, entity: Entity, values: Mapping[str, Any]) -> bool:
    """Delete the item these values name (its REMOVE carries the version it held); False when
    there is none."""
    for _ in range(RETRIES):
        stored = store.get(client, table, entity.key(values))
        if stored is None:
            return False
        held = _version(stored, entity)
        try:
            client.delete_item(TableName=table, Key=marshal(entity.key(values)), **_still(held, entity))
            return True
        except client.exceptions.ConditionalCheckFailedException:
            continue
    raise Conflict(f"{entity.name}: the item kept changing while it was deleted ({RETRIES} tries)")


def _version(stored: dict[str, Any], entity: Entity) -> int | None:
    """The stored item's version; None for an item a writer stored without one."""
    held = stored.get(entity.names.version)
    return None if held is None else int(held)


def _still(held: int | None, entity: Entity) -> dict[str, Any]:
    """The condition that the item is as it was read: absent or without a version, or at the
    version read."""
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
