"""Write-back: stream records of entities mastered in DynamoDB -> their PostgreSQL tables.

Exactly once in effect under at-least-once, out-of-order delivery: each batch is decoded, coalesced
to the newest change per key, and applied per table as one merge of the rows sent as one JSON
parameter, in one transaction, guarded by the item's version; a REMOVE leaves a tombstone row so
an older image replayed later cannot resurrect the row. Bad records become dead letters; the rest
of the batch lands.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa

from hybridsync import deadletters
from hybridsync.convert import attribute_value, to_integer, to_row
from hybridsync.declare import Entity, Model
from hybridsync.records import EVENT_NAMES, DeadLetter, Rejected, is_ttl_expiry, stream_data, triage
from hybridsync.schema import table_of

SOURCE = "write_back"
TRANSIENT_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock: safe to retry at once
TRANSIENT_RETRIES = 3


def event_filters(model: Model) -> list[dict[str, Any]]:
    """The mapping's Lambda event filters (FilterCriteria patterns; a record passes if it matches
    any): changes of the entities written back, made in DynamoDB (no origin, or not the SQL side's),
    and deletes by a user or application (TTL expiries carry the DynamoDB service's userIdentity).
    `decode` enforces the same rules, so a record that slips past is still ignored; a unit test
    evaluates both on the same fixtures with Lambda's grammar (hybridsync.filters)."""
    names = model.names
    entities = {names.entity: {"S": [e.name for e in model.written_back()]}}
    not_from_sql = ({"S": [{"exists": False}]}, {"S": [{"anything-but": [names.origin_sql]}]})
    return [
        *({"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": entities | {names.origin: origin}}}
          for origin in not_from_sql),
        {"eventName": ["REMOVE"], "userIdentity": {"type": [{"exists": False}]},
         "dynamodb": {"OldImage": entities}},
    ]  # fmt: skip


@dataclass(frozen=True)
class Change:
    """The effect of one stream record on one SQL row."""

    entity: Entity
    key: tuple[Any, ...]
    version: int
    deleted: bool
    row: dict[str, Any]  # SQL column -> value
    record: dict[str, Any] = field(repr=False, compare=False)
    # The next-newest change of the same key in the batch: applied instead if PostgreSQL refuses
    # this one, so a bad newest record costs only itself (as a record-by-record pass would).
    older: Change | None = field(default=None, repr=False, compare=False)

    @property
    def precedence(self) -> tuple[int, bool]:
        # At equal versions a delete wins: a REMOVE carries the version of the image it removed.
        return (self.version, self.deleted)


@dataclass
class Outcome:
    received: int = 0
    applied: int = 0  # changes sent to PostgreSQL after coalescing (one per key)
    changed: int = 0  # rows they inserted or updated (a replay, or an older version, changes none)
    skipped: int = 0  # not ours to write back: SQL-origin, TTL expiry, entity mastered elsewhere
    rejected: list[DeadLetter] = field(default_factory=list)


# --- decoding -------------------------------------------------------------------------------


def decode(record: dict[str, Any], model: Model) -> Change | None:
    """The change a stream record asks for; None when it is not for write-back. Raises Rejected."""
    names = model.names
    event = record.get("eventName")
    if event not in EVENT_NAMES:
        raise Rejected(f"unknown eventName {event!r}")
    if event == "REMOVE" and is_ttl_expiry(record):
        return None
    data = stream_data(record)
    side = "OldImage" if event == "REMOVE" else "NewImage"
    raw = data.get(side)
    if not isinstance(raw, dict) or not raw:
        raise Rejected(f"{event} record without {side} (the stream must be NEW_AND_OLD_IMAGES)")
    try:
        name = attribute_value(raw[names.entity]) if names.entity in raw else None
        if not isinstance(name, str):
            raise Rejected(f"item has no {names.entity} attribute")
        mapped = _mapped(model).get(name)
        if mapped is None:
            raise Rejected(f"unknown entity {name!r}")
        entity, attributes = mapped
        if entity is None:  # mastered elsewhere, or no SQL table: not ours
            return None
        # Only the attributes the mapping reads are decoded: keys and GSI attributes are not.
        image = {}
        for a in (a for a in attributes if a in raw):
            try:
                image[a] = attribute_value(raw[a])
            except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError):
                shown = json.dumps(raw[a], default=str)[:80]
                raise Rejected(f"undecodable {a}: {shown} is not a DynamoDB value") from None
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as error:
        raise Rejected(f"undecodable image: {type(error).__name__}: {error}") from None
    if image.get(names.origin) == names.origin_sql:
        return None
    raw_version = image.get(names.version)
    version = None if raw_version is None else to_integer(entity.field(names.version), raw_version)
    if version is None or version < 0:
        raise Rejected(f"{name}: {names.version} must be a non-negative integer, got {raw_version!r}")
    row = to_row(entity, image)
    return Change(
        entity, tuple(row[c] for c in entity.sql_key_columns), version, event == "REMOVE", row, record
    )


@functools.cache
def _mapped(model: Model) -> dict[str, tuple[Entity | None, tuple[str, ...]]]:
    """Entity name -> (the entity if it is written back, else None; the attributes its mapping reads)."""
    written = model.written_back()
    return {e.name: (e if e in written else None, (*(f.attribute for f in e.all_fields), model.names.origin))
            for e in model.all_entities}  # fmt: skip


# --- applying -------------------------------------------------------------------------------


def coalesce(changes: Iterable[Change]) -> list[Change]:
    """The newest change per key, the only one that matters once the batch is applied; it keeps
    the older ones (newest first) as its fallback chain."""
    per_key: dict[tuple[str, tuple[Any, ...]], list[Change]] = defaultdict(list)
    for change in changes:
        per_key[(change.entity.name, change.key)].append(change)
    latest = []
    for group in per_key.values():
        if len(group) == 1:  # the common case: nothing to chain
            latest.append(group[0])
            continue
        # stable sort: of two records with equal precedence the later one wins
        chain: Change | None = None
        for change in sorted(group, key=lambda c: c.precedence):
            chain = dataclasses.replace(change, older=chain)
        assert chain is not None
        latest.append(chain)
    return latest


@functools.cache
def _columns(entity: Entity) -> tuple[list[str], list[str], list[str]]:
    """(columns written, their SQL types, key columns) of an entity's table."""
    columns = [f.column for f in entity.fields] + ["version", "deleted"]
    types = [f.type.sql for f in entity.fields] + ["bigint", "boolean"]
    return columns, types, list(entity.sql_key_columns)


def _on_conflict(entity: Entity) -> str:
    """Replace a row only with a newer version; at equal versions a tombstone wins (a REMOVE
    carries the version of the image it removed)."""
    table = table_of(entity).name
    columns, _, key = _columns(entity)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}, updated_at = now() "
        f"WHERE {table}.version < excluded.version "
        f"OR ({table}.version = excluded.version AND excluded.deleted AND NOT {table}.deleted)"
    )


_AS_TEXT = {"numeric": str, "timestamptz": datetime.isoformat, "bytea": lambda b: "\\x" + bytes(b).hex()}


@functools.cache
def _as_text(entity: Entity) -> tuple[tuple[str, Callable[[Any], str]], ...]:
    """The columns whose values travel in JSON as text PostgreSQL's input functions read back
    exactly (numbers, times, bytes), and how each is written."""
    return tuple((f.column, _AS_TEXT[f.type.sql]) for f in entity.fields if f.type.sql in _AS_TEXT)


@functools.cache
def merge_sql(entity: Entity) -> str:
    """Any number of rows, sent as one JSON parameter and read back typed, merged with one
    statement. Nothing in it outlives the transaction (no temporary table, no prepared statement),
    so an RDS Proxy never pins the connection. The rows come in key order, so concurrent batches
    lock rows in one order (a deadlock would still be retried, see TRANSIENT_SQLSTATES)."""
    columns, types, _ = _columns(entity)
    # a jsonb value travels as its text (a JSON string) and is parsed here, exactly as written
    pairs = list(zip(columns, types, strict=True))
    typed = ", ".join(f"{c} {'text' if t == 'jsonb' else t}" for c, t in pairs)
    select = ", ".join(f"r.{c}::jsonb" if t == "jsonb" else f"r.{c}" for c, t in pairs)
    return (
        f"INSERT INTO {table_of(entity).name} ({', '.join(columns)}) "
        f"SELECT {select} FROM json_to_recordset(%(rows)s) AS r({typed}) {_on_conflict(entity)}"
    )


def _rows_json(entity: Entity, changes: Sequence[Change]) -> str:
    as_text = _as_text(entity)
    rows = []
    for change in changes:
        row = dict(change.row)
        for column, write in as_text:
            if row[column] is not None:
                row[column] = write(row[column])
        row["version"], row["deleted"] = change.version, change.deleted
        rows.append(row)
    return json.dumps(rows, separators=(",", ":"))


def first_line(error: BaseException) -> str:
    """PostgreSQL's message, with its detail when it has one (which value it refused)."""
    original = getattr(error, "orig", None) or error
    message = str(original).strip().splitlines()[0]
    detail = getattr(getattr(original, "diag", None), "message_detail", None)
    return f"{message}: {detail}" if detail else message


def _merge(conn: sa.Connection, entity: Entity, changes: Sequence[Change]) -> int:
    """The rows the merge inserted or updated."""
    return conn.exec_driver_sql(merge_sql(entity), {"rows": _rows_json(entity, changes)}).rowcount


@dataclass
class Applied:
    """What PostgreSQL did with a batch's changes: the rows changed, the changes it refused."""

    changed: int = 0
    refused: list[DeadLetter] = field(default_factory=list)


def _apply(conn: sa.Connection, entity: Entity, changes: Sequence[Change], done: Applied) -> None:
    """Apply in a savepoint; when PostgreSQL refuses the data, isolate the culprit(s) instead of
    failing the batch (into `done.refused`, as dead letters)."""
    try:
        with conn.begin_nested():
            done.changed += _merge(conn, entity, changes)
    except (sa.exc.DataError, sa.exc.IntegrityError, psycopg.DataError, psycopg.IntegrityError):
        _bisect(conn, entity, changes, done)


def _bisect(conn: sa.Connection, entity: Entity, changes: Sequence[Change], done: Applied) -> None:
    """Merge halves in savepoints down to the rows PostgreSQL refuses; each refused change falls
    back to its key's next-newest one."""
    try:
        with conn.begin_nested():
            done.changed += _merge(conn, entity, changes)
        return
    except (sa.exc.DataError, sa.exc.IntegrityError) as error:
        if len(changes) == 1:
            (change,) = changes
            done.refused.append(DeadLetter(change.record, f"rejected by PostgreSQL: {first_line(error)}"))
            if change.older:
                _bisect(conn, entity, [change.older], done)
            return
    middle = len(changes) // 2
    _bisect(conn, entity, changes[:middle], done)
    _bisect(conn, entity, changes[middle:], done)


def apply_changes(conn: sa.Connection, changes: Iterable[Change]) -> Applied:
    """One merge per table (more only to isolate a bad row)."""
    by_entity: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        by_entity[change.entity.name].append(change)
    done = Applied()
    for name in sorted(by_entity):
        group = sorted(by_entity[name], key=lambda c: c.key)
        _apply(conn, group[0].entity, group, done)
    return done


def _chain(change: Change) -> Iterable[dict[str, Any]]:
    link: Change | None = change
    while link is not None:
        yield link.record
        link = link.older


def write_back(
    records: Sequence[dict[str, Any]], engine: sa.Engine, model: Model, *, store_dead_letters: bool = True
) -> Outcome:
    """Apply one batch of stream records. Infrastructure failures raise, so the platform retries
    the whole batch; nothing is committed unless everything, dead letters included, is."""
    with _collector_paused():
        return _write_back(records, engine, model, store_dead_letters)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """A batch allocates ~100 objects per record, none of them in cycles (they die by reference
    count when it ends); a full collection in the middle walks every one of them for nothing:
    0.24 s of a 0.3 s batch of 10,000 records, measured. Collection resumes after the batch."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _write_back(records: Sequence[dict[str, Any]], engine: sa.Engine, model: Model,
                store_dead_letters: bool) -> Outcome:  # fmt: skip
    changes, rejected, skipped = triage(records, lambda record: decode(record, model))
    outcome = Outcome(received=len(records), skipped=skipped, rejected=rejected)
    latest = coalesce(changes)
    for attempt in range(1, TRANSIENT_RETRIES + 1):
        try:
            with engine.begin() as conn:
                done = apply_changes(conn, latest)
                if store_dead_letters:
                    deadletters.store(conn, SOURCE, outcome.rejected + done.refused)
            break
        except sa.exc.OperationalError as error:
            if (
                getattr(error.orig, "sqlstate", None) not in TRANSIENT_SQLSTATES
                or attempt == TRANSIENT_RETRIES
            ):
                raise
            time.sleep(0.05 * 2**attempt)
    outcome.rejected += done.refused
    outcome.changed = done.changed
    # keys whose whole chain PostgreSQL refused are the only ones not applied
    refused_records = {id(letter.record) for letter in done.refused}
    outcome.applied = sum(1 for c in latest if not all(id(r) in refused_records for r in _chain(c)))
    return outcome


def redrive(engine: sa.Engine, model: Model, ids: list[int] | None = None) -> tuple[int, list[DeadLetter]]:
    """Apply pending write-back dead letters again (after a fix to the data or the mapping);
    the ones that now land are marked redriven, the rest stay pending."""
    with engine.connect() as conn:
        pending = deadletters.pending(conn, SOURCE, ids)
    if not pending:
        return 0, []
    outcome = write_back([row.record for row in pending], engine, model, store_dead_letters=False)
    failed = {id(d.record) for d in outcome.rejected}
    landed = [row.id for row in pending if id(row.record) not in failed]
    with engine.begin() as conn:
        deadletters.mark_redriven(conn, landed)
    return len(landed), outcome.rejected
