"""What each access pattern costs for a described workload, beside its naive alternative: the
arithmetic behind `hybridsync cost`, from the capacity model's rules (no DynamoDB needed).

Bulk reads are priced page by page as DynamoDB charges them (items summed per 1 MB page, rounded
up to 4 KB), so a 2-billion-item scan is computed without listing 2 billion sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hybridsync.dynamodb import capacity
from hybridsync.dynamodb.capacity import PAGE_LIMIT, Cost


@dataclass(frozen=True)
class Row:
    pattern: str
    design: str
    cost: Cost
    per_second: float = 0.0  # how often the operation runs
    naive: bool = False

    @property
    def units_per_second(self) -> float:
        return (self.cost.read_units + self.cost.write_units) * self.per_second


def bulk_read(items: int, size: int, *, limit: int | None = None, consistent: bool = False) -> Cost:
    """Query/Scan pages over `items` items of `size` bytes: full pages priced once, times their
    count, then the last; an empty read is still one request."""
    per_page = max(1, min(limit or items or 1, PAGE_LIMIT // max(size, 1)))
    full, rest = divmod(items, per_page)
    units = full * capacity.read_units(per_page * size, consistent=consistent)
    if rest or not full:
        units += capacity.read_units(rest * size, consistent=consistent)
    return Cost(requests=full + (1 if rest or not full else 0), items_read=items, read_units=units)


def _scatter(items: int, size: int, shards: int) -> Cost:
    """A scatter read: the items spread evenly over the shards, one Query (or more) per shard."""
    cost, left = Cost(), items
    for shard in range(shards):
        share = left // (shards - shard)
        cost, left = cost + bulk_read(share, size), left - share
    return cost


def distinct_keys(keys: int, items_per_key: int, item_size: int, index_entry_size: int = 150) -> list[Row]:
    """Pattern 20: every partition key of a table whose collections hold many items."""
    skip = Cost(requests=keys + 1, items_read=keys,
                read_units=keys * capacity.read_units(item_size, consistent=False) + 0.5)  # fmt: skip
    return [
        Row("distinct keys", "full table scan", bulk_read(keys * items_per_key, item_size), naive=True),
        Row("distinct keys", "#static items, KEYS_ONLY index scan", bulk_read(keys, index_entry_size)),
        Row("distinct keys", "skip-scan: Limit=1, then past the collection", skip),
    ]


def time_range(days: int, items_per_day: int, entry_size: int, shards: int = 8,
               reads_per_s: float = 0.0) -> list[Row]:  # fmt: skip
    """Pattern 5: all orders of the last `days` days across customers."""
    per_day = Cost()
    for _ in range(days):
        per_day += bulk_read(items_per_day, entry_size)
    sharded = _scatter(days * items_per_day, entry_size, shards)
    return [
        Row("orders in a time range", "GSI partition per day", per_day, reads_per_s, naive=True),
        Row("orders in a time range", f"constant partition, {shards} shards", sharded, reads_per_s),
    ]


def selective(table_items: int, item_size: int, matching: int, entry_size: int,
              shards: int, reads_per_s: float = 0.0) -> list[Row]:  # fmt: skip
    """Patterns 8, 9: items with one status in a time range, by scan vs the sparse sharded index."""
    index = _scatter(matching, entry_size, shards)
    return [
        Row("open orders in a range", "scan with a filter", bulk_read(table_items, item_size), reads_per_s,
            naive=True),
        Row("open orders in a range", f"sparse index, {shards} shards", index, reads_per_s),
    ]  # fmt: skip


def price_change(static_size: int, small_size: int, writes_per_s: float = 0.0) -> list[Row]:
    """Pattern 16: a price change rewrites the small availability item, not the whole product."""
    combined = math.ceil((static_size + small_size) / capacity.WRITE_UNIT)
    split = math.ceil(small_size / capacity.WRITE_UNIT)
    return [
        Row("price change", "one combined product item", Cost(requests=1, write_units=combined),
            writes_per_s, naive=True),
        Row("price change", "vertical partition: availability item only", Cost(requests=1, write_units=split),
            writes_per_s),
    ]  # fmt: skip


def order_with_lines(lines: int, line_size: int, order_size: int, reads_per_s: float = 0.0) -> list[Row]:
    """Pattern 17: an order and its lines, one Query on the collection vs a GetItem each."""
    gets = Cost(requests=lines + 1, items_read=lines + 1,
                read_units=capacity.read_units(order_size, consistent=False)
                + lines * capacity.read_units(line_size, consistent=False))  # fmt: skip
    query = capacity.scan_cost([order_size] + [line_size] * lines)
    return [
        Row("order with its lines", "GetItem per item", gets, reads_per_s, naive=True),
        Row("order with its lines", "one Query on the item collection", query, reads_per_s),
    ]


def write_sharding(
    shards: int, items_per_period: int, entry_size: int, reads_per_s: float = 0.0
) -> list[Row]:
    """Pattern 7: a write-sharded constant partition, its suffix calculated from an attribute's
    hash or drawn at random. Writes spread evenly either way (random even when one value is hot);
    a period's read scatters over every shard either way; one item's read is one Query of the shard
    its attribute names when calculated, a Query of every shard when random (the item is in one)."""
    one = bulk_read(1, entry_size)
    empty = bulk_read(0, entry_size)  # an empty Query still costs a request and its minimum
    period = _scatter(items_per_period, entry_size, shards)
    return [
        Row("one item, sharded partition", f"random suffix: {shards} Queries",
            sum([empty] * (shards - 1), one), reads_per_s, naive=True),
        Row("one item, sharded partition", "calculated suffix: its shard's Query", one, reads_per_s),
        Row("a period, sharded partition", f"random suffix: {shards} Queries", period, reads_per_s,
            naive=True),
        Row("a period, sharded partition", f"calculated suffix: {shards} Queries", period, reads_per_s),
    ]  # fmt: skip


GB = 1024**3
PARALLEL_SCAN_GB = 20  # the seeds' threshold: below it a parallel scan is not warranted
GB_PER_SEGMENT = 2  # DynamoDB's guidance: start with one segment per 2 GB


@dataclass(frozen=True)
class ScanPlan:
    """What a full scan of a table costs and takes at a paced rate."""

    table_gb: float
    cost: Cost
    rate: float  # read units per second it is paced to
    minutes: float
    parallel: bool  # whether a parallel scan is warranted at this size
    segments: int  # the segments to start with if it is


def scan(table_gb: float, item_size: int = 500, rate: float = 100.0, consistent: bool = False) -> ScanPlan:
    """Pattern 21: a full scan of `table_gb`, in read units (1 MB pages: 128 eventually consistent,
    256 strongly) and in minutes at `rate` units/s; a parallel scan is warranted from 20 GB (when
    read capacity is spare and one sequential scan is too slow), one segment per 2 GB."""
    if table_gb <= 0 or rate <= 0 or item_size <= 0:
        raise ValueError("table size, rate and item size must be positive")
    items = math.ceil(table_gb * GB / item_size)
    cost = bulk_read(items, item_size, consistent=consistent)
    parallel = table_gb >= PARALLEL_SCAN_GB
    segments = max(1, math.ceil(table_gb / GB_PER_SEGMENT)) if parallel else 1
    return ScanPlan(table_gb, cost, rate, cost.read_units / rate / 60, parallel, segments)
