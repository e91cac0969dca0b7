"""Versioned writes to DynamoDB: a write never replaces a newer version of the same item."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from hybridsync.model import VERSION, Entity

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def marshal(item: dict[str, Any]) -> dict[str, Any]:
    return {name: _serializer.serialize(value) for name, value in item.items()}


def unmarshal(image: dict[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in image.items()}


def put(client: Any, table_name: str, entity: Entity, values: dict[str, Any]) -> bool:
    """Put the item unless the table holds the same or a newer version; False when it does."""
    item = entity.item(values)
    try:
        client.put_item(
            TableName=table_name,
            Item=marshal(item),
            ConditionExpression="attribute_not_exists(#v) OR #v < :v",
            ExpressionAttributeNames={"#v": VERSION},
            ExpressionAttributeValues={":v": {"N": str(item[VERSION])}},
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


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
