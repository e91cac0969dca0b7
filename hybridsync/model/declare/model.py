"""A whole model: its tables, entities, aggregates and time series, checked together as one
declaration (reserved names and prefixes, key builders naming fields, SQL columns the engine
keeps), and the entities the engine derives from it."""

from __future__ import annotations

import string
from dataclasses import dataclass, replace
from functools import cached_property

from hybridsync.model.declare.aggregates import Aggregate
from hybridsync.model.declare.builders import Sharded, Template, When, literal_head, reads
from hybridsync.model.declare.engine import STATIC_SK, bookkeeping, collection, job_entities
from hybridsync.model.declare.entities import Bodies, Entity, _snake
from hybridsync.model.declare.tables import DEFAULT_NAMES, FieldType, Names, Side, Table
from hybridsync.model.declare.timeseries import TimeSeries

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
            import difflib  # only when a declaration is refused: never at a function's cold start

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
            for _, placeholder, spec, _ in string.Formatter().parse(pattern):
                if (placeholder and spec and spec[-1] in INTEGER_SPECS
                        and fields[placeholder].type is not FieldType.INTEGER):  # fmt: skip
                    raise ValueError(
                        f"{entity.name}.{attribute}: {pattern!r} formats {placeholder} as an integer "
                        f"({{{placeholder}:{spec}}}), but it is a {fields[placeholder].type.name}"
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

    def with_names(self, **changes: str) -> Model:
        return replace(self, names=replace(self.names, **changes))
