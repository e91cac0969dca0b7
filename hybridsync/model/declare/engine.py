"""The engine's own entities, under the model's reserved prefix: the bookkeeping of aggregation
(cursors, journals, ranges, changes, shards), the checkpoints of long jobs, collection markers."""

from __future__ import annotations

from hybridsync.model.declare.builders import Template
from hybridsync.model.declare.entities import Entity, Field
from hybridsync.model.declare.tables import FieldType, Names, Side, Table

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
