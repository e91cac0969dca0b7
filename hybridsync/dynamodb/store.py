"""DynamoDB item access: versioned writes (a write never replaces a newer version of the same item)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from hybridsync.dynamodb import cursors
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import DEFAULT_NAMES, Entity, Names
from hybridsync.model.errors import Conflict, Invalid, Rejected


def put_if_newer(client: Any, table_name: str, entity: Entity, item: dict[str, Any], *,
                 expired_before: int | None = None) -> bool:  # fmt: skip
    """Put the entity's item unless the table holds the same or a newer version of it; with
    `expired_before`, the same version may be replaced once its TTL attribute has passed (a cache
    refresh). False when the table kept its item."""
    version = entity.names.version
    condition = "attribute_not_exists(#v) OR #v < :v"
    names, values = {"#v": version}, {":v": item[version]}
    if expired_before is not None and entity.table.ttl_attribute:
        condition += " OR (#v = :v AND #x < :now)"
        names["#x"], values[":now"] = entity.table.ttl_attribute, expired_before
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
    return put_if_newer(client, table_name, entity, entity.item(values))


def delete(client: Any, table_name: str, entity: Entity, values: dict[str, Any], version: int) -> bool:
    """Delete the item if the table holds `version` or older; False when a newer one is there."""
    try:
        client.delete_item(
            TableName=table_name,
            Key=marshal(entity.key(values)),
            ConditionExpression="attribute_not_exists(#v) OR #v <= :v",
            ExpressionAttributeNames={"#v": entity.names.version},
            ExpressionAttributeValues={":v": {"N": str(version)}},
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def pages(client: Any, operation: str, **request: Any) -> Any:
    """Every page of a Query or Scan, following `LastEvaluatedKey` (boto3's paginator)."""
    return client.get_paginator(operation).paginate(**request)


# --- transactions: several items change together or not at all (TransactWriteItems, <= 100) --

TRANSACTION_LIMIT = 100
CONFLICT_RETRIES = 8  # a transaction cancelled by another one holding its items: sent again
CONFLICT_BACKOFF_S = 0.025  # full jitter up to 0.025 s x 2^attempt, at most 1 s


def put_action(table_name: str, item: dict[str, Any], *, new: bool = False, version: int | None = None,
               names: Names = DEFAULT_NAMES) -> dict[str, Any]:  # fmt: skip
    """A Put of the item, guarded: `new` -> the key must be free; `version` -> the stored item
    must still be that version (optimistic concurrency)."""
    put: dict[str, Any] = {"TableName": table_name, "Item": marshal(item)}
    if new:
        put["ConditionExpression"] = "attribute_not_exists(#v) AND attribute_not_exists(#e)"
        put["ExpressionAttributeNames"] = {"#v": names.version, "#e": names.entity}
    elif version is not None:
        put |= _version_guard(version, names)
    return {"Put": put}


def update_action(table_name: str, entity: Entity, stored: dict[str, Any], changes: dict[str, Any],
                  version: int) -> dict[str, Any]:  # fmt: skip
    """An Update of a stored item to its values plus `changes` and the new `version`, guarded by
    the stored version. Every key the model derives is recomputed: an attribute the new values no
    longer qualify for (a sparse index key when an order leaves OPEN) is REMOVEd, so no UpdateItem
    of ours leaves an item in an index it has left."""
    new = entity.item(entity.values(stored) | changes | {entity.names.version: version})
    table_keys = {a.name for a in entity.table.key_schema()}
    sets = {n: v for n, v in new.items() if n not in table_keys and stored.get(n) != v}
    removes = [n for n in stored if n not in new and n not in table_keys]
    names = {f"#a{i}": n for i, n in enumerate([*sets, *removes])}
    by_name = {n: alias for alias, n in names.items()}
    expression = "SET " + ", ".join(f"{by_name[n]} = :a{i}" for i, n in enumerate(sets))
    if removes:
        expression += " REMOVE " + ", ".join(by_name[n] for n in removes)
    held = stored.get(entity.names.version)
    guard = _version_guard(None if held is None else int(held), entity.names)
    values = marshal({f":a{i}": v for i, v in enumerate(sets.values())}) | guard.get(
        "ExpressionAttributeValues", {}
    )
    return {"Update": {
        "TableName": table_name, "Key": marshal(entity.key(new)), "UpdateExpression": expression,
        "ConditionExpression": guard["ConditionExpression"],
        "ExpressionAttributeNames": names | guard["ExpressionAttributeNames"],
        **({"ExpressionAttributeValues": values} if values else {}),
    }}  # fmt: skip


def delete_action(table_name: str, key: dict[str, Any], version: int | None,
                  names: Names = DEFAULT_NAMES) -> dict[str, Any]:  # fmt: skip
    return {"Delete": {"TableName": table_name, "Key": marshal(key), **_version_guard(version, names)}}


def _version_guard(version: int | None, names: Names = DEFAULT_NAMES) -> dict[str, Any]:
    """The item is still as read: at `version`, or still without one (a writer that keeps none)."""
    if version is None:
        return {
            "ConditionExpression": "attribute_not_exists(#gv)",
            "ExpressionAttributeNames": {"#gv": names.version},
        }
    return {
        "ConditionExpression": "#gv = :gv",
        "ExpressionAttributeNames": {"#gv": names.version},
        "ExpressionAttributeValues": {":gv": {"N": str(version)}},
    }


def transact(client: Any, actions: list[dict[str, Any]], *, token: str | None = None) -> int:
    """Apply the actions in one transaction; returns how many times a conflict was retried. A
    guard that fails raises Conflict carrying the per-action cancellation codes. A transaction
    cancelled because another transaction held one of its items (`TransactionConflict`) applied
    nothing: it is sent again in place, jittered, up to CONFLICT_RETRIES times, then raises
    Conflict. One action without a token goes as the plain conditional write: the same guard at
    half the write units (a transactional write costs two per KB)."""
    if len(actions) > TRANSACTION_LIMIT:
        raise ValueError(f"{len(actions)} actions, over the transaction limit of {TRANSACTION_LIMIT}")
    if len(actions) == 1 and token is None:
        _write(client, actions[0])
        return 0
    request: dict[str, Any] = {"TransactItems": actions}
    if token:
        request["ClientRequestToken"] = token
    try:
        return send_transaction(client, request)
    except client.exceptions.TransactionCanceledException as error:
        codes = cancellation_codes(error)
        if any(code in ("ThrottlingError", "ProvisionedThroughputExceeded") for code in codes):
            raise  # capacity, not a conflict: the caller's retry policy applies
        if "ValidationError" in codes:  # a value DynamoDB cannot store: the request's fault, not a race
            reasons = error.response.get("CancellationReasons", [])
            refusals = {r.get("Message", "") for r in reasons if r.get("Code") == "ValidationError"}
            raise Rejected("; ".join(sorted(refusals))) from None
        raise Conflict("the items changed meanwhile; read them again and retry", codes) from None
    except client.exceptions.TransactionConflictException:
        raise Conflict("a concurrent transaction is changing these items; retry") from None
    except client.exceptions.IdempotentParameterMismatchException:
        raise Conflict("this request token was used for a different request") from None


def send_transaction(
    client: Any, request: dict[str, Any], on_retry: Callable[[], None] = lambda: None
) -> int:
    """One TransactWriteItems request; returns how many times it was sent again. Cancelled by
    `TransactionConflict` alone (another transaction held one of its items), it applied nothing:
    sent again in place, jittered, up to CONFLICT_RETRIES times (`on_retry` before each). Any other
    cancellation, or the last conflict, raises TransactionCanceledException."""
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            client.transact_write_items(**request)
            return attempt
        except client.exceptions.TransactionCanceledException as error:
            codes = set(cancellation_codes(error))
            if attempt == CONFLICT_RETRIES or "TransactionConflict" not in codes or codes - CONFLICT_ONLY:
                raise
            on_retry()
            time.sleep(random.uniform(0, min(1.0, CONFLICT_BACKOFF_S * 2**attempt)))
    raise AssertionError("unreachable")


CONFLICT_ONLY = {"TransactionConflict", "None"}  # the codes of a cancellation worth sending again


def cancellation_codes(error: Any) -> list[str]:
    """Each action's code in a TransactionCanceledException ("None" for the ones that were fine)."""
    return [r.get("Code", "None") for r in error.response.get("CancellationReasons", [])]


def _write(client: Any, action: dict[str, Any]) -> None:
    """One Put, Update or Delete action as its own conditional request."""
    ((kind, request),) = action.items()
    call = {"Put": client.put_item, "Update": client.update_item, "Delete": client.delete_item}[kind]
    try:
        call(**request)
    except client.exceptions.ConditionalCheckFailedException:
        raise Conflict(
            "the item changed meanwhile; read it again and retry", ["ConditionalCheckFailed"]
        ) from None


def get(client: Any, table_name: str, key: dict[str, Any]) -> dict[str, Any] | None:
    """One item, strongly consistent (what a read-modify-write needs); None when absent."""
    got = client.get_item(TableName=table_name, Key=marshal(key), ConsistentRead=True)
    return unmarshal(got["Item"]) if "Item" in got else None


# --- paged reads: a page of items and an opaque cursor for the next ----------------------------

MAX_PAGE = 100


def page(
    client: Any, request: dict[str, Any], limit: int, cursor: str | None
) -> tuple[list[dict], str | None]:
    """One page of a Query: up to `limit` items and the cursor that continues after them (None at
    the end). The cursor is the LastEvaluatedKey, signed and bound to the request (`cursors`)."""
    if not 1 <= limit <= MAX_PAGE:
        raise Invalid("limit", f"limit must be from 1 to {MAX_PAGE}, got {limit}")
    request = request | {"Limit": limit}
    if cursor:
        request["ExclusiveStartKey"] = cursors.decode(cursor)
    answer = client.query(**request)
    last = answer.get("LastEvaluatedKey")
    following = cursors.encode(last) if last else None
    return [unmarshal(i) for i in answer["Items"]], following


def batch_write(client: Any, table: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem in 25s, resending what DynamoDB leaves unprocessed (with backoff)."""
    for start in range(0, len(requests), 25):
        pending = {table: requests[start : start + 25]}
        for attempt in range(10):
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
            time.sleep(min(1.0, 0.05 * 2**attempt))
        else:
            raise RuntimeError(f"{table}: items still unprocessed after 10 attempts")


BATCH_GET = 100  # keys per BatchGetItem


def batch_get(client: Any, table: str, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items at these keys (those that exist), strongly consistent: BatchGetItem in 100s,
    re-asking for what DynamoDB left unprocessed (with backoff)."""
    found = []
    for start in range(0, len(keys), BATCH_GET):
        pending: dict[str, Any] = {
            table: {"Keys": [marshal(k) for k in keys[start : start + BATCH_GET]], "ConsistentRead": True}
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
