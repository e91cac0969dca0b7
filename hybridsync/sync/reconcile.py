"""Reconcile: compare every written-back entity in DynamoDB with its PostgreSQL rows, row by row
(like a DMS validation task), and optionally repair PostgreSQL from DynamoDB; and the other way,
the rows mastered in PostgreSQL with their DynamoDB views."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from hybridsync.convert import to_row
from hybridsync.declare import Entity, FieldType, Model, Side
from hybridsync.records import Rejected
from hybridsync.scans import Scanner
from hybridsync.schema import table_of
from hybridsync.sync.writeback import Change, apply_changes
from hybridsync.views import is_live, is_missing


@dataclass
class Drift:
    missing: list[tuple[Any, ...]] = field(default_factory=list)  # in DynamoDB, not live in SQL
    stale: list[tuple[Any, ...]] = field(default_factory=list)  # both, but SQL differs
    extra: list[tuple[Any, ...]] = field(default_factory=list)  # live in SQL, gone from DynamoDB
    unmappable: list[str] = field(default_factory=list)  # DynamoDB items the mapping rejects
    unrepaired: list[str] = field(default_factory=list)  # rows PostgreSQL refused during repair
    checked: int = 0

    @property
    def total(self) -> int:
        return len(self.missing) + len(self.stale) + len(self.extra)


def _comparable(entity: Entity, row: dict[str, Any]) -> dict[str, Any]:
    """Values as both sides can compare them: JSON parsed with exact numbers."""
    out = {}
    for f in entity.fields:
        value = row[f.column]
        if f.type is FieldType.JSON and value is not None:
            value = json.loads(value, parse_float=Decimal, parse_int=Decimal)
        out[f.column] = value
    return out


def _dynamodb_items(
    client: Any,
    tables: Mapping[str, str] | str,
    entities: tuple[Entity, ...],
    scanner: Callable[[str], Scanner] | None,
) -> dict[str, list[dict]]:
    """The entities' items, from one scan of each table holding them. No server-side filter: a
    Scan is charged for every item it reads either way, so filtering here costs nothing more and
    keeps the scanner's capacity figure exact."""
    items: dict[str, list[dict]] = {e.name: [] for e in entities}
    for logical in sorted({e.table.name for e in entities}):
        physical = tables if isinstance(tables, str) else tables[logical]
        scan = scanner(physical) if scanner else Scanner(client, physical)
        tag = next(e.names.entity for e in entities)
        for item in scan.items():
            if item.get(tag) in items:
                items[item[tag]].append(item)
    return items


def _sql_rows(
    conn: sa.Connection, entity: Entity, *, live_only: bool = True
) -> dict[tuple[Any, ...], dict[str, Any]]:
    table = table_of(entity)
    columns = [
        sa.cast(table.c[f.column], sa.Text).label(f.column) if f.type is FieldType.JSON else table.c[f.column]
        for f in entity.fields
    ]
    key = [entity.field(a).column for a in entity.sql_key]
    query = sa.select(*columns, table.c.version)
    if live_only:  # written-back tables keep deleted rows as tombstones
        query = query.where(table.c.deleted.is_(False))
    return {tuple(r[c] for c in key): r for r in (row._asdict() for row in conn.execute(query))}


def reconcile(
    client: Any,
    tables: Mapping[str, str] | str,
    engine: sa.Engine,
    model: Model,
    *,
    repair: bool = False,
    scanner: Callable[[str], Scanner] | None = None,
) -> dict[str, Drift]:
    """Drift per entity. With `repair`, DynamoDB's state is written over SQL's (never over a newer
    SQL version) and rows gone from DynamoDB are tombstoned. `scanner` sets how the table is read
    (pace, segments, consistency) and adds up what it cost; by default one eventually consistent
    sequential scan per table. `tables`: logical -> physical names (or one physical name for all)."""
    entities = model.written_back()
    dynamo = _dynamodb_items(client, tables, entities, scanner)
    report: dict[str, Drift] = {}
    fixes: list[Change] = []
    with engine.connect() as conn:
        for entity in entities:
            drift = report.setdefault(entity.name, Drift())
            sql = _sql_rows(conn, entity)
            seen = set()
            for item in dynamo[entity.name]:
                drift.checked += 1
                try:
                    row = to_row(entity, item)
                except Rejected as rejected:
                    where = "/".join(str(item.get(k.name)) for k in entity.table.key_schema())
                    drift.unmappable.append(f"{where}: {rejected.reason}")
                    continue
                key = tuple(row[entity.field(a).column] for a in entity.sql_key)
                seen.add(key)
                version = int(item[model.names.version])
                current = sql.get(key)
                if current is None:
                    drift.missing.append(key)
                elif current["version"] != version or _comparable(entity, current) != _comparable(
                    entity, row
                ):
                    drift.stale.append(key)
                else:
                    continue
                fixes.append(Change(entity, key, version, False, row, {"entity": entity.name, "key": key}))
            for key, current in sql.items():
                if key not in seen:
                    drift.extra.append(key)
                    row = {f.column: current[f.column] for f in entity.fields}
                    fixes.append(
                        Change(
                            entity, key, current["version"], True, row, {"entity": entity.name, "key": key}
                        )
                    )
    if repair and fixes:
        with engine.begin() as conn:
            for letter in apply_changes(conn, fixes, force=True):
                where = letter.record
                report[where["entity"]].unrepaired.append(
                    f"{'/'.join(map(str, where['key']))}: {letter.reason}"
                )
    return report


def reconcile_views(
    client: Any,
    tables: Mapping[str, str] | str,
    engine: sa.Engine,
    model: Model,
    *,
    scanner: Callable[[str], Scanner] | None = None,
    every_row: bool = False,
) -> dict[str, Drift]:
    """The other direction: each entity mastered in PostgreSQL against its DynamoDB views. A view
    of an older version or other values is stale; a live view of a row PostgreSQL no longer has
    is extra. A row without a view is missing only with `every_row` (when every row was changed
    through the outbox since the views were empty): otherwise the cache may simply be cold."""
    entities = model.mastered_in(Side.POSTGRESQL)
    dynamo = _dynamodb_items(client, tables, entities, scanner)
    now = int(time.time())
    report: dict[str, Drift] = {}
    with engine.connect() as conn:
        for entity in entities:
            drift = report.setdefault(entity.name, Drift())
            rows = _sql_rows(conn, entity, live_only=False)
            key_names = [k.name for k in entity.table.key_schema()]
            views = {
                tuple(i[k] for k in key_names): i for i in dynamo[entity.name] if is_live(entity, i, now)
            }
            for key, row in rows.items():
                drift.checked += 1
                where = entity.key({a: row[entity.field(a).column] for a in entity.sql_key})
                view = views.pop(tuple(where[k] for k in key_names), None)
                if view is None or is_missing(view):
                    if every_row or view is not None:
                        drift.missing.append(key)
                elif int(view[model.names.version]) != row["version"] or _comparable(
                    entity, to_row(entity, view)
                ) != (_comparable(entity, row)):
                    drift.stale.append(key)
            drift.extra += [
                tuple(view.get(a) for a in entity.sql_key) for view in views.values() if not is_missing(view)
            ]
    return report
