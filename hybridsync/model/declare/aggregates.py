"""Declared aggregates: the records of their sources grouped, by period, into sums and counts
the engine keeps exactly once from the stream (what cannot be taken back, a min or a max, is
refused: `NotAggregable`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any

from hybridsync.model import keys, limits
from hybridsync.model.declare.builders import Copy, KeyBuilder, Sharded, Template
from hybridsync.model.declare.entities import Entity, Field
from hybridsync.model.declare.tables import FieldType, Side, Table
from hybridsync.model.declare.timeseries import Period


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
