"""Capacity arithmetic: an item's size as DynamoDB counts it, and the read and write units it costs.

Sizes follow DynamoDB's rules (attribute names count; numbers take one byte per two significant
digits plus one; lists and maps 3 bytes plus one per element), so the 400 KB item limit is
computed before a write, never met by surprise. Reads: 4 KB per unit, eventually consistent half;
a Query or Scan page sums its items' sizes before rounding; every request costs at least one
unit. Writes: 1 KB per unit, the larger of the before and after images; every index entry
written, moved (delete + put) or deleted is a write of its own; transactions double.

`Meter` asks DynamoDB for `ReturnConsumedCapacity` on every call of a client and keeps the model's
figure beside the one DynamoDB reports, so a deployed function logs both.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hybridsync.model.convert import unmarshal
from hybridsync.model.declare import Projection, Table

# sizes are defined with the limits; re-exported here, where the units are
from hybridsync.model.limits import ITEM_BYTES
from hybridsync.model.limits import item_size as item_size
from hybridsync.model.limits import value_size as value_size

ITEM_LIMIT = ITEM_BYTES  # bytes, attribute names included
WRITE_UNIT = 1024  # one WCU writes up to 1 KB (transactions cost two)
READ_UNIT = 4096  # one RCU reads up to 4 KB strongly consistent (eventually consistent: half)
PAGE_LIMIT = 1024 * 1024  # a Query or Scan page stops at 1 MB read


def units(size: int, *, transactional: bool = False) -> int:
    """Write units of writing `size` bytes: 1 per started KB, at least 1, doubled in a transaction."""
    return max(1, math.ceil(size / WRITE_UNIT)) * (2 if transactional else 1)


def write_units(item: dict[str, Any], *, transactional: bool = False) -> int:
    """Write units of one put of this item into the table (index writes not included)."""
    return units(item_size(item), transactional=transactional)


def read_units(size: int, *, consistent: bool = True) -> float:
    """Read units of reading `size` bytes (a GetItem's item, or a Query's summed items)."""
    units = max(1, math.ceil(size / READ_UNIT))
    return units if consistent else units / 2


def page_units(sizes: Iterable[int], *, consistent: bool = False) -> float:
    """Read units of one Query/Scan page: the items' sizes summed, then rounded up to 4 KB."""
    return read_units(sum(sizes), consistent=consistent)


@dataclass
class Cost:
    """What a piece of work costs: requests, items read, and units by the model; `consumed` is
    what DynamoDB reported (None when it did not)."""

    requests: int = 0
    items_read: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    consumed: float | None = None

    def __add__(self, other: Cost) -> Cost:
        consumed = (None if self.consumed is None and other.consumed is None
                    else (self.consumed or 0) + (other.consumed or 0))  # fmt: skip
        return Cost(self.requests + other.requests, self.items_read + other.items_read,
                    self.read_units + other.read_units, self.write_units + other.write_units,
                    consumed)  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "items_read": self.items_read,
                "read_units": round(self.read_units, 1), "write_units": round(self.write_units, 1),
                "consumed_units": None if self.consumed is None else round(self.consumed, 1)}  # fmt: skip


def scan_cost(sizes: Iterable[int], *, limit: int | None = None, consistent: bool = False) -> Cost:
    """Cost of reading items of these sizes with Query/Scan pages of at most `limit` items (and
    1 MB each), one request per page, even an empty last one."""
    cost, page, page_bytes = Cost(), 0, 0

    def close() -> None:
        nonlocal page, page_bytes
        cost.requests += 1
        cost.read_units += read_units(page_bytes, consistent=consistent)
        page, page_bytes = 0, 0

    for size in sizes:
        if (limit and page == limit) or page_bytes + size > PAGE_LIMIT:
            close()
        page, page_bytes = page + 1, page_bytes + size
        cost.items_read += 1
    close()
    return cost


def index_entry(table: Table, index_name: str, item: dict[str, Any] | None) -> dict[str, Any] | None:
    """The entry an item makes in a GSI, or None when it carries none of it (a sparse index)."""
    index = table.index(index_name)
    index_keys = [k.name for k in (index.partition, index.sort) if k is not None]
    if item is None or any(k not in item for k in index_keys):
        return None
    if index.projection is Projection.ALL:
        return dict(item)
    kept = {k.name for k in table.key_schema()} | set(index_keys)
    if index.projection is Projection.INCLUDE:
        kept |= set(index.non_key_attributes)
    return {n: v for n, v in item.items() if n in kept}


def write_cost(table: Table, before: dict[str, Any] | None, after: dict[str, Any] | None, *,
               transactional: bool = False) -> float:  # fmt: skip
    """Write units of one write that turns `before` into `after` (None: absent), indexes included:
    an entry that appears or disappears is one write, one whose keys change is two (delete and
    put), one whose projected values change is one, an unchanged one is free."""
    units = max(1, math.ceil(max(item_size(before or {}), item_size(after or {})) / WRITE_UNIT))
    for index in table.indexes:
        old, new = index_entry(table, index.name, before), index_entry(table, index.name, after)
        if old == new:
            continue
        keys = [k.name for k in (index.partition, index.sort) if k is not None]
        moved = old is not None and new is not None and any(old[k] != new[k] for k in keys)
        for entry in [old, new] if moved else [new if new is not None else old]:
            units += max(1, math.ceil(item_size(entry or {}) / WRITE_UNIT))
    return units * (2 if transactional else 1)


# --- metering a client: the model's figure beside DynamoDB's own ---------------------------------

_READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}


@dataclass
class Meter:
    """Counts every DynamoDB call of the clients it is attached to. Reads are priced by the model
    from the items returned (exact when no filter or projection trims them; a filter's discarded
    items are counted by `ScannedCount` but priced only if returned); DynamoDB's own figure is in
    `cost.consumed`."""

    cost: Cost = field(default_factory=Cost)
    by_operation: dict[str, Cost] = field(default_factory=dict)
    calls: list[tuple[str, Cost]] = field(default_factory=list)  # each request, in order
    _request: threading.local = field(default_factory=threading.local, repr=False)

    def attach(self, client: Any) -> Any:
        """Meter this client's calls (attaching the same client again changes nothing)."""
        if getattr(client.meta, "_hybridsync_meter", None) is not self:
            client.meta.events.register("provide-client-params.dynamodb.*", self._ask)
            client.meta.events.register("after-call.dynamodb.*", self._count)
            client.meta._hybridsync_meter = self
        return client

    def detach(self, client: Any) -> None:
        client.meta.events.unregister("provide-client-params.dynamodb.*", self._ask)
        client.meta.events.unregister("after-call.dynamodb.*", self._count)
        client.meta._hybridsync_meter = None

    def reset(self) -> Cost:
        spent, self.cost, self.by_operation, self.calls = self.cost, Cost(), {}, []
        return spent

    def _ask(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")
        # calls on a thread are serial; BatchGetItem asks it per table, inside RequestItems
        per_table = params.get("RequestItems") if model.name == "BatchGetItem" else None
        self._request.consistent = bool(params.get("ConsistentRead")) or any(
            bool(t.get("ConsistentRead")) for t in (per_table or {}).values() if isinstance(t, dict)
        )

    def _count(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if "Error" in parsed:
            return
        operation = model.name
        cost = Cost(requests=1, consumed=_consumed(parsed.get("ConsumedCapacity")))
        if operation in _READS:
            consistent = getattr(self._request, "consistent", False)
            if operation in ("Query", "Scan"):
                cost.items_read = parsed.get("ScannedCount", parsed.get("Count", 0))
                cost.read_units = page_units((_wire_size(i) for i in parsed.get("Items", [])),
                                             consistent=consistent)  # fmt: skip
            else:
                items = ([parsed["Item"]] if "Item" in parsed else
                         [i for found in parsed.get("Responses", {}).values() for i in found]
                         if isinstance(parsed.get("Responses"), dict) else
                         [r["Item"] for r in parsed.get("Responses", []) if "Item" in r])  # fmt: skip
                cost.items_read = len(items)
                cost.read_units = sum(read_units(_wire_size(i), consistent=consistent) for i in items) or (
                    read_units(0, consistent=consistent)
                )
                if operation == "TransactGetItems":  # a transactional read: two units per 4 KB
                    cost.read_units = 2 * sum(read_units(_wire_size(i), consistent=True) for i in items)
        self.cost += cost
        self.by_operation[operation] = self.by_operation.get(operation, Cost()) + cost
        self.calls.append((operation, cost))


def _consumed(reported: Any) -> float | None:
    if not reported:
        return None
    entries = reported if isinstance(reported, list) else [reported]
    return sum(float(e.get("CapacityUnits", 0)) for e in entries)


def _wire_size(item: dict[str, Any]) -> int:
    """item_size of an item in DynamoDB's wire form ({"S": ...})."""
    return item_size(unmarshal(item))
