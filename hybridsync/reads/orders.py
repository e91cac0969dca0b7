"""Order reads: a customer's orders in a time range (pattern 2), all recent orders across customers
(the sharded time GSI, patterns 5 and 7) and the open orders (the sparse GSI, patterns 8 and 9)."""

from __future__ import annotations

import heapq
from typing import Any

from hybridsync import store
from hybridsync.convert import marshal, unmarshal
from hybridsync.model import ENTITY, MAIN, ORDER

HIGHEST = "\U0010ffff"  # sorts after every character a key can hold


def customer_orders(client: Any, table: str, customer_id: str, start: str, end: str) -> list[dict[str, Any]]:
    """Orders created in [start, end] (ISO-8601 prefixes), oldest first: one Query on the
    customer's item collection; the lines sharing it are filtered out."""
    sort_prefix = ORDER.key_prefix("SK")  # the orders' part of the collection, before their time
    pages = store.pages(
        client, "query", TableName=table,
        KeyConditionExpression="PK = :pk AND SK BETWEEN :low AND :high",
        FilterExpression="#entity = :order",
        ExpressionAttributeNames={"#entity": ENTITY},
        ExpressionAttributeValues=marshal({
            ":pk": ORDER.key_value("PK", {"CustomerId": customer_id}),
            ":low": sort_prefix + start, ":high": sort_prefix + end + HIGHEST, ":order": ORDER.name,
        }),
    )  # fmt: skip
    return [unmarshal(i) for page in pages for i in page["Items"]]


def _scatter(client: Any, table: str, index: str, condition: str, values: dict, n: int,
             newest_first: bool) -> list[dict[str, Any]]:  # fmt: skip
    """The first n orders of a write-sharded index: one Query per shard, merged."""
    declared = MAIN.index(index)
    sort = declared.sort
    assert sort is not None
    key_condition = f"{declared.partition.name} = :p" + (f" AND {condition}" if condition else "")
    found = []
    for partition in ORDER.partitions(declared.partition.name):
        page = client.query(
            TableName=table, IndexName=index, KeyConditionExpression=key_condition,
            ExpressionAttributeValues=marshal({":p": partition, **values}),
            ScanIndexForward=not newest_first, Limit=n,
        )  # fmt: skip
        found += [unmarshal(i) for i in page["Items"]]
    pick = heapq.nlargest if newest_first else heapq.nsmallest
    return pick(n, found, key=lambda i: (i[sort.name], i["OrderId"]))


def recent_orders(client: Any, table: str, since: str, n: int) -> list[dict[str, Any]]:
    """The newest n orders created at or after `since`, across all customers: one Query per shard."""
    return _scatter(client, table, "OrdersByTime", "CreatedAt >= :since", {":since": since}, n, True)


def open_orders(client: Any, table: str, n: int) -> list[dict[str, Any]]:
    """The n oldest open orders: the sparse index holds open orders only."""
    return _scatter(client, table, "OpenOrders", "", {}, n, False)
