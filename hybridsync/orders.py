"""Order reads: a customer's orders in a time range (pattern 2), all recent orders across customers
(the sharded time GSI, patterns 5 and 7) and the open orders (the sparse GSI, patterns 8 and 9)."""

from __future__ import annotations

import heapq
from typing import Any

from hybridsync import keys, store
from hybridsync.model import MAIN, ORDER

HIGHEST = "\U0010ffff"  # sorts after every character a key can hold


def customer_orders(client: Any, table: str, customer_id: str, start: str, end: str) -> list[dict[str, Any]]:
    """Orders created in [start, end] (ISO-8601 prefixes), oldest first: one Query on the
    customer's item collection; the lines sharing it are filtered out."""
    low = f"ORDER#{start}"
    high = f"ORDER#{end}{HIGHEST}"
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "PK = :pk AND SK BETWEEN :low AND :high",
        "FilterExpression": "Entity = :order",
        "ExpressionAttributeValues": store.marshal(
            {":pk": f"CUSTOMER#{customer_id}", ":low": low, ":high": high, ":order": ORDER.name}
        ),
    }
    while True:
        page = client.query(**request)
        items += [store.unmarshal(i) for i in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _scatter(client: Any, table: str, index: str, prefix: str, condition: str, values: dict, n: int,
             newest_first: bool) -> list[dict[str, Any]]:  # fmt: skip
    declared = MAIN.index(index)
    sort = declared.sort
    assert sort is not None
    key_condition = f"{declared.partition.name} = :p" + (f" AND {condition}" if condition else "")
    found = []
    for partition in keys.all_shards(prefix, declared.shards):
        page = client.query(
            TableName=table, IndexName=index, KeyConditionExpression=key_condition,
            ExpressionAttributeValues=store.marshal({":p": partition, **values}),
            ScanIndexForward=not newest_first, Limit=n,
        )  # fmt: skip
        found += [store.unmarshal(i) for i in page["Items"]]
    pick = heapq.nlargest if newest_first else heapq.nsmallest
    return pick(n, found, key=lambda i: (i[sort.name], i["OrderId"]))


def recent_orders(client: Any, table: str, since: str, n: int) -> list[dict[str, Any]]:
    """The newest n orders created at or after `since`, across all customers: one Query per shard."""
    return _scatter(
        client, table, "OrdersByTime", "ORDERS", "CreatedAt >= :since", {":since": since}, n, True
    )


def open_orders(client: Any, table: str, n: int) -> list[dict[str, Any]]:
    """The n oldest open orders: the sparse index holds open orders only."""
    return _scatter(client, table, "OpenOrders", "OPEN", "", {}, n, False)
