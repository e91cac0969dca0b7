from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridsync.model import keys


def test_entity_keys_join_with_hash():
    assert keys.key("CUSTOMER", 42) == "CUSTOMER#42"
    assert keys.key("ORDER", "2026-11-22T07:00:00.000Z", "o-1") == "ORDER#2026-11-22T07:00:00.000Z#o-1"


def test_dynamodb_decimals_render_like_the_integers_they_are():
    assert keys.key("LINE", Decimal("7")) == "LINE#7"
    assert keys.key("LINE", Decimal("7E+1")) == "LINE#70"
    assert keys.key("PRICE", Decimal("2.50")) == "PRICE#2.50"


@pytest.mark.parametrize("prefix", ["", "A#B"])
def test_entity_prefix_must_be_a_plain_name(prefix):
    with pytest.raises(ValueError, match="entity prefix"):
        keys.key(prefix, 1)


def test_hierarchical_key_and_prefix_match_a_level_not_a_sibling():
    location = keys.hierarchical("US", "WA", "King", "Seattle", "Ballard")
    assert location == "US#WA#King#Seattle#Ballard"
    assert location.startswith(keys.hierarchy_prefix("US", "WA"))
    assert not "US#WASHINGTON#X".startswith(keys.hierarchy_prefix("US", "WA"))


@pytest.mark.parametrize("level", ["", "a#b"])
def test_hierarchy_levels_cannot_be_empty_or_contain_the_separator(level):
    with pytest.raises(ValueError, match="hierarchy level"):
        keys.hierarchical("US", level)


def test_shard_is_stable_and_known_for_a_value():
    # Pinned values: a change of hash function would strand every stored item in the wrong shard.
    assert [keys.shard_of(f"o-{n}", 8) for n in range(8)] == [5, 5, 4, 2, 6, 6, 4, 1]
    assert keys.shard_of(Decimal(7), 8) == keys.shard_of("7", 8)
    assert keys.sharded("ORDERS", "o-1", 8) == f"ORDERS#{keys.shard_of('o-1', 8)}"
    assert keys.shard_of("anything", 1) == 0


def test_shards_spread_evenly():
    counts = Counter(keys.shard_of(f"order-{n}", 8) for n in range(8000))
    assert set(counts) == set(range(8))
    assert max(counts.values()) < 1.15 * 1000


@given(st.text(), st.integers(min_value=1, max_value=500))
def test_shard_always_in_range(value, shards):
    assert 0 <= keys.shard_of(value, shards) < shards


def test_shard_count_must_be_positive():
    with pytest.raises(ValueError):
        keys.shard_of("x", 0)


def test_all_shards_lists_every_partition():
    assert keys.all_shards("OPEN", 3) == ["OPEN#0", "OPEN#1", "OPEN#2"]
    assert keys.sharded("SALES#2026-11-22", "p-1", 4) in keys.all_shards("SALES#2026-11-22", 4)


def test_iso_ms_is_fixed_width_utc():
    moment = datetime(2026, 11, 22, 8, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert keys.iso_ms(moment) == "2026-11-22T07:00:00.123Z"
    assert keys.parse_iso("2026-11-22T07:00:00.123Z") == datetime(2026, 11, 22, 7, 0, 0, 123000, tzinfo=UTC)
    with pytest.raises(ValueError):
        keys.iso_ms(datetime(2026, 1, 1))


@given(st.datetimes(timezones=st.just(UTC)), st.datetimes(timezones=st.just(UTC)))
def test_iso_ms_string_order_is_time_order(a, b):
    a, b = (
        a.replace(microsecond=a.microsecond // 1000 * 1000),
        b.replace(microsecond=b.microsecond // 1000 * 1000),
    )
    if a.year >= 1000 and b.year >= 1000:
        assert (keys.iso_ms(a) < keys.iso_ms(b)) == (a < b)
