"""Tables and what every item of them carries: the reserved attribute names (`Names`), where an
entity is mastered (`Side`), a field's type on both sides (`FieldType`), key attributes, indexes
and the tables themselves, with the CreateTable call each renders."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import cache, cached_property
from typing import Any, Required, TypedDict

ID_LENGTH = 128  # a sensible limit for ids; a field's max_length says its own


# --- DynamoDB's CreateTable request, as `Table.create_request` renders it (boto3's
# `client.create_table(**request)` takes it as it is)


class KeySchemaElement(TypedDict):
    AttributeName: str
    KeyType: str  # HASH | RANGE


class AttributeDefinition(TypedDict):
    AttributeName: str
    AttributeType: str  # S | N | B


class Throughput(TypedDict):
    ReadCapacityUnits: int
    WriteCapacityUnits: int


class IndexProjection(TypedDict, total=False):
    ProjectionType: Required[str]  # ALL | KEYS_ONLY | INCLUDE
    NonKeyAttributes: list[str]


class GlobalSecondaryIndex(TypedDict, total=False):
    IndexName: Required[str]
    KeySchema: Required[list[KeySchemaElement]]
    Projection: Required[IndexProjection]
    ProvisionedThroughput: Throughput


class StreamSpecification(TypedDict):
    StreamEnabled: bool
    StreamViewType: str


class CreateTableRequest(TypedDict, total=False):
    TableName: Required[str]
    KeySchema: Required[list[KeySchemaElement]]
    AttributeDefinitions: Required[list[AttributeDefinition]]
    BillingMode: Required[str]  # PAY_PER_REQUEST | PROVISIONED
    ProvisionedThroughput: Throughput
    GlobalSecondaryIndexes: list[GlobalSecondaryIndex]
    StreamSpecification: StreamSpecification


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


@cache
def _partitions() -> tuple[dict[str, Any], ...]:
    from botocore.loaders import create_loader  # the SDK's own list: every partition, its Regions

    return tuple(create_loader().load_data("partitions")["partitions"])


def partition_of(region: str) -> str | None:
    """The AWS partition (`aws`, `aws-cn`, `aws-us-gov`, ...) of a Region's name, as the SDK knows
    them: its listed Regions, then each partition's pattern for Regions newer than it; None: no
    Region's name."""
    partitions = _partitions()
    listed = next((p["id"] for p in partitions if region in p["regions"]), None)
    return listed or next(
        (p["id"] for p in partitions if re.fullmatch(p["regionRegex"].strip("^$"), region)), None
    )


def regions(names: str | tuple[str, ...] | list[str], what: str) -> tuple[str, ...]:
    """Region names, each checked (one comma-separated string, as `-c replica_regions` gives them,
    or a sequence); a ValueError naming `what` otherwise."""
    given = [n.strip() for n in names.split(",")] if isinstance(names, str) else [str(n) for n in names]
    given = [n for n in given if n]
    wrong = [n for n in given if partition_of(n) is None]
    if wrong:
        raise ValueError(f"{what}: {', '.join(map(repr, wrong))} is not an AWS Region (e.g. us-west-2)")
    if len(set(given)) < len(given):
        raise ValueError(f"{what}: a Region is named twice ({', '.join(given)})")
    return tuple(given)


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
    `"kinesis"` (Kinesis Data Streams for DynamoDB); None: the app's `-c change_source`.
    `replicas`: the other Regions the table is a global table in (version 2019.11.21, multi-Region
    eventual consistency), besides the home Region the stacks deploy to; empty: the app's
    `-c replica_regions`. `consistency`: its replicas' mode, `"eventual"` (MREC); `"strong"` (MRSC)
    is refused, with the reason."""

    name: str
    partition: KeyAttribute
    sort: KeyAttribute | None = None
    indexes: tuple[Index, ...] = ()
    stream: StreamView | None = None
    ttl_attribute: str | None = None
    purpose: str = ""
    distinct_index: str | None = None
    change_source: str | None = None
    replicas: tuple[str, ...] = ()
    consistency: str = "eventual"

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", regions(self.replicas, f"table {self.name!r}: replicas"))
        if self.consistency == "strong":  # GlobalTables.html, "Multi-Region strong consistency"
            raise ValueError(
                f"table {self.name!r}: multi-Region strong consistency (MRSC) is refused: its tables take no "
                "transactions, and the aggregation folds each batch in one TransactWriteItems; nor TTL, "
                "which expires what PostgreSQL keeps. Keep consistency='eventual' (MREC)"
            )
        if self.consistency != "eventual":
            raise ValueError(
                f"table {self.name!r}: consistency is 'eventual' (MREC), not {self.consistency!r}"
            )
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

    def create_request(self, name: str, capacity: tuple[int, int] | None = None) -> CreateTableRequest:
        """The CreateTable call for this declaration (the CDK data stack renders the same one):
        on demand, or provisioned with (read, write) `capacity` for the table and each index."""
        throughput: Throughput | None = capacity and {
            "ReadCapacityUnits": capacity[0],
            "WriteCapacityUnits": capacity[1],
        }
        request: CreateTableRequest = {
            "TableName": name,
            "KeySchema": _key_schema(self.partition, self.sort),
            "AttributeDefinitions": [
                {"AttributeName": a.name, "AttributeType": a.type} for a in self.attribute_definitions()
            ],
            "BillingMode": "PROVISIONED" if throughput else "PAY_PER_REQUEST",
        }
        if throughput:
            request["ProvisionedThroughput"] = throughput
        if self.indexes:
            request["GlobalSecondaryIndexes"] = [_index_request(index, throughput) for index in self.indexes]
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


def _key_schema(partition: KeyAttribute, sort: KeyAttribute | None) -> list[KeySchemaElement]:
    schema: list[KeySchemaElement] = [{"AttributeName": partition.name, "KeyType": "HASH"}]
    return schema + ([{"AttributeName": sort.name, "KeyType": "RANGE"}] if sort else [])


def _index_request(index: Index, throughput: Throughput | None) -> GlobalSecondaryIndex:
    """A GSI of a CreateTable request; with the table's `throughput` when it is provisioned."""
    projection: IndexProjection = {"ProjectionType": index.projection.value}
    if index.non_key_attributes:
        projection["NonKeyAttributes"] = list(index.non_key_attributes)
    request: GlobalSecondaryIndex = {
        "IndexName": index.name,
        "KeySchema": _key_schema(index.partition, index.sort),
        "Projection": projection,
    }
    if throughput:
        request["ProvisionedThroughput"] = throughput
    return request
