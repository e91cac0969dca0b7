"""Initial loads, online, for a system that already holds data (jobs of `hybridsync.sync.jobs`):

- `views`: the rows of entities mastered in PostgreSQL become their DynamoDB views, exactly as the
  outbox writes them, each only if DynamoDB holds no newer version (the outbox keeps draining).
- `items`: the rows of entities mastered in DynamoDB that exist in PostgreSQL today (moving the
  master) become versioned items, each only if DynamoDB holds none or one at most as new that
  differs; the write-back of the load's own records changes nothing (same version).
- `rows`: DynamoDB items -> PostgreSQL through the write-back's own merge, from a parallel scan (a
  unit per segment) or a point-in-time export (a unit per data file), into the rows no stream
  record has reached (the stream orders the rest); an item of any writer, tagged or not, is placed
  by the model's key templates (`hybridsync.model.placing`) and left as it is.

A SQL unit is a range of the primary key (bounds cut at job creation by the row count), read by
keyset pages in key order; a DynamoDB unit a scan segment or an export file. Every chunk is
committed, then checkpointed: a killed load redoes at most one chunk per unit, and redoing one
changes nothing (every write is conditional on versions). What cannot cross is a dead letter
(source `load`) with its reason; the load goes on.
"""

from __future__ import annotations

import functools
import gzip
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa

from hybridsync.dynamodb import capacity, exports, store
from hybridsync.dynamodb.scans import Scanner
from hybridsync.dynamodb.views import CACHE_TTL_S, view_item
from hybridsync.model import placing
from hybridsync.model.convert import item_values, marshal, to_row, unmarshal, writer_version
from hybridsync.model.declare import Entity, Side
from hybridsync.model.errors import Rejected
from hybridsync.sql import deadletters
from hybridsync.sql.schema import table_of
from hybridsync.streams.records import DeadLetter
from hybridsync.sync.jobs import DONE, SOURCE, Counts, Services, kind
from hybridsync.sync.outbox import exact_json
from hybridsync.sync.writeback import LOAD, Change, apply_changes

CHUNK = 500  # rows per keyset page; items per export chunk
PAGE = 1000  # items per Scan request: what a unit holds at once, whatever the table's size
GROUP = 100  # items read (one BatchGetItem) just before they are written: a short race
PUTS_AT_ONCE = 16  # conditional PutItems in flight, all units together


# --- PostgreSQL key ranges ------------------------------------------------------------------------


def _key_columns(entity: Entity) -> list[sa.ColumnElement]:
    table = table_of(entity)
    return [table.c[c] for c in entity.sql_key_columns]


def _typed(entity: Entity, key: list[Any]) -> sa.ColumnElement:
    """A key as PostgreSQL compares it with the key columns (checkpoints keep keys as JSON text)."""
    columns = _key_columns(entity)
    return sa.tuple_(*(sa.cast(sa.literal(str(v)), c.type) for c, v in zip(columns, key, strict=True)))


def _live(entity: Entity) -> sa.ColumnElement | None:
    return table_of(entity).c.deleted.is_(False) if entity.master is Side.DYNAMODB else None


def plan_sql(services: Services, spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Cut the entity's table into `segments` key ranges of about as many rows each."""
    entity = services.model.entity(spec["entity"])
    table, columns, live = table_of(entity), _key_columns(entity), _live(entity)
    with services.engine.connect() as conn:
        count = conn.execute(
            sa.select(sa.func.count()).select_from(table).where(*[w for w in [live] if w is not None])
        ).scalar_one()
        bounds = []
        for n in range(1, max(1, int(spec.get("segments", 1)))):
            query = sa.select(*columns).order_by(*columns).offset(n * count // spec["segments"]).limit(1)
            if live is not None:
                query = query.where(live)
            if (row := conn.execute(query).first()) is not None and list(row) not in bounds:
                bounds.append([json.loads(json.dumps(v, default=str)) for v in row])
    return spec | {"bounds": bounds, "rows": count}, len(bounds) + 1


def sql_chunks(
    services: Services, entity: Entity, spec: dict[str, Any], unit: int, after: list[Any] | None
) -> Iterator[tuple[list[tuple[list[Any], int, dict[str, Any]]], list[Any]]]:
    """The unit's rows in key order, CHUNK at a time from after `after`: (key, version, the row as
    JSON with exact numbers) each, and the last key."""
    table, columns, live = table_of(entity), _key_columns(entity), _live(entity)
    bounds = spec["bounds"]
    low = bounds[unit - 1] if unit > 0 else None
    high = bounds[unit] if unit < len(bounds) else None
    key = sa.tuple_(*columns)
    while True:
        query = sa.select(sa.func.to_jsonb(table.table_valued()).cast(sa.Text), table.c.version, *columns)
        query = query.order_by(*columns).limit(CHUNK)
        if live is not None:
            query = query.where(live)
        if after is not None:
            query = query.where(key > _typed(entity, after))
        elif low is not None:
            query = query.where(key >= _typed(entity, low))
        if high is not None:
            query = query.where(key < _typed(entity, high))
        with services.engine.connect() as conn:
            rows = [
                (
                    json.loads(json.dumps(list(r[2:]), default=str)),
                    None if r[1] is None else int(r[1]),
                    exact_json(r[0]),
                )
                for r in conn.execute(query)
            ]
        if not rows:
            return
        after = rows[-1][0]
        yield rows, after
        if len(rows) < CHUNK:
            return


def _row_letter(entity: Entity, key: list[Any], reason: str) -> DeadLetter:
    return DeadLetter(
        {"eventID": f"load:{entity.name}:{json.dumps(key, default=str)}", "entity": entity.name, "key": key},
        f"{entity.name} {'/'.join(map(str, key))}: {reason}",
    )


# --- conditional puts, a transaction of up to 100 at a time ---------------------------------------


def put_guarded(services: Services, table: str, puts: list[tuple[dict[str, Any], dict[str, Any]]],
                counts: Counts, letters: list[DeadLetter], letter: Any) -> None:  # fmt: skip
    """Put each item on its own condition (a Put's ConditionExpression, names and values),
    PUTS_AT_ONCE requests in flight, paced in write units. A conditional PutItem, not a batch:
    BatchWriteItem takes no condition, and a transaction costs twice the units and fails whole on
    one refused condition. A refused condition counts as older (DynamoDB holds something newer);
    an item DynamoDB cannot store is a dead letter (`letter(item, why)`). Throttles are retried by
    the client (standard mode)."""
    client = services.client

    def put(pair: tuple[dict[str, Any], dict[str, Any]]) -> tuple[str, str]:
        item, guard = pair
        services.pacer.spend(capacity.units(capacity.item_size(item)))
        try:
            client.put_item(TableName=table, Item=marshal(item), **guard)
            return "written", ""
        except client.exceptions.ConditionalCheckFailedException:
            return "older", ""
        except client.exceptions.ClientError as error:
            if error.response["Error"]["Code"] != "ValidationException":
                raise
            return "refused", error.response["Error"]["Message"]

    for (item, _), (outcome, why) in zip(puts, _writers().map(put, puts), strict=True):
        if outcome == "refused":
            letters.append(letter(item, f"DynamoDB refused it: {why}"))
        else:
            setattr(counts, outcome, getattr(counts, outcome) + 1)


@functools.cache
def _writers() -> ThreadPoolExecutor:
    """The threads every unit's puts go out on, made once (no thread churn per chunk)."""
    return ThreadPoolExecutor(PUTS_AT_ONCE, thread_name_prefix="load-put")


def _guard(expression: str, names: dict[str, str], values: dict[str, Any]) -> dict[str, Any]:
    guard = {"ConditionExpression": expression, "ExpressionAttributeNames": names}
    return guard | ({"ExpressionAttributeValues": marshal(values)} if values else {})


# --- PostgreSQL -> DynamoDB: views -------------------------------------------------------------


@kind("views", plan_sql)
def load_views(
    services: Services, spec: dict[str, Any], unit: int, checkpoint: Any
) -> Iterator[tuple[Any, Counts]]:
    """Each row's view as the outbox writes it (the same item, the same expiry), unless DynamoDB
    holds its version or a newer one (the outbox drained a change meanwhile)."""
    entity = services.model.entity(spec["entity"])

    def view(row: dict[str, Any], version: int) -> dict[str, Any]:
        return view_item(entity, item_values(entity, row), version, now=int(time.time()), ttl_s=CACHE_TTL_S)

    yield from _rows_to_items(services, entity, spec, unit, checkpoint, view, replace_equal=False)


@kind("items", plan_sql)
def load_items(
    services: Services, spec: dict[str, Any], unit: int, checkpoint: Any
) -> Iterator[tuple[Any, Counts]]:
    """Each live row as its item at the row's version. An item the app has written since (a newer
    version) is never replaced; one at the row's version that differs is (a legacy write since the
    last pass: a second pass after the legacy writer stops rewrites only those)."""
    entity = services.model.entity(spec["entity"])

    def item(row: dict[str, Any], version: int) -> dict[str, Any]:
        return entity.item(item_values(entity, row) | {entity.names.version: version})

    yield from _rows_to_items(services, entity, spec, unit, checkpoint, item, replace_equal=True)


def _rows_to_items(services: Services, entity: Entity, spec: dict[str, Any], unit: int, checkpoint: Any,
                   build: Any, *, replace_equal: bool) -> Iterator[tuple[Any, Counts]]:  # fmt: skip
    """The unit's rows as items, a chunk at a time. What DynamoDB holds is read first (strongly
    consistent: reads are cheaper than refused writes): an item as new or newer is left (counted
    older), one equal to ours is skipped, the rest are put on the condition that they are still as
    read (compare-and-set on the version), so a write landing meanwhile is never replaced."""
    table, version_name = services.tables[entity.table.name], entity.names.version
    for rows, last in sql_chunks(services, entity, spec, unit, checkpoint):
        counts, letters, wanted = Counts(read=len(rows)), [], []
        for key, version, row in rows:
            if version is None:  # written back from an item of a writer that keeps no version: it is one
                counts.skipped += 1
                continue
            try:
                wanted.append(build(row, version))
            except (Rejected, ValueError) as error:
                letters.append(_row_letter(entity, key, getattr(error, "reason", None) or str(error)))
        for start in range(0, len(wanted), GROUP):
            group = wanted[start : start + GROUP]
            keys = [entity.key(i) for i in group]
            held = {_text(entity.key(i)): i for i in store.batch_get(services.client, table, keys)}
            puts = []
            for item in group:
                current = held.get(_text(entity.key(item)))
                seen = None if current is None else current.get(version_name)
                newer = seen is not None and int(seen) > item[version_name]
                if newer or (seen is not None and int(seen) == item[version_name] and not replace_equal):
                    counts.older += 1
                elif current is not None and _same_item(entity, current, item):
                    counts.skipped += 1
                elif seen is None:
                    puts.append((item, _guard("attribute_not_exists(#v)", {"#v": version_name}, {})))
                else:
                    puts.append((item, _guard("#v = :seen", {"#v": version_name}, {":seen": seen})))
            put_guarded(services, table, puts, counts, letters,
                        lambda i, why: _row_letter(entity, _sql_key(entity, i), why))  # fmt: skip
        services.dead_letter(letters)
        counts.dead_lettered = len(letters)
        yield last, counts
    yield DONE, Counts()


def _sql_key(entity: Entity, item: dict[str, Any]) -> list[Any]:
    return [str(item.get(a)) for a in entity.sql_key]


def _same_item(entity: Entity, current: dict[str, Any], item: dict[str, Any]) -> bool:
    ignore = {entity.names.origin, entity.table.ttl_attribute}
    return {k: v for k, v in current.items() if k not in ignore} == {
        k: v for k, v in item.items() if k not in ignore
    }


def _text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True, default=str)


# --- DynamoDB -> PostgreSQL: rows ----------------------------------------------------------------


def plan_rows(services: Services, spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A unit per scan segment of each table holding the entities, or per data file of an export."""
    model = services.model
    entities = (
        [model.entity(n) for n in spec["entities"]] if spec.get("entities") else list(model.written_back())
    )
    if not entities:
        raise ValueError("the model writes no entity back to PostgreSQL")
    if stray := [e.name for e in entities if e not in model.written_back()]:
        raise ValueError(f"{', '.join(stray)}: not written back (mastered in PostgreSQL, or no SQL table)")
    tables = sorted({e.table.name for e in entities})
    if spec.get("export"):
        s3 = services.aws("s3")
        export = exports.Export.parse(spec["export"])
        physical = exports.table_name(s3, export)
        logical = [n for n in tables if services.tables[n] == physical]
        if not logical:
            ours = ", ".join(services.tables[n] for n in tables)
            raise ValueError(f"{spec['export']} is an export of {physical}, not of {ours}")
        files = [f["dataFileS3Key"] for f in exports.data_files(s3, export)]
        units = [{"table": logical[0], "file": f} for f in files]
    else:
        segments = max(1, int(spec.get("segments", 1)))
        units = [{"table": t, "segment": s, "of": segments} for t in tables for s in range(segments)]
    return spec | {"entities": [e.name for e in entities], "units": units}, len(units)


@kind("rows", plan_rows)
def load_rows(
    services: Services, spec: dict[str, Any], unit: int, checkpoint: Any
) -> Iterator[tuple[Any, Counts]]:
    where = spec["units"][unit]
    table = services.tables[where["table"]]
    sorter = Sorter(services, where["table"], set(spec["entities"]))
    if "file" in where:
        s3, export = services.aws("s3"), exports.Export.parse(spec["export"])
        raw = s3.get_object(Bucket=export.bucket, Key=where["file"])["Body"].read()
        lines = [line for line in gzip.decompress(raw).splitlines() if line.strip()]
        done = int(checkpoint or 0)
        while done < len(lines):
            chunk = [unmarshal(json.loads(line)["Item"]) for line in lines[done : done + CHUNK]]
            counts = sorter.merge(table, chunk)
            done += len(chunk)
            yield done, counts
        yield DONE, Counts()
        return
    scanner = Scanner(services.client, table, segments=where["of"], page_limit=spec.get("page_limit") or PAGE)
    scanner.pacer = services.pacer
    request = scanner.request()
    if where["of"] > 1:
        request |= {"Segment": where["segment"], "TotalSegments": where["of"]}
    if checkpoint:
        request["ExclusiveStartKey"] = checkpoint
    ahead = ThreadPoolExecutor(1, thread_name_prefix="load-scan")  # the next page read while one merges
    try:
        reading = ahead.submit(scanner.call, dict(request))
        while True:
            page = reading.result()
            last = page.get("LastEvaluatedKey")
            if last:
                reading = ahead.submit(scanner.call, request | {"ExclusiveStartKey": last})
            counts = sorter.merge(table, [unmarshal(i) for i in page["Items"]])
            if not last:
                yield DONE, counts
                return
            yield last, counts
    finally:  # stopped at a deadline: a page read ahead is read again next time
        ahead.shutdown(wait=True, cancel_futures=True)


class Sorter:
    """Sorts a chunk of items: each is placed by its keys (`hybridsync.model.placing`, its tag only
    confirming them), whoever wrote it; the entities loaded become changes merged into PostgreSQL
    (one transaction per chunk, the write-back's merge, over rows no stream record has reached);
    other entities' items are left alone; what is none of these, or cannot become a row, is a
    dead letter. Nothing is written to the items themselves."""

    def __init__(self, services: Services, table: str, loaded: set[str]):
        self.services, self.model, self.table = services, services.model, table
        self.loaded = {n: services.model.entity(n) for n in loaded}
        self.keys = [a.name for a in self.model.table(table).key_schema()]

    def merge(self, table: str, items: list[dict[str, Any]]) -> Counts:
        names = self.model.names
        counts, changes, letters = Counts(read=len(items)), [], []
        for item in items:
            keys = {k: item[k] for k in self.keys if k in item}
            try:
                entity = placing.place(self.model, keys, item.get(names.entity), table=self.table)
            except Rejected as rejected:
                letters.append(self.letter(item, rejected.reason))
                continue
            if entity is None:
                letters.append(
                    self.letter(item, "matches no entity: no entity tag, and no entity's key templates")
                )
                continue
            entity = self.loaded.get(entity.name)  # type: ignore[assignment]
            if entity is None:
                counts.skipped += 1
                continue
            try:
                version = writer_version(entity, item)
                row = to_row(entity, item)
                placing.check_keys(entity, keys, item)
            except Rejected as rejected:
                letters.append(self.letter(item, f"{entity.name}: {rejected.reason}"))
                continue
            key = tuple(row[c] for c in entity.sql_key_columns)
            changes.append(
                Change(entity, key, version, False, row, _item_record(self.keys, item), None, keys)
            )
        with self.services.engine.begin() as conn:
            done = apply_changes(conn, changes, LOAD)
            letters += done.refused
            deadletters.store(conn, SOURCE, letters)  # with the rows: a redone chunk stores none twice
        counts.written += done.changed
        counts.older += len(changes) - len(done.refused) - done.changed
        counts.dead_lettered += len(letters)
        return counts

    def letter(self, item: dict[str, Any], reason: str) -> DeadLetter:
        return DeadLetter(_item_record(self.keys, item), reason)


def _item_record(keys: list[str], item: dict[str, Any]) -> dict[str, Any]:
    """An item as its dead letter holds it, named by its table key (stored once however often a
    chunk is redone)."""
    return {"eventID": f"load:{_text({k: item.get(k) for k in keys})}", "item": item}
