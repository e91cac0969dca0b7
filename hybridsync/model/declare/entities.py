"""Entities and their fields: where an entity lives, how its keys are built, where it is
mastered, its SQL table; and the large bodies (pattern 18) an entity may keep by size."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from hybridsync.model import errors, keys, limits
from hybridsync.model.declare.builders import (
    Hierarchy,
    KeyBuilder,
    Sharded,
    Template,
    When,
    partitions_of,
    reads,
)
from hybridsync.model.declare.tables import DEFAULT_NAMES, FieldType, Names, Side, Table

# The Python values a default of each type may be (a timestamp as its ISO-8601 text).
DEFAULT_TYPES: dict[FieldType, tuple[type, ...]] = {
    FieldType.STRING: (str,),
    FieldType.INTEGER: (int,),
    FieldType.DECIMAL: (int, Decimal),
    FieldType.TIMESTAMP: (str,),
    FieldType.BOOLEAN: (bool,),
    FieldType.JSON: (dict, list),
    FieldType.BINARY: (bytes,),
}
# What a field's default may be (one of DEFAULT_TYPES' for its type; JSON: a dict or a list of any JSON)
FieldDefault = str | int | Decimal | bool | bytes | dict[str, Any] | list[Any] | None


@dataclass(frozen=True)
class Field:
    """One attribute of an entity and the SQL column it maps to. `default`: the value of an item
    or row that lacks it, what a field added to an existing entity needs (its column gets it as a
    server default, so the rows there take it; items written before it existed are written back
    with it). `scale`: a decimal's digits after the point, kept as declared (`12.30`). `min`, `max`:
    a number's range, inclusive (a quantity's `min=1`). Every field also has the limits both sides
    put on any value (`hybridsync.model.limits`)."""

    attribute: str
    type: FieldType
    column: str = ""
    required: bool = True
    max_length: int | None = None  # strings longer than this are rejected, not truncated
    default: FieldDefault = field(default=None, hash=False)
    scale: int | None = None
    min: Decimal | int | None = None
    max: Decimal | int | None = None

    def __post_init__(self) -> None:
        if not self.column:
            object.__setattr__(self, "column", _snake(self.attribute))
        allowed = DEFAULT_TYPES[self.type]
        if self.default is not None and (
            not isinstance(self.default, allowed) or (isinstance(self.default, bool) and bool not in allowed)
        ):
            names = " or ".join(t.__name__ for t in allowed)
            raise ValueError(f"{self.attribute}: the default of a {self.type.name} field is a {names}, "
                             f"not {self.default!r}")  # fmt: skip
        if self.type is FieldType.TIMESTAMP and isinstance(self.default, str):
            try:  # kept as items hold a timestamp
                object.__setattr__(self, "default", keys.iso_ms(keys.parse_iso(self.default)))
            except ValueError:
                why = f"{self.attribute}: its default is not an ISO-8601 time with a zone"
                raise ValueError(why) from None
        if self.type in (FieldType.INTEGER, FieldType.DECIMAL) and isinstance(self.default, int | Decimal):
            object.__setattr__(self, "default", Decimal(self.default))  # as DynamoDB numbers decode
        if self.scale is not None and (self.type is not FieldType.DECIMAL or not 0 <= self.scale <= 37):
            raise ValueError(f"{self.attribute}: a scale (0-37 digits after the point) is a DECIMAL's")
        for bound in ("min", "max"):
            if getattr(self, bound) is not None:
                if self.type not in (FieldType.INTEGER, FieldType.DECIMAL):
                    raise ValueError(f"{self.attribute}: {bound} is a number's (INTEGER or DECIMAL)")
                object.__setattr__(self, bound, Decimal(getattr(self, bound)))
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"{self.attribute}: its min {self.min} is over its max {self.max}")
        self._check_default()

    def _check_default(self) -> None:
        """A default is a value the field itself would take: one it would refuse fills every row and
        item that lacks it, and each is refused later, far from the declaration."""
        value, why = self.default, None
        if value is None:
            return
        if isinstance(value, Decimal):
            if self.min is not None and value < self.min:
                why = f"is under its min {self.min}"
            elif self.max is not None and value > self.max:
                why = f"is over its max {self.max}"
            elif self.scale is not None and value.as_tuple().exponent < -self.scale:  # type: ignore[operator]
                why = f"has more digits after the point than its scale, {self.scale}"
            else:
                why = limits.number_problem(value)
        elif isinstance(value, str):
            if self.max_length is not None and len(value) > self.max_length:
                why = f"is {len(value)} characters long, over its max_length {self.max_length}"
            else:
                why = limits.text_problem(value)
        if why:
            raise ValueError(f"{self.attribute}: its default {_shown(value)} {why}")


def _shown(value: Any) -> str:
    text = str(value) if isinstance(value, Decimal) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


@dataclass(frozen=True, eq=False)
class Entity:
    """An entity: where it lives, how its keys are built, where it is mastered, its SQL table.
    `managed=False`: its SQL table is the user's own (migrations leave it alone). `names` is set
    by the Model the entity belongs to."""

    name: str
    table: Table
    master: Side
    fields: tuple[Field, ...]
    keys: Mapping[str, KeyBuilder]
    sql_table: str | None = None
    sql_key: tuple[str, ...] = ()  # attributes forming the SQL primary key
    description: str = ""
    versioned: bool = field(default=True)
    managed: bool = True
    names: Names = DEFAULT_NAMES

    def __post_init__(self) -> None:
        missing = {a.name for a in self.table.key_schema()} - set(self.keys)
        if missing:
            raise ValueError(f"{self.name}: no builder for table key(s) {sorted(missing)}")
        if (self.sql_table is None) != (not self.sql_key):
            raise ValueError(f"{self.name}: sql_table and sql_key go together")
        unknown = set(self.sql_key) - {f.attribute for f in self.fields}
        if unknown:
            raise ValueError(f"{self.name}: sql_key names unknown attributes {sorted(unknown)}")

    def rename(self, names: Names) -> None:
        """Take the model's reserved names (what its version field is called, ...): a model binds
        its entities' names once, and what was derived from the old ones is derived again."""
        if names != self.names:
            object.__setattr__(self, "names", names)
            for derived in ("all_fields", "_fields_by_attribute", "sql_key_columns", "identity"):
                self.__dict__.pop(derived, None)

    @cached_property
    def all_fields(self) -> tuple[Field, ...]:
        """The declared fields plus the version every synced entity carries."""
        if not self.versioned:
            return self.fields
        return (*self.fields, Field(self.names.version, FieldType.INTEGER, column="version"))

    @cached_property
    def _fields_by_attribute(self) -> dict[str, Field]:
        return {f.attribute: f for f in self.all_fields}

    @cached_property
    def sql_key_columns(self) -> tuple[str, ...]:
        return tuple(self.field(a).column for a in self.sql_key)

    def field(self, attribute: str) -> Field:
        try:
            return self._fields_by_attribute[attribute]
        except KeyError:
            raise KeyError(f"{self.name} has no field {attribute!r}") from None

    def key(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The table's primary key of the item with these values. A key built from several values
        is checked as the key DynamoDB takes (each value within its field's limit may still make
        one over 2,048 bytes for a partition key, 1,024 for a sort key): `Invalid` names them."""
        out = {}
        for n, attr in enumerate(self.table.key_schema()):
            builder = self.keys[attr.name]
            value = builder(values)
            if value is None:
                raise ValueError(f"{self.name}: cannot build {attr.name} from {dict(values)!r}")
            limit = limits.PARTITION_KEY_BYTES if n == 0 else limits.SORT_KEY_BYTES
            if (size := limits.value_size(value)) > limit:
                fields, kind = ", ".join(sorted(reads(builder))) or attr.name, "sort" if n else "partition"
                why = f"they build {attr.name}, {size} bytes, over DynamoDB's {limit} for a {kind} key"
                raise errors.Invalid(fields, f"{fields}: {why}")
            out[attr.name] = value
        return out

    def key_value(self, attribute: str, values: Mapping[str, Any]) -> Any:
        """One key attribute of the item with these values (the partition key, an index key...)."""
        value = self.keys[attribute](values)
        if value is None:
            raise ValueError(f"{self.name}: cannot build {attribute} from {dict(values)!r}")
        return value

    def key_prefix(self, attribute: str, values: Mapping[str, Any] | None = None) -> str:
        """The `begins_with` prefix of a key attribute for the values known (see Template.prefix
        and Hierarchy.level_prefix)."""
        builder = self.keys[attribute]
        if isinstance(builder, Hierarchy):
            return builder.level_prefix(values or {})
        if not isinstance(builder, Template):
            raise TypeError(f"{self.name}.{attribute} is not a template key")
        return builder.prefix(values or {})

    def partitions(self, attribute: str, values: Mapping[str, Any] | None = None) -> list[str]:
        """Every value a (possibly write-sharded) partition key takes for these values: the
        partitions a scatter-gather read queries (pattern 7)."""
        return partitions_of(self.keys[attribute], values or {})

    def shards(self, attribute: str) -> int:
        builder = self.keys.get(attribute)
        builder = builder.then if isinstance(builder, When) else builder
        return builder.shards if isinstance(builder, Sharded) else 1

    @cached_property
    def identity(self) -> set[str]:
        """The attributes its primary key is built from: an item that changes one is another item."""
        return {name for a in self.table.key_schema() for name in reads(self.keys[a.name])}

    def values(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """The entity's own attributes of a stored item (no keys or bookkeeping)."""
        return {f.attribute: item[f.attribute] for f in self.all_fields if f.attribute in item}

    def item(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A complete item: its fields, entity tag and every key it qualifies for.

        Index keys that do not apply (sparse indexes) are left out, never written empty.
        """
        known = {f.attribute for f in self.all_fields} | {self.names.origin}
        if self.table.ttl_attribute:
            known.add(self.table.ttl_attribute)
        extra = set(values) - known
        if extra:
            raise ValueError(f"{self.name}: unknown attribute(s) {sorted(extra)}")
        defaults = {f.attribute: f.default for f in self.all_fields
                    if f.default is not None and values.get(f.attribute) is None}  # fmt: skip
        values = {**values, **defaults} if defaults else values
        for f in self.all_fields:
            if f.required and values.get(f.attribute) is None:
                raise ValueError(f"{self.name}: missing required attribute {f.attribute!r}")
        item = {k: v for k, v in values.items() if v is not None}
        item[self.names.entity] = self.name
        item.update(self.key(values))
        for name, build in self.keys.items():
            if name not in item:
                value = build(values)
                if value is not None:
                    item[name] = value
        limits.check_item(item, *self.table.key_names)
        return item


# --- large attributes (pattern 18): the fields an entity with a body of any size declares ----

BODY = {  # attribute -> what it holds; exactly one of the first, second, third (with its version) or last
    "Body": FieldType.STRING,  # small: as text
    "BodyGz": FieldType.BINARY,  # larger: gzip, in the item
    "ChunkCount": FieldType.INTEGER,  # larger still: gzip, chunked into a chunks table
    "ChunkVersion": FieldType.INTEGER,
    "BodyObject": FieldType.STRING,  # largest: gzip, an S3 object key
}


def body_fields() -> tuple[Field, ...]:
    """The fields of an entity whose body `hybridsync.dynamodb.large.Bodies` keeps by size, with the
    body's UTF-8 size (`BodyBytes`) wherever it is kept."""
    return (
        Field("BodyBytes", FieldType.INTEGER),
        *(Field(name, kind, required=False) for name, kind in BODY.items()),
    )


def chunks_of(name: str, table: Table) -> Entity:
    """The chunk entity of large bodies, in a table keyed by one string attribute:
    `<parentPK>#<parentSK>#<version>#<seq>`, so a new version never mixes with the old."""
    if table.sort is not None:
        raise ValueError(f"{table.name}: a chunks table has a simple (partition-only) key")
    return Entity(
        name,
        table,
        Side.DYNAMODB,
        description="one chunk of a large body (pattern 18)",
        fields=(
            Field("ParentPK", FieldType.STRING),
            Field("ParentSK", FieldType.STRING),
            Field("ChunkVersion", FieldType.INTEGER),
            Field("Seq", FieldType.INTEGER),
            Field("Data", FieldType.BINARY),
        ),
        keys={table.partition.name: Template("{ParentPK}#{ParentSK}#{ChunkVersion}#{Seq}")},
    )


@dataclass(frozen=True, eq=False)
class Bodies:
    """The large bodies of `entity` (whose fields include `body_fields()`), chunked into `chunks`
    (`chunks_of`), the largest in the model's `bodies` bucket under `object_prefix`. An engine
    function sweeps what a crashed writer left behind (`hybridsync.dynamodb.large.sweep`)."""

    entity: Entity
    chunks: Entity
    object_prefix: str

    def __post_init__(self) -> None:
        if self.entity.table.sort is None:
            raise ValueError(f"{self.entity.name}: large bodies need a parent table with a sort key")
        missing = set(BODY) - {f.attribute for f in self.entity.fields}
        if missing:
            raise ValueError(f"{self.entity.name} lacks the body fields {sorted(missing)} (body_fields())")
        if not self.object_prefix.endswith("/"):
            raise ValueError(f"{self.entity.name}: object_prefix {self.object_prefix!r} must end with '/'")

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.entity.table.key_schema())
