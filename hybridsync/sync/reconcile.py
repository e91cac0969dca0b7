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
from sqlalchemy.dialects.postgresql import insert

from hybridsync import store
from hybridsync.convert import item_values, to_row
from hybridsync.declare import Entity, FieldType, Model, Side
from hybridsync.records import Rejected
from hybridsync.scans import Scanner
from hybridsync.schema import table_of
from hybridsync.sync.writeback import first_line
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
    clock: Callable[[], float] = time.time,
) -> tuple[dict[str, list[dict]], dict[str, float]]:
    """The entities' items, from one scan of each table holding them, and per table the time what
    was read is a picture of (an export's time; a scan's start by `clock`). No server-side filter:
    a Scan is charged for every item it reads either way, so filtering here costs nothing more and
    keeps the scanner's capacity figure exact."""
    items: dict[str, list[dict]] = {e.name: [] for e in entities}
    snapshots: dict[str, float] = {}
    for logical in sorted({e.table.name for e in entities}):
        physical = _physical(tables, logical)
        scan = scanner(physical) if scanner else Scanner(client, physical)
        snapshot_at = getattr(scan, "snapshot_at", None)
        snapshots[logical] = snapshot_at() if snapshot_at else clock()
        tag = next(e.names.entity for e in entities)
        for item in scan.items():
            if item.get(tag) in items:
                items[item[tag]].append(item)
    return items, snapshots


def _physical(tables: Mapping[str, str] | str, logical: str) -> str:
    return tables if isinstance(tables, str) else tables[logical]


def _sql_rows(
    conn: sa.Connection, entity: Entity, *, live_only: bool = True, keys: list[tuple[Any, ...]] | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    table = table_of(entity)
    columns = [
        sa.cast(table.c[f.column], sa.Text).label(f.column) if f.type is FieldType.JSON else table.c[f.column]
        for f in entity.fields
    ]
    key = [entity.field(a).column for a in entity.sql_key]
    bookkeeping = [table.c.version]
    if entity.master is Side.DYNAMODB:  # written back: tombstones, and when each row last changed
        bookkeeping += [table.c.deleted, sa.extract("epoch", table.c.updated_at).label("changed_at")]
    query = sa.select(*columns, *bookkeeping)
    if live_only:  # written-back tables keep deleted rows as tombstones
        query = query.where(table.c.deleted.is_(False))
    if keys is not None:
        query = query.where(sa.tuple_(*(table.c[c] for c in key)).in_(keys))
    return {tuple(r[c] for c in key): r for r in (row._asdict() for row in conn.execute(query))}


def _same(entity: Entity, row: dict[str, Any], current: dict[str, Any], version: int) -> bool:
    return (
        not current.get("deleted")
        and current["version"] == version
        and _comparable(entity, current) == _comparable(entity, row)
    )


@dataclass(frozen=True)
class Fix:
    """What repair writes to one row: the row and its version (or a tombstone), only if the row is
    still as it was seen (`seen`: version and deleted; None: no row), so a write-back landing
    meanwhile is never overwritten."""

    key: tuple[Any, ...]
    row: dict[str, Any]
    version: int
    deleted: bool
    seen: tuple[int, bool] | None


def reconcile(
    client: Any,
    tables: Mapping[str, str] | str,
    engine: sa.Engine,
    model: Model,
    *,
    repair: bool = False,
    scanner: Callable[[str], Scanner] | None = None,
) -> dict[str, Drift]:
    """Drift per entity, safe while the app runs and writes continue. The scan (or export) names
    candidates; each is then read again by key, strongly consistent, beside its PostgreSQL row read
    again, and only what still differs is drift: a change in flight when the scan passed is not.
    A row is extra only if it last changed before the snapshot the scan is (its start, or the
    export's time) and DynamoDB holds no item for it now. With `repair`, DynamoDB's state as read
    again is written over PostgreSQL's, each row only if it is still as it was read (a write-back
    landing meanwhile wins) and never older over newer; extra rows are tombstoned at their own
    version. `scanner` sets how a table is read (pace, segments, an export) and adds up what it
    cost; by default one eventually consistent sequential scan per table. `tables`: logical ->
    physical names (or one physical name for all)."""
    entities = model.written_back()

    def database_clock() -> float:  # the clock `updated_at` is written by
        with engine.connect() as conn:
            return float(conn.execute(sa.text("SELECT extract(epoch FROM now())")).scalar_one())

    dynamo, snapshots = _dynamodb_items(client, tables, entities, scanner, database_clock)
    report: dict[str, Drift] = {}
    fixes: dict[str, list[Fix]] = {}
    with engine.connect() as conn:
        for entity in entities:
            drift = report.setdefault(entity.name, Drift())
            sql = _sql_rows(conn, entity)
            seen: set[tuple[Any, ...]] = set()
            suspects: Suspects = {}
            for item in dynamo[entity.name]:
                drift.checked += 1
                try:
                    row = to_row(entity, item)
                except Rejected as rejected:
                    drift.unmappable.append(f"{_where(entity, item)}: {rejected.reason}")
                    continue
                key = tuple(row[entity.field(a).column] for a in entity.sql_key)
                seen.add(key)
                version = _version(item, model.names.version)
                if version is None:  # a writer outside the model's contract (plain PutItem): named
                    drift.unmappable.append(f"{_where(entity, item)}: {_UNVERSIONED}")
                    continue
                current = sql.get(key)
                if current is None or not _same(entity, row, current, version):
                    suspects[key] = entity.key(item)
            snapshot = snapshots[entity.table.name]
            for key, current in sql.items():
                if key not in seen and current["changed_at"] < snapshot:
                    try:
                        suspects[key] = entity.key(item_values(entity, current))
                    except ValueError as error:
                        drift.unmappable.append(f"{'/'.join(map(str, key))}: {error}")
            if suspects:
                physical = _physical(tables, entity.table.name)
                fixes[entity.name] = _confirm(client, physical, conn, entity, suspects, snapshot, drift)
    if repair:
        with engine.begin() as conn:
            for name, planned in fixes.items():
                entity = model.entity(name)
                for fix, why in _write(conn, entity, planned):
                    report[name].unrepaired.append(f"{'/'.join(map(str, fix.key))}: {why}")
    return report


_UNVERSIONED = "no Version: written outside the model's writer contract (a plain PutItem), not compared"


def _version(item: dict[str, Any], attribute: str) -> int | None:
    """The item's version, or None where a writer outside the model's contract left none (or a
    value no version can be): reconcile names such an item and goes on, it never stops on one."""
    value = item.get(attribute)
    if (
        isinstance(value, Decimal | int)
        and not isinstance(value, bool)
        and value >= 0
        and value == int(value)
    ):
        return int(value)
    return None


def _where(entity: Entity, item: dict[str, Any]) -> str:
    return "/".join(str(item.get(k.name)) for k in entity.table.key_schema())


Suspects = dict[tuple[Any, ...], dict[str, Any]]  # SQL key -> the DynamoDB item's key


def _confirm(client: Any, table: str, conn: sa.Connection, entity: Entity, suspects: Suspects,
             snapshot: float, drift: Drift) -> list[Fix]:  # fmt: skip
    """Read the suspects again (SQL key -> item key), DynamoDB strongly consistent and PostgreSQL
    tombstones included: record what still differs in `drift`, and return what repair would write."""
    names = entity.names
    by_item_key = {_text(item_key): key for key, item_key in suspects.items()}
    items = {}
    for item in store.batch_get(client, table, list(suspects.values())):
        key = by_item_key.get(_text({a.name: item[a.name] for a in entity.table.key_schema()}))
        if key is not None and item.get(names.entity) == entity.name:
            items[key] = item
    rows = _sql_rows(conn, entity, live_only=False, keys=list(suspects))
    fixes = []
    for key in suspects:
        item, current = items.get(key), rows.get(key)
        seen = None if current is None else (current["version"], current["deleted"])
        if item is None:
            if current is not None and not current["deleted"] and current["changed_at"] < snapshot:
                drift.extra.append(key)  # gone from DynamoDB, and not a change in flight
                row = {f.column: current[f.column] for f in entity.fields}
                fixes.append(Fix(key, row, current["version"], True, seen))
            continue
        try:
            row = to_row(entity, item)
        except Rejected as rejected:
            drift.unmappable.append(f"{_where(entity, item)}: {rejected.reason}")
            continue
        version = _version(item, names.version)
        if version is None:  # rewritten without its version since the scan: named, not compared
            drift.unmappable.append(f"{_where(entity, item)}: {_UNVERSIONED}")
            continue
        if current is not None and _same(entity, row, current, version):
            continue  # a change in flight when the scan passed: landed since
        (drift.missing if current is None or current["deleted"] else drift.stale).append(key)
        if current is not None and current["version"] > version:
            continue  # PostgreSQL newer than DynamoDB: never written over (reported, not repaired)
        # A tombstone at the version of an item DynamoDB holds now (strongly consistent) removed
        # nothing: DynamoDB versions grow across delete and re-create, so the live row replaces it.
        fixes.append(Fix(key, row, version, False, seen))
    return fixes


def _text(item_key: dict[str, Any]) -> str:
    return json.dumps(item_key, sort_keys=True, default=str)


def _write(conn: sa.Connection, entity: Entity, fixes: list[Fix]) -> list[tuple[Fix, str]]:
    """Write the fixes, each in a savepoint; the ones PostgreSQL refuses (or that found their row
    changed since it was read) come back with the reason."""
    table = table_of(entity)
    key_columns = list(entity.sql_key_columns)
    refused = []
    for fix in fixes:
        values = fix.row | {"version": fix.version, "deleted": fix.deleted, "updated_at": sa.func.now()}
        where = sa.and_(*(table.c[c] == v for c, v in zip(key_columns, fix.key, strict=True)))
        if fix.seen is None:
            statement = insert(table).values(values).on_conflict_do_nothing()
        else:
            statement = (
                table.update()
                .where(where, table.c.version == fix.seen[0], table.c.deleted.is_(fix.seen[1]))
                .values(values)
            )
        try:
            with conn.begin_nested():
                if conn.execute(statement).rowcount == 0:
                    refused.append((fix, "changed since it was read (left as the write-back made it)"))
        except (sa.exc.DataError, sa.exc.IntegrityError) as error:
            refused.append((fix, f"rejected by PostgreSQL: {first_line(error)}"))
    return refused


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
    dynamo, _ = _dynamodb_items(client, tables, entities, scanner)
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
