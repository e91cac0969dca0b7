"""One change, end to end (`hybridsync trace TABLE ATTR=VALUE...`): in time order, each stream
record of the item, each invocation that read it (the functions log every change's identity,
hybridsync.streams.trail), each aggregate item it moved and by how much, its dead letters and
their redrives, and the row PostgreSQL holds for it, each hop with its freshness.

Where each comes from: the records from the table's stream (its shards from the trim horizon:
24 hours); the invocations from the functions' log lines (the local app's files, or CloudWatch
Logs Insights deployed), read by a substring of the item's identity and then matched exactly; the
aggregates from the engine's own fold of each record (hybridsync.sync.aggregate `parse`), marked
folded when a `changes folded` line lists it; the dead letters and the row from PostgreSQL.

Events are ordered record by record by sequence number, which orders one shard's records: an item
whose records span a shard and its child (DynamoDB splits shards) may show the child's first."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

KINDS = ("outbox", "put", "stream_record", "invocation", "aggregate", "dead_letter", "redrive", "row")
Line = tuple[float, str, dict[str, Any]]  # (epoch seconds, the function, the parsed log line)


@dataclass(frozen=True)
class Event:
    at: float  # epoch seconds
    kind: str  # one of KINDS
    detail: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        at = datetime.fromtimestamp(self.at, UTC).isoformat(timespec="milliseconds")
        return {"at": at, "kind": self.kind, **self.detail}

    @classmethod
    def from_json(cls, said: Mapping[str, Any]) -> Event:
        rest = {k: v for k, v in said.items() if k not in ("at", "kind")}
        return cls(datetime.fromisoformat(said["at"]).timestamp(), said["kind"], rest)


Postgres = Callable[[str, Mapping[str, str], "dict[str, Any] | None"], list[Event]]


@dataclass
class Sources:
    """Where a trace reads: a `dynamodb` client; `records(stream_arn, sequences)`: the stream's
    records of those numbers (those the logs name), or all of them, as Lambda delivers them (None:
    no records read); `lines(needle, since)`: the
    functions' log lines holding `needle`, as (time, function, parsed line); `postgres(table, key,
    image)`: the item's dead letters and row (`in_postgres`, here or in the operations function;
    None: not read)."""

    dynamodb: Any
    records: Callable[[str, list[str]], Iterable[dict[str, Any]]] | None
    postgres: Postgres | None
    lines: Callable[[str, float], Iterable[Line]]
    failed: Callable[[], Iterable[Any]] | None = None  # the failure bucket's batches (sync/failed.py)


def trace(model: Any, table: str, key: Mapping[str, str], tables: Mapping[str, str], sources: Sources,
          since: float = 0.0) -> list[Event]:  # fmt: skip
    """Every event of the item `key` (attribute -> value as text) of the model's table `table`
    since `since` (epoch seconds), in the order of module's docstring. `tables`: logical ->
    physical names. ValueError names what is wrong with the table or the key."""
    from hybridsync.streams import trail

    if table not in tables:
        raise ValueError(f"no table {table!r} in the model (its tables: {', '.join(sorted(tables))})")
    types = typed(model, table, key)
    key = {name: value for name, (_, value) in types.items()}
    physical, item = tables[table], trail.item(key)
    arn = sources.dynamodb.describe_table(TableName=physical)["Table"].get("LatestStreamArn")
    needle = json.dumps(item, ensure_ascii=False)[1:-1]  # as a JSON log line holds it
    found = [(at, function, line, entry) for at, function, line in sources.lines(needle, since)
             if line.get("stream") in (None, trail.stream(arn))
             for entry in line.get("changes") or []
             if entry.get("item") == item and entry.get("table", line.get("table")) == physical]  # fmt: skip
    drained = [f for f in found if f[2].get("message") == "outbox drained"]
    read = [f for f in found if f[2].get("message") != "outbox drained"]
    sequences = sorted({entry["sequence"] for *_, entry in read}, key=int)
    records = stream_records(sources, arn, item, sequences, since) if arn and sources.records else []
    # a record's stamp as its consumers saw it: DynamoDB Local stamps a record when it is read
    stamped = {e["sequence"]: e["created_ms"] / 1000 for *_, e in read if e.get("created_ms") is not None}
    events = [_record(change, stamped) for change in records]
    events += _attempts([_invocation(at, function, line, entry) for at, function, line, entry in read])
    events += _drained(drained)
    events += aggregates(model, table, records, _folds(read), stamped)
    if sources.failed is not None:
        events += failed_batches(sources.failed(), item, arn)
    if sources.postgres is not None:
        image = next(
            (c.new_image or c.old_image for c in reversed(records) if c.new_image or c.old_image), None
        )
        if image is None:  # no record left in the stream: the item as it is now
            stored = {name: {kind: value} for name, (kind, value) in types.items()}
            image = sources.dynamodb.get_item(TableName=physical, Key=stored, ConsistentRead=True).get("Item")
        events += sources.postgres(table, key, _json_image(image))
    return ordered(_hops(events))


def _drained(drained: list[tuple[float, str, dict[str, Any], dict[str, Any]]]) -> list[Event]:
    """A PostgreSQL-mastered item's outbox rows (each once, when its transaction wrote it) and each
    drain's put of its view, with the row's fate (applied, superseded, dead letter, deferred)."""
    events, written = [], set()
    for at, function, line, entry in drained:
        if entry["outbox"] not in written:
            written.add(entry["outbox"])
            row = {
                "outbox": entry["outbox"],
                "operation": entry.get("operation"),
                "version": entry.get("version"),
            }
            events.append(Event(at - float(entry.get("waited_s") or 0), "outbox", row))
        events.append(Event(at, "put", {
            "function": function, "request": line.get("function_request_id"), "outbox": entry["outbox"],
            "fate": entry.get("fate"), "version": entry.get("version"), "freshness_s": entry.get("waited_s"),
        }))  # fmt: skip
    return events


def typed(model: Any, table: str, key: Mapping[str, str]) -> dict[str, tuple[str, Any]]:
    """Each key attribute as (its DynamoDB type, its value as the stream names it): a number as
    DynamoDB writes it back (`7.0` is `7`), a binary as its base64 text."""
    import base64
    import binascii
    from decimal import Decimal, InvalidOperation

    declared = next((t for t in model.tables if t.name == table), None)
    schema = {a.name: a.type for a in declared.key_schema()} if declared else {}
    if set(key) != set(schema):
        raise ValueError(
            f"{table}'s key is {', '.join(sorted(schema))}: give each as ATTR=VALUE, and nothing else"
        )
    out: dict[str, tuple[str, Any]] = {}
    for name, value in key.items():
        try:
            if schema[name] == "N":
                out[name] = ("N", format(Decimal(value).normalize(), "f"))
            elif schema[name] == "B":
                out[name] = ("B", base64.b64encode(base64.b64decode(value, validate=True)).decode())
            else:
                out[name] = ("S", value)
        except (InvalidOperation, ValueError, binascii.Error):
            kind = "a number" if schema[name] == "N" else "base64"
            raise ValueError(f"{name}={value}: {table}'s {name} is {kind}") from None
    return out


def _json_image(image: Any) -> Any:
    """An image as JSON can carry it to the operations function (a binary as its base64 text)."""
    import base64

    if isinstance(image, dict):
        return {k: _json_image(v) for k, v in image.items()}
    if isinstance(image, list):
        return [_json_image(v) for v in image]
    if isinstance(image, bytes | bytearray):
        return base64.b64encode(image).decode()
    return image


def _folds(
    read: list[tuple[float, str, dict[str, Any], dict[str, Any]]],
) -> dict[str, tuple[float, bool | None]]:
    """Per sequence the aggregation read it in: when, and whether it was folded then (True; None
    when its batch also held duplicates, already folded, which the line does not tell apart)."""
    return {
        entry["sequence"]: (at, True if not line.get("duplicates") else None)
        for at, _, line, entry in read if line.get("message") == "changes folded"
    }  # fmt: skip


def located(engine: Any, model: Any, name: str, given: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """An entity and its `sql_key` values (attribute -> text) as a trace's input: (its table, the
    item's key), the key made from the row PostgreSQL holds (a key template may name attributes
    the SQL key lacks: an invoice's partition is its customer's). ValueError says what is wrong."""
    import sqlalchemy as sa

    from hybridsync.model.convert import item_values

    try:
        entity = model.entity(name)
    except KeyError:
        entity = None
    if entity is None or not entity.sql_table:
        raise ValueError(f"no table or synced entity {name!r} in the model (its entities with a SQL table: "
                         f"{', '.join(e.name for e in model.synced())})")  # fmt: skip
    if set(given) != set(entity.sql_key):
        raise ValueError(
            f"{name} is found by its sql_key: give {' '.join(f'{a}=...' for a in entity.sql_key)}"
        )
    # each value typed by its column (PostgreSQL infers it), so the primary key's index is used
    where = " AND ".join(f"{entity.field(a).column} = :{n}" for n, a in enumerate(entity.sql_key))
    try:
        with engine.connect() as conn:
            values_of = {str(n): given[a] for n, a in enumerate(entity.sql_key)}
            query = sa.text(f"SELECT to_jsonb(t) FROM {entity.sql_table} t WHERE {where}")
            found = conn.execute(query, values_of).scalar()
    except sa.exc.DataError as wrong:  # a value its column cannot hold: no such row
        raise ValueError(f"{name}'s sql_key {' '.join(f'{a}={v}' for a, v in given.items())}: "
                         f"{str(wrong.orig).splitlines()[0]}") from None  # fmt: skip
    values = (
        item_values(entity, json.loads(found) if isinstance(found, str) else found) if found else dict(given)
    )
    try:
        key = entity.key(values)
    except ValueError:
        raise ValueError(
            f"no row of {name} with {' '.join(f'{a}={v}' for a, v in given.items())} in "
            f"{entity.sql_table}: give the table and the item's key instead"
        ) from None
    as_text = {
        attr: base64.b64encode(v).decode() if isinstance(v, bytes) else str(v) for attr, v in key.items()
    }
    return entity.table.name, as_text


def in_postgres(engine: Any, model: Any) -> Postgres:
    """The item's dead letters and row, read from PostgreSQL (`engine`)."""
    return lambda table, key, image: (
        dead_letters(engine, key, model, table) + row(engine, model, table, key, image)
    )


def ordered(events: list[Event]) -> list[Event]:
    """In the order things happened to the item: by the record each event is of (its place in the
    shard: the records' own times are DynamoDB's, to the second, and a consumer may read a record
    within the second it is stamped with), then by kind (a record, its invocations, what it moved,
    its dead letter and redrive), then by time; an event of no record (an outbox row, a put) before
    the first record seen after it; the row, as PostgreSQL holds it now, last."""
    places = sorted({int(e.detail["sequence"]) for e in events if e.detail.get("sequence")})
    rank = {str(sequence): n for n, sequence in enumerate(places)}
    seen: dict[int, float] = {}  # when a record was first read, else its stamp (to the second)
    for event in sorted(events, key=lambda e: (e.kind == "stream_record", e.at)):
        if (n := rank.get(event.detail.get("sequence") or "")) is not None:
            seen.setdefault(n, event.at)
    last = len(places)

    def place(event: Event) -> tuple[int, int, int, float]:
        if event.kind == "row":
            return last, 2, 0, event.at
        if (n := rank.get(event.detail.get("sequence") or "")) is not None:
            return n, 1, KINDS.index(event.kind), event.at
        before = next((n for n in range(last) if seen.get(n, event.at) >= event.at), last)
        return before, 0, KINDS.index(event.kind), event.at

    return sorted(events, key=place)


def _digest(image: Any) -> str | None:
    """A short digest of an image, to tell two versions apart at a glance."""
    if not image:
        return None
    return hashlib.sha256(json.dumps(image, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _record(change: Any, stamped: Mapping[str, float]) -> Event:
    at = stamped.get(str(change.sequence), (change.created_micros or 0) / 1e6)
    return Event(at, "stream_record", {"event": change.event, "sequence": str(change.sequence),
                                       "new_image": _digest(change.new_image),
                                       "old_image": _digest(change.old_image),
                                       "ttl_expiry": change.ttl_expiry or None})  # fmt: skip


def _hops(events: list[Event]) -> list[Event]:
    """Each hop's freshness (s, from the record's stamp): a folded aggregate's, and the row's from
    the newest record written before it was."""
    records = sorted((e.at, e.detail["sequence"]) for e in events if e.kind == "stream_record")
    stamp = {sequence: at for at, sequence in records}
    for event in events:
        sequence = event.detail.get("sequence")
        if event.kind == "aggregate" and event.detail.get("folded") and sequence in stamp:
            event.detail["freshness_s"] = round(max(event.at - stamp[sequence], 0.0), 3)
        elif (
            event.kind == "row"
            and event.detail.get("row")
            and (before := [a for a, _ in records if a <= event.at])
        ):
            event.detail["freshness_s"] = round(event.at - before[-1], 3)
    return events


def failed_batches(batches: Iterable[Any], item: str, arn: str | None) -> list[Event]:
    """The batches an event source mapping gave up on (past its retries, or too old) that held a
    record of the item: each a `dead_letter` of its consumer, its records kept in the failure
    bucket until `hybridsync failed-batches redrive` applies them."""
    from hybridsync.streams import trail

    events = []
    for batch in batches:
        if trail.stream(batch.stream_arn) != trail.stream(arn):
            continue
        for record in batch.records or []:
            keys = (record.get("dynamodb") or {}).get("Keys")
            if not isinstance(keys, dict) or trail.item(keys) != item:
                continue
            given = str(record["dynamodb"].get("SequenceNumber") or "")
            at = datetime.fromisoformat(batch.at.replace("Z", "+00:00")).timestamp() if batch.at else 0.0
            events.append(Event(at, "dead_letter", {
                "consumer": batch.consumer, "failed_batch": f"{batch.place}/{batch.message_id}",
                "reason": f"the mapping gave up on its batch ({batch.condition}, {batch.attempts} attempts): "
                          "`hybridsync failed-batches redrive` applies it",
                "sequence": str(int(given)) if given.isdigit() else None}))  # fmt: skip
    return events


def _attempts(invocations: list[Event]) -> list[Event]:
    """Each invocation's `attempt` at its record (a function that read the same record before: a
    retry of its batch), and `bisected` when the retry's batch held fewer records than the one
    before (the mapping split the failing batch in halves)."""
    before: dict[tuple[Any, Any], Event] = {}
    for event in sorted(invocations, key=lambda e: e.at):
        seen = (event.detail["function"], event.detail["sequence"])
        earlier = before.get(seen)
        event.detail["attempt"] = earlier.detail["attempt"] + 1 if earlier else 1
        held, had = (e.detail["batch"].get("records") if e else None for e in (event, earlier))
        if held is not None and had is not None and held < had:
            event.detail["bisected"] = f"{held} of {had} records"
        before[seen] = event
    return invocations


def _invocation(at: float, function: str, line: dict[str, Any], entry: dict[str, Any]) -> Event:
    outcome = {k: line[k] for k in ("records", "first", "last", "applied", "changed", "skipped", "duplicates",
                                    "dead_letters") if k in line}  # fmt: skip
    created = entry.get("created_ms")
    return Event(at, "invocation", {
        "function": function, "request": line.get("function_request_id"), "message": line.get("message"),
        "event": entry.get("event"), "sequence": entry.get("sequence"), "batch": outcome,
        # from the record's stamp, DynamoDB's to the second: up to 1 s more than the trip
        "freshness_s": round(max(at - created / 1000, 0.0), 3) if created is not None else None,
    })  # fmt: skip


def stream_records(sources: Sources, arn: str, item: str, sequences: list[str], since: float) -> list[Any]:
    """The item's records in the table's stream (`sources.records(arn, sequences)`: the records
    of those numbers, or every record from the trim horizon)."""
    from hybridsync.streams import changes, trail

    found = []
    for record in sources.records(arn, sequences) if sources.records else []:
        change = changes.read_one(record)
        if trail.item(change.keys) == item and (change.created_micros or 0) / 1e6 >= since:
            found.append(change)
    return sorted(found, key=lambda c: c.sequence or 0)


def aggregates(model: Any, table: str, records: list[Any], folds: Mapping[str, tuple[float, bool | None]],
               stamped: Mapping[str, float]) -> list[Event]:  # fmt: skip
    """What each record moves, by the engine's own fold: per aggregate item, its measures' deltas,
    at the time the aggregation read it (`folds`), else at the record's stamp; `folded`: True,
    False (not read yet), or None (read in a batch that also held records folded before)."""
    if not any(a.table.name == table for a in model.aggregates):
        return []
    from hybridsync.model.errors import Rejected
    from hybridsync.sync.aggregate import Aggregation

    folding, events = Aggregation(model, table), []
    for change in records:
        at, folded = folds.get(
            str(change.sequence),
            (stamped.get(str(change.sequence), (change.created_micros or 0) / 1e6), False),
        )
        try:
            parsed = folding.parse(change)
        except Rejected as refused:
            events.append(Event(at, "aggregate",
                                {"sequence": str(change.sequence), "refused": refused.reason}))  # fmt: skip
            continue
        moved = sorted((parsed.deltas if parsed else {}).items(), key=lambda kv: [str(k) for k in kv[0]])
        for (name, *parts), delta in moved:
            measures = folding.by_name[name].measures
            events.append(Event(at, "aggregate", {
                "aggregate": name, "key": [str(p) for p in parts], "sequence": str(change.sequence),
                "delta": {m.name: str(d) for m, d in zip(measures, delta, strict=True)},
                "folded": folded,
            }))  # fmt: skip
    return events


def dead_letters(
    engine: Any, key: Mapping[str, str], model: Any = None, table: str | None = None
) -> list[Event]:
    """The item's dead letters (a stream record whose keys are the item's; with the `model` and the
    item's `table`, an outbox row whose view is the item), and their redrives."""
    import sqlalchemy as sa

    from hybridsync.sql.schema import dead_letters as letters_table
    from hybridsync.streams import trail
    from hybridsync.sync.outbox import SOURCE as DRAIN

    # a value as the column's text holds it (json.dumps escapes it), matched literally; an outbox
    # row's letter names the row's key, not the item's: the drain's letters are read and placed
    first = json.dumps(next(iter(key.values())))[1:-1]
    holds = sa.cast(letters_table.c.record, sa.Text).contains(first, autoescape=True)
    query = sa.select(letters_table).where(sa.or_(holds, letters_table.c.source == DRAIN) if model else holds)
    item = trail.item(key)
    with engine.connect() as conn:
        found = conn.execute(query.order_by(letters_table.c.id))
        letters = [r for r in found if item in (_keys(r.record), model and _view_of(model, table, r.record))]
    events = []
    for letter in letters:
        given = str(((letter.record or {}).get("dynamodb") or {}).get("SequenceNumber") or "")
        sequence = str(int(given)) if given.isdigit() else None  # as the trail writes it
        said = {"id": letter.id, "consumer": letter.source, "reason": letter.reason, "sequence": sequence}
        if "outbox_id" in (letter.record or {}):
            said["outbox"] = letter.record["outbox_id"]
        events.append(Event(letter.created_at.timestamp(), "dead_letter", said))
        if letter.redriven_at is not None:
            events.append(
                Event(letter.redriven_at.timestamp(), "redrive", {"id": letter.id, "sequence": sequence})
            )
    return events


def _view_of(model: Any, table: str | None, record: Any) -> str | None:
    """The item an outbox row's dead letter would have put (None: not of `table`, or no item)."""
    from hybridsync.model.convert import item_values
    from hybridsync.streams import trail
    from hybridsync.sync.outbox import mastered_tables

    if not isinstance(record, dict) or "outbox_id" not in record:
        return None
    entity = mastered_tables(model).get(record.get("table_name"))
    if entity is None or entity.table.name != table:
        return None
    try:
        return trail.item(entity.key(item_values(entity, record.get("row_key") or {})))
    except Exception:  # a row no view can be made of
        return None


def _keys(record: Any) -> str:
    from hybridsync.streams import trail

    data = record.get("dynamodb") if isinstance(record, dict) else None
    keys = data.get("Keys") if isinstance(data, dict) else None
    return trail.item(keys) if isinstance(keys, dict) else ""


def row(
    engine: Any, model: Any, table: str, key: Mapping[str, str], image: dict[str, Any] | None
) -> list[Event]:
    """The row PostgreSQL holds for the item, found by the key its latest `image` (DynamoDB JSON)
    gives it; [] for no image, or an item of no written-back entity."""
    import sqlalchemy as sa

    from hybridsync.model import placing
    from hybridsync.model.convert import to_row, unmarshal
    from hybridsync.model.errors import Rejected
    from hybridsync.sql.schema import table_of

    if image is None:
        return []
    values = unmarshal(image)
    entity = placing.place(model, {k: values[k] for k in key if k in values}, None, table)
    if entity is None or entity not in model.written_back():
        return []
    try:
        sql, wanted = table_of(entity), to_row(entity, values)
    except Rejected as refused:  # its latest image has no row: the write-back refused it too
        return [Event(datetime.now(UTC).timestamp(), "row", {"entity": entity.name, "row": None,
                                                            "refused": refused.reason})]  # fmt: skip
    where = [sql.c[column.name] == wanted[column.name] for column in sql.primary_key.columns]
    with engine.connect() as conn:
        found = conn.execute(sa.select(sql).where(*where)).mappings().first()
    if found is None:
        return [Event(datetime.now(UTC).timestamp(), "row", {"entity": entity.name, "row": None})]
    held = {k: (str(v) if not isinstance(v, bool | int | type(None)) else v) for k, v in found.items()}
    at = found["updated_at"].timestamp() if found.get("updated_at") else datetime.now(UTC).timestamp()
    return [Event(at, "row", {"entity": entity.name, "table": sql.name, "row": held,
                              "stream_position": held.get("stream_position")})]  # fmt: skip


def local_lines(logs: Any) -> Callable[[str, float], Iterable[Line]]:
    """The local app's function logs (`.local/logs/<Function>.log`, Powertools' JSON lines)."""
    from pathlib import Path

    def lines(needle: str, since: float) -> Iterable[Line]:
        for path in sorted(Path(logs).glob("*.log")):
            with path.open(errors="replace") as file:
                for text in file:
                    if needle in text and (parsed := _parsed(text, since)):
                        yield parsed[0], path.stem, parsed[1]

    return lines


def _parsed(text: str, since: float) -> tuple[float, dict[str, Any]] | None:
    """A Powertools log line, parsed, with its time; None for another line, or one before `since`."""
    try:
        line = json.loads(text)
        at = _when(line["timestamp"])
    except (ValueError, KeyError, TypeError):
        return None
    return (at, line) if at >= since else None


def _when(stamp: str) -> float:
    """Powertools' `timestamp` ("2026-11-30 02:10:00,123+0000") as epoch seconds."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f%z").timestamp()


# Logs Insights: the functions' lines holding a part of an item's identity (`like` a string: a
# substring of the raw line; CloudWatch Logs Insights query syntax, "filter"), the newest first
QUERY = 'fields @timestamp, @message | filter @message like "{needle}" | sort @timestamp desc | limit {limit}'
QUERY_LIMIT = 10_000
QUERY_TIMEOUT_S = 120.0


def searchable(needle: str) -> str:
    """The longest run of `needle` with no `"` nor `\\`: a literal no escaping can garble (the lines
    are matched against the whole needle after the query)."""
    return max(re.split(r'["\\]', needle), key=len)


def insights_lines(logs: Any, groups: list[str], say: Callable[[str], None] = lambda _: None,
                   wait: Callable[[float], None] | None = None,
                   timeout_s: float = QUERY_TIMEOUT_S) -> Callable[[str, float], Iterable[Line]]:  # fmt: skip
    """The deployed functions' lines (their log groups `groups`, at most 50 a query), by a Logs
    Insights query; each line matched again here against the whole needle. RuntimeError when the
    query does not complete."""
    import time

    wait = wait or time.sleep

    def lines(needle: str, since: float) -> Iterable[Line]:
        query = QUERY.format(needle=searchable(needle), limit=QUERY_LIMIT)
        started = logs.start_query(logGroupNames=groups, startTime=int(since), endTime=int(time.time()) + 60,
                                   queryString=query)["queryId"]  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while (answer := logs.get_query_results(queryId=started))["status"] in ("Scheduled", "Running"):
            if time.monotonic() > deadline:
                logs.stop_query(queryId=started)
                raise RuntimeError(f"the Logs Insights query did not end in {timeout_s:.0f} s (stopped)")
            wait(1.0)
        if answer["status"] != "Complete":  # Failed, Cancelled, Timeout, Unknown
            raise RuntimeError(f"the Logs Insights query ended {answer['status']}")
        if len(answer["results"]) >= QUERY_LIMIT:
            say(f"the log lines were cut at the newest {QUERY_LIMIT}: use --since to look at less")
        for fields in reversed(answer["results"]):
            text = next((f["value"] for f in fields if f["field"] == "@message"), "")
            if needle in text and (parsed := _parsed(text, since)):
                yield parsed[0], str(parsed[1].get("function_name") or ""), parsed[1]

    return lines
