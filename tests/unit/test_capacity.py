"""The capacity model against hand-computed figures for each rule, and the seeds' worked examples."""

from datetime import UTC, datetime

import pytest

from hybridsync.dynamodb import capacity
from hybridsync.dynamodb.scans import Pacer
from hybridsync.model.declare import Period, TimeSeries
from hybridsync.sizing import costs
from shop.model import EVENT_SERIES, MAIN

pytestmark = pytest.mark.unit

ORDER_ITEM = {"PK": "CUSTOMER#c1", "SK": "ORDER#2026-11-22T07:00:00.000Z#o1", "Entity": "Order",
              "OrderId": "o1", "CustomerId": "c1", "Status": "OPEN", "Total": 10,
              "CreatedAt": "2026-11-22T07:00:00.000Z", "TimeShard": "ORDERS#3",
              "OpenShard": "OPEN#1", "OrderOpenDate": "2026-11-22T07:00:00.000Z", "Version": 1}  # fmt: skip


def test_reads_round_up_to_4_kb_and_eventual_consistency_halves():
    assert capacity.read_units(1) == 1 and capacity.read_units(4096) == 1 and capacity.read_units(4097) == 2
    assert capacity.read_units(0, consistent=False) == 0.5  # every request costs something
    assert capacity.read_units(8192, consistent=False) == 1.0


def test_a_page_sums_its_items_before_rounding_and_pages_split_at_limit_and_1_mb():
    assert capacity.scan_cost([100] * 40).read_units == 0.5  # 4,000 bytes: one page, one unit halved
    paged = capacity.scan_cost([100] * 40, limit=10)
    assert (paged.requests, paged.items_read, paged.read_units) == (4, 40, 2.0)
    one_mb = capacity.scan_cost([4096] * 256)
    assert (one_mb.requests, one_mb.read_units) == (1, 128)  # pattern 21: 1 MB = 128 EC units
    assert capacity.scan_cost([4096] * 256, consistent=True).read_units == 256
    assert capacity.scan_cost([4096] * 257).requests == 2
    assert capacity.scan_cost([]).as_dict()["requests"] == 1  # an empty Query still costs a request


def test_bulk_read_prices_full_pages_like_page_by_page():
    for items, size, limit in ((1000, 700, None), (5, 100, 2), (0, 100, None), (3000, 4096, 100)):
        assert costs.bulk_read(items, size, limit=limit) == capacity.scan_cost([size] * items, limit=limit)


def test_writes_count_every_index_entry_written_moved_or_deleted():
    size = capacity.item_size(ORDER_ITEM)
    assert size < 1024
    # a new open order: the table item and its entries in OrdersByTime and OpenOrders
    assert capacity.write_cost(MAIN, None, ORDER_ITEM) == 3
    shipped = {k: v for k, v in ORDER_ITEM.items() if k not in ("OpenShard", "OrderOpenDate")} | {
        "Status": "SHIPPED", "Version": 2}  # fmt: skip
    # shipping: the table item, the OrdersByTime entry (Status is projected) rewritten, the
    # OpenOrders entry deleted
    assert capacity.write_cost(MAIN, ORDER_ITEM, shipped) == 3
    # a change to an attribute no index projects: the table item only
    assert capacity.write_cost(MAIN, ORDER_ITEM, ORDER_ITEM | {"Version": 2}) == 1
    moved = ORDER_ITEM | {"CreatedAt": "2026-11-23T07:00:00.000Z", "Version": 2}
    # the OrdersByTime entry moves (delete + put); OpenOrders projects CreatedAt: rewritten in place
    assert capacity.write_cost(MAIN, ORDER_ITEM, moved) == 1 + 2 + 1
    assert capacity.write_cost(MAIN, ORDER_ITEM, None) == 3  # the item and both entries deleted
    assert capacity.write_cost(MAIN, None, ORDER_ITEM, transactional=True) == 6


def test_large_items_and_their_entries_round_up_separately():
    big = ORDER_ITEM | {"Blob": "x" * 3000}  # not projected by the INCLUDE indexes
    assert capacity.write_cost(MAIN, None, big) == 4 + 1 + 1
    # the larger of the old and new image prices the table write
    assert capacity.write_cost(MAIN, big, ORDER_ITEM | {"Version": 2}) == 4


def test_index_entries_follow_the_projection():
    entry = capacity.index_entry(
        MAIN, "DistinctKeys", {"PK": "A", "SK": "#static", "StaticPK": "A", "Members": 3}
    )
    assert entry == {"PK": "A", "SK": "#static", "StaticPK": "A"}  # KEYS_ONLY
    assert capacity.index_entry(MAIN, "OpenOrders", {"PK": "A", "SK": "B"}) is None  # sparse


def test_the_seeds_worked_examples():
    day, constant = costs.time_range(days=4, items_per_day=1, entry_size=100, shards=1)
    assert (day.cost.requests, day.cost.read_units) == (4, 2.0)  # pattern 5: 4 requests, 2 units
    assert (constant.cost.requests, constant.cost.read_units) == (1, 0.5)  # 1 request, 0.5 units
    combined, split = costs.price_change(static_size=2700, small_size=300)
    assert (combined.cost.write_units, split.cost.write_units) == (
        3,
        1,
    )  # pattern 16: ~3 KB together, ~300 B apart
    scan, index, skip = costs.distinct_keys(2_000_000, 1000, 500, index_entry_size=150)
    # the seeds' 125,000,000 / 37,500 / 1,000,000, with 4 KB = 4,096 bytes instead of 4,000
    assert scan.cost.read_units == pytest.approx(125_000_000 * 4000 / 4096, rel=0.001)
    assert index.cost.read_units == pytest.approx(37_500 * 4000 / 4096, rel=0.001)
    assert skip.cost.read_units == 1_000_000.5  # 0.5 per key and the last, empty page
    gets, query = costs.order_with_lines(lines=5, line_size=300, order_size=400)
    assert (gets.cost.requests, gets.cost.read_units, query.cost.requests, query.cost.read_units) == (
        6,
        3,
        1,
        0.5,
    )


def test_costs_add_up_and_keep_what_dynamodb_reported():
    total = capacity.Cost(1, 2, 0.5, 0, None) + capacity.Cost(1, 3, 1.0, 2, 1.5)
    assert total == capacity.Cost(2, 5, 1.5, 2, 1.5)


def test_pacer_owes_each_pages_units_before_the_next_request():
    slept = []
    pacer = Pacer(rate=100, sleep=slept.append)
    pacer.spend(50)
    pacer.spend(50)
    assert slept and 0.9 < slept[-1] <= 1.0  # 100 units at 100/s: the second page waits ~1 s
    Pacer(rate=None, sleep=slept.append).spend(1e9)
    assert len(slept) == 2


def test_time_series_periods_and_table_names():
    now = datetime(2026, 11, 22, 13, 5, tzinfo=UTC)
    assert EVENT_SERIES.table_name("hybridsync", now) == "hybridsync-events-2026-11-22"
    assert EVENT_SERIES.label_of("hybridsync-events-2026-11-22", "hybridsync") == "2026-11-22"
    assert EVENT_SERIES.label_of("hybridsync-events-latest", "hybridsync") is None
    assert EVENT_SERIES.label_of("other-events-2026-11-22", "hybridsync") is None
    span = EVENT_SERIES.starts(datetime(2026, 11, 30, 23, tzinfo=UTC), datetime(2026, 12, 2, 1, tzinfo=UTC))
    assert [EVENT_SERIES.label(s) for s in span] == ["2026-11-30", "2026-12-01", "2026-12-02"]
    monthly = TimeSeries(EVENT_SERIES.entity, Period.MONTH, "At")
    assert monthly.label(monthly.step(monthly.start_of(now), 2)) == "2027-01"
    assert monthly.label(monthly.step(monthly.start_of(now), -11)) == "2025-12"
