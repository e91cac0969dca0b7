"""The language a model is declared in: tables, keys, indexes, entities, reserved names,
aggregates and time series. A team declares its model with these, in its own package, once;
the engine renders everything else from that one declaration (the CDK stacks, the local tables,
the SQL schema and its migrations, the stream filters, the key of every item it writes).

    from hybridsync.model.declare import *

    MAIN = Table("main", partition=KeyAttribute("PK"), sort=KeyAttribute("SK"), stream=NEW_AND_OLD_IMAGES)
    INVOICE = Entity("Invoice", MAIN, Side.DYNAMODB, fields=(...),
                     keys={"PK": Template("INVOICE#{InvoiceId}"),
                     "SK": Template("DETAILS")}, sql_table="invoices", sql_key=("InvoiceId",))
    MODEL = Model(tables=(MAIN,), entities=(INVOICE,))
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import Enum, StrEnum
from functools import cached_property
from typing import Any

from hybridsync.model import errors, keys, limits

ID_LENGTH = 128  # a sensible limit for ids; a field's max_length says its own


@dataclass(frozen=True)
class Names:
    """The attributes the engine adds to every item it writes, named as the model says (the
    defaults are the engine's own): which entity an item is (how a stream record is routed), its
    version (grows on every write, across delete and re-create: the order-safety guard) and its
    origin (`origin_sql` when the SQL -> DynamoDB propagation wrote it: never written back)."""

    entity: str = "Entity"
    version: str = "Version"
    origin: str = "Origin"
    origin_sql: str = "sql"


DEFAULT_NAMES = Names()


class Side(StrEnum):
    """Where an entity is mastered; the other side holds a view the pipeline keeps in sync."""

    DYNAMODB = "dynamodb"  # written in DynamoDB, written back to PostgreSQL
    POSTGRESQL = "postgresql"  # written in PostgreSQL, cached / propagated into DynamoDB
    DERIVED = "derived"  # computed by the pipeline (aggregates, its bookkeeping); no SQL table


class FieldType(Enum):
    """A value's type on both sides: (DynamoDB attribute type, SQL type name)."""

    STRING = ("S", "text")
    INTEGER = ("N", "bigint")
    DECIMAL = ("N", "numeric")
    TIMESTAMP = ("S", "timestamptz")  # ISO-8601 ms UTC string in DynamoDB (sorts as time)
    BOOLEAN = ("BOOL", "boolean")
    JSON = ("M", "jsonb")  # nested maps, lists and sets
    BINARY = ("B", "bytea")  # e.g. a gzip-compressed body (pattern 18)

    @property
    def dynamodb(self) -> str:
        return self.value[0]

    @property
    def sql(self) -> str:
        return self.value[1]


class Projection(StrEnum):
    ALL = "ALL"
    KEYS_ONLY = "KEYS_ONLY"
    INCLUDE = "INCLUDE"


class StreamView(StrEnum):
    NEW_AND_OLD_IMAGES = "NEW_AND_OLD_IMAGES"


NEW_AND_OLD_IMAGES = StreamView.NEW_AND_OLD_IMAGES
# Where a table's changes are read from: its DynamoDB stream, or Kinesis Data Streams for DynamoDB.
CHANGE_SOURCES = ("dynamodb", "kinesis")


@dataclass(frozen=True)
class KeyAttribute:
    name: str
    type: str = "S"  # S | N | B


@dataclass(frozen=True)
class Index:
    """A GSI. Whether its partitions are write-sharded is said by the entities' key builders."""

    name: str
    partition: KeyAttribute
    sort: KeyAttribute | None
    projection: Projection
    purpose: str
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    """A DynamoDB table. `name` is logical; deployments prefix it (`hybridsync-main`).
    `distinct_index`: a KEYS_ONLY index keyed on the engine's `#static` items, one per item
    collection the write path fills, so listing every partition key reads it, not the table.
    `change_source`: where its changes are read from, `"dynamodb"` (its DynamoDB stream) or
    `"kinesis"` (Kinesis Data Streams for DynamoDB); None: the app's `-c change_source`."""

    name: str
    partition: KeyAttribute
    sort: KeyAttribute | None = None
    indexes: tuple[Index, ...] = ()
    stream: StreamView | None = None
    ttl_attribute: str | None = None
    purpose: str = ""
    distinct_index: str | None = None
    change_source: str | None = None

    def __post_init__(self) -> None:
        if self.change_source not in (None, *CHANGE_SOURCES):
            raise ValueError(
                f"table {self.name!r}: change_source must be one of {CHANGE_SOURCES}, "
                f"not {self.change_source!r}"
            )

    def index(self, name: str) -> Index:
        for index in self.indexes:
            if index.name == name:
                return index
        raise KeyError(f"table {self.name!r} has no index {name!r}")

    def key_schema(self) -> list[KeyAttribute]:
        return [self.partition] + ([self.sort] if self.sort else [])

    @cached_property
    def key_names(self) -> tuple[frozenset[str], frozenset[str]]:
        """The partition and the sort key attributes of the table and its indexes (their limits
        differ: 2,048 and 1,024 bytes)."""
        partitions = {self.partition.name} | {i.partition.name for i in self.indexes}
        sorts = {k.name for k in (self.sort, *(i.sort for i in self.indexes)) if k}
        return frozenset(partitions), frozenset(sorts - partitions)

    def create_request(self, name: str, capacity: tuple[int, int] | None = None) -> dict[str, Any]:
        """The CreateTable call for this declaration (the CDK data stack renders the same one):
        on demand, or provisioned with (read, write) `capacity` for the table and each index."""

        def key_schema(partition: KeyAttribute, sort: KeyAttribute | None) -> list[dict[str, str]]:
            schema = [{"AttributeName": partition.name, "KeyType": "HASH"}]
            return schema + ([{"AttributeName": sort.name, "KeyType": "RANGE"}] if sort else [])

        throughput = capacity and {"ReadCapacityUnits": capacity[0], "WriteCapacityUnits": capacity[1]}
        request: dict[str, Any] = {
            "TableName": name,
            "KeySchema": key_schema(self.partition, self.sort),
            "AttributeDefinitions": [
                {"AttributeName": a.name, "AttributeType": a.type} for a in self.attribute_definitions()
            ],
        } | (
            {"BillingMode": "PROVISIONED", "ProvisionedThroughput": throughput}
            if throughput
            else {"BillingMode": "PAY_PER_REQUEST"}
        )
        if self.indexes:
            request["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": key_schema(index.partition, index.sort),
                    "Projection": {"ProjectionType": index.projection.value}
                    | (
                        {"NonKeyAttributes": list(index.non_key_attributes)}
                        if index.non_key_attributes
                        else {}
                    ),
                }
                | ({"ProvisionedThroughput": throughput} if throughput else {})
                for index in self.indexes
            ]
        if self.stream:
            request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": self.stream.value}
        return request

    def attribute_definitions(self) -> list[KeyAttribute]:
        """Every key attribute of the table and its indexes, once (what CreateTable wants)."""
        seen: dict[str, KeyAttribute] = {}
        for attr in self.key_schema() + [
            a for i in self.indexes for a in (i.partition, i.sort) if a is not None
        ]:
            if seen.setdefault(attr.name, attr).type != attr.type:
                raise ValueError(f"{self.name}: key attribute {attr.name} declared with two types")
        return list(seen.values())


# --- key builders: small callables the entities compose; each returns None to leave a key out
# (which is how an item stays out of a sparse index).

KeyBuilder = Callable[[Mapping[str, Any]], Any]


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


class _KeyText(dict):
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
        return self.then.partitions(values)  # type: ignore[attr-defined]


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
    default: Any = field(default=None, hash=False)  # a JSON default is a dict or list
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
        if self.type in (FieldType.INTEGER, FieldType.DECIMAL) and self.default is not None:
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
        return self.keys[attribute].partitions(values or {})  # type: ignore[attr-defined]

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


class Period(StrEnum):
    DAY = "day"
    MONTH = "month"
    YEAR = "year"

    @property
    def format(self) -> str:
        return {"day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}[self.value]

    def label(self, at: datetime) -> str:
        return at.astimezone(UTC).strftime(self.format)


@dataclass(frozen=True, eq=False)
class TimeSeries:
    """A table per period (pattern 22): `<prefix>-<table>-<label>`, e.g. `hybridsync-events-2026-11-22`.
    The table of a period is created `ahead` periods before it starts, with full capacity while it
    is current; once it is past, its capacity is lowered; past `keep` periods it is archived (its
    items copied to S3) and dropped. Provisioned capacity, since lowering it is the point."""

    entity: Entity
    period: Period
    time_attribute: str  # the entity's attribute that places an item in a period (ISO-8601)
    ahead: int = 1
    keep: int = 14
    current_capacity: tuple[int, int] = (25, 25)  # (read, write) units of the current period
    past_capacity: tuple[int, int] = (5, 1)  # of periods past: read-mostly, seldom written

    @property
    def table(self) -> Table:
        return self.entity.table

    def label(self, at: datetime) -> str:
        return self.period.label(at)

    def start_of(self, at: datetime) -> datetime:
        day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return {Period.DAY: day, Period.MONTH: day.replace(day=1), Period.YEAR: day.replace(month=1, day=1)}[
            self.period
        ]

    def step(self, start: datetime, periods: int) -> datetime:
        """The start of the period `periods` after (or before) the one starting at `start`."""
        if self.period is Period.DAY:
            return start + timedelta(days=periods)
        months = start.year * 12 + start.month - 1 + periods * (12 if self.period is Period.YEAR else 1)
        return start.replace(year=months // 12, month=months % 12 + 1)

    def table_name(self, prefix: str, at: datetime) -> str:
        return f"{prefix}-{self.table.name}-{self.label(at)}"

    def label_of(self, table_name: str, prefix: str) -> str | None:
        """The period label of one of this series' tables, None for any other table."""
        head = f"{prefix}-{self.table.name}-"
        label = table_name.removeprefix(head)
        if label == table_name:
            return None
        try:
            datetime.strptime(label, self.period.format)
        except ValueError:
            return None
        return label

    def starts(self, start: datetime, end: datetime) -> list[datetime]:
        """The start of every period that [start, end] touches, oldest first."""
        out, at = [], self.start_of(start)
        while at <= end:
            out.append(at)
            at = self.step(at, 1)
        return out


# --- declared aggregates ---------------------------------------------------------------------


class NotAggregable(ValueError):
    """A measure that cannot be maintained from a stream of changes: what a record added could
    not be taken back when it is removed or changed (min, max, distinct counts)."""


@dataclass(frozen=True)
class Where:
    """Which records count: `Where("Status", none_of=("CANCELLED",))`, `Where("Kind", one_of=(...))`.
    A record's contribution follows its images, so a MODIFY into or out of the set moves it."""

    attribute: str
    one_of: tuple[Any, ...] = ()
    none_of: tuple[Any, ...] = ()

    def __call__(self, values: Mapping[str, Any]) -> bool:
        value = values.get(self.attribute)
        return (not self.one_of or value in self.one_of) and value not in self.none_of


@dataclass(frozen=True)
class Sum:
    """A running sum: of a field (`of="Quantity"`), or of a product of fields
    (`of=("Quantity", "UnitPrice")`); `whole=True` rounds each record's part down to a whole
    number first (a loyalty point per whole currency unit of a line). Subtracted on REMOVE and
    on a MODIFY's old image, so it stays exact under any change. `sources`: the entities (by
    name) whose records it sums; every source's by default. A source's sign applies."""

    name: str
    of: str | tuple[str, ...]
    whole: bool = False
    sources: tuple[str, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.of,) if isinstance(self.of, str) else self.of

    def part(self, values: Mapping[str, Any], sign: int = 1) -> Decimal:
        total = Decimal(1)
        for name in self.fields:  # DynamoDB's 38 digits: a product that would round raises
            total = limits.ARITHMETIC.multiply(total, Decimal(values[name]))
        return sign * (Decimal(int(total)) if self.whole else total)


@dataclass(frozen=True)
class Count:
    """How many records count: each adds its source's sign (a credit note takes one back: a net
    count), or one whatever its sign with `signed=False`. `sources`: the entities (by name) whose
    records it counts; every source's by default (`Count("Invoices", sources=("Invoice",))` beside
    a net total of invoices and credit notes)."""

    name: str
    sources: tuple[str, ...] = ()
    signed: bool = True

    @property
    def fields(self) -> tuple[str, ...]:
        return ()

    def part(self, values: Mapping[str, Any], sign: int = 1) -> Decimal:
        return Decimal(sign if self.signed else 1)


Measure = Sum | Count


def Min(name: str, of: str) -> Measure:
    raise NotAggregable(f"{name}: a minimum cannot be taken back when the record holding it is removed")


def Max(name: str, of: str) -> Measure:
    raise NotAggregable(f"{name}: a maximum cannot be taken back when the record holding it is removed")


def CountDistinct(name: str, of: str) -> Measure:
    raise NotAggregable(f"{name}: a distinct count cannot be taken back without keeping every value")


def _measures(measure: Measure, entity: Entity) -> bool:
    """Whether a measure takes records of this entity (its `sources`, else every source's)."""
    return not measure.sources or entity.name in measure.sources


@dataclass(frozen=True)
class Source:
    """An entity whose records feed an aggregate: `sign=-1` subtracts them (credit notes)."""

    entity: Entity
    sign: int = 1
    where: Where | None = None


@dataclass(frozen=True)
class Rank:
    """The measure a top-N reads by: the aggregate items carry the index's keys (a sparse,
    write-sharded GSI): the partition `prefix` (a template over the group and `Period`) with a
    shard picked by the group, and the measure as the sort key."""

    measure: str
    index: str
    prefix: str
    shards: int = 4


PERIOD = "Period"  # the attribute of an aggregate item naming its period: 2026-11-22, 2026-11


@dataclass(frozen=True, eq=False)
class Aggregate:
    """An aggregate, declared as data: the records of `sources` that `where` admits, grouped by
    `group_by` and by each period of `time`, folded into `measures`, exactly once. The engine
    renders its entity (`entity`: keys `partition` and `sort`, templates over the group and
    `Period`), its rank keys, the stream mapping's filter and each record's contribution."""

    name: str
    sources: tuple[Source, ...]
    group_by: tuple[str, ...]
    time: str
    periods: tuple[Period, ...]
    measures: tuple[Measure, ...]
    partition: str
    sort: str
    rank: Rank | None = None
    where: Where | None = None
    description: str = ""

    def __post_init__(self) -> None:
        sources = tuple(s if isinstance(s, Source) else Source(s) for s in self.sources)
        object.__setattr__(self, "sources", sources)
        for measure in self.measures:
            if not isinstance(measure, Sum | Count):
                raise NotAggregable(f"{self.name}: {measure!r} is not a Sum or a Count")
        tables = {s.entity.table.name for s in sources}
        if len(tables) != 1:
            raise ValueError(f"{self.name}: every source must live in one table, not {sorted(tables)}")
        needed = {*self.group_by, self.time}
        kinds = (
            {FieldType.STRING, FieldType.INTEGER},
            {FieldType.TIMESTAMP, FieldType.STRING},
            {FieldType.INTEGER, FieldType.DECIMAL},
        )
        for source in sources:
            summed = {f for m in self.measures if _measures(m, source.entity) for f in m.fields}
            missing = (needed | summed) - {f.attribute for f in source.entity.fields}
            if missing:
                raise ValueError(f"{self.name}: source {source.entity.name} lacks {sorted(missing)}")
            for names, allowed, role in (
                (self.group_by, kinds[0], "group by"),
                ((self.time,), kinds[1], "time"),
                (summed, kinds[2], "measure"),
            ):
                for name in names:
                    if source.entity.field(name).type not in allowed:
                        raise ValueError(
                            f"{self.name}: cannot {role} {source.entity.name}.{name}, a "
                            f"{source.entity.field(name).type.name.lower()}"
                        )
        names = {s.entity.name for s in sources}
        for measure in self.measures:
            if stray := set(measure.sources) - names:
                raise ValueError(f"{self.name}: {measure.name} counts {sorted(stray)}, not among its sources")
        if PERIOD in self.group_by or PERIOD in {m.name for m in self.measures}:
            raise ValueError(f"{self.name}: {PERIOD!r} is the attribute naming an aggregate's period")
        if len({m.name for m in self.measures}) != len(self.measures) or not self.measures:
            raise ValueError(f"{self.name}: measures need distinct names, and at least one")
        if self.rank and self.rank.measure not in {m.name for m in self.measures}:
            raise ValueError(
                f"{self.name}: the ranked measure {self.rank.measure!r} is not one of its measures"
            )

    @property
    def table(self) -> Table:
        return self.sources[0].entity.table

    @cached_property
    def entity(self) -> Entity:
        """The derived entity the aggregate items are."""
        source = self.sources[0].entity
        group = tuple(source.field(name) for name in self.group_by)
        measures = tuple(
            Field(
                m.name,
                FieldType.INTEGER
                if isinstance(m, Count)
                or m.whole
                or all(
                    s.entity.field(f).type is FieldType.INTEGER
                    for s in self.sources
                    if _measures(m, s.entity)
                    for f in m.fields
                )
                else FieldType.DECIMAL,
            )
            for m in self.measures
        )
        table = self.table
        built: dict[str, KeyBuilder] = {table.partition.name: Template(self.partition)}
        if table.sort:
            built[table.sort.name] = Template(self.sort)
        if self.rank:
            index = table.index(self.rank.index)
            built[index.partition.name] = Sharded(self.rank.prefix, self.group_by, self.rank.shards)
            if index.sort:
                built[index.sort.name] = Copy(self.rank.measure)
        return Entity(
            self.name,
            table,
            Side.DERIVED,
            fields=(*group, Field(PERIOD, FieldType.STRING), *measures),
            keys=built,
            description=self.description,
            versioned=False,
            names=source.names,
        )

    def counts(self, entity: Entity, values: Mapping[str, Any]) -> bool:
        """Whether a record of `entity` with these (decoded) values counts."""
        source = next((s for s in self.sources if s.entity.name == entity.name), None)
        return bool(source) and all(w(values) for w in (self.where, source.where) if w)  # type: ignore[union-attr]

    def contribution(
        self, entity: Entity, values: Mapping[str, Any]
    ) -> dict[tuple[Any, ...], tuple[Decimal, ...]]:
        """What one image adds: per aggregate item (its group values and period), each measure."""
        if not self.counts(entity, values):
            return {}
        sign = next(s.sign for s in self.sources if s.entity.name == entity.name)
        parts = tuple(m.part(values, sign) if _measures(m, entity) else Decimal(0) for m in self.measures)
        group = tuple(values[name] for name in self.group_by)
        moment = values[self.time]
        moment = keys.parse_iso(moment) if isinstance(moment, str) else moment
        return {(*group, period.label(moment)): parts for period in self.periods}

    def item_values(self, group_and_period: tuple[Any, ...], measures: tuple[Decimal, ...]) -> dict[str, Any]:
        values = dict(zip((*self.group_by, PERIOD), group_and_period, strict=True))
        return values | {m.name: total for m, total in zip(self.measures, measures, strict=True)}


# --- the engine's own bookkeeping ------------------------------------------------------------

STATIC_SK = "#static"  # the sort key of a collection's marker item (pattern 20)


def bookkeeping(table: Table, prefix: str, names: Names) -> dict[str, Entity]:
    """The entities the engine keeps in a table of aggregated records, under the reserved prefix:
    a cursor per stream shard (its exactly-once watermark), the journals of batches being applied,
    the ranges of records each batch journaled, the changes read from Kinesis already folded in."""
    pk, sk = table.partition.name, table.sort.name if table.sort else None
    if sk is None:
        raise ValueError(f"table {table.name}: aggregating its records needs a sort key for the bookkeeping")

    def derived(name: str, fields: tuple[Field, ...], sort: str, description: str) -> Entity:
        keys_ = {pk: prefix + "{ShardId}", sk: sort}
        return engine_entity(table, names, name, fields, keys_, description)

    text = FieldType.STRING
    return {
        "cursor": derived(
            "AggregationCursor",
            (
                Field("ShardId", text),
                Field("Watermark", text),
                Field("Pending", text, required=False),
                Field("Chunks", FieldType.INTEGER, required=False),
                Field("Progress", FieldType.INTEGER, required=False),
            ),
            "CURSOR",
            "exactly-once state of the aggregation per stream shard; TTL prunes closed shards",
        ),
        "journal": derived(
            "AggregationJournal",
            (
                Field("ShardId", text),
                Field("JournalId", text),
                Field("Part", FieldType.INTEGER),
                Field("Deltas", text),
            ),
            "JOURNAL#{JournalId}#{Part:04d}",
            "a batch's net deltas, kept until every one is applied",
        ),
        "range": derived(
            "AggregationRange",
            (Field("ShardId", text), Field("First", text), Field("Last", text)),
            "APPLIED#{First}",
            "the stream records one batch journaled (a redrive applies the rest)",
        ),
        "change": engine_entity(
            table,
            names,
            "AggregationChange",
            (Field("Change", text),),
            {pk: prefix + "CHANGE#{Change}", sk: "CHANGE"},
            "a change read from Kinesis that a journal folded in, so its duplicates are not (kds.html)",
        ),
        "shard": engine_entity(
            table,
            names,
            "AggregationShard",
            (Field("ShardId", text),),
            {pk: prefix + "SHARDS", sk: "{ShardId}"},
            "every shard with a cursor, so the bookkeeping of expired ones is found and dropped",
        ),
    }


def engine_entity(table: Table, names: Names, name: str, fields: tuple[Field, ...], keys_: dict[str, str],
                  description: str) -> Entity:  # fmt: skip
    """One of the engine's own entities: derived, unversioned, its keys templates."""
    keys_built = {attribute: Template(pattern) for attribute, pattern in keys_.items()}
    return Entity(name, table, Side.DERIVED, fields=fields, versioned=False, names=names, keys=keys_built,
                  description=description)  # fmt: skip


def job_entities(table: Table, prefix: str, names: Names) -> dict[str, Entity]:
    """Where the engine checkpoints its long operations (hybridsync.sync.jobs), under the reserved
    prefix: one entry per job in a listing partition, one item per work unit under the job's own."""
    pk, sk = table.partition.name, table.sort.name if table.sort else ""
    text, integer = FieldType.STRING, FieldType.INTEGER

    return {
        "job": engine_entity(
            table,
            names,
            "Job",
            (
                Field("JobId", text),
                Field("Kind", text),
                Field("Spec", text),
                Field("Units", integer),
                Field("Created", text),
            ),
            {pk: prefix + "JOBS", sk: "{JobId}"},
            "a long operation (a load, a rebuild): what it does and into how many units it is cut",
        ),
        "unit": engine_entity(
            table,
            names,
            "JobUnit",
            (
                Field("JobId", text),
                Field("Unit", integer),
                Field("Checkpoint", text, required=False),
                Field("Done", FieldType.BOOLEAN),
                Field("Counts", text),
                Field("Error", text, required=False),
            ),
            {pk: prefix + "JOB#{JobId}", sk: "UNIT#{Unit:05d}"},
            "a work unit's checkpoint: where it stopped and what it did so far",
        ),
    }


def collection(table: Table, names: Names) -> Entity:
    """The `#static` marker of an item collection, listed by the table's distinct-keys index;
    created with the collection's first member and deleted with its last (pattern 20)."""
    index = table.index(table.distinct_index or "")
    keys_ = {
        table.partition.name: Template("{CollectionPK}"),
        index.partition.name: Template("{CollectionPK}"),
    }
    if table.sort:
        keys_[table.sort.name] = Template(STATIC_SK)
    return Entity(
        "Collection",
        table,
        Side.DYNAMODB,
        names=names,
        keys=keys_,
        fields=(Field("CollectionPK", FieldType.STRING), Field("Members", FieldType.INTEGER)),
        description="the #static marker of an item collection (pattern 20)",
    )


# The columns the engine adds to an entity's SQL table, by where the entity is mastered
# (hybridsync.sql.schema.table_of renders them; a unit test holds the two in step). A field mapped to
# one of them would be a second column of that name: its field names another (`column=`).
ENGINE_COLUMNS: dict[Side, tuple[str, ...]] = {
    Side.DYNAMODB: ("version", "deleted", "stream_position", "updated_at"),
    Side.POSTGRESQL: ("version", "updated_at"),
}


def _check_columns(entity: Entity) -> None:
    """Refuse a field whose column is one the engine keeps in the entity's table, or another
    field's: `Field("UpdatedAt", ...)` is column `updated_at` unless it says otherwise."""
    if not entity.sql_table:
        return
    engine = ENGINE_COLUMNS.get(entity.master, ())
    taken: dict[str, str] = {}
    for f in entity.fields:
        if f.column in engine:
            raise ValueError(
                f"{entity.name}.{f.attribute}: its column {f.column!r} is one the engine keeps in "
                f"{entity.sql_table} (reserved: {', '.join(engine)}); map the field to another with "
                f"column=, e.g. Field({f.attribute!r}, FieldType.{f.type.name}, "
                f"column={_snake(entity.name) + '_' + f.column!r})"
            )
        if f.column in taken:
            raise ValueError(
                f"{entity.name}.{f.attribute}: its column {f.column!r} is {entity.name}.{taken[f.column]}'s "
                f"too; give one of them another with column="
            )
        taken[f.column] = f.attribute


INTEGER_SPECS = "bcdoxX"  # format types only an integer takes (`{LineNo:04d}`)


def _check_keys_name_fields(entity: Entity) -> None:
    """Refuse a key builder naming an attribute that is not one of the entity's fields (every item
    would lack the key: `cannot build PK` at the first write, naming nothing), or padding a
    placeholder as an integer that is not one."""
    fields = {f.attribute: f for f in entity.all_fields}
    for attribute, builder in entity.keys.items():
        for name in sorted(reads(builder) - set(fields)):
            close = difflib.get_close_matches(name, list(fields), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(
                f"{entity.name}.{attribute}: {builder!r} names {name}, which is not a field of "
                f"{entity.name} ({', '.join(fields)}){hint}"
            )
        inner = builder.then if isinstance(builder, When) else builder
        patterns = [inner.pattern] if isinstance(inner, Template) else []
        patterns += [inner.prefix] if isinstance(inner, Sharded) else []
        for pattern in patterns:
            for _, name, spec, _ in string.Formatter().parse(pattern):
                if name and spec and spec[-1] in INTEGER_SPECS and fields[name].type is not FieldType.INTEGER:
                    raise ValueError(
                        f"{entity.name}.{attribute}: {pattern!r} formats {name} as an integer "
                        f"({{{name}:{spec}}}), but it is a {fields[name].type.name}"
                    )


@dataclass(frozen=True, eq=False)
class Model:
    """A whole model: its tables, entities, aggregates and time series, with the reserved names
    and the prefix of the engine's own keys (no key template of the user's may start with it)."""

    tables: tuple[Table, ...]
    entities: tuple[Entity, ...]
    time_series: tuple[TimeSeries, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    bodies: tuple[Bodies, ...] = ()
    names: Names = DEFAULT_NAMES
    reserved_prefix: str = "AGGREGATE#"

    def __post_init__(self) -> None:
        declared = [*self.entities, *(s.entity for s in self.time_series)]
        for entity in [*declared, *(a.entity for a in self.aggregates)]:  # one set of reserved names
            entity.rename(self.names)
        seen: set[str] = set()
        for entity in declared:
            if entity.name in seen:
                raise ValueError(f"two entities are named {entity.name!r}")
            seen.add(entity.name)
            for attribute, builder in entity.keys.items():
                head = literal_head(builder)
                if head is not None and (head.startswith(self.reserved_prefix) or head == STATIC_SK):
                    raise ValueError(
                        f"{entity.name}.{attribute}: {head!r} is the engine's (reserved prefix "
                        f"{self.reserved_prefix!r}, {STATIC_SK!r})"
                    )
        reserved = {self.names.entity, self.names.version, self.names.origin}
        for entity in self.entities:
            clash = reserved & {f.attribute for f in entity.fields}
            if clash:
                raise ValueError(f"{entity.name}: {sorted(clash)} are reserved attribute names")
        for entity in declared:
            _check_keys_name_fields(entity)
            _check_columns(entity)
        for aggregate in self.aggregates:
            if aggregate.name in seen:
                raise ValueError(f"aggregate {aggregate.name!r} has the name of an entity")
            if aggregate.table.stream is None:
                raise ValueError(f"{aggregate.name}: table {aggregate.table.name} has no stream to aggregate")
            undeclared = [s.entity.name for s in aggregate.sources if s.entity not in self.entities]
            if undeclared:
                raise ValueError(f"{aggregate.name}: its sources {undeclared} are not entities of the model")
            if aggregate.rank and aggregate.rank.index not in {i.name for i in aggregate.table.indexes}:
                raise ValueError(
                    f"{aggregate.name}: table {aggregate.table.name} has no index {aggregate.rank.index!r}"
                )
            # renders its keys now: a declaration error shows here, not at run time
            _check_keys_name_fields(aggregate.entity)
        tables = {t.name for t in self.tables}
        for entity in self.entities:
            if entity.table.name not in tables:
                raise ValueError(f"{entity.name}: its table {entity.table.name!r} is not one of the model's")
        for bodies in self.bodies:
            if bodies.entity not in self.entities or bodies.chunks not in self.entities:
                raise ValueError(f"{bodies.entity.name}'s bodies: declare {bodies.entity.name} and "
                                 f"{bodies.chunks.name} among the model's entities")  # fmt: skip

    @cached_property
    def _bookkeeping(self) -> dict[str, dict[str, Entity]]:
        return {
            t.name: bookkeeping(t, self.reserved_prefix, self.names)
            for t in self.tables
            if any(a.table.name == t.name for a in self.aggregates)
        }

    @cached_property
    def jobs(self) -> dict[str, Entity]:
        """The engine's job and work-unit entities, in the model's first table keyed by two strings."""
        for table in self.tables:
            if table.sort and table.partition.type == "S" and table.sort.type == "S":
                return job_entities(table, self.reserved_prefix, self.names)
        raise ValueError("checkpointing a job needs a table whose partition and sort keys are strings")

    def bookkeeping(self, table: Table) -> dict[str, Entity]:
        """The engine's cursor, journal and range entities of a table with aggregates."""
        return self._bookkeeping[table.name]

    @cached_property
    def _collections(self) -> dict[str, Entity]:
        return {t.name: collection(t, self.names) for t in self.tables if t.distinct_index}

    def collection(self, table: Table) -> Entity:
        return self._collections[table.name]

    @cached_property
    def all_entities(self) -> tuple[Entity, ...]:
        """The user's entities, the aggregates' entities and the engine's own."""
        engine = [e for kinds in self._bookkeeping.values() for e in kinds.values()]
        return (*self.entities, *(a.entity for a in self.aggregates), *self._collections.values(), *engine)

    def entity(self, name: str) -> Entity:
        for entity in (*self.all_entities, *(s.entity for s in self.time_series)):
            if entity.name == name:
                return entity
        raise KeyError(f"no entity named {name!r}")

    def aggregate(self, name: str) -> Aggregate:
        for aggregate in self.aggregates:
            if aggregate.name == name:
                return aggregate
        raise KeyError(f"no aggregate named {name!r}")

    def table(self, name: str) -> Table:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(f"no table named {name!r}")

    def mastered_in(self, side: Side) -> tuple[Entity, ...]:
        return tuple(e for e in self.all_entities if e.master is side)

    def written_back(self) -> tuple[Entity, ...]:
        """Entities mastered in DynamoDB whose changes the pipeline writes back to PostgreSQL."""
        return tuple(e for e in self.mastered_in(Side.DYNAMODB) if e.sql_table)

    def synced(self) -> tuple[Entity, ...]:
        """Entities with a SQL table on the other side of the pipeline."""
        return tuple(e for e in self.all_entities if e.sql_table)

    def streamed_tables(self) -> tuple[Table, ...]:
        return tuple(t for t in self.tables if t.stream)

    def with_names(self, **changes: Any) -> Model:
        return replace(self, names=replace(self.names, **changes))
