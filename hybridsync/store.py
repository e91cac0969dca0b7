"""DynamoDB item access: versioned writes (a write never replaces a newer version of the same item)."""

from __future__ import annotations

from typing import Any

from hybridsync.convert import marshal
from hybridsync.model import EXPIRES_AT, VERSION, Entity


def put_if_newer(
    client: Any, table_name: str, item: dict[str, Any], *, expired_before: int | None = None
) -> bool:
    """Put the item unless the table holds the same or a newer `Version` of it; with
    `expired_before`, the same version may be replaced once its `ExpiresAt` has passed (a cache
    refresh). False when the table kept its item."""
    condition = "attribute_not_exists(#v) OR #v < :v"
    names, values = {"#v": VERSION}, {":v": item[VERSION]}
    if expired_before is not None:
        condition += " OR (#v = :v AND #x < :now)"
        names["#x"], values[":now"] = EXPIRES_AT, expired_before
    try:
        client.put_item(
            TableName=table_name,
            Item=marshal(item),
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=marshal(values),
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def put(client: Any, table_name: str, entity: Entity, values: dict[str, Any]) -> bool:
    """Put the entity's item unless the table holds the same or a newer version of it."""
    return put_if_newer(client, table_name, entity.item(values))


def delete(client: Any, table_name: str, entity: Entity, values: dict[str, Any], version: int) -> bool:
    """Delete the item if the table holds `version` or older; False when a newer one is there."""
    try:
        client.delete_item(
            TableName=table_name,
            Key=marshal(entity.key(values)),
            ConditionExpression="attribute_not_exists(#v) OR #v <= :v",
            ExpressionAttributeNames={"#v": VERSION},
            ExpressionAttributeValues={":v": {"N": str(version)}},
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def pages(client: Any, operation: str, **request: Any) -> Any:
    """Every page of a Query or Scan, following `LastEvaluatedKey` (boto3's paginator)."""
    return client.get_paginator(operation).paginate(**request)
