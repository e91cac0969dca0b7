"""Reviews with bodies of any size (pattern 18), kept by size where they are cheapest to read:
as text in the item, gzip-compressed into a Binary attribute, gzip-compressed and chunked into the
`chunks` table (`<parentPK>#<parentSK>#<version>#<seq>`, BatchWriteItem / BatchGetItem), or
gzip-compressed in S3 with the object key in the item. The item's size is computed (names
included) before the write, so the 400 KB limit is never met by surprise.

A new body is written under a new version first and the item is switched to it last, with a
version guard; the old chunks or object are removed after the switch. A reader therefore sees
the old body whole or the new body whole, never a mix; what a crash leaves behind (chunks or an
object no item names) is removed by `sweep`, once it is older than any write in progress.
"""

from __future__ import annotations

import gzip
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

from hybridsync import capacity, keys, store, versions
from hybridsync.convert import marshal, unmarshal
from hybridsync.errors import Conflict, Invalid, NotFound
from hybridsync.model import REVIEW, REVIEW_CHUNK, VERSION

logger = logging.getLogger(__name__)
BATCH_WRITE, BATCH_GET = 25, 100  # BatchWriteItem / BatchGetItem request limits
FIELDS = ("ReviewId", "ProductId", "CustomerId", "Rating", "Title")
BODY_ATTRIBUTES = ("Body", "BodyGz", "ChunkCount", "ChunkVersion", "BodyObject")
OBJECT_PREFIX = "reviews/"
STORAGE = {"Body": "text", "BodyGz": "gzip", "ChunkCount": "chunks", "BodyObject": "s3"}


def _shown(item: dict[str, Any]) -> dict[str, Any]:
    """The review as callers see it: its fields and where its body is kept, not the body's bytes."""
    values = {k: v for k, v in REVIEW.values(item).items() if k not in BODY_ATTRIBUTES}
    return values | {"Storage": next(kind for attr, kind in STORAGE.items() if attr in item)}


@dataclass(frozen=True)
class Limits:
    inline: int = 1024  # UTF-8 bytes kept as text
    in_item: int = 64 * 1024  # compressed bytes kept in the item
    chunk: int = 256 * 1024  # bytes per chunk item
    chunked: int = 1024 * 1024  # compressed bytes kept in chunks; above: S3 (or refused)


@dataclass(frozen=True)
class Place:
    """Where review bodies go: the chunks table and, for the largest, a bucket."""

    chunks_table: str
    s3: Any = None
    bucket: str | None = None
    limits: Limits = Limits()


def _review_key(product_id: str, review_id: str) -> dict[str, Any]:
    return REVIEW.key({"ProductId": product_id, "ReviewId": review_id})


def _chunk_keys(parent: dict[str, Any], version: int, count: int) -> list[dict[str, Any]]:
    base = {"ParentPK": parent["PK"], "ParentSK": parent["SK"], "ChunkVersion": version}
    return [REVIEW_CHUNK.key(base | {"Seq": seq}) for seq in range(count)]


def _object_key(product_id: str, review_id: str, version: int) -> str:
    return f"{OBJECT_PREFIX}{quote(product_id, safe='')}/{quote(review_id, safe='')}/{version}.gz"


def _object_owner(object_key: str) -> tuple[str, str, int]:
    product_id, review_id, version = object_key.removeprefix(OBJECT_PREFIX).removesuffix(".gz").split("/")
    return unquote(product_id), unquote(review_id), int(version)


def put_review(client: Any, table: str, place: Place, values: dict[str, Any], body: str) -> dict[str, Any]:
    """Create or replace a review and its body; returns the review as stored (without the body)."""
    key = _review_key(values["ProductId"], values["ReviewId"])
    stored = store.get(client, table, key)
    version = versions.next_version(stored[VERSION] if stored else None)
    created = stored["CreatedAt"] if stored else keys.iso_ms(datetime.now(UTC))
    raw = body.encode()
    item = REVIEW.item(values | {"CreatedAt": created, "BodyBytes": len(raw), VERSION: version})
    _write_body(client, place, item, raw, version)  # the new body, under the new version
    size = capacity.item_size(item)
    if size > capacity.ITEM_LIMIT:
        _remove_body(client, place, item)
        raise Invalid(
            "Title", f"the review item would be {size} bytes, over DynamoDB's {capacity.ITEM_LIMIT}"
        )
    guard = {"new": True} if stored is None else {"version": int(stored[VERSION])}
    try:
        store.transact(client, [store.put_action(table, item, **guard)])
    except Conflict:
        _remove_body(client, place, item)
        raise Conflict(f"review {values['ReviewId']!r} changed meanwhile; read it again and retry") from None
    if stored is not None:
        _remove_body(client, place, stored)  # only now: a reader of the old item still finds it whole
    return _shown(item)


def _write_body(client: Any, place: Place, item: dict[str, Any], raw: bytes, version: int) -> None:
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
            REVIEW_CHUNK.item(
                {
                    "ParentPK": item["PK"],
                    "ParentSK": item["SK"],
                    "ChunkVersion": version,
                    "Seq": seq,
                    "Data": part,
                    VERSION: version,
                }
            )
            for seq, part in enumerate(parts)
        ]
        _batch_write(client, place.chunks_table, [{"PutRequest": {"Item": marshal(c)}} for c in chunks])
        item |= {"ChunkCount": len(chunks), "ChunkVersion": version}
        return
    object_key = _object_key(item["ProductId"], item["ReviewId"], version)
    place.s3.put_object(Bucket=place.bucket, Key=object_key, Body=packed, ContentEncoding="gzip")
    item["BodyObject"] = object_key


def _batch_write(client: Any, table: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem in 25s, resending what DynamoDB leaves unprocessed (with backoff)."""
    for start in range(0, len(requests), BATCH_WRITE):
        pending = {table: requests[start : start + BATCH_WRITE]}
        for attempt in range(10):
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
            time.sleep(min(1.0, 0.05 * 2**attempt))
        else:
            raise RuntimeError(f"{table}: items still unprocessed after 10 attempts")


def _remove_body(client: Any, place: Place, item: dict[str, Any]) -> None:
    """Best effort: what is left behind is an orphan for `sweep`, never a broken review."""
    try:
        if item.get("ChunkCount"):
            keys_ = _chunk_keys(item, int(item["ChunkVersion"]), int(item["ChunkCount"]))
            _batch_write(client, place.chunks_table, [{"DeleteRequest": {"Key": marshal(k)}} for k in keys_])
        if item.get("BodyObject") and place.s3 is not None:
            place.s3.delete_object(Bucket=place.bucket, Key=item["BodyObject"])
    except Exception:  # the write that matters is done; the sweep finishes this
        logger.warning("left the old body of %s/%s for the sweep", item["PK"], item["SK"], exc_info=True)


# --- reads -----------------------------------------------------------------------------------


def get_review(client: Any, table: str, place: Place, product_id: str, review_id: str) -> dict[str, Any]:
    """A review with its body. If the body is replaced while it is being read, the read starts
    again on the new item: a body is returned whole, old or new, never mixed."""
    for _ in range(5):
        item = store.get(client, table, _review_key(product_id, review_id))
        if item is None:
            raise NotFound(f"product {product_id!r} has no review {review_id!r}")
        body = _read_body(client, place, item)
        if body is not None:
            return _shown(item) | {"Body": body}
    raise Conflict(f"review {review_id!r} keeps changing while it is read; retry")


def _read_body(client: Any, place: Place, item: dict[str, Any]) -> str | None:
    """The body, or None when it was replaced under us (its chunks or object already removed)."""
    if "Body" in item:
        return item["Body"]
    if "BodyGz" in item:
        return gzip.decompress(item["BodyGz"].value).decode()
    if "ChunkCount" in item:
        wanted = _chunk_keys(item, int(item["ChunkVersion"]), int(item["ChunkCount"]))
        found = _batch_get(client, place.chunks_table, wanted)
        if len(found) < len(wanted):
            return None
        data = b"".join(c["Data"].value for c in sorted(found, key=lambda c: int(c["Seq"])))
        return gzip.decompress(data).decode()
    if place.s3 is None:
        raise RuntimeError("the review's body is in S3 but no bucket is configured")
    try:
        answer = place.s3.get_object(Bucket=place.bucket, Key=item["BodyObject"])
    except place.s3.exceptions.NoSuchKey:
        return None
    return gzip.decompress(answer["Body"].read()).decode()


def _batch_get(client: Any, table: str, wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BatchGetItem in 100s, strongly consistent, re-asking for what DynamoDB left unprocessed."""
    found = []
    for start in range(0, len(wanted), BATCH_GET):
        pending: dict[str, Any] = {
            table: {"Keys": [marshal(k) for k in wanted[start : start + BATCH_GET]], "ConsistentRead": True}
        }
        for attempt in range(10):
            answer = client.batch_get_item(RequestItems=pending)
            found += [unmarshal(i) for i in answer["Responses"].get(table, [])]
            pending = answer.get("UnprocessedKeys") or {}
            if not pending:
                break
            time.sleep(min(1.0, 0.05 * 2**attempt))
        else:
            raise RuntimeError(f"{table}: keys still unprocessed after 10 attempts")
    return found


def delete_review(client: Any, table: str, place: Place, product_id: str, review_id: str) -> None:
    item = store.get(client, table, _review_key(product_id, review_id))
    if item is None:
        raise NotFound(f"product {product_id!r} has no review {review_id!r}")
    store.transact(
        client, [store.delete_action(table, _review_key(product_id, review_id), int(item[VERSION]))]
    )
    _remove_body(client, place, item)


# --- orphans ---------------------------------------------------------------------------------


def sweep(client: Any, table: str, place: Place, older_than_s: int = 900) -> dict[str, int]:
    """Remove chunks and objects that no review names, once older than `older_than_s` (a write in
    progress has not switched its item yet). Their age is their version: epoch milliseconds."""
    cutoff = versions.now_ms() - older_than_s * 1000
    parents: dict[tuple[str, str], dict[str, Any] | None] = {}

    def parent(pk: str, sk: str) -> dict[str, Any] | None:
        if (pk, sk) not in parents:
            parents[pk, sk] = store.get(client, table, {"PK": pk, "SK": sk})
        return parents[pk, sk]

    orphan_chunks = []
    for page in store.pages(client, "scan", TableName=place.chunks_table):
        for chunk in map(unmarshal, page["Items"]):
            version = int(chunk["ChunkVersion"])
            owner = parent(chunk["ParentPK"], chunk["ParentSK"])
            if version < cutoff and (owner is None or int(owner.get("ChunkVersion", -1)) != version):
                orphan_chunks.append(REVIEW_CHUNK.key(chunk))
    if orphan_chunks:
        _batch_write(
            client, place.chunks_table, [{"DeleteRequest": {"Key": marshal(k)}} for k in orphan_chunks]
        )
    orphan_objects = 0
    if place.s3 is not None:
        listing = place.s3.get_paginator("list_objects_v2").paginate(
            Bucket=place.bucket, Prefix=OBJECT_PREFIX
        )
        for obj in (obj for page in listing for obj in page.get("Contents", [])):
            product_id, review_id, version = _object_owner(obj["Key"])
            if version < cutoff:
                key = _review_key(product_id, review_id)
                owner = parent(key["PK"], key["SK"])
                if owner is None or owner.get("BodyObject") != obj["Key"]:
                    place.s3.delete_object(Bucket=place.bucket, Key=obj["Key"])
                    orphan_objects += 1
    return {"chunks": len(orphan_chunks), "objects": orphan_objects}
