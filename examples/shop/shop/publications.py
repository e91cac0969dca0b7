"""Relational data in one table (pattern 4) with version history (pattern 15).

A publication is the root of its item collection `PUBLICATION#<id>`: its metadata
(`METADATA#v000000`, the latest), every earlier revision (`METADATA#v000001` ... `vN`), its titles
(`TITLE#<id>`) and its title <-> tag edges (`TAG#<tag>#<title>`). The metadata is one GetItem, the
titles or the titles with a tag one Query, and a title's tags one Query of the overloaded Inverted
GSI. An edit writes revision N+1 and copies it into v0 in one transaction guarded by v0's revision:
of two concurrent edits of the same revision, one wins and the other gets a Conflict.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hybridsync.dynamodb import distinct, store
from hybridsync.model import keys, versions
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.errors import Conflict, Invalid, NotFound
from shop.model import COLLECTION, MAIN, PUBLICATION, TITLE, TITLE_TAG, VERSION

LATEST = 0  # the slot that always holds the newest revision
MAX_REVISION = 999_999  # the slot's six digits
EDITABLE = ("Name", "Description")


def _collection(publication_id: str) -> str:
    return PUBLICATION.key_value("PK", {"PublicationId": publication_id})


def _slot_key(publication_id: str, slot: int) -> dict[str, Any]:
    return PUBLICATION.key({"PublicationId": publication_id, "Slot": slot})


def edit(client: Any, table: str, publication_id: str, changes: dict[str, Any], editor: str,
         expected_revision: int | None = None) -> dict[str, Any]:  # fmt: skip
    """Write revision N+1 of the metadata (the first edit creates the publication) and make it the
    latest. `expected_revision` is the revision the editor saw: if another edit landed since, the
    edit is refused with Conflict instead of silently overwriting it."""
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise Invalid(sorted(unknown)[0], f"{sorted(unknown)[0]} is not an editable field")
    latest = store.get(client, table, _slot_key(publication_id, LATEST))
    revision = int(latest["Revision"]) if latest else 0
    if expected_revision is not None and expected_revision != revision:
        raise Conflict(f"publication {publication_id!r} is at revision {revision}, not {expected_revision}")
    if revision >= MAX_REVISION:
        raise Conflict(f"publication {publication_id!r} has reached {MAX_REVISION} revisions")
    current = PUBLICATION.values(latest) if latest else {}
    values = {k: v for k, v in current.items() if k in EDITABLE} | changes
    if "Name" not in values:
        raise Invalid("Name", "Name is required")
    version = versions.next_version(latest[VERSION] if latest else None)
    body = values | {"PublicationId": publication_id, "Revision": revision + 1, "Editor": editor,
                     "EditedAt": keys.iso_ms(datetime.now(UTC)), VERSION: version}  # fmt: skip
    history = PUBLICATION.item(body | {"Slot": revision + 1})
    newest = PUBLICATION.item(body | {"Slot": LATEST})
    actions = [store.put_action(table, history, new=True)]
    if latest is None:
        actions += [store.put_action(table, newest, new=True),
                    distinct.joined(table, COLLECTION, _collection(publication_id), version)]  # fmt: skip
    else:
        actions.append(store.put_action(table, newest, version=int(latest[VERSION])))
    try:
        store.transact(client, actions)
    except Conflict:
        raise Conflict(f"publication {publication_id!r} was edited meanwhile; reload it and retry") from None
    return PUBLICATION.values(newest)


def latest(client: Any, table: str, publication_id: str) -> dict[str, Any]:
    """The newest revision: one GetItem of v0."""
    item = store.get(client, table, _slot_key(publication_id, LATEST))
    if item is None:
        raise NotFound(f"no publication {publication_id!r}")
    return PUBLICATION.values(item)


def revision(client: Any, table: str, publication_id: str, number: int) -> dict[str, Any]:
    """Revision `number` (1 is the first), as it was written."""
    if not 1 <= number <= MAX_REVISION:
        raise Invalid("revision", f"revision must be from 1 to {MAX_REVISION}, got {number}")
    item = store.get(client, table, _slot_key(publication_id, number))
    if item is None:
        raise NotFound(f"publication {publication_id!r} has no revision {number}")
    return PUBLICATION.values(item)


def history(client: Any, table: str, publication_id: str, limit: int = 20,
            cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
    """Every revision, newest first, a page at a time (v0 is left out: it repeats the newest)."""
    request = {
        "TableName": table, "ScanIndexForward": False,
        "KeyConditionExpression": "PK = :pk AND SK BETWEEN :first AND :last",
        "ExpressionAttributeValues": marshal({
            ":pk": _collection(publication_id),
            ":first": _slot_key(publication_id, 1)["SK"],
            ":last": _slot_key(publication_id, MAX_REVISION)["SK"],
        }),
    }  # fmt: skip
    items, next_cursor = store.page(client, request, limit, cursor)
    return [PUBLICATION.values(i) for i in items], next_cursor


# --- titles and tags -------------------------------------------------------------------------


def add_title(client: Any, table: str, publication_id: str, title_id: str, name: str,
              tags: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    """A title and its tag edges, together."""
    latest(client, table, publication_id)  # NotFound for a publication that does not exist
    for value, field in [(title_id, "TitleId"), *((tag, "Tags") for tag in tags)]:
        if not value or "#" in value:
            raise Invalid(field, f"{field} must be non-empty and free of '#', got {value!r}")
    if len(tags) > store.TRANSACTION_LIMIT - 2:
        raise Invalid("Tags", f"a title takes at most {store.TRANSACTION_LIMIT - 2} tags")
    version = versions.next_version()
    base = {"PublicationId": publication_id, "TitleId": title_id}
    title = TITLE.item(base | {"Name": name, "PublishedAt": keys.iso_ms(datetime.now(UTC)), VERSION: version})
    edges = [TITLE_TAG.item(base | {"Tag": tag, VERSION: version}) for tag in sorted(set(tags))]
    try:
        store.transact(client, [store.put_action(table, title, new=True),
                                *(store.put_action(table, e, new=True) for e in edges)])  # fmt: skip
    except Conflict:
        raise Conflict(f"publication {publication_id!r} already has a title {title_id!r}") from None
    return TITLE.values(title) | {"Tags": sorted(set(tags))}


def _query(client: Any, table: str, publication_id: str, prefix: str) -> list[dict[str, Any]]:
    pages = store.pages(
        client, "query", TableName=table, KeyConditionExpression="PK = :pk AND begins_with(SK, :sk)",
        ExpressionAttributeValues=marshal({":pk": _collection(publication_id), ":sk": prefix}),
    )  # fmt: skip
    return [unmarshal(i) for page in pages for i in page["Items"]]


def titles(client: Any, table: str, publication_id: str, tag: str | None = None) -> list[dict[str, Any]]:
    """The publication's titles, or those with a tag: one Query either way."""
    if tag is None:
        return [TITLE.values(i) for i in _query(client, table, publication_id, TITLE.key_prefix("SK"))]
    edges = _query(client, table, publication_id, TITLE_TAG.key_prefix("SK", {"Tag": tag}))
    return [{"TitleId": e["TitleId"]} for e in edges]


def tags(client: Any, table: str, publication_id: str, title_id: str) -> list[str]:
    """A title's tags: one Query of the Inverted GSI, where the edge is keyed by its title."""
    index = MAIN.index("Inverted")
    values = {"PublicationId": publication_id, "TitleId": title_id}
    pages = store.pages(
        client, "query", TableName=table, IndexName=index.name,
        KeyConditionExpression=f"{index.partition.name} = :pk",
        ExpressionAttributeValues=marshal({":pk": TITLE_TAG.key_value(index.partition.name, values)}),
    )  # fmt: skip
    return [unmarshal(i)["Tag"] for page in pages for i in page["Items"]]
