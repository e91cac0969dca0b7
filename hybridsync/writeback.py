"""Write-back: stream records of entities mastered in DynamoDB -> their PostgreSQL tables.

Exactly once in effect under at-least-once, out-of-order delivery: each batch is decoded, coalesced
to the newest change per key, and applied as one set-based upsert per table in one transaction,
guarded by the item's version; a REMOVE leaves a tombstone row so an older image replayed later
cannot resurrect the row. Bad records become dead letters; the rest of the batch lands.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from boto3.dynamodb.types import Binary, TypeDeserializer

from hybridsync import deadletters, keys
from hybridsync.deadletters import DeadLetter, Rejected, triage
from hybridsync.model import ENTITY, MODEL, ORIGIN, ORIGIN_SQL, VERSION, Entity, Field, FieldType, Side
from hybridsync.schema import entity_tables

SOURCE = "write_back"
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
TRANSIENT_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock: safe to retry at once
TRANSIENT_RETRIES = 3

# Lambda event filters (FilterCriteria patterns; a record passes if it matches any). The same
# rules are enforced in `decode`, so a record that slips past the filters is still ignored.
_WRITES = ["INSERT", "MODIFY"]
EVENT_FILTERS: list[dict[str, Any]] = [
    # changes made in DynamoDB: no Origin, or an Origin other than the SQL side
    {"eventName": _WRITES, "dynamodb": {"NewImage": {ORIGIN: {"S": [{"exists": False}]}}}},
    {"eventName": _WRITES, "dynamodb": {"NewImage": {ORIGIN: {"S": [{"anything-but": [ORIGIN_SQL]}]}}}},
    # deletes by a user or application; TTL expiries carry a userIdentity of the DynamoDB service
    {"eventName": ["REMOVE"], "userIdentity": {"type": [{"exists": False}]}},
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
    applied: int = 0  # changes sent to PostgreSQL after coalescing (older ones are no-ops there)
    skipped: int = 0  # not ours to write back: SQL-origin, TTL expiry, entity mastered elsewhere
    rejected: list[DeadLetter] = field(default_factory=list)


# --- decoding -------------------------------------------------------------------------------

_deserializer = TypeDeserializer()


def _is_ttl_expiry(record: dict[str, Any]) -> bool:
    identity = record.get("userIdentity") or {}
    return identity.get("type") == "Service" and identity.get("principalId") == "dynamodb.amazonaws.com"


def decode(record: dict[str, Any]) -> Change | None:
    """The change a stream record asks for; None when it is not for write-back. Raises Rejected."""
    event = record.get("eventName")
    if event not in ("INSERT", "MODIFY", "REMOVE"):
        raise Rejected(f"unknown eventName {event!r}")
    if event == "REMOVE" and _is_ttl_expiry(record):
        return None
    data = record.get("dynamodb")
    if not isinstance(data, dict):
        raise Rejected("record has no dynamodb section")
    side = "OldImage" if event == "REMOVE" else "NewImage"
    raw = data.get(side)
    if not isinstance(raw, dict) or not raw:
        raise Rejected(f"{event} record without {side} (the stream must be NEW_AND_OLD_IMAGES)")
    try:
        name = attribute_value(raw[ENTITY]) if ENTITY in raw else None
        if not isinstance(name, str):
            raise Rejected(f"item has no {ENTITY} attribute")
        try:
            entity = MODEL.entity(name)
        except KeyError:
            raise Rejected(f"unknown entity {name!r}") from None
        if entity.master is not Side.DYNAMODB or not entity.sql_table:
            return None
        # Only the attributes the mapping reads are decoded: keys and GSI attributes are not.
        image = {a: attribute_value(raw[a]) for a in (*_MAPPED[entity.name], ORIGIN) if a in raw}
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as error:
        raise Rejected(f"undecodable image: {type(error).__name__}: {error}") from None
    if image.get(ORIGIN) == ORIGIN_SQL:
        return None
    version = _integer(entity.field(VERSION), image.get(VERSION))
    if version is None or version < 0:
        raise Rejected(f"{name}: {VERSION} must be a non-negative integer, got {image.get(VERSION)!r}")
    row = to_row(entity, image)
    return Change(
        entity, tuple(row[c] for c in entity.sql_key_columns), version, event == "REMOVE", row, record
    )


_MAPPED = {e.name: tuple(f.attribute for f in e.all_fields) for e in MODEL.entities}


def attribute_value(attribute: dict[str, Any]) -> Any:
    """One DynamoDB-JSON attribute value; scalars on a fast path, the rest through boto3."""
    ((kind, raw),) = attribute.items()
    if kind == "S":
        return raw
    if kind == "N":
        return Decimal(raw)  # raises on a malformed number, where boto3 would return NaN
    if kind == "BOOL":
        return raw
    if kind == "NULL":
        return None
    return _deserializer.deserialize(attribute)


def to_row(entity: Entity, image: dict[str, Any]) -> dict[str, Any]:
    """An item's values as the SQL row its mapping declares; raises Rejected naming the attribute."""
    row = {}
    for f, column, convert, required, is_key in _plan(entity.name):
        value = image.get(f.attribute)
        if value is None:
            if is_key:
                raise Rejected(f"{entity.name}: missing key attribute {f.attribute}")
            if required:
                raise Rejected(f"{entity.name}: missing required attribute {f.attribute}")
            row[column] = None
        else:
            row[column] = convert(f, value)
    return row


@functools.cache
def _plan(entity_name: str) -> tuple[tuple[Field, str, Callable[[Field, Any], Any], bool, bool], ...]:
    """Per field: what `to_row` needs, looked up once (it runs for every record)."""
    entity = MODEL.entity(entity_name)
    return tuple(
        (f, f.column, _CONVERTERS[f.type], f.required, f.attribute in entity.sql_key) for f in entity.fields
    )


def _reject(f: Field, expected: str, value: Any) -> Rejected:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return Rejected(f"{f.attribute} must be {expected}, got {type(value).__name__} {shown}")


def _string(f: Field, value: Any) -> str:
    if not isinstance(value, str):
        raise _reject(f, "a string", value)
    if f.max_length is not None and len(value) > f.max_length:
        raise Rejected(f"{f.attribute} is {len(value)} characters long, over its limit of {f.max_length}")
    return value


def _integer(f: Field, value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, Decimal) or value != value.to_integral_value():
        raise _reject(f, "an integer", value)
    number = int(value)
    if not BIGINT_MIN <= number <= BIGINT_MAX:
        raise Rejected(f"{f.attribute} = {number} is outside the 64-bit range of its column")
    return number


def _decimal(f: Field, value: Any) -> Decimal:
    # boto3 decodes a malformed number ("twelve") as NaN, which PostgreSQL's numeric would accept
    if not isinstance(value, Decimal) or not value.is_finite():
        raise _reject(f, "a number", value)
    return value


def _timestamp(f: Field, value: Any) -> Any:
    try:
        return keys.parse_iso(_string(f, value))
    except ValueError:
        raise _reject(f, "an ISO-8601 timestamp with a timezone", value) from None


def _boolean(f: Field, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _reject(f, "a boolean", value)
    return value


def _json(f: Field, value: Any) -> str:
    if not isinstance(value, dict | list | set):
        raise _reject(f, "a map, list or set", value)
    return json_text(value)


_CONVERTERS: dict[FieldType, Callable[[Field, Any], Any]] = {
    FieldType.STRING: _string,
    FieldType.INTEGER: _integer,
    FieldType.DECIMAL: _decimal,
    FieldType.TIMESTAMP: _timestamp,
    FieldType.BOOLEAN: _boolean,
    FieldType.JSON: _json,
}


def json_text(value: Any) -> str:
    """JSON for a DynamoDB value that keeps numbers literal (38 digits stay 38 digits; json.dumps
    would go through float) and writes sets as sorted lists and binary as base64."""
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{json_text(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if isinstance(value, set | frozenset):
        return json_text(sorted(value, key=lambda v: v.value if isinstance(v, Binary) else v))
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, Decimal | int):
        if isinstance(value, Decimal) and not value.is_finite():
            raise Rejected(f"not a number in a nested value: {value}")
        return str(value)
    if isinstance(value, Binary):
        return json.dumps(base64.b64encode(value.value).decode())
    return json.dumps(value, ensure_ascii=False)


# --- applying -------------------------------------------------------------------------------


def coalesce(changes: Iterable[Change]) -> list[Change]:
    """The newest change per key, the only one that matters once the batch is applied; it keeps
    the older ones (newest first) as its fallback chain."""
    per_key: dict[tuple[str, tuple[Any, ...]], list[Change]] = defaultdict(list)
    for change in changes:
        per_key[(change.entity.name, change.key)].append(change)
    latest = []
    for group in per_key.values():
        # stable sort: of two records with equal precedence the later one wins
        chain: Change | None = None
        for change in sorted(group, key=lambda c: c.precedence):
            chain = dataclasses.replace(change, older=chain)
        assert chain is not None
        latest.append(chain)
    return latest


@functools.cache
def upsert_sql(entity_name: str, force: bool = False) -> str:
    """One INSERT ... SELECT FROM unnest(arrays) ... ON CONFLICT for any number of rows: one
    statement and one parameter per column, whatever the batch size."""
    entity = MODEL.entity(entity_name)
    table = entity_tables[entity_name]
    columns = [f.column for f in entity.fields] + ["version", "deleted"]
    types = [f.type.sql for f in entity.fields] + ["bigint", "boolean"]
    # jsonb travels as text and is cast per row: a jsonb[] parameter would need each element adapted
    arrays = ", ".join(
        f"%({c})s::{'text' if t == 'jsonb' else t}[]" for c, t in zip(columns, types, strict=True)
    )
    select = ", ".join(
        f"u.{c}::jsonb" if t == "jsonb" else f"u.{c}" for c, t in zip(columns, types, strict=True)
    )
    key = [entity.field(a).column for a in entity.sql_key]
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    newer = "<=" if force else "<"  # force: repair may rewrite a drifted row of the same version
    return (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"SELECT {select} FROM unnest({arrays}) AS u({', '.join(columns)}) "
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}, updated_at = now() "
        f"WHERE {table.name}.version {newer} excluded.version "
        f"OR ({table.name}.version = excluded.version AND excluded.deleted AND NOT {table.name}.deleted)"
    )


def _parameters(entity: Entity, changes: Sequence[Change]) -> dict[str, list[Any]]:
    params: dict[str, list[Any]] = {f.column: [c.row[f.column] for c in changes] for f in entity.fields}
    params["version"] = [c.version for c in changes]
    params["deleted"] = [c.deleted for c in changes]
    return params


def _first_line(error: BaseException) -> str:
    return str(getattr(error, "orig", None) or error).strip().splitlines()[0]


def _apply(conn: sa.Connection, entity: Entity, changes: Sequence[Change], force: bool) -> list[DeadLetter]:
    """Apply in a savepoint; when PostgreSQL rejects the data, bisect to the culprit(s) instead of
    failing the batch. Returns the changes PostgreSQL rejected, as dead letters."""
    try:
        with conn.begin_nested():
            conn.exec_driver_sql(upsert_sql(entity.name, force), _parameters(entity, changes))
        return []
    except (sa.exc.DataError, sa.exc.IntegrityError) as error:
        if len(changes) == 1:
            (change,) = changes
            letter = DeadLetter(change.record, f"rejected by PostgreSQL: {_first_line(error)}")
            return [letter] + (_apply(conn, entity, [change.older], force) if change.older else [])
    middle = len(changes) // 2
    return _apply(conn, entity, changes[:middle], force) + _apply(conn, entity, changes[middle:], force)


def apply_changes(conn: sa.Connection, changes: Iterable[Change], *, force: bool = False) -> list[DeadLetter]:
    """One statement per table (more only to isolate a bad row), rows in key order so concurrent
    batches lock in the same order. Returns the changes PostgreSQL refused."""
    by_entity: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        by_entity[change.entity.name].append(change)
    rejected = []
    for name in sorted(by_entity):
        group = sorted(by_entity[name], key=lambda c: c.key)
        rejected += _apply(conn, MODEL.entity(name), group, force)
    return rejected


def _chain(change: Change) -> Iterable[dict[str, Any]]:
    link: Change | None = change
    while link is not None:
        yield link.record
        link = link.older


def write_back(
    records: Sequence[dict[str, Any]],
    engine: sa.Engine,
    *,
    force: bool = False,
    store_dead_letters: bool = True,
    source: str = SOURCE,
) -> Outcome:
    """Apply one batch of stream records. Infrastructure failures raise, so the platform retries
    the whole batch; nothing is committed unless everything, dead letters included, is."""
    changes, rejected, skipped = triage(records, decode)
    outcome = Outcome(received=len(records), skipped=skipped, rejected=rejected)
    latest = coalesce(changes)
    for attempt in range(1, TRANSIENT_RETRIES + 1):
        try:
            with engine.begin() as conn:
                refused = apply_changes(conn, latest, force=force)
                if store_dead_letters:
                    deadletters.store(conn, source, outcome.rejected + refused)
            break
        except sa.exc.OperationalError as error:
            if (
                getattr(error.orig, "sqlstate", None) not in TRANSIENT_SQLSTATES
                or attempt == TRANSIENT_RETRIES
            ):
                raise
            time.sleep(0.05 * 2**attempt)
    outcome.rejected += refused
    # keys whose whole chain PostgreSQL refused are the only ones not applied
    refused_records = {id(letter.record) for letter in refused}
    outcome.applied = sum(1 for c in latest if not all(id(r) in refused_records for r in _chain(c)))
    return outcome


def redrive(engine: sa.Engine, ids: list[int] | None = None) -> tuple[int, list[DeadLetter]]:
    """Apply pending write-back dead letters again (after a fix to the data or the mapping);
    the ones that now land are marked redriven, the rest stay pending."""
    with engine.connect() as conn:
        pending = deadletters.pending(conn, SOURCE, ids)
    if not pending:
        return 0, []
    outcome = write_back([row.record for row in pending], engine, store_dead_letters=False)
    failed = {id(d.record) for d in outcome.rejected}
    landed = [row.id for row in pending if id(row.record) not in failed]
    with engine.begin() as conn:
        deadletters.mark_redriven(conn, landed)
    return len(landed), outcome.rejected
