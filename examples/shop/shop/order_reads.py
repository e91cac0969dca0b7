"""Order reads: a customer's orders in a time range (pattern 2), all recent orders across customers
(the sharded time GSI, patterns 5 and 7), one order's entry in it (its shard computed, not
scattered), the open orders (the sparse GSI, patterns 8 and 9) and the orders of any status in a
time range (the open ones' index or its complement, pattern 8)."""

from __future__ import annotations

import heapq
from typing import Any

from hybridsync.dynamodb import store
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.keys import HIGHEST
from shop.model import MAIN, OPEN_STATUSES, ORDER, ORDER_STATUSES

HEADERS = MAIN.index("Inverted")  # the order headers in their customer's partition, no lines


def customer_orders(client: Any, table: str, customer_id: str, start: str, end: str) -> list[dict[str, Any]]:
    """Orders created in [start, end] (ISO-8601 prefixes), oldest first: one Query of the headers'
    copies in the Inverted index. The base collection interleaves each order with its lines
    (`ORDER#<time>#<id>`, then `...#LINE#0001`): a range there reads every line and pays for it."""
    assert HEADERS.sort is not None
    partition, sort = HEADERS.partition.name, HEADERS.sort.name
    sort_prefix = ORDER.key_prefix(sort)  # the orders' part of the partition, before their time
    pages = store.pages(
        client, "query", TableName=table, IndexName=HEADERS.name,
        KeyConditionExpression=f"{partition} = :pk AND {sort} BETWEEN :low AND :high",
        ExpressionAttributeValues=marshal({
            ":pk": ORDER.key_value(partition, {"CustomerId": customer_id}),
            ":low": sort_prefix + start, ":high": sort_prefix + end + HIGHEST,
        }),
    )  # fmt: skip
    return [unmarshal(i) for page in pages for i in page["Items"]]


def order_in_time_index(client: Any, table: str, order_id: str, created_at: str) -> dict[str, Any] | None:
    """One order's entry in OrdersByTime: its shard is computed from its id (calculated write
    sharding, pattern 7), so this is one Query, where a random suffix would query every shard."""
    index = MAIN.index("OrdersByTime")
    assert index.sort is not None
    partition = ORDER.key_value(index.partition.name, {"OrderId": order_id})
    page = client.query(
        TableName=table, IndexName=index.name,
        KeyConditionExpression=f"{index.partition.name} = :p AND {index.sort.name} = :at",
        ExpressionAttributeValues=marshal({":p": partition, ":at": created_at}),
    )  # fmt: skip
    return next((unmarshal(i) for i in page["Items"] if i["OrderId"]["S"] == order_id), None)


def _scatter(client: Any, table: str, index: str, n: int, newest_first: bool, start: str | None,
             end: str | None, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The first n orders of a write-sharded index with the sort key in [start, end] (ISO-8601
    prefixes; None leaves that side open): one Query per shard, each stopping at n, merged.
    `values` name the partition's non-shard part (a status)."""
    declared = MAIN.index(index)
    sort = declared.sort
    assert sort is not None
    condition, bounds = _time_range(sort.name, start, end)
    found = []
    for partition in ORDER.partitions(declared.partition.name, values):
        request = dict(
            TableName=table, IndexName=index,
            KeyConditionExpression=f"{declared.partition.name} = :p" + condition,
            ExpressionAttributeValues=marshal({":p": partition, **bounds}),
            ScanIndexForward=not newest_first,
        )  # fmt: skip
        wanted = n
        while wanted > 0:  # a shard's Query stops at 1 MB: page on until n or the end
            page = client.query(**request, Limit=wanted)
            found += [unmarshal(i) for i in page["Items"]]
            wanted -= len(page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    pick = heapq.nlargest if newest_first else heapq.nsmallest
    return pick(n, found, key=lambda i: (i[sort.name], i["OrderId"]))


def _time_range(attribute: str, start: str | None, end: str | None) -> tuple[str, dict[str, str]]:
    """A sort-key condition for [start, end]; `end` is a prefix, so all of its second (or day) counts."""
    if start and end:
        return f" AND {attribute} BETWEEN :low AND :high", {":low": start, ":high": end + HIGHEST}
    if start:
        return f" AND {attribute} >= :low", {":low": start}
    if end:
        return f" AND {attribute} <= :high", {":high": end + HIGHEST}
    return "", {}


def recent_orders(client: Any, table: str, since: str | None, n: int, *, until: str | None = None,
                  oldest_first: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """n orders created in [since, until] across all customers, newest first (or oldest first):
    one Query per shard of the sharded constant partition (pattern 5)."""
    return _scatter(client, table, "OrdersByTime", n, not oldest_first, since, until)


def open_orders(client: Any, table: str, n: int, *, since: str | None = None,
                until: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The n oldest orders still open, opened in [since, until]: the sparse, write-sharded index
    holds open orders only, so a time range is one Query per shard, never a scan (patterns 8, 9)."""
    return _scatter(client, table, "OpenOrders", n, False, since, until)


def orders_with_status(client: Any, table: str, status: str, n: int, *, since: str | None = None,
                       until: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """n orders of any status created in [since, until], newest first: an open status reads the
    sparse OpenOrders index, any other its complement OrdersByStatus (partitioned `<status>#<shard>`);
    one Query per shard either way, never a scan (pattern 8)."""
    if status not in ORDER_STATUSES:
        raise ValueError(f"status must be one of {', '.join(ORDER_STATUSES)}, got {status!r}")
    index = "OpenOrders" if status in OPEN_STATUSES else "OrdersByStatus"
    return _scatter(client, table, index, n, True, since, until, {"Status": status})
