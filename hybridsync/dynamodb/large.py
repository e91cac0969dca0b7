"""Large attributes (pattern 18): an entity's body of any size, kept by size where it is cheapest
to read: as text in the item, gzip-compressed into a Binary attribute, gzip-compressed and chunked
into a chunks table (`<parentPK>#<parentSK>#<version>#<seq>`, BatchWriteItem / BatchGetItem), or
gzip-compressed in S3 with the object key in the item. Declared with `declare.body_fields()` in the
entity and `declare.chunks_of(...)` for the chunks. The item's size is computed (names
included) before the write, so the 400 KB limit is never met by surprise.

A new body is written under a new version first and the item is switched to it last, with a
version guard; the old chunks or object are removed after the switch. A reader therefore sees
the old body whole or the new body whole, never a mix; what a crash leaves behind (chunks or an
object no item names) is removed by `sweep`, once it is older than any write in progress.
"""

from __future__ import annotations

import gzip
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

from hybridsync.dynamodb import capacity, store
from hybridsync.model import keys, limits, versions
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import BODY, Bodies
from hybridsync.model.errors import Conflict, Invalid, NotFound, Rejected

logger = logging.getLogger(__name__)
BODY_ATTRIBUTES = tuple(BODY)  # Body, BodyGz, ChunkCount, ChunkVersion, BodyObject
STORAGE = {"Body": "text", "BodyGz": "gzip", "ChunkCount": "chunks", "BodyObject": "s3"}


@dataclass(frozen=True)
class Limits:
    inline: int = 1024  # UTF-8 bytes kept as text
    in_item: int = 64 * 1024  # compressed bytes kept in the item
    chunk: int = 256 * 1024  # bytes per chunk item
    chunked: int = 1024 * 1024  # compressed bytes kept in chunks; above: S3 (or refused)


@dataclass(frozen=True)
class Place:
    """Where bodies go: the chunks table and, for the largest, a bucket."""

    chunks_table: str
    s3: Any = None
    bucket: str | None = None
    limits: Limits = Limits()


def shown(bodies: Bodies, item: dict[str, Any]) -> dict[str, Any]:
    """The item as callers see it: its fields and where its body is kept, not the body's bytes."""
    values = {k: v for k, v in bodies.entity.values(item).items() if k not in BODY_ATTRIBUTES}
    return values | {"Storage": next(kind for attr, kind in STORAGE.items() if attr in item)}


def _chunk_keys(bodies: Bodies, parent: dict[str, Any], version: int, count: int) -> list[dict[str, Any]]:
    return [bodies.chunks.key(_chunk_values(parent, bodies.key_names, version, seq)) for seq in range(count)]


def _object_key(bodies: Bodies, item: dict[str, Any], version: int) -> str:
    key = "/".join(quote(str(item[name]), safe="") for name in bodies.key_names)
    return f"{bodies.object_prefix}{key}/{version}.gz"


def _object_owner(bodies: Bodies, object_key: str) -> tuple[dict[str, Any], int]:
    *parts, version = object_key.removeprefix(bodies.object_prefix).removesuffix(".gz").split("/")
    return dict(zip(bodies.key_names, map(unquote, parts), strict=True)), int(version)


# --- writes ----------------------------------------------------------------------------------


def put(
    bodies: Bodies, client: Any, table: str, place: Place, values: dict[str, Any], body: str
) -> dict[str, Any]:
    """Create or replace an item and its body; returns the item as stored (without the body)."""
    entity, version_name = bodies.entity, bodies.entity.names.version
    key = entity.key(values)
    stored = store.get(client, table, key)
    version = versions.next_version(stored[version_name] if stored else None)
    created = {}
    if "CreatedAt" in {f.attribute for f in entity.fields}:  # kept from the first write
        created["CreatedAt"] = stored["CreatedAt"] if stored else keys.iso_ms(datetime.now(UTC))
    raw = body.encode()
    try:
        item = entity.item(values | created | {"BodyBytes": len(raw), version_name: version})
    except Rejected as refused:  # a field past a limit of the model's: nothing is written yet
        raise Invalid(limits.largest(values), refused.reason) from None
    _write_body(bodies, client, place, item, raw, version)  # the new body, under the new version
    size = capacity.item_size(item)
    if size > capacity.ITEM_LIMIT:
        _remove_body(bodies, client, place, item)
        largest = limits.largest(values)
        raise Invalid(
            largest,
            f"the item would be {size} bytes, over DynamoDB's {capacity.ITEM_LIMIT} "
            f"(its largest attribute is {largest})",
        )
    guard = {"new": True} if stored is None else {"version": int(stored[version_name])}
    try:
        store.transact(client, [store.put_action(table, item, names=entity.names, **guard)])
    except Conflict:
        _remove_body(bodies, client, place, item)
        raise Conflict(
            f"{entity.name} {_shown_key(key)} changed meanwhile; read it again and retry"
        ) from None
    if stored is not None:
        _remove_body(bodies, client, place, stored)  # only now: a reader of the old item still finds it whole
    return shown(bodies, item)


def _write_body(
    bodies: Bodies, client: Any, place: Place, item: dict[str, Any], raw: bytes, version: int
) -> None:
    """Put the body where its size says, recording in `item` where it went."""
    limits = place.limits
    if len(raw) <= limits.inline:
        item["Body"] = raw.decode()
        return
    packed = gzip.compress(raw, mtime=0)
    if len(packed) <= limits.in_item:
        item["BodyGz"] = packed
        return
    if len(packed) <= limits.chunked or place.s3 is None:
        if len(packed) > limits.chunked:
            raise Invalid("Body", f"the body compresses to {len(packed)} bytes, over {limits.chunked}")
        parts = [packed[n : n + limits.chunk] for n in range(0, len(packed), limits.chunk)]
        chunks = [
            bodies.chunks.item(
                _chunk_values(item, bodies.key_names, version, seq)
                | {"Data": part, bodies.entity.names.version: version}
            )
            for seq, part in enumerate(parts)
        ]
        store.batch_write(client, place.chunks_table, [{"PutRequest": {"Item": marshal(c)}} for c in chunks])
        item |= {"ChunkCount": len(chunks), "ChunkVersion": version}
        return
    object_key = _object_key(bodies, item, version)
    place.s3.put_object(Bucket=place.bucket, Key=object_key, Body=packed, ContentEncoding="gzip")
    item["BodyObject"] = object_key


def _remove_body(bodies: Bodies, client: Any, place: Place, item: dict[str, Any]) -> None:
    """Best effort: what is left behind is an orphan for `sweep`, never a broken item."""
    try:
        if item.get("ChunkCount"):
            keys_ = _chunk_keys(bodies, item, int(item["ChunkVersion"]), int(item["ChunkCount"]))
            deletes = [{"DeleteRequest": {"Key": marshal(k)}} for k in keys_]
            store.batch_write(client, place.chunks_table, deletes)
        if item.get("BodyObject") and place.s3 is not None:
            place.s3.delete_object(Bucket=place.bucket, Key=item["BodyObject"])
    except Exception:  # the write that matters is done; the sweep finishes this
        logger.warning(
            "left the old body of %s for the sweep", [item.get(k) for k in bodies.key_names], exc_info=True
        )


def delete(bodies: Bodies, client: Any, table: str, place: Place, key_values: dict[str, Any]) -> None:
    entity = bodies.entity
    key = entity.key(key_values)
    item = store.get(client, table, key)
    if item is None:
        raise NotFound(f"no {entity.name} {_shown_key(key)}")
    version = int(item[entity.names.version])
    store.transact(client, [store.delete_action(table, key, version, names=entity.names)])
    _remove_body(bodies, client, place, item)


# --- reads -----------------------------------------------------------------------------------


def get(bodies: Bodies, client: Any, table: str, place: Place, key_values: dict[str, Any]) -> dict[str, Any]:
    """An item with its body. If the body is replaced while it is being read, the read starts
    again on the new item: a body is returned whole, old or new, never mixed."""
    key = bodies.entity.key(key_values)
    for _ in range(5):
        item = store.get(client, table, key)
        if item is None:
            raise NotFound(f"no {bodies.entity.name} {_shown_key(key)}")
        body = _read_body(bodies, client, place, item)
        if body is not None:
            return shown(bodies, item) | {"Body": body}
    raise Conflict(f"{bodies.entity.name} {_shown_key(key)} keeps changing while it is read; retry")


def _read_body(bodies: Bodies, client: Any, place: Place, item: dict[str, Any]) -> str | None:
    """The body, or None when it was replaced under us (its chunks or object already removed)."""
    if "Body" in item:
        return item["Body"]
    if "BodyGz" in item:
        return gzip.decompress(item["BodyGz"].value).decode()
    if "ChunkCount" in item:
        wanted = _chunk_keys(bodies, item, int(item["ChunkVersion"]), int(item["ChunkCount"]))
        found = store.batch_get(client, place.chunks_table, wanted)
        if len(found) < len(wanted):
            return None
        data = b"".join(c["Data"].value for c in sorted(found, key=lambda c: int(c["Seq"])))
        return gzip.decompress(data).decode()
    if place.s3 is None:
        raise RuntimeError("the body is in S3 but no bucket is configured")
    try:
        answer = place.s3.get_object(Bucket=place.bucket, Key=item["BodyObject"])
    except place.s3.exceptions.NoSuchKey:
        return None
    return gzip.decompress(answer["Body"].read()).decode()


# --- orphans ---------------------------------------------------------------------------------


def sweep(bodies: Bodies, client: Any, table: str, place: Place, older_than_s: int = 900) -> dict[str, int]:
    """Remove chunks and objects that no item names, once older than `older_than_s` (a write in
    progress has not switched its item yet). Their age is their version: epoch milliseconds."""
    cutoff = versions.now_ms() - older_than_s * 1000
    owners: dict[tuple[Any, ...], dict[str, Any] | None] = {}
    names = bodies.key_names

    def owner(key: dict[str, Any]) -> dict[str, Any] | None:
        at = tuple(key[n] for n in names)
        if at not in owners:
            owners[at] = store.get(client, table, key)
        return owners[at]

    orphan_chunks = []
    for page in store.pages(client, "scan", TableName=place.chunks_table):
        for chunk in map(unmarshal, page["Items"]):
            if chunk.get(bodies.entity.names.entity) != bodies.chunks.name:
                continue  # another entity's chunks, in a shared chunks table
            version = int(chunk["ChunkVersion"])
            found = owner(dict(zip(names, (chunk["ParentPK"], chunk["ParentSK"]), strict=True)))
            if version < cutoff and (found is None or int(found.get("ChunkVersion", -1)) != version):
                orphan_chunks.append(bodies.chunks.key(chunk))
    if orphan_chunks:
        store.batch_write(
            client, place.chunks_table, [{"DeleteRequest": {"Key": marshal(k)}} for k in orphan_chunks]
        )
    orphan_objects = 0
    if place.s3 is not None:
        listing = place.s3.get_paginator("list_objects_v2").paginate(
            Bucket=place.bucket, Prefix=bodies.object_prefix
        )
        for obj in (obj for page in listing for obj in page.get("Contents", [])):
            key, version = _object_owner(bodies, obj["Key"])
            if version < cutoff:
                found = owner(key)
                if found is None or found.get("BodyObject") != obj["Key"]:
                    place.s3.delete_object(Bucket=place.bucket, Key=obj["Key"])
                    orphan_objects += 1
    return {"chunks": len(orphan_chunks), "objects": orphan_objects}


def _chunk_values(
    parent: dict[str, Any], key_names: tuple[str, ...], version: int, seq: int
) -> dict[str, Any]:
    return {
        "ParentPK": parent[key_names[0]],
        "ParentSK": parent[key_names[1]],
        "ChunkVersion": version,
        "Seq": seq,
    }


def _shown_key(key: dict[str, Any]) -> str:
    return "/".join(str(v) for v in key.values())
