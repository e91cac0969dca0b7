"""The value contract of every model: what both sides can store, defined once and checked wherever a
value enters (the HTTP edge, the application write API, the outbox's apply, the stream consumers).

DynamoDB (Developer Guide, "Quotas in Amazon DynamoDB" and "Supported data types"; what DynamoDB
Local 1.25.1 answers agrees, tests/integration/test_limits_agree.py):
- a number has at most 38 significant digits, magnitude 1E-130 to 9.9999999999999999999999999999999999999E+125
  ("DynamoDB only supports precision up to 38 digits", "Number overflow", "Number underflow");
- a partition key value is at most 2,048 bytes, a sort key value 1,024 (table and GSI keys alike);
- nested attributes go 32 levels deep (an attribute is level 1: a map in a map is level 2), and an
  attribute name (a map's key too) is 1 byte to 64 KB ("Empty attribute name");
- an item is at most 400 KB, attribute names included (`item_size`).
PostgreSQL: text and jsonb hold no NUL character; no driver encodes a lone surrogate (valid UTF-8
is what both sides store).

Each check returns what is wrong in words (None when the value fits); `Rejected` carries it to
a dead letter, `Invalid` to a 400 naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from decimal import (
    Clamped,
    Context,
    Decimal,
    Inexact,
    InvalidOperation,
    Overflow,
    Rounded,
    Subnormal,
    Underflow,
)
from typing import Any

from boto3.dynamodb.types import Binary

from hybridsync.model.errors import Rejected

DIGITS = 38
MAX_NUMBER = Decimal("9.9999999999999999999999999999999999999E+125")
MIN_NUMBER = Decimal("1E-130")
NUMBER_RANGE = "38 significant digits, magnitude 1E-130 to 9.99...E+125"
PARTITION_KEY_BYTES = 2048
SORT_KEY_BYTES = 1024
DEPTH = 32
NAME_BYTES = 65_535  # an attribute name, inside a map too: 1 byte to 64 KB
ITEM_BYTES = 400 * 1024
# The engine's arithmetic: DynamoDB's 38 digits, and a sum that would round raises instead.
ARITHMETIC = Context(
    prec=DIGITS, Emax=125, Emin=-130,
    traps=[Inexact, Rounded, Overflow, Underflow, Subnormal, Clamped, InvalidOperation],
)  # fmt: skip


def number_problem(value: Decimal | int) -> str | None:
    """Why DynamoDB cannot store this number, said of it (`has 39 significant digits...`); None
    when it can."""
    number = Decimal(value)
    if not number.is_finite():
        return "is not a number DynamoDB can store"
    if number.is_zero():
        return None
    digits = significant_digits(number)
    if digits > DIGITS:
        return f"has {digits} significant digits, over DynamoDB's {DIGITS}"
    if number.copy_abs() > MAX_NUMBER:  # abs() would round in the default 28-digit context
        return "has a magnitude over DynamoDB's 9.99...E+125"
    if number.copy_abs() < MIN_NUMBER:
        return "has a magnitude under DynamoDB's 1E-130"
    return None


def significant_digits(number: Decimal) -> int:
    """Digits without the trailing zeros DynamoDB drops (`3.50` is 3.5: two)."""
    digits = number.as_tuple().digits
    count = len(digits)
    while count > 1 and digits[count - 1] == 0:
        count -= 1
    return count


def text_problem(text: str) -> str | None:
    """Why neither side can store this text as it is, said of it; None when both can."""
    if "\x00" in text:
        return "holds a NUL character (\\u0000), which PostgreSQL cannot store"
    try:
        text.encode()
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate)"
    return None


def depth(value: Any) -> int:
    """Levels of nesting as DynamoDB counts them: a scalar is 1, a map or list one more than its
    deepest member (iterative, so a hostile value cannot exhaust the stack)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        current, level = pending.pop()
        deepest = max(deepest, level)
        if level > DEPTH:
            return level
        if isinstance(current, dict):
            pending += [(v, level + 1) for v in current.values()]
        elif isinstance(current, list | tuple):
            pending += [(v, level + 1) for v in current]
    return deepest


class Name(str):
    """A map key met by `walk`: an attribute name inside a value."""


def walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every scalar and map key (a `Name`) of a value with its path (`Attributes.size[2]`),
    iteratively."""
    pending = [(path, value)]
    while pending:
        where, current = pending.pop()
        if isinstance(current, dict):
            for k, v in current.items():
                yield f"{where}.{k}", Name(k)
                pending.append((f"{where}.{k}", v))
        elif isinstance(current, list | tuple | set | frozenset):
            pending += [(f"{where}[{n}]", v) for n, v in enumerate(current)]
        else:
            yield where, current


def value_problem(name: str, value: Any) -> str | None:
    """Why this attribute value (Python, as `unmarshal` gives) cannot be stored on both sides,
    naming where inside it; None when it can."""
    if depth(value) > DEPTH:
        return f"{name} is nested deeper than DynamoDB's {DEPTH} levels"
    for where, scalar in walk(value, name):
        problem: str | None
        if isinstance(scalar, Name) and not 1 <= len(scalar.encode("utf-8", "surrogatepass")) <= NAME_BYTES:
            problem = f"has an attribute name of {len(scalar)} characters in it (DynamoDB: 1 to 64 KB)"
            where = name
        elif isinstance(scalar, str):
            problem = text_problem(scalar)
        elif isinstance(scalar, Decimal | int) and not isinstance(scalar, bool):
            problem = number_problem(scalar)
        elif isinstance(scalar, float):
            problem = "is a float (numbers are Decimal, so they stay exact)"
        else:
            problem = None
        if problem:
            return f"{where} {problem}"
    return None


def check_values(values: dict[str, Any]) -> None:
    """Raise Rejected naming the first attribute whose value cannot be stored."""
    for name, value in values.items():
        if problem := value_problem(name, value):
            raise Rejected(problem)


# --- sizes: an item as DynamoDB counts it ------------------------------------------------------


def value_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))  # a hostile item is measured, not a crash
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int | Decimal):
        return (significant_digits(Decimal(value)) + 1) // 2 + 1
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, Binary):
        return len(value.value)
    if isinstance(value, dict):
        return 3 + sum(value_size(str(k)) + 1 + value_size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(1 + value_size(v) for v in value)
    if isinstance(value, set | frozenset):
        return sum(value_size(v) for v in value)
    raise TypeError(f"not a DynamoDB value: {type(value).__name__}")


def item_size(item: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for this item (Python values, as `unmarshal` gives them)."""
    return sum(value_size(name) + value_size(value) for name, value in item.items())


def check_item(item: dict[str, Any], partition_keys: Iterable[str], sort_keys: Iterable[str]) -> None:
    """Raise Rejected when the item breaks a limit: a value (`check_values`), a key attribute's
    size (the table's and every index's), or the item's size."""
    check_values(item)
    for names, limit, kind in ((partition_keys, PARTITION_KEY_BYTES, "partition"),
                               (sort_keys, SORT_KEY_BYTES, "sort")):  # fmt: skip
        for name in names:
            if name in item and (size := value_size(item[name])) > limit:
                raise Rejected(f"{name} is {size} bytes, over DynamoDB's {limit} for a {kind} key "
                               "(a value it is built from is too long)")  # fmt: skip
    if (size := item_size(item)) > ITEM_BYTES:
        raise Rejected(f"the item would be {size} bytes, over DynamoDB's {ITEM_BYTES} "
                       f"(its largest attribute is {largest(item)})")  # fmt: skip


def largest(values: dict[str, Any]) -> str:
    """The attribute taking the most bytes (what to name when an item is too large)."""
    return max(
        (name for name in values if values[name] is not None), key=lambda name: value_size(values[name])
    )
