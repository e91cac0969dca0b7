"""Follows as an adjacency list (pattern 19): an edge item `USER#a / FOLLOWS#b` answers whom A
follows with one Query; the Inverted GSI, keyed the other way round, answers who follows A. A
user's collection keeps its `#static` item (pattern 20); the write-back carries edges to SQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hybridsync.dynamodb import distinct, store
from hybridsync.model import keys, versions
from hybridsync.model.convert import marshal
from hybridsync.model.errors import Invalid, NotFound
from shop.model import COLLECTION, FOLLOW, MAIN, VERSION


def _edge(follower: str, followee: str) -> dict[str, str]:
    if follower == followee:
        raise Invalid("followee", "a user cannot follow themselves")
    return {"FollowerId": follower, "FolloweeId": followee}


def follow(client: Any, table: str, follower: str, followee: str) -> tuple[dict[str, Any], bool]:
    """A follows B. Returns (edge, created); following again changes nothing."""
    values = _edge(follower, followee)
    stored = store.get(client, table, FOLLOW.key(values))
    if stored is not None:
        return FOLLOW.values(stored), False
    version = versions.next_version()
    edge = FOLLOW.item(values | {"CreatedAt": keys.iso_ms(datetime.now(UTC)), VERSION: version})
    collection = FOLLOW.key_value("PK", values)
    store.transact(
        client,
        [store.put_action(table, edge, new=True), distinct.joined(table, COLLECTION, collection, version)],
    )
    return FOLLOW.values(edge), True


def unfollow(client: Any, table: str, follower: str, followee: str) -> None:
    """A stops following B; NotFound when A did not follow B."""
    values = _edge(follower, followee)
    stored = store.get(client, table, FOLLOW.key(values))
    if stored is None:
        raise NotFound(f"{follower!r} does not follow {followee!r}")
    held = None if stored.get(VERSION) is None else int(stored[VERSION])  # none: another writer's edge
    version = versions.next_version(held)
    store.transact(
        client,
        [
            store.delete_action(table, FOLLOW.key(values), held),
            distinct.left(client, table, COLLECTION, FOLLOW.key_value("PK", values), version),
        ],
    )


def following(
    client: Any, table: str, user: str, limit: int = 20, cursor: str | None = None
) -> tuple[list[str], str | None]:
    """Whom `user` follows, by id, a page at a time: one Query on their collection."""
    request = {
        "TableName": table,
        "KeyConditionExpression": "PK = :pk AND begins_with(SK, :sk)",
        "ExpressionAttributeValues": marshal(
            {":pk": FOLLOW.key_value("PK", {"FollowerId": user}), ":sk": FOLLOW.key_prefix("SK")}
        ),
    }
    edges, following_cursor = store.page(client, request, limit, cursor)
    return [e["FolloweeId"] for e in edges], following_cursor


def followers(
    client: Any, table: str, user: str, limit: int = 20, cursor: str | None = None
) -> tuple[list[str], str | None]:
    """Who follows `user`, a page at a time: one Query on the Inverted GSI."""
    index = MAIN.index("Inverted")
    request = {
        "TableName": table,
        "IndexName": index.name,
        "KeyConditionExpression": f"{index.partition.name} = :pk",
        "ExpressionAttributeValues": marshal(
            {":pk": FOLLOW.key_value(index.partition.name, {"FolloweeId": user})}
        ),
    }
    edges, next_cursor = store.page(client, request, limit, cursor)
    return [e["FollowerId"] for e in edges], next_cursor
