"""Pure key builders: `Entity#Value` keys, hierarchical keys, calculated write shards, ISO-8601 times."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import Decimal

SEPARATOR = "#"
HIGHEST = "\U0010ffff"  # sorts after every character a key can hold: the end of a prefix range


def key_text(value: object) -> str:
    """A key component as text: integral Decimals as integers, datetimes as ISO-8601 ms."""
    # DynamoDB hands numbers back as Decimal; an integral one must print as "7", not "7.0" or "7E+1".
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return str(int(value))
    if isinstance(value, datetime):
        return iso_ms(value)
    return str(value)


def key(entity: str, *values: object) -> str:
    """`key("CUSTOMER", 42)` -> `CUSTOMER#42`; several values nest: `ORDER#<time>#<id>`."""
    if not entity or SEPARATOR in entity:
        raise ValueError(f"entity prefix must be non-empty and free of {SEPARATOR!r}: {entity!r}")
    return SEPARATOR.join([entity, *(key_text(v) for v in values)])


def hierarchical(*levels: object) -> str:
    """`country#region#state#...`: a sort key queryable at every level with begins_with (pattern 3)."""
    parts = [key_text(level) for level in levels]
    for part in parts:
        if not part or SEPARATOR in part:
            raise ValueError(f"hierarchy level must be non-empty and free of {SEPARATOR!r}: {part!r}")
    return SEPARATOR.join(parts)


def hierarchy_prefix(*levels: object) -> str:
    """Prefix for `begins_with` that matches a level and everything below it, never a sibling
    whose name merely starts the same (`US#WA#` must not match `US#WASH...`)."""
    return hierarchical(*levels) + SEPARATOR


def shard_of(value: object, shards: int) -> int:
    """Calculated write shard in 0..shards-1 (pattern 7): stable across processes and releases
    (unlike `hash()`), so a reader can compute the shard of one known item."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    digest = hashlib.blake2b(key_text(value).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def sharded(prefix: str, value: object, shards: int) -> str:
    """`sharded("ORDERS", order_id, 8)` -> `ORDERS#5`: the GSI partition of one item. The prefix
    may itself be a key (`SALES#2026-11-22`)."""
    if not prefix:
        raise ValueError("shard prefix must be non-empty")
    return f"{prefix}{SEPARATOR}{shard_of(value, shards)}"


def all_shards(prefix: str, shards: int) -> list[str]:
    """Every partition a scatter-gather read must query."""
    return [f"{prefix}{SEPARATOR}{n}" for n in range(shards)]


def iso_ms(moment: datetime) -> str:
    """UTC ISO-8601 with milliseconds and `Z`: fixed width, so string order is time order."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)  # isoformat pads every year to 4 digits (strftime's %Y may not)
    return utc.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def parse_iso(text: str) -> datetime:
    """Inverse of `iso_ms` (accepts any ISO-8601 form with an offset or `Z`)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without a timezone: {text!r}")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is in year 10000 in UTC
        raise ValueError(f"{text!r} is outside the years 1 to 9999 in UTC") from None
