"""The contract a model must keep for the engine to serve it, as tests parametrized over the
model's entities and aggregates, run against real components (DynamoDB Local and its streams,
embedded PostgreSQL at the revisions' heads):

- every entity's keys rebuild from its item, and its values survive DynamoDB's wire format;
- a stream image of a synced entity becomes its SQL row and the row becomes the same values again
  (through the write-back for DynamoDB-mastered ones, the outbox for PostgreSQL-mastered ones);
- the write-back's filters admit exactly the written-back entities, each aggregation's exactly its
  sources, and never a view the SQL side wrote;
- every PostgreSQL-mastered table has its triggers, and the migrations at head equal the model;
- every aggregate equals a clean recount after generated inserts, modifies and removes, delivered
  in batches and then delivered again (a replay changes nothing).

`from hybridsync.testing.contract import *` in a test module runs it (over the project's model,
or the module's `HYBRIDSYNC_MODEL`); its fixtures come from the `hybridsync` pytest plugin."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from hybridsync.dynamodb import store
from hybridsync.model import config
from hybridsync.model.convert import item_values, marshal, unmarshal
from hybridsync.model.declare import Aggregate, Entity, FieldType, Model, Side
from hybridsync.runtime import db
from hybridsync.sql import migrations, rows
from hybridsync.streams import filters
from hybridsync.testing import sample_values
from hybridsync.workloads import Writer, scan

if TYPE_CHECKING:
    from hybridsync import local

__all__ = [
    "pytest_generate_tests",
    "test_a_synced_entity_round_trips_between_its_item_and_its_row",
    "test_aggregate_equals_a_recount_under_inserts_modifies_removes_and_replays",
    "test_every_postgresql_mastered_table_has_its_triggers",
    "test_filters_admit_exactly_what_each_consumer_needs",
    "test_keys_rebuild_from_the_item_and_values_survive_the_wire",
    "test_migrations_at_head_equal_the_model",
]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize over the module's model: `entity`, `synced` (entities with a SQL table) and
    `aggregate` arguments take each of its entities, synced entities and aggregates."""
    wanted = {"entity", "synced", "aggregate"} & set(metafunc.fixturenames)
    if not wanted:
        return
    model = config.model(getattr(metafunc.module, "HYBRIDSYNC_MODEL", None))
    declared: dict[str, list[Entity] | list[Aggregate]] = {
        "entity": list(model.entities),
        "synced": list(model.synced()),
        "aggregate": list(model.aggregates),
    }
    for name in wanted:
        values = declared[name]
        metafunc.parametrize(
            name,
            values or [pytest.param(None, marks=pytest.mark.skip(f"the model has no {name}"))],
            ids=[v.name for v in values] or None,
        )


def test_keys_rebuild_from_the_item_and_values_survive_the_wire(entity: Entity) -> None:
    values = sample_values(entity)
    item = entity.item(values)
    assert entity.key(item) == entity.key(values)  # what a stream record's Keys name, from the item alone
    assert entity.values(item) == values  # every value kept, nothing added to them
    assert unmarshal(marshal(item)) == item  # DynamoDB's wire format loses nothing
    for attribute, builder in entity.keys.items():
        value = builder(values)
        if isinstance(value, str) and hasattr(builder, "prefix") and hasattr(builder, "pattern"):
            assert value.startswith(entity.key_prefix(attribute)), (attribute, value)  # begins_with reads it


def test_a_synced_entity_round_trips_between_its_item_and_its_row(
    synced: Entity, hybridsync_database: local.LocalStack, hybridsync_model: Model
) -> None:
    """DynamoDB-mastered: its stream record, written back, is its row; PostgreSQL-mastered: its row,
    drained from the outbox, is its view. Either way the values come back as they were."""
    from hybridsync.local.dynamodb.streams import StreamReader
    from hybridsync.reads import cache
    from hybridsync.sync import outbox, writeback

    stack, model = hybridsync_database, hybridsync_model
    client, table = stack.client(), stack.table_names[synced.table.name]
    engine = db.create_engine(stack.database_url)
    values = sample_values(synced)
    key = {a: values[a] for a in synced.sql_key}
    try:
        if synced.master is Side.DYNAMODB:
            arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
            reader = StreamReader(stack.client("dynamodbstreams"), arn, start="TRIM_HORIZON")
            reader.read()  # what earlier tests wrote
            store.put(client, table, synced, values)
            records = [r for r in reader.read() if r["dynamodb"]["Keys"] == marshal(synced.key(values))]
            assert records, "the put reached the stream"
            assert filters.admits(writeback.event_filters(model), records[-1])
            outcome = writeback.write_back(
                records, engine, model, truth=writeback.Truth(client, stack.table_names)
            )
            assert not outcome.rejected, outcome.rejected
            row = cache._read_row(engine, synced, key)
        else:
            with engine.begin() as conn:
                rows.upsert(conn, synced, {k: v for k, v in values.items() if k != synced.names.version})
            outbox.drain_all(engine, client, model, stack.table_names)
            view = store.get(client, table, synced.key(values))
            assert view is not None, "the outbox drain wrote the view"
            row = cache._read_row(engine, synced, key)
            assert row is not None, "the row the outbox drained"
            assert {
                k: v for k, v in view.items() if k in values and k != synced.names.version
            } == item_values(synced, row)
        assert row is not None
        back = item_values(synced, row)
        assert back == {k: v for k, v in values.items() if k != synced.names.version}
    finally:
        engine.dispose()


def test_filters_admit_exactly_what_each_consumer_needs(hybridsync_model: Model) -> None:
    from hybridsync.sync import aggregate, writeback

    model = hybridsync_model
    names = model.names
    write_back = writeback.event_filters(model)
    folds = {
        t: aggregate.Aggregation(model, t).event_filters() for t in {a.table.name for a in model.aggregates}
    }
    for entity in model.all_entities:
        item = entity.item(sample_values(entity))
        record = {
            "eventName": "INSERT",
            "dynamodb": {"Keys": marshal(entity.key(item)), "NewImage": marshal(item)},
        }
        removed = {
            "eventName": "REMOVE",
            "dynamodb": {"Keys": marshal(entity.key(item)), "OldImage": marshal(item)},
        }
        # a consumer's filter admits its entities' records by key prefix, whoever wrote them; another
        # entity's only when its keys begin as theirs do (the function places it and leaves it)
        written_back = entity in model.written_back() or _prefixed(record, model.written_back())
        assert filters.admits(write_back, record) is written_back, entity.name
        assert filters.admits(write_back, removed) is written_back, entity.name
        view = {
            "eventName": "INSERT",
            "dynamodb": {"NewImage": marshal(item | {names.origin: names.origin_sql})},
        }
        assert not filters.admits(write_back, view), (
            f"{entity.name}: a view the SQL side wrote is written back"
        )
        for table, patterns in folds.items():
            sources = [s.entity for a in model.aggregates if a.table.name == table for s in a.sources]
            sourced = entity in sources or _prefixed(record, sources)
            assert filters.admits(patterns, record) is sourced, (table, entity.name)
            assert filters.admits(patterns, removed) is sourced, (table, entity.name)


def _prefixed(record: dict[str, Any], entities: Iterable[Entity]) -> bool:
    """Whether the record's keys begin as some of these entities' keys begin (`placing.key_filter`)."""
    from hybridsync.model import placing

    keys = placing.key_filter(list(entities))
    return not keys or filters.admits([{"dynamodb": keys}], record)


def test_every_postgresql_mastered_table_has_its_triggers(
    hybridsync_database: local.LocalStack, hybridsync_model: Model
) -> None:
    engine = db.create_engine(hybridsync_database.database_url)
    try:
        with engine.connect() as conn:
            assert migrations.trigger_drift(conn, hybridsync_model) == []
            present = migrations.existing_triggers(conn)
    finally:
        engine.dispose()
    for entity in hybridsync_model.mastered_in(Side.POSTGRESQL):
        if entity.sql_table and entity.managed:
            assert present.get(entity.sql_table) == set(migrations.TRIGGERS), entity.name


def test_migrations_at_head_equal_the_model(
    hybridsync_database: local.LocalStack, hybridsync_spec: str
) -> None:
    differences = migrations.check(hybridsync_database.database_url, hybridsync_spec)
    assert not differences, "\n".join(differences.lines())


def _vary(aggregate: Aggregate, entity: Entity, rng: random.Random, n: int) -> dict[str, Any]:
    """A source record's values with what the aggregate reads varied: the group (a few values, so
    items are shared), the time (a few periods), each measure's fields, and `where`'s attributes."""
    values = sample_values(entity, n)
    for name in aggregate.group_by:
        values[name] = (
            rng.randrange(3) if entity.field(name).type is FieldType.INTEGER else f"g{rng.randrange(3)}"
        )
    values[aggregate.time] = sample_values(entity, rng.choice([1, 24 * 40, 24 * 400]))[aggregate.time]
    for measure in aggregate.measures:
        for name in measure.fields if not measure.sources or entity.name in measure.sources else ():
            kind = entity.field(name).type
            values[name] = (
                rng.randint(0, 50) if kind is FieldType.INTEGER else Decimal(rng.randint(0, 99_999)) / 100
            )
    for where in [aggregate.where, *(s.where for s in aggregate.sources if s.entity.name == entity.name)]:
        if where is not None:
            values[where.attribute] = rng.choice([*where.one_of, *where.none_of, "OTHER"])
    return values


def test_aggregate_equals_a_recount_under_inserts_modifies_removes_and_replays(
    aggregate: Aggregate, hybridsync_database: local.LocalStack, hybridsync_model: Model
) -> None:
    from hybridsync.local.dynamodb.streams import StreamReader
    from hybridsync.sync.aggregate import Aggregation

    stack = hybridsync_database.with_tables(f"a{uuid.uuid4().hex[:6]}", model=hybridsync_model)
    client, table = stack.client(), stack.table_names[aggregate.table.name]
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    reader = StreamReader(stack.client("dynamodbstreams"), arn, start="TRIM_HORIZON")
    rng, writer = random.Random(20261123), Writer(client, table)
    live: list[tuple[Entity, dict[str, Any]]] = []
    for n in range(60):
        source = rng.choice(aggregate.sources).entity
        roll = rng.random()
        if live and roll < 0.3:  # a modify: any of what the aggregate reads may change
            entity, values = live.pop(rng.randrange(len(live)))
            changed = _vary(aggregate, entity, rng, n)
            movable = sorted(set(changed) - entity.identity - {entity.names.version})
            values = values | {k: changed[k] for k in rng.sample(movable, min(3, len(movable)))}
            live.append((entity, writer.put(entity, values)))
        elif live and roll < 0.45:  # a remove
            entity, values = live.pop(rng.randrange(len(live)))
            writer.delete(entity, values)
        else:
            live.append((source, writer.put(source, _vary(aggregate, source, rng, n))))
    records = reader.read()
    folding = Aggregation(hybridsync_model, aggregate.table)
    shard = reader.shard
    batches, at = [], 0
    while at < len(records):
        size = rng.randint(1, 25)
        batches.append(records[at : at + size])
        at += size
    for batch in batches:
        folding.aggregate(batch, client, table, shard)
    for batch in rng.sample(batches, min(3, len(batches))):  # delivered again: at-least-once
        assert folding.aggregate(batch, client, table, shard).applied == 0
    items = scan(client, table)
    mine = lambda key: key[0] == aggregate.name  # noqa: E731
    assert folding.stored(items, mine) == folding.recount(items, mine)
    assert folding.recount(items, mine), "the generated records counted for something"
