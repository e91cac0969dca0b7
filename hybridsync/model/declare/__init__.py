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

Every name is imported from here; the modules hold them by subject: tables, builders (key
builders), entities (with large bodies), timeseries, aggregates, engine (the engine's own
entities) and model.
"""

from __future__ import annotations

from hybridsync.model.declare.aggregates import (
    PERIOD,
    Aggregate,
    Count,
    CountDistinct,
    Max,
    Measure,
    Min,
    NotAggregable,
    Rank,
    Source,
    Sum,
    Where,
)
from hybridsync.model.declare.builders import (
    Copy,
    Hierarchy,
    KeyBuilder,
    Partitioned,
    Sharded,
    Template,
    When,
    literal_head,
    partitions_of,
    reads,
)
from hybridsync.model.declare.engine import (
    STATIC_SK,
    bookkeeping,
    collection,
    engine_entity,
    job_entities,
)
from hybridsync.model.declare.entities import (
    BODY,
    DEFAULT_TYPES,
    Bodies,
    Entity,
    Field,
    FieldDefault,
    body_fields,
    chunks_of,
)
from hybridsync.model.declare.model import (
    ENGINE_COLUMNS,
    INTEGER_SPECS,
    Model,
)
from hybridsync.model.declare.tables import (
    CHANGE_SOURCES,
    DEFAULT_NAMES,
    ID_LENGTH,
    NEW_AND_OLD_IMAGES,
    CreateTableRequest,
    FieldType,
    Index,
    KeyAttribute,
    Names,
    Projection,
    Side,
    StreamView,
    Table,
    partition_of,
    regions,
)
from hybridsync.model.declare.timeseries import (
    Period,
    TimeSeries,
)

__all__ = [
    "BODY",
    "CHANGE_SOURCES",
    "DEFAULT_NAMES",
    "DEFAULT_TYPES",
    "ENGINE_COLUMNS",
    "ID_LENGTH",
    "INTEGER_SPECS",
    "NEW_AND_OLD_IMAGES",
    "PERIOD",
    "STATIC_SK",
    "Aggregate",
    "Bodies",
    "Copy",
    "Count",
    "CountDistinct",
    "CreateTableRequest",
    "Entity",
    "Field",
    "FieldDefault",
    "FieldType",
    "Hierarchy",
    "Index",
    "KeyAttribute",
    "KeyBuilder",
    "Max",
    "Measure",
    "Min",
    "Model",
    "Names",
    "NotAggregable",
    "Partitioned",
    "Period",
    "Projection",
    "Rank",
    "Sharded",
    "Side",
    "Source",
    "StreamView",
    "Sum",
    "Table",
    "Template",
    "TimeSeries",
    "When",
    "Where",
    "body_fields",
    "bookkeeping",
    "chunks_of",
    "collection",
    "engine_entity",
    "job_entities",
    "literal_head",
    "partition_of",
    "partitions_of",
    "reads",
    "regions",
]
