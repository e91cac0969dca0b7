"""Key builders: small callables the entities compose (`Template`, `Sharded`, `Copy`,
`Hierarchy`, `When`); each returns None to leave a key out (which is how an item stays out of
a sparse index)."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from hybridsync.model import keys

KeyBuilder = Callable[[Mapping[str, Any]], Any]


@runtime_checkable
class Partitioned(Protocol):
    """A key builder that also names every partition its key takes: a template's one, each shard
    of a sharded key (what a scatter-gather read queries)."""

    def __call__(self, values: Mapping[str, Any]) -> Any: ...

    def partitions(self, values: Mapping[str, Any]) -> list[str]: ...


def partitions_of(builder: KeyBuilder, values: Mapping[str, Any]) -> list[str]:
    """Every partition a key builder's key takes for these values (see `Partitioned`)."""
    if not isinstance(builder, Partitioned):
        raise TypeError(f"{builder!r} names no partitions (a Template, a Sharded or a When over one does)")
    return builder.partitions(values)


@dataclass(frozen=True)
class Template:
    """`Template("CUSTOMER#{CustomerId}")`; None when a placeholder has no value."""

    pattern: str

    def __call__(self, values: Mapping[str, Any]) -> str | None:
        try:
            return self.pattern.format_map(_KeyText(values))
        except _Missing:
            return None

    def prefix(self, values: Mapping[str, Any]) -> str:
        """The key rendered up to the first placeholder without a value, the text before it
        included: `ORDER#` for no values, `ORDER#<time>#` with the time. For `begins_with` and
        ranges, so that readers never spell a key themselves."""
        text = _KeyText(values)
        out = []
        for literal, name, spec, _ in string.Formatter().parse(self.pattern):
            out.append(literal)
            if name is None:
                break
            try:
                out.append(format(text[name], spec or ""))
            except _Missing:
                break
        return "".join(out)

    def partitions(self, values: Mapping[str, Any]) -> list[str]:
        value = self(values)
        if value is None:
            raise ValueError(f"cannot build {self.pattern!r} from {dict(values)!r}")
        return [value]

    @property
    def names(self) -> tuple[str, ...]:
        """The attributes the template's placeholders name, in order."""
        return tuple(name for _, name, _, _ in string.Formatter().parse(self.pattern) if name)

    @property
    def literal_head(self) -> str:
        """The text before the first placeholder (what every key it builds starts with)."""
        return next(iter(string.Formatter().parse(self.pattern)), ("",))[0]

    @cached_property
    def literal_length(self) -> int:
        """How many characters of every key it builds the template fixes."""
        return sum(len(literal) for literal, _, _, _ in string.Formatter().parse(self.pattern))

    @cached_property
    def _reader(self) -> tuple[re.Pattern[str], tuple[str, ...]]:
        regex, names = "", []
        for literal, name, _, _ in string.Formatter().parse(self.pattern):
            regex += re.escape(literal)
            if name:
                regex += "(?:.+?)" if name in names else "(.+?)"
                names += [] if name in names else [name]
        # DOTALL: a value may hold any character the value contract admits, line breaks included
        # (without it, `USER#a\r\nb` fit no template and its item was dead-lettered, never synced)
        return re.compile(regex + r"\Z", re.DOTALL), tuple(names)

    def read(self, key: str) -> dict[str, str] | None:
        """The placeholders' values (as text) of a key this template built, None if it does not
        fit: what recognises an item written before its entity's tag (hybridsync.sync.loads)."""
        regex, names = self._reader
        found = regex.match(key)
        return None if found is None else dict(zip(names, found.groups(), strict=True))


class _Missing(Exception):
    pass


class _KeyText(dict[str, Any]):
    """format_map view that renders values the way `keys` does and signals absent ones."""

    def __init__(self, values: Mapping[str, Any]):
        super().__init__()
        self._values = values

    def __missing__(self, name: str) -> Any:
        value = self._values.get(name)
        if value is None or value == "":
            raise _Missing(name)
        text = keys.key_text(value)
        # numbers stay numbers so a pattern can pad them (`{LineNo:04d}`); strings stay as given
        return int(text) if isinstance(value, int | Decimal) and text.lstrip("-").isdigit() else text


@dataclass(frozen=True)
class Sharded:
    """Calculated write shard: `Sharded("ORDERS", "OrderId", 8)` -> `ORDERS#5` (pattern 7). `by`
    names the attribute (or attributes, joined) whose hash picks the shard."""

    prefix: str
    by: str | tuple[str, ...]
    shards: int

    def _value(self, values: Mapping[str, Any]) -> str | None:
        names = (self.by,) if isinstance(self.by, str) else self.by
        parts = [values.get(name) for name in names]
        return None if any(p is None for p in parts) else keys.SEPARATOR.join(keys.key_text(p) for p in parts)

    def __call__(self, values: Mapping[str, Any]) -> str | None:
        prefix, value = Template(self.prefix)(values), self._value(values)
        if prefix is None or value is None:
            return None
        return keys.sharded(prefix, value, self.shards)

    def partitions(self, values: Mapping[str, Any]) -> list[str]:
        """Every shard of the partition: what a scatter-gather read queries."""
        prefix = Template(self.prefix)(values)
        if prefix is None:
            raise ValueError(f"cannot build {self.prefix!r} from {dict(values)!r}")
        return keys.all_shards(prefix, self.shards)


@dataclass(frozen=True)
class Copy:
    """The value of another attribute, e.g. a score as a GSI sort key."""

    attribute: str

    def __call__(self, values: Mapping[str, Any]) -> Any:
        return values.get(self.attribute)


@dataclass(frozen=True)
class Hierarchy:
    """`Hierarchy(("Region", "City", "StoreId"))` -> `WA#Seattle#s-1`: a key queryable at every
    level with `begins_with` (pattern 3). A level holding the separator is refused, not escaped."""

    levels: tuple[str, ...]
    prefix: str = ""  # a constant first level, e.g. the entity name of a partition key

    def __call__(self, values: Mapping[str, Any]) -> str | None:
        if any(values.get(level) in (None, "") for level in self.levels):
            return None
        return keys.hierarchical(*self._head(), *(values[level] for level in self.levels))

    def _head(self) -> tuple[str, ...]:
        return (self.prefix,) if self.prefix else ()

    def level_prefix(self, values: Mapping[str, Any]) -> str:
        """The `begins_with` prefix of the leading levels given (`WA#Seattle#`); "" for none."""
        known = []
        for level in self.levels:
            if values.get(level) in (None, ""):
                break
            known.append(values[level])
        if not known and not self.prefix:
            return ""
        return keys.hierarchy_prefix(*self._head(), *known)


@dataclass(frozen=True)
class When:
    """A key only while `attribute` is one of `allowed` (sparse index, pattern 9)."""

    attribute: str
    allowed: tuple[Any, ...]
    then: KeyBuilder

    def __call__(self, values: Mapping[str, Any]) -> Any:
        return self.then(values) if values.get(self.attribute) in self.allowed else None

    def partitions(self, values: Mapping[str, Any]) -> list[str]:
        return partitions_of(self.then, values)


def literal_head(builder: KeyBuilder) -> str | None:
    """The text every key of this builder starts with (for the reserved-prefix check); None when
    it starts with a value."""
    builder = builder.then if isinstance(builder, When) else builder
    if isinstance(builder, Template):
        return builder.literal_head
    if isinstance(builder, Sharded):
        return Template(builder.prefix).literal_head
    if isinstance(builder, Hierarchy):
        return builder.prefix or None
    return None


def reads(builder: KeyBuilder) -> set[str]:
    """The attributes a key builder reads: changing one of them moves the item (for a primary key)
    or its index entry."""
    if isinstance(builder, Template):
        return set(builder.names)
    if isinstance(builder, Sharded):
        return set(Template(builder.prefix).names) | (
            {builder.by} if isinstance(builder.by, str) else set(builder.by)
        )
    if isinstance(builder, Copy):
        return {builder.attribute}
    if isinstance(builder, Hierarchy):
        return set(builder.levels)
    if isinstance(builder, When):
        return {builder.attribute} | reads(builder.then)
    return set()
