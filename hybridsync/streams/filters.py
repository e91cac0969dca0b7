"""Lambda event filtering (an event source mapping's FilterCriteria), evaluated as Lambda does.

A record passes when any pattern matches it. A pattern is an object whose keys mirror the record's:
an object value descends, a list value is the leaf's rules (any rule matching any value of the
field: OR), several keys must all match (AND), and `$or` holds alternative sub-patterns. Rules:

  "text", 12, true, null, ""           equals (null: the field is present and null; "": empty); a
                                        number equals only the number written the same way (300 is
                                        not 300.0 nor 3.0e2, as in AWS)
  {"equals-ignore-case": "text"}
  {"prefix": "p"}  {"suffix": "s"}      either may take {"equals-ignore-case": ...}
  {"anything-but": x}                   present and not x (a value, a list, or a prefix/suffix rule)
  {"numeric": [">", 0, "<=", 5]}        JSON numbers only (DynamoDB's "N" values are strings)
  {"exists": true | false}              on leaves only; false also matches under a missing parent

A pattern is checked when it is parsed (`parse`), as Lambda checks it when the mapping is
created: one it would refuse raises InvalidPattern with Lambda's message. An operator this evaluator
does not know raises ValueError, so a pattern never silently passes all.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

_ABSENT = object()
LAMBDA_REFUSAL = "Invalid filter pattern definition."  # InvalidParameterValueException's message


class InvalidPattern(ValueError):
    """A pattern Lambda refuses when the mapping is created (InvalidParameterValueException)."""


class _Number(float):
    """A JSON number of a pattern, with the text it was written as (AWS compares that text)."""

    text: str

    def __new__(cls, text: str) -> _Number:
        number = super().__new__(cls, text)
        number.text = text
        return number


def parse(text: str) -> dict[str, Any]:
    """A FilterCriteria pattern from its JSON text, checked as Lambda checks it."""
    try:
        pattern = json.loads(text, parse_float=_Number, parse_int=lambda t: int(t))
    except ValueError:
        raise InvalidPattern(LAMBDA_REFUSAL) from None
    check(pattern)
    return pattern


def check(pattern: Any) -> None:
    """Raise InvalidPattern unless `pattern` is one Lambda accepts: an object whose values are
    objects (descending) or lists of rules, with `$or` holding a list of such objects."""
    if not isinstance(pattern, Mapping) or not pattern:
        raise InvalidPattern(LAMBDA_REFUSAL)
    for name, rule in pattern.items():
        if name == "$or":
            if not isinstance(rule, list) or len(rule) < 2:
                raise InvalidPattern(LAMBDA_REFUSAL)
            for alternative in rule:
                check(alternative)
        elif isinstance(rule, Mapping):
            check(rule)
        elif isinstance(rule, list) and rule:
            for leaf in rule:
                if isinstance(leaf, list):
                    raise InvalidPattern(LAMBDA_REFUSAL)
                if isinstance(leaf, Mapping):
                    try:
                        _rule(leaf, "")  # its operator and arguments are checked on the way
                    except ValueError:
                        raise InvalidPattern(LAMBDA_REFUSAL) from None
        else:
            raise InvalidPattern(LAMBDA_REFUSAL)


_NUMERIC: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip


def admits(patterns: Iterable[Mapping[str, Any]], record: Mapping[str, Any]) -> bool:
    """Whether an event source mapping with these filter patterns delivers the record. No
    patterns: everything is delivered."""
    patterns = list(patterns)
    return not patterns or any(matches(pattern, record) for pattern in patterns)


def matches(pattern: Mapping[str, Any], event: Any) -> bool:
    """One pattern against one (sub-)event."""
    for name, rule in pattern.items():
        if name == "$or":
            if not isinstance(rule, list) or not any(matches(p, event) for p in rule):
                return False
            continue
        value = event.get(name, _ABSENT) if isinstance(event, Mapping) else _ABSENT
        if isinstance(rule, Mapping):
            if not matches(rule, value if isinstance(value, Mapping) else {}):
                return False
        elif isinstance(rule, list):
            if not _leaf(rule, value):
                return False
        else:
            raise ValueError(f"filter rule for {name!r} must be an object or a list, got {rule!r}")
    return True


def _leaf(rules: Sequence[Any], value: Any) -> bool:
    if isinstance(value, Mapping):
        value = _ABSENT  # rules apply to leaves: an object is not a value they can match
    values = value if isinstance(value, list) else [value]
    return any(_rule(rule, v) for rule in rules for v in values)


def _rule(rule: Any, value: Any) -> bool:
    if not isinstance(rule, Mapping):
        return value is not _ABSENT and _equals(rule, value)
    if len(rule) != 1:
        raise ValueError(f"a filter rule holds one operator, got {dict(rule)!r}")
    ((op, arg),) = rule.items()
    if op == "exists":
        if not isinstance(arg, bool):
            raise ValueError(f"exists takes true or false, got {arg!r}")
        return (value is not _ABSENT) == arg
    if value is _ABSENT:
        return False
    if op == "anything-but":
        return not _anything(arg, value)
    if op == "numeric":
        return _numeric(arg, value)
    if op in ("prefix", "suffix", "equals-ignore-case"):
        return _text(op, arg, value)
    raise ValueError(f"unknown filter operator {op!r}")


def _equals(expected: Any, value: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool) or expected is None or value is None:
        return type(expected) is type(value) and expected == value
    if isinstance(expected, int | float) and isinstance(value, int | float):
        return _written(expected) == _written(value)
    return isinstance(value, str) and isinstance(expected, str) and expected == value


def _written(number: float) -> str:
    return getattr(number, "text", None) or json.dumps(number)


def _anything(arg: Any, value: Any) -> bool:
    """Whether `value` is one of what anything-but excludes."""
    if isinstance(arg, Mapping):
        return _rule(arg, value)
    return any(_equals(excluded, value) for excluded in (arg if isinstance(arg, list) else [arg]))


def _text(op: str, arg: Any, value: Any) -> bool:
    fold = isinstance(arg, Mapping)
    if fold:
        if set(arg) != {"equals-ignore-case"} or op == "equals-ignore-case":
            raise ValueError(f"{op} takes a string or {{'equals-ignore-case': ...}}, got {arg!r}")
        arg = arg["equals-ignore-case"]
    if not isinstance(arg, str):
        raise ValueError(f"{op} takes a string, got {arg!r}")
    if not isinstance(value, str):
        return False
    if fold or op == "equals-ignore-case":
        arg, value = arg.casefold(), value.casefold()
    if op == "prefix":
        return value.startswith(arg)
    if op == "suffix":
        return value.endswith(arg)
    return value == arg


def _numeric(arg: Any, value: Any) -> bool:
    if not isinstance(arg, list) or not arg or len(arg) % 2 or len(arg) > 4:
        raise ValueError(f"numeric takes [op, n] or [op, n, op, n], got {arg!r}")
    comparisons = list(zip(arg[::2], arg[1::2], strict=True))
    for op, bound in comparisons:
        if op not in _NUMERIC or isinstance(bound, bool) or not isinstance(bound, int | float):
            raise ValueError(f"numeric comparison {op!r} {bound!r} is not one Lambda accepts")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return all(_NUMERIC[op](value, bound) for op, bound in comparisons)
