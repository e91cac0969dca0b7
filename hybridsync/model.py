"""The single declaration of the data model: tables, keys, GSIs, stream, TTL and entity <-> SQL mappings.

Everything else renders from here: the CDK data stack, the local tables, the SQL schema and the
key of every item the pipeline writes. Change the model here and nowhere else.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import Enum, StrEnum
from functools import cached_property
from typing import Any

from hybridsync import keys

# Attributes every entity item carries.
ENTITY = "Entity"  # which entity an item is: how a stream record is routed
VERSION = "Version"  # grows on every write, across delete and re-create: the order-safety guard
ORIGIN = "Origin"  # "sql" when the SQL -> DynamoDB propagation wrote it: never written back
EXPIRES_AT = "ExpiresAt"  # TTL (epoch seconds) of cache items

ORIGIN_SQL = "sql"
ID_LENGTH = 128

# Shard counts of the write-sharded GSI partitions (pattern 7). Readers scatter over all of them.
ORDER_TIME_SHARDS = 8
OPEN_ORDER_SHARDS = 4
RANKING_SHARDS = 4
LEADERBOARD_SHARDS = 8


class Side(StrEnum):
    """Where an entity is mastered; the other side holds a view the pipeline keeps in sync."""

    DYNAMODB = "dynamodb"  # written in DynamoDB, written back to PostgreSQL
    POSTGRESQL = "postgresql"  # written in PostgreSQL, cached / propagated into DynamoDB
    DERIVED = "derived"  # computed by the pipeline (aggregates, watermarks); no SQL table


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
    """A DynamoDB table. `name` is logical; deployments prefix it (`hybridsync-main`)."""

    name: str
    partition: KeyAttribute
    sort: KeyAttribute | None = None
    indexes: tuple[Index, ...] = ()
    stream: StreamView | None = None
    ttl_attribute: str | None = None
    purpose: str = ""

    def index(self, name: str) -> Index:
        for index in self.indexes:
            if index.name == name:
                return index
        raise KeyError(f"table {self.name!r} has no index {name!r}")

    def key_schema(self) -> list[KeyAttribute]:
        return [self.partition] + ([self.sort] if self.sort else [])

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
        } | ({"BillingMode": "PROVISIONED", "ProvisionedThroughput": throughput} if throughput
             else {"BillingMode": "PAY_PER_REQUEST"})  # fmt: skip
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
    """Calculated write shard: `Sharded("ORDERS", "OrderId", 8)` -> `ORDERS#5` (pattern 7)."""

    prefix: str
    by: str
    shards: int

    def __call__(self, values: Mapping[str, Any]) -> str | None:
        prefix = Template(self.prefix)(values)
        value = values.get(self.by)
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


@dataclass(frozen=True)
class Field:
    """One attribute of an entity and the SQL column it maps to."""

    attribute: str
    type: FieldType
    column: str = ""
    required: bool = True
    max_length: int | None = None  # strings longer than this are rejected, not truncated

    def __post_init__(self) -> None:
        if not self.column:
            object.__setattr__(self, "column", _snake(self.attribute))


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


@dataclass(frozen=True)
class Entity:
    """An entity: where it lives, how its keys are built, where it is mastered, its SQL table."""

    name: str
    table: Table
    master: Side
    fields: tuple[Field, ...]
    keys: Mapping[str, KeyBuilder]
    sql_table: str | None = None
    sql_key: tuple[str, ...] = ()  # attributes forming the SQL primary key
    description: str = ""
    versioned: bool = field(default=True)

    def __post_init__(self) -> None:
        missing = {a.name for a in self.table.key_schema()} - set(self.keys)
        if missing:
            raise ValueError(f"{self.name}: no builder for table key(s) {sorted(missing)}")
        if (self.sql_table is None) != (not self.sql_key):
            raise ValueError(f"{self.name}: sql_table and sql_key go together")
        unknown = set(self.sql_key) - {f.attribute for f in self.fields}
        if unknown:
            raise ValueError(f"{self.name}: sql_key names unknown attributes {sorted(unknown)}")

    @cached_property
    def all_fields(self) -> tuple[Field, ...]:
        """The declared fields plus the version every synced entity carries."""
        if not self.versioned:
            return self.fields
        return (*self.fields, Field(VERSION, FieldType.INTEGER))

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
        """The table's primary key of the item with these values."""
        out = {}
        for attr in self.table.key_schema():
            value = self.keys[attr.name](values)
            if value is None:
                raise ValueError(f"{self.name}: cannot build {attr.name} from {dict(values)!r}")
            out[attr.name] = value
        return out

    def key_value(self, attribute: str, values: Mapping[str, Any]) -> Any:
        """One key attribute of the item with these values (`PK`, an index key, ...)."""
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

    def values(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """The entity's own attributes of a stored item (no keys or bookkeeping)."""
        return {f.attribute: item[f.attribute] for f in self.all_fields if f.attribute in item}

    def item(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A complete item: its fields, entity tag and every key it qualifies for.

        Index keys that do not apply (sparse indexes) are left out, never written empty.
        """
        known = {f.attribute for f in self.all_fields} | {ORIGIN, EXPIRES_AT}
        extra = set(values) - known
        if extra:
            raise ValueError(f"{self.name}: unknown attribute(s) {sorted(extra)}")
        for f in self.all_fields:
            if f.required and values.get(f.attribute) is None:
                raise ValueError(f"{self.name}: missing required attribute {f.attribute!r}")
        item = {k: v for k, v in values.items() if v is not None}
        item[ENTITY] = self.name
        item.update(self.key(values))
        for name, build in self.keys.items():
            if name not in item:
                value = build(values)
                if value is not None:
                    item[name] = value
        return item


class Period(StrEnum):
    DAY = "day"
    MONTH = "month"


@dataclass(frozen=True)
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
        return at.strftime("%Y-%m-%d" if self.period is Period.DAY else "%Y-%m")

    def start_of(self, at: datetime) -> datetime:
        day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return day if self.period is Period.DAY else day.replace(day=1)

    def step(self, start: datetime, periods: int) -> datetime:
        """The start of the period `periods` after (or before) the one starting at `start`."""
        if self.period is Period.DAY:
            return start + timedelta(days=periods)
        months = start.year * 12 + start.month - 1 + periods
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
            datetime.strptime(label, "%Y-%m-%d" if self.period is Period.DAY else "%Y-%m")
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


@dataclass(frozen=True)
class Model:
    tables: tuple[Table, ...]
    entities: tuple[Entity, ...]
    time_series: tuple[TimeSeries, ...] = ()

    def entity(self, name: str) -> Entity:
        for entity in self.entities:
            if entity.name == name:
                return entity
        raise KeyError(f"no entity named {name!r}")

    def table(self, name: str) -> Table:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(f"no table named {name!r}")

    def mastered_in(self, side: Side) -> tuple[Entity, ...]:
        return tuple(e for e in self.entities if e.master is side)

    def written_back(self) -> tuple[Entity, ...]:
        """Entities mastered in DynamoDB whose changes the pipeline writes back to PostgreSQL."""
        return tuple(e for e in self.mastered_in(Side.DYNAMODB) if e.sql_table)

    def synced(self) -> tuple[Entity, ...]:
        """Entities with a SQL table on the other side of the pipeline."""
        return tuple(e for e in self.entities if e.sql_table)


def _s(name: str) -> KeyAttribute:
    return KeyAttribute(name, "S")


def _n(name: str) -> KeyAttribute:
    return KeyAttribute(name, "N")


ORDER_SUMMARY = (ENTITY, "OrderId", "CustomerId", "Status", "Total", "CreatedAt")

MAIN = Table(
    name="main",
    partition=_s("PK"),
    sort=_s("SK"),
    stream=StreamView.NEW_AND_OLD_IMAGES,
    ttl_attribute=EXPIRES_AT,
    purpose="every entity, as item collections keyed Entity#Value",
    indexes=(
        Index(
            "OrdersByTime",
            _s("TimeShard"),
            _s("CreatedAt"),
            Projection.INCLUDE,
            "all orders by time across customers (last 24 h / 7 d, newest N) in one Query per "
            "shard; the constant partition is write-sharded by order id (patterns 5, 7)",
            non_key_attributes=ORDER_SUMMARY[:-1],
        ),
        Index(
            "OpenOrders",
            _s("OpenShard"),
            _s("OrderOpenDate"),
            Projection.INCLUDE,
            "sparse: only open orders carry OrderOpenDate, so the index lists exactly the open "
            "ones by open date; shards 0..N allow a time-range scatter read (patterns 8, 9)",
            non_key_attributes=ORDER_SUMMARY,
        ),
        Index(
            "Rankings",
            _s("RankPK"),
            _n("RankSK"),
            Projection.ALL,
            "overloaded and sparse: top sellers per day/month, top customers per month and the "
            "game leaderboard; only aggregates and scores carry it; write-sharded partitions, "
            "top N = one descending Query per shard, merged (patterns 6, 8, 10, 11)",
        ),
        Index(
            "Inverted",
            _s("GSI1PK"),
            _s("GSI1SK"),
            Projection.ALL,
            "overloaded inverted edges: who follows A (PK/SK of follow edges swapped), a "
            "customer's reviews (the product -> review edge read from the author's side) and a "
            "title's tags (the tag -> title edge read from the title's side) (patterns 4, 10, 19)",
        ),
        Index(
            "DistinctKeys",
            _s("StaticPK"),
            None,
            Projection.KEYS_ONLY,
            "sparse KEYS_ONLY: one #static item per item collection, so listing every partition "
            "key reads a tiny index instead of scanning the table (pattern 20)",
        ),
    ),
)

CHUNKS = Table(
    name="chunks",
    partition=_s("ChunkKey"),
    purpose="chunks of large attributes, simple key <parentPK>#<parentSK>#<version>#<seq> (pattern 18)",
)

STATIC_SK = "#static"

CUSTOMER = Entity(
    "Customer",
    MAIN,
    Side.POSTGRESQL,
    fields=(
        Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("Email", FieldType.STRING, max_length=320),
        Field("Tier", FieldType.STRING, required=False),
    ),
    keys={"PK": Template("CUSTOMER#{CustomerId}"), "SK": Template("PROFILE")},
    sql_table="customers",
    sql_key=("CustomerId",),
    description="customer profile, cached from PostgreSQL on read",
)

PRODUCT_DETAILS = Entity(
    "ProductDetails",
    MAIN,
    Side.POSTGRESQL,
    fields=(
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("Category", FieldType.STRING),
        Field("Description", FieldType.STRING, required=False),
        Field("Attributes", FieldType.JSON, required=False),
    ),
    keys={"PK": Template("PRODUCT#{ProductId}"), "SK": Template("DETAILS")},
    sql_table="products",
    sql_key=("ProductId",),
    description="large, static catalog part of a product (pattern 16)",
)

PRODUCT_AVAILABILITY = Entity(
    "ProductAvailability",
    MAIN,
    Side.POSTGRESQL,
    fields=(
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Price", FieldType.DECIMAL),
        Field("Stock", FieldType.INTEGER),
    ),
    keys={"PK": Template("PRODUCT#{ProductId}"), "SK": Template("AVAILABILITY")},
    sql_table="product_availability",
    sql_key=("ProductId",),
    description="small, fast-changing price and stock: a price change rewrites only this (pattern 16)",
)

_ORDER_FIELDS = (
    Field("OrderId", FieldType.STRING, max_length=ID_LENGTH),
    Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
    Field("CreatedAt", FieldType.TIMESTAMP),
    Field("Status", FieldType.STRING, max_length=32),
)
OPEN, SHIPPED, CANCELLED = "OPEN", "SHIPPED", "CANCELLED"
ORDER_STATUSES = (OPEN, SHIPPED, CANCELLED)
OPEN_STATUSES = (OPEN,)

ORDER = Entity(
    "Order",
    MAIN,
    Side.DYNAMODB,
    fields=(
        *_ORDER_FIELDS,
        Field("Total", FieldType.DECIMAL),
        Field("ShippingAddress", FieldType.JSON, required=False),
    ),
    keys={
        "PK": Template("CUSTOMER#{CustomerId}"),
        "SK": Template("ORDER#{CreatedAt}#{OrderId}"),
        "TimeShard": Sharded("ORDERS", "OrderId", ORDER_TIME_SHARDS),
        "OpenShard": When("Status", OPEN_STATUSES, Sharded("OPEN", "OrderId", OPEN_ORDER_SHARDS)),
        "OrderOpenDate": When("Status", OPEN_STATUSES, Copy("CreatedAt")),
    },
    sql_table="orders",
    sql_key=("OrderId",),
    description="order header in the customer's collection: a date range is one Query (pattern 2)",
)

ORDER_LINE = Entity(
    "OrderLine",
    MAIN,
    Side.DYNAMODB,
    fields=(
        *_ORDER_FIELDS,
        Field("LineNo", FieldType.INTEGER),
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Quantity", FieldType.INTEGER),
        Field("UnitPrice", FieldType.DECIMAL),
    ),
    keys={
        "PK": Template("CUSTOMER#{CustomerId}"),
        "SK": Template("ORDER#{CreatedAt}#{OrderId}#LINE#{LineNo:04d}"),
    },
    sql_table="order_lines",
    sql_key=("OrderId", "LineNo"),
    description="order line next to its order: begins_with(SK, ORDER#<time>#<id>) reads both",
)

PLAYER_SCORE = Entity(
    "PlayerScore",
    MAIN,
    Side.DYNAMODB,
    fields=(Field("PlayerId", FieldType.STRING, max_length=ID_LENGTH), Field("Score", FieldType.INTEGER)),
    keys={
        "PK": Template("PLAYER#{PlayerId}"),
        "SK": Template("SCORE"),
        "RankPK": Sharded("LEADERBOARD", "PlayerId", LEADERBOARD_SHARDS),
        "RankSK": Copy("Score"),
    },
    sql_table="player_scores",
    sql_key=("PlayerId",),
    description="loyalty game score; the score is a GSI sort key, never a primary key (pattern 6)",
)

FOLLOW = Entity(
    "Follow",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("FollowerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("FolloweeId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CreatedAt", FieldType.TIMESTAMP),
    ),
    keys={
        "PK": Template("USER#{FollowerId}"),
        "SK": Template("FOLLOWS#{FolloweeId}"),
        "GSI1PK": Template("FOLLOWS#{FolloweeId}"),
        "GSI1SK": Template("USER#{FollowerId}"),
    },
    sql_table="follows",
    sql_key=("FollowerId", "FolloweeId"),
    description="adjacency list edge; the Inverted GSI answers who follows A (pattern 19)",
)

ORDER_REF = Entity(
    "OrderRef",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("OrderId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CreatedAt", FieldType.TIMESTAMP),
        Field("Request", FieldType.STRING),  # fingerprint of the request that placed the order
    ),
    keys={"PK": Template("ORDER#{OrderId}"), "SK": Template("REF")},
    description="an order's key by its id; created with the order under attribute_not_exists, so a "
    "retried placement finds the first one instead of placing a second",
)

STORE = Entity(
    "Store",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("Country", FieldType.STRING, max_length=64),
        Field("Region", FieldType.STRING, max_length=ID_LENGTH),
        Field("City", FieldType.STRING, max_length=ID_LENGTH),
        Field("StoreId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("Address", FieldType.STRING, required=False),
    ),
    keys={"PK": Hierarchy(("Country",), "STORES"), "SK": Hierarchy(("Region", "City", "StoreId"))},
    description="a store under country#region#city#id: every level is one begins_with Query (pattern 3)",
)

PUBLICATION = Entity(
    "Publication",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("PublicationId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Slot", FieldType.INTEGER),  # 0: the latest revision; k >= 1: revision k, kept
        Field("Revision", FieldType.INTEGER),
        Field("Name", FieldType.STRING),
        Field("Description", FieldType.STRING, required=False),
        Field("Editor", FieldType.STRING, max_length=ID_LENGTH),
        Field("EditedAt", FieldType.TIMESTAMP),
    ),
    keys={"PK": Template("PUBLICATION#{PublicationId}"), "SK": Template("METADATA#v{Slot:06d}")},
    description="a publication's metadata with its history: v0 the latest, v1..vN every revision "
    "(patterns 4, 15)",
)

TITLE = Entity(
    "Title",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("PublicationId", FieldType.STRING, max_length=ID_LENGTH),
        Field("TitleId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Name", FieldType.STRING),
        Field("PublishedAt", FieldType.TIMESTAMP),
    ),
    keys={"PK": Template("PUBLICATION#{PublicationId}"), "SK": Template("TITLE#{TitleId}")},
    description="a title in its publication's collection: the titles are one Query (pattern 4)",
)

TITLE_TAG = Entity(
    "TitleTag",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("PublicationId", FieldType.STRING, max_length=ID_LENGTH),
        Field("TitleId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Tag", FieldType.STRING, max_length=64),
    ),
    keys={
        "PK": Template("PUBLICATION#{PublicationId}"),
        "SK": Template("TAG#{Tag}#{TitleId}"),
        "GSI1PK": Template("TITLE#{PublicationId}#{TitleId}"),
        "GSI1SK": Template("TAG#{Tag}"),
    },
    description="a title <-> tag edge: the titles with a tag by Query, a title's tags by the "
    "Inverted GSI (patterns 4, 10)",
)

REVIEW = Entity(
    "Review",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("ReviewId", FieldType.STRING, max_length=ID_LENGTH),
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("CreatedAt", FieldType.TIMESTAMP),
        Field("Rating", FieldType.INTEGER),
        Field("Title", FieldType.STRING),
        Field("BodyBytes", FieldType.INTEGER),  # the body's UTF-8 size, wherever it is kept
        # exactly one of these holds the body (pattern 18):
        Field("Body", FieldType.STRING, required=False),  # small: as text
        Field("BodyGz", FieldType.BINARY, required=False),  # larger: gzip, in the item
        Field("ChunkCount", FieldType.INTEGER, required=False),  # larger still: gzip, chunked
        Field("ChunkVersion", FieldType.INTEGER, required=False),
        Field("BodyObject", FieldType.STRING, required=False),  # largest: gzip, an S3 object key
    ),
    keys={
        "PK": Template("PRODUCT#{ProductId}"),
        "SK": Template("REVIEW#{ReviewId}"),
        "GSI1PK": Template("CUSTOMER#{CustomerId}"),
        "GSI1SK": Template("REVIEW#{CreatedAt}"),
    },
    description="a product review; its body inline, gzip-compressed, chunked or in S3 by size (pattern 18)",
)

REVIEW_CHUNK = Entity(
    "ReviewChunk",
    CHUNKS,
    Side.DYNAMODB,
    fields=(
        Field("ParentPK", FieldType.STRING),
        Field("ParentSK", FieldType.STRING),
        Field("ChunkVersion", FieldType.INTEGER),
        Field("Seq", FieldType.INTEGER),
        Field("Data", FieldType.BINARY),
    ),
    keys={"ChunkKey": Template("{ParentPK}#{ParentSK}#{ChunkVersion}#{Seq}")},
    description="one chunk of a large attribute; a new ChunkVersion never mixes with the old",
)

COLLECTION = Entity(
    "Collection",
    MAIN,
    Side.DYNAMODB,
    fields=(
        Field("CollectionPK", FieldType.STRING),
        Field("Members", FieldType.INTEGER),  # items the write path keeps in the collection
    ),
    keys={
        "PK": Template("{CollectionPK}"),
        "SK": Template(STATIC_SK),
        "StaticPK": Template("{CollectionPK}"),
    },
    description="the #static marker of an item collection, listed by the DistinctKeys GSI; "
    "created with the collection's first member and deleted with its last (pattern 20)",
)

SALES = Entity(
    "Sales",
    MAIN,
    Side.DERIVED,
    fields=(
        Field("ProductId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Period", FieldType.STRING),  # 2026-11-22 (day) or 2026-11 (month)
        Field("Units", FieldType.INTEGER),
        Field("Revenue", FieldType.DECIMAL),
    ),
    keys={
        "PK": Template("PRODUCT#{ProductId}"),
        "SK": Template("SALES#{Period}"),
        "RankPK": Sharded("SALES#{Period}", "ProductId", RANKING_SHARDS),
        "RankSK": Copy("Units"),
    },
    description="units and revenue of a product in a day or month (pattern 11)",
    versioned=False,
)

CUSTOMER_SPEND = Entity(
    "CustomerSpend",
    MAIN,
    Side.DERIVED,
    fields=(
        Field("CustomerId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Period", FieldType.STRING),  # 2026-11
        Field("Spend", FieldType.DECIMAL),
        Field("Points", FieldType.INTEGER),
    ),
    keys={
        "PK": Template("CUSTOMER#{CustomerId}"),
        "SK": Template("SPEND#{Period}"),
        "RankPK": Sharded("SPEND#{Period}", "CustomerId", RANKING_SHARDS),
        "RankSK": Copy("Points"),
    },
    description="spend and loyalty points of a customer in a month (top customers)",
    versioned=False,
)

AGGREGATION_CURSOR = Entity(
    "AggregationCursor",
    MAIN,
    Side.DERIVED,
    fields=(
        Field("ShardId", FieldType.STRING),
        Field("Watermark", FieldType.STRING),  # last stream sequence number journaled
        Field("Pending", FieldType.STRING, required=False),  # journal being applied, if any
        Field("Chunks", FieldType.INTEGER, required=False),  # its delta chunks
        Field("Progress", FieldType.INTEGER, required=False),  # delta chunks applied so far
    ),
    keys={"PK": Template("AGGREGATE#{ShardId}"), "SK": Template("CURSOR")},
    description="exactly-once state of the aggregation per stream shard; TTL prunes closed shards",
    versioned=False,
)

AGGREGATION_JOURNAL = Entity(
    "AggregationJournal",
    MAIN,
    Side.DERIVED,
    fields=(
        Field("ShardId", FieldType.STRING),
        Field("JournalId", FieldType.STRING),
        Field("Part", FieldType.INTEGER),
        Field("Deltas", FieldType.STRING),  # JSON [[entity, owner, period, a, b], ...]
    ),
    keys={"PK": Template("AGGREGATE#{ShardId}"), "SK": Template("JOURNAL#{JournalId}#{Part:04d}")},
    description="a batch's net counter deltas, kept until every one is applied (a crash resumes them)",
    versioned=False,
)

AGGREGATION_RANGE = Entity(
    "AggregationRange",
    MAIN,
    Side.DERIVED,
    fields=(
        Field("ShardId", FieldType.STRING),
        Field("First", FieldType.STRING),  # first sequence number journaled, zero-padded (sorts)
        Field("Last", FieldType.STRING),  # last one
    ),
    keys={"PK": Template("AGGREGATE#{ShardId}"), "SK": Template("APPLIED#{First}")},
    description="the stream records one batch journaled: a failed batch redriven later applies only "
    "the records no batch did; TTL as the cursor's",
    versioned=False,
)

EVENTS = Table(
    name="events",
    partition=_s("PK"),
    sort=_s("SK"),
    purpose="one table per day of device events (pattern 22); created ahead, cooled, archived, dropped",
)

EVENT = Entity(
    "Event",
    EVENTS,
    Side.DYNAMODB,
    fields=(
        Field("Source", FieldType.STRING, max_length=ID_LENGTH),  # a device, a service, a user
        Field("At", FieldType.STRING),  # ISO-8601 UTC, ms
        Field("EventId", FieldType.STRING, max_length=ID_LENGTH),
        Field("Kind", FieldType.STRING),
        Field("Data", FieldType.JSON, required=False),
    ),
    keys={"PK": Template("SOURCE#{Source}"), "SK": Template("{At}#{EventId}")},
    description="an event of a source at a time; a source's events of a day are one Query",
    versioned=False,
)

EVENT_SERIES = TimeSeries(EVENT, Period.DAY, time_attribute="At")

MODEL = Model(
    time_series=(EVENT_SERIES,),
    tables=(MAIN, CHUNKS),
    entities=(
        CUSTOMER,
        PRODUCT_DETAILS,
        PRODUCT_AVAILABILITY,
        ORDER,
        ORDER_LINE,
        PLAYER_SCORE,
        FOLLOW,
        ORDER_REF,
        STORE,
        PUBLICATION,
        TITLE,
        TITLE_TAG,
        REVIEW,
        REVIEW_CHUNK,
        COLLECTION,
        SALES,
        CUSTOMER_SPEND,
        AGGREGATION_CURSOR,
        AGGREGATION_JOURNAL,
        AGGREGATION_RANGE,
    ),
)
