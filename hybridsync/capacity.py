"""Capacity arithmetic: an item's size as DynamoDB counts it, and the read and write units it costs.

Sizes follow DynamoDB's rules (attribute names count; numbers take one byte per two significant
digits plus one; lists and maps 3 bytes plus one per element), so the 400 KB item limit is
computed before a write, never met by surprise.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import Binary

ITEM_LIMIT = 400 * 1024  # bytes, attribute names included
WRITE_UNIT = 1024  # one WCU writes up to 1 KB (transactions cost two)
READ_UNIT = 4096  # one RCU reads up to 4 KB strongly consistent (eventually consistent: half)


def value_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int | Decimal):
        digits = Decimal(value).normalize().as_tuple().digits
        return (len(digits) + 1) // 2 + 1
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, Binary):
        return len(value.value)
    if isinstance(value, dict):
        return 3 + sum(len(str(k).encode()) + 1 + value_size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(1 + value_size(v) for v in value)
    if isinstance(value, set | frozenset):
        return sum(value_size(v) for v in value)
    raise TypeError(f"not a DynamoDB value: {type(value).__name__}")


def item_size(item: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for this item (Python values, as `unmarshal` gives them)."""
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(item: dict[str, Any], *, transactional: bool = False) -> int:
    """Write units of one put of this item into the table (index writes not included)."""
    return max(1, math.ceil(item_size(item) / WRITE_UNIT)) * (2 if transactional else 1)


def read_units(size: int, *, consistent: bool = True) -> float:
    """Read units of reading `size` bytes (a GetItem's item, or a Query's summed items)."""
    units = max(1, math.ceil(size / READ_UNIT))
    return units if consistent else units / 2
