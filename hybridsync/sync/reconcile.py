"""Reconcile: compare every written-back entity in DynamoDB with its PostgreSQL rows, row by row
(like a DMS validation task), and optionally repair PostgreSQL from DynamoDB; and the other way,
the rows mastered in PostgreSQL with their DynamoDB views.

Items are placed by their table keys (`hybridsync.model.placing`), whoever wrote them: tagged or not,
with a version or without one. An item and its row are compared by content: the row's values
against the item's, its deleted flag, and the writer's version the row carries (when the writer
keeps one). A version orders nothing here: a writer's counter may restart at 1 after a delete."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, insert

from hybridsync.dynamodb import store
from hybridsync.dynamodb.scans import Scanner
from hybridsync.dynamodb.views import is_live, is_missing
from hybridsync.model import placing
from hybridsync.model.convert import item_values, to_integer, to_row
from hybridsync.model.declare import Entity, FieldType, Model, Side, literal_head
from hybridsync.model.errors import Rejected
from hybridsync.sql.schema import table_of
from hybridsync.sync.writeback import first_line

POSITION = "stream_position"  # the stream position a written-back row last applied (write-back's)


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


_UNPLACED = "its keys fit no key template of the model (a writer outside it): not written back"


def _placed(model: Model, table: str, item: dict[str, Any]) -> Entity | None:
    """The entity the item is, by its table keys (the tag, if any, only confirming them); None
    when no entity's templates fit it. Raises Rejected when that cannot be decided."""
    keys = {a.name: item.get(a.name) for a in model.table(table).key_schema()}
    return placing.place(model, keys, item.get(model.names.entity), table)


def _meant(entities: list[Entity], item: dict[str, Any], tag: Any) -> Entity | None:
    """Of these entities, the one an item that could not be placed was most likely meant as (so
    reconcile names it there): the one its tag names, else the one whose keys' literal heads its
    keys start with (the longest); None: another application's item, none of these entities'."""
    for entity in entities:
        if entity.name == tag:
            return entity
    best, longest = None, 0
    for entity in entities:
        heads = [(a.name, literal_head(entity.keys[a.name])) for a in entity.table.key_schema()]
        if all(str(item.get(name, "")).startswith(head or "") for name, head in heads):
            length = sum(len(head or "") for _, head in heads)
            if length > longest:
                best, longest = entity, length
    return best


def _dynamodb_items(
    client: Any,
    tables: Mapping[str, str] | str,
    model: Model,
    entities: tuple[Entity, ...],
    scanner: Callable[[str], Scanner] | None,
    clock: Callable[[], float] = time.time,
) -> tuple[dict[str, list[dict]], dict[str, list[str]], dict[str, float]]:
    """The entities' items, from one scan of each table holding them, each placed by its keys;
    per entity the items that could not be placed but look meant as it (and why); and per table
    the time what was read is a picture of (an export's time; a scan's start by `clock`). No
    server-side filter: a Scan is charged for every item it reads either way, so filtering here
    costs nothing more and keeps the scanner's capacity figure exact."""
    items: dict[str, list[dict]] = {e.name: [] for e in entities}
    unplaced: dict[str, list[str]] = {e.name: [] for e in entities}
    snapshots: dict[str, float] = {}
    for logical in sorted({e.table.name for e in entities}):
        physical = _physical(tables, logical)
        scan = scanner(physical) if scanner else Scanner(client, physical)
        snapshot_at = getattr(scan, "snapshot_at", None)
        snapshots[logical] = snapshot_at() if snapshot_at else clock()
        on_table = [e for e in entities if e.table.name == logical]
        for item in scan.items():
            try:
                entity = _placed(model, logical, item)
                why = _UNPLACED
            except Rejected as rejected:
                entity, why = None, rejected.reason
            if entity is None:
                meant = _meant(on_table, item, item.get(model.names.entity))
                if meant is not None:
                    unplaced[meant.name].append(f"{_where(meant, item)}: {why}")
            elif entity.name in items:
                items[entity.name].append(item)
    return items, unplaced, snapshots


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
    if entity.master is Side.DYNAMODB:  # written back: tombstones, positions, when each row last changed
        bookkeeping += [
            table.c.deleted,
            table.c[POSITION],
            sa.extract("epoch", table.c.updated_at).label("changed_at"),
        ]
    query = sa.select(*columns, *bookkeeping)
    if live_only:  # written-back tables keep deleted rows as tombstones
        query = query.where(table.c.deleted.is_(False))
    if keys is not None:
        query = query.where(sa.tuple_(*(table.c[c] for c in key)).in_(keys))
    return {tuple(r[c] for c in key): r for r in (row._asdict() for row in conn.execute(query))}


def _image(entity: Entity, item: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The row an item maps to and the writer's version it carries (None: it keeps none), as
    write-back reads them. Raises Rejected."""
    row = to_row(entity, item)
    raw = item.get(entity.names.version) if entity.versioned else None
    return row, None if raw is None else to_integer(entity.field(entity.names.version), raw)


def _same(entity: Entity, row: dict[str, Any], version: int | None, current: dict[str, Any]) -> bool:
    """The row holds the item: live, the same values, the same writer's version (or none)."""
    return (
        not current.get("deleted")
        and current["version"] == version
        and _comparable(entity, current) == _comparable(entity, row)
    )


def _sql_key(entity: Entity, row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c] for c in entity.sql_key_columns)


def _item_key(entity: Entity, item: dict[str, Any]) -> dict[str, Any]:
    return {a.name: item[a.name] for a in entity.table.key_schema()}


@dataclass(frozen=True)
class Fix:
    """What repair writes to one row: the row, the writer's version it carries and whether it is a
    tombstone, only if the row is still as it was seen (`seen`: its values, version, deleted flag
    and stream position as read; None: no row), so a write-back landing meanwhile is never
    overwritten. The row's stream position is kept: records still in flight apply after it."""

    key: tuple[Any, ...]
    row: dict[str, Any]
    version: int | None
    deleted: bool
    seen: dict[str, Any] | None


def _seen(entity: Entity, current: dict[str, Any]) -> dict[str, Any]:
    return {f.column: current[f.column] for f in entity.fields} | {
        name: current[name] for name in ("version", "deleted", POSITION)
    }


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
    candidates; each is then read again, its PostgreSQL row first and then its item by key,
    strongly consistent, and only what still differs is drift: a change in flight when the scan
    passed is not. Items are placed by their keys, whoever wrote them, and compared with their rows
    by content; an item that cannot be mapped (or placed, when it looks meant as an entity) is
    named in `unmappable`, never a reason to stop. A row is extra only if it last changed before
    the snapshot the scan is (its start, or the export's time) and DynamoDB holds no item for it
    now. With `repair`, DynamoDB's state as read again (after the row) is written over
    PostgreSQL's, each row only if it is still as it was read (a write-back landing meanwhile
    wins), keeping its stream position; extra rows are tombstoned. `scanner` sets how a table is
    read (pace, segments, an export) and adds up what it cost; by default one eventually
    consistent sequential scan per table. `tables`: logical -> physical names (or one physical
    name for all)."""
    entities = model.written_back()

    def database_clock() -> float:  # the clock `updated_at` is written by
        with engine.connect() as conn:
            return float(conn.execute(sa.text("SELECT extract(epoch FROM now())")).scalar_one())

    dynamo, unplaced, snapshots = _dynamodb_items(client, tables, model, entities, scanner, database_clock)
    report: dict[str, Drift] = {}
    fixes: dict[str, list[Fix]] = {}
    with engine.connect() as conn:
        for entity in entities:
            drift = report.setdefault(entity.name, Drift())
            drift.checked += len(unplaced[entity.name])
            drift.unmappable += unplaced[entity.name]
            sql = _sql_rows(conn, entity)
            seen: set[tuple[Any, ...]] = set()
            suspects: Suspects = {}
            for item in dynamo[entity.name]:
                drift.checked += 1
                try:
                    row, version = _image(entity, item)
                except Rejected as rejected:
                    drift.unmappable.append(f"{_where(entity, item)}: {rejected.reason}")
                    continue
                key = _sql_key(entity, row)
                seen.add(key)
                current = sql.get(key)
                if current is None or not _same(entity, row, version, current):
                    suspects[key] = _item_key(entity, item)
            snapshot = snapshots[entity.table.name]
            for key, current in sql.items():
                if key not in seen and current["changed_at"] < snapshot:
                    try:
                        suspects[key] = entity.key(item_values(entity, current))
                    except ValueError as error:
                        drift.unmappable.append(f"{'/'.join(map(str, key))}: {error}")
            if suspects:
                physical = _physical(tables, entity.table.name)
                fixes[entity.name] = _confirm(
                    client, physical, conn, model, entity, suspects, snapshot, drift
                )
    if repair:
        with engine.begin() as conn:
            for name, planned in fixes.items():
                entity = model.entity(name)
                for fix, why in _write(conn, entity, planned):
                    report[name].unrepaired.append(f"{'/'.join(map(str, fix.key))}: {why}")
    return report


def _where(entity: Entity, item: dict[str, Any]) -> str:
    return "/".join(str(item.get(k.name)) for k in entity.table.key_schema())


Suspects = dict[tuple[Any, ...], dict[str, Any]]  # SQL key -> the DynamoDB item's key


def _confirm(client: Any, table: str, conn: sa.Connection, model: Model, entity: Entity,
             suspects: Suspects, snapshot: float, drift: Drift) -> list[Fix]:  # fmt: skip
    """Read the suspects again (SQL key -> item key), PostgreSQL first (tombstones included) and
    then DynamoDB, strongly consistent, so the item read is at least as new as what its row holds:
    record what still differs in `drift`, and return what repair would write."""
    rows = _sql_rows(conn, entity, live_only=False, keys=list(suspects))
    by_item_key: dict[str, list[tuple[Any, ...]]] = {}
    for key, item_key in suspects.items():
        by_item_key.setdefault(_text(item_key), []).append(key)
    wanted = [suspects[keys[0]] for keys in by_item_key.values()]  # BatchGetItem refuses duplicates
    items: dict[tuple[Any, ...], dict[str, Any]] = {}
    undecided: set[tuple[Any, ...]] = set()
    for item in store.batch_get(client, table, wanted):
        keys = by_item_key.get(_text(_item_key(entity, item)), [])
        try:
            placed = _placed(model, entity.table.name, item)
        except Rejected as rejected:  # rewritten since the scan into an item that cannot be placed
            drift.unmappable.append(f"{_where(entity, item)}: {rejected.reason}")
            undecided.update(keys)
            continue
        if placed is entity:
            items.update(dict.fromkeys(keys, item))
    fixes = []
    for key in suspects:
        if key in undecided:
            continue
        item, current = items.get(key), rows.get(key)
        seen = None if current is None else _seen(entity, current)
        if item is not None:
            try:
                row, version = _image(entity, item)
            except Rejected as rejected:
                drift.unmappable.append(f"{_where(entity, item)}: {rejected.reason}")
                continue
            if _sql_key(entity, row) != key:  # the item at this row's key holds another row's values
                item = None
        if item is None:
            if current is not None and not current["deleted"] and current["changed_at"] < snapshot:
                drift.extra.append(key)  # gone from DynamoDB, and not a change in flight
                row = {f.column: current[f.column] for f in entity.fields}
                fixes.append(Fix(key, row, current["version"], True, seen))
            continue
        if current is not None and _same(entity, row, version, current):
            continue  # a change in flight when the scan passed: landed since
        # The item was read after its row, consistently: it is at least as new as what the row
        # holds, whatever versions say (a writer's counter restarts at 1 after a delete, so an
        # item re-created over a tombstone of version 3 is at version 1, and it is the live one).
        (drift.missing if current is None or current["deleted"] else drift.stale).append(key)
        fixes.append(Fix(key, row, version, False, seen))
    return fixes


def _text(item_key: dict[str, Any]) -> str:
    return json.dumps(item_key, sort_keys=True, default=str)


def _write(conn: sa.Connection, entity: Entity, fixes: list[Fix]) -> list[tuple[Fix, str]]:
    """Write the fixes, each in a savepoint; the ones PostgreSQL refuses (or that found their row
    changed since it was read) come back with the reason."""
    table = table_of(entity)
    key_columns = list(entity.sql_key_columns)
    json_columns = {f.column for f in entity.fields if f.type is FieldType.JSON}

    def column(name: str) -> Any:  # JSON as the text it was read as
        return sa.cast(table.c[name], sa.Text) if name in json_columns else table.c[name]

    def value(name: str, v: Any) -> Any:  # JSON text parsed by PostgreSQL, never bound as a string
        return sa.cast(sa.literal(v, sa.Text), JSONB) if name in json_columns and v is not None else v

    refused = []
    for fix in fixes:
        values = {c: value(c, v) for c, v in fix.row.items()}
        values |= {"version": fix.version, "deleted": fix.deleted, "updated_at": sa.func.now()}
        if fix.seen is None:  # no row: a new one, no stream position (records in flight settle it)
            statement = insert(table).values(values).on_conflict_do_nothing()
        else:  # the row as read, or nothing; its stream position is left as it is
            where = [table.c[c] == v for c, v in zip(key_columns, fix.key, strict=True)]
            where += [column(c).is_not_distinct_from(v) for c, v in fix.seen.items()]
            statement = table.update().where(*where).values(values)
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
    through the outbox since the views were empty): otherwise the cache may simply be cold. A view
    that cannot be mapped is named in `unmappable`."""
    entities = model.mastered_in(Side.POSTGRESQL)
    dynamo, unplaced, _ = _dynamodb_items(client, tables, model, entities, scanner)
    now = int(time.time())
    report: dict[str, Drift] = {}
    with engine.connect() as conn:
        for entity in entities:
            drift = report.setdefault(entity.name, Drift())
            drift.unmappable += unplaced[entity.name]
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
                    continue
                try:
                    image, version = _image(entity, view)
                except Rejected as rejected:
                    drift.unmappable.append(f"{_where(entity, view)}: {rejected.reason}")
                    continue
                if version != row["version"] or _comparable(entity, image) != _comparable(entity, row):
                    drift.stale.append(key)
            drift.extra += [
                tuple(view.get(a) for a in entity.sql_key) for view in views.values() if not is_missing(view)
            ]
    return report
