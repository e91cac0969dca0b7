"""Materialized aggregation: the stream records of a table folded into the aggregates the model
declares on it (`hybridsync.model.declare.Aggregate`), each record applied exactly once although the
stream delivers at least once.

Plain `ADD` counters double-count a retried batch. Here, per stream shard (Lambda passes the
shard id when the event source mapping uses a tumbling window):

1. A cursor item holds the shard's watermark, the last sequence number journaled. Records at or
   below it are skipped: replays, bisected halves and retried batches arriving late change nothing.
   A record refused (a dead letter) is journaled as changing nothing, so the watermark passes it:
   everything up to the watermark is what the aggregates hold, which a rebuild relies on.
2. The remaining records are summed into net deltas per aggregate item (a hot product is written
   once per batch, not once per record), stored as a journal, and the watermark advanced: one
   TransactWriteItems, conditional on the watermark read.
3. The journal is applied in chunks of 99 aggregate items, each chunk in one TransactWriteItems
   with the cursor's progress counter, so a crash between two chunks resumes at the next chunk,
   on the retry of any batch of the shard, without applying a chunk twice. Then it is deleted.

Each journal also records the range of sequence numbers it covered. A batch the platform gave up
on (its retries exhausted, the batch in the failure destination) is skipped by the watermark once
later batches pass it; `redrive` applies such a batch later, only its records no range covers,
under a cursor of its own, so redriving it twice applies nothing more.

Cursors and ranges carry an expiry renewed on every batch: twice the stream's retention
(`STREAM_RETENTION_S`, 24 h in AWS) after the shard's last batch. No record of the shard can be
delivered or redriven after it (each is at most as new as that batch, and gone from the stream a
retention later). Every shard with a cursor is listed in one registry partition; the first batch
of each new shard (every rollover and split) drops the bookkeeping of the expired ones, so it stays
bounded by the shards of two retention periods, whatever TTL does (AWS deletes lazily, DynamoDB
Local not at all for these items). TransactWriteItems' `ClientRequestToken` would not do: it is
remembered for 10 minutes only.

Two shards' batches updating one hot aggregate item at once make DynamoDB cancel a transaction
with `TransactionConflict`: it is retried in place (bounded, jittered), not failed.

Sums are DynamoDB's 38 digits (`limits.ARITHMETIC`), never rounded. A record that would make a
batch's sum round starts a journal of its own (`_exact_runs`); a journal row whose stored total
plus its delta DynamoDB refuses becomes a dead letter, stored before its chunk is sent again
without it (`_apply_chunk`): no single record stops a shard, and every other row still applies once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal
from typing import Any

from hybridsync.dynamodb import capacity, store
from hybridsync.model import placing
from hybridsync.model.convert import WIDE, marshal, to_values, unmarshal, writer_version
from hybridsync.model.declare import PERIOD, Aggregate, Entity, Model, Table
from hybridsync.model.errors import Rejected
from hybridsync.model.limits import ARITHMETIC, DIGITS
from hybridsync.streams import kinesis
from hybridsync.streams.records import DeadLetter, sequence, stream_data, table_of_arn, triage

SOURCE = "aggregate"
MAX_TRANSACTION_ITEMS = 100  # TransactWriteItems limit
CONCURRENT_RETRIES = 3
CHUNK = MAX_TRANSACTION_ITEMS - 1  # aggregate items per transaction, beside the cursor
JOURNAL_PART_BYTES = 300_000  # a journal item stays well under DynamoDB's 400 KB
# changes read from Kinesis per journal: each one's marker joins the journal's transaction
CHANGES_PER_JOURNAL = MAX_TRANSACTION_ITEMS - 10
log = logging.getLogger(__name__)


def cursor_lifetime_s() -> int:
    """How long a shard's bookkeeping outlives its last batch: twice the stream's retention."""
    return 2 * int(os.environ.get("STREAM_RETENTION_S", 24 * 3600))


# An aggregate item, as the engine names it: (aggregate name, *group values, period).
Key = tuple[Any, ...]
Totals = dict[Key, tuple[Decimal, ...]]  # what each aggregate item holds, its measures in order


@dataclass(frozen=True)
class RecordDelta:
    """What one stream record changes: measure deltas per aggregate item."""

    sequence: int
    deltas: dict[Key, tuple[Decimal, ...]]
    record: dict[str, Any] = field(repr=False, compare=False)
    change: str | None = None  # what identifies a change read from Kinesis across its duplicates


@dataclass
class Outcome:
    received: int = 0
    applied: int = 0  # records folded into the aggregates by this call
    duplicates: int = 0  # records at or below the shard's watermark: already applied
    skipped: int = 0  # not a source's records, or no measure changes
    transactions: int = 0
    conflicts_retried: int = 0  # transactions DynamoDB cancelled for a conflicting write, retried
    shards_pruned: int = 0  # expired shards whose bookkeeping this call dropped
    calls: int = 0  # DynamoDB requests made
    write_units: int = 0  # by DynamoDB's rules (`capacity.units`)
    rejected: list[DeadLetter] = field(default_factory=list)


class ConcurrentUpdate(Exception):
    """Another invocation moved the shard's cursor between our read and our write."""


def _sequence(record: dict[str, Any]) -> int | None:
    """A refused record's sequence number, if it has a readable one."""
    try:
        return sequence(record)
    except (Rejected, TypeError, ValueError, KeyError, AttributeError):
        return None


def _padded(sequence: int) -> str:
    return f"{sequence:040d}"  # sequence numbers sort as text once padded


def _add(totals: dict[Key, list[Decimal]], key: Key, parts: tuple[Decimal, ...],
         context: Context = ARITHMETIC) -> None:  # fmt: skip
    """Add one item's measure parts into running totals, by default in DynamoDB's 38 digits: a sum
    that would round raises ArithmeticError and changes nothing."""
    total = totals.get(key, [Decimal(0)] * len(parts))
    totals[key] = [context.add(t, part) for t, part in zip(total, parts, strict=True)]


def _units(size: int, *, gsi_moves: int = 0) -> int:
    """A transactional write of `size` bytes; each GSI entry whose key moves is a delete and a put."""
    return capacity.units(size, transactional=True) + 2 * gsi_moves


Letters = Callable[[list[DeadLetter]], None] | None  # stores dead letters (the function's store)


def _reject(outcome: Outcome, letters: list[DeadLetter], dead_letter: Letters) -> None:
    """Count the letters and store them now: a watermark or a chunk's progress passes them next."""
    if letters:
        outcome.rejected += letters
        if dead_letter is not None:
            dead_letter(letters)


def _exact_runs(records: list[RecordDelta]) -> list[tuple[list[RecordDelta], dict[Key, list[Decimal]]]]:
    """The records in runs whose sums stay exact in DynamoDB's 38 digits, with those sums: a record
    that would make a sum round (1e37 beside 24.99) starts the next run. Each run is journaled and
    applied on its own, so what is stored decides, row by row (`_apply_chunk`), which delta cannot
    be added; a record alone always fits (its deltas are exact)."""
    runs: list[tuple[list[RecordDelta], dict[Key, list[Decimal]]]] = [([], {})]
    for record in records:
        run, totals = runs[-1]
        trial = {key: totals[key] for key in record.deltas if key in totals}
        try:
            for key, delta in record.deltas.items():
                _add(trial, key, delta)
        except ArithmeticError:
            run, totals = [], {}
            runs.append((run, totals))
            trial = {}
            for key, delta in record.deltas.items():
                _add(trial, key, delta)
        totals.update(trial)
        run.append(record)
    return runs


def _with_markers(records: list[RecordDelta]) -> list[list[RecordDelta]]:
    """The records in slices of at most CHANGES_PER_JOURNAL changes read from Kinesis: each
    slice's markers fit its journal's transaction."""
    slices: list[list[RecordDelta]] = [[]]
    marked = 0
    for record in records:
        if record.change and record.deltas:
            if marked == CHANGES_PER_JOURNAL:
                slices.append([])
                marked = 0
            marked += 1
        slices[-1].append(record)
    return slices


def _journal_letter(shard: str, journal: str, row: list[Any], refusal: str) -> DeadLetter:
    """A journal row DynamoDB refused, as a dead letter naming the aggregate item and its delta."""
    name, key, delta = row
    record = {"eventID": f"journal:{shard}:{journal}:{json.dumps([name, key])}", "eventSource": SOURCE,
              "aggregate": name, "key": key, "delta": delta}  # fmt: skip
    why = (f"{name} {key}: its stored totals plus {delta} need more than DynamoDB's {DIGITS} digits "
           f"(DynamoDB: {refusal or 'ValidationError'})")  # fmt: skip
    return DeadLetter(record, why)


def source_table(model: Model, tables: Mapping[str, str], stream_arn: str) -> str:
    """The logical table a batch of stream records is aggregated in: the model's one table with
    aggregates, or, when it has several, the one whose stream (`stream_arn`) the batch came from."""
    logical = sorted({a.table.name for a in model.aggregates})
    if len(logical) == 1:
        return logical[0]
    physical = table_of_arn(stream_arn)
    for name in logical:
        if tables.get(name) == physical:
            return name
    raise ValueError(f"a stream of table {physical!r}: none of {sorted(tables.values())} has aggregates")


class Aggregation:
    """The aggregates a model declares over one table, folded from that table's stream."""

    def __init__(self, model: Model, table: Table | str | None = None):
        tables = {a.table.name for a in model.aggregates}
        if table is None and len(tables) != 1:
            raise ValueError(f"name the table to aggregate: the model aggregates {sorted(tables) or 'none'}")
        self.table = model.table(table if isinstance(table, str) else table.name if table else tables.pop())
        self.aggregates = tuple(a for a in model.aggregates if a.table.name == self.table.name)
        if not self.aggregates:
            raise ValueError(f"the model declares no aggregate over table {self.table.name!r}")
        self.model, self.names = model, model.names
        self.by_name = {a.name: a for a in self.aggregates}
        self.sources: dict[str, tuple[Entity, tuple[Aggregate, ...]]] = {}
        for aggregate in self.aggregates:
            for source in aggregate.sources:
                entity, feeding = self.sources.get(source.entity.name, (source.entity, ()))
                self.sources[source.entity.name] = (entity, (*feeding, aggregate))
        book = model.bookkeeping(self.table)
        self.cursor, self.journal_entity, self.range_entity = book["cursor"], book["journal"], book["range"]
        self.registry, self.change_entity = book["shard"], book["change"]
        self.pk, self.sk = self.table.partition.name, self.table.sort.name  # type: ignore[union-attr]

    def event_filters(self) -> list[dict[str, Any]]:
        """The mapping's filter: the records whose keys start as a source's keys start, whoever
        wrote them (a REMOVE carries only its old image; the keys are in every record). None when
        some source's keys may start with any text: the function sees every record."""
        keys = placing.key_filter([entity for entity, _ in self.sources.values()])
        return [{"dynamodb": keys}] if keys else []

    # --- what a record contributes ---------------------------------------------------------------

    def source(self, keys: Mapping[str, Any], tag: Any) -> tuple[Entity, tuple[Aggregate, ...]] | None:
        """The source an item is, placed by its keys (`hybridsync.model.placing`), with the aggregates it
        feeds; None when it feeds none. Raises Rejected when its entity cannot be decided."""
        entity = placing.place(self.model, keys, tag, table=self.table.name)
        return None if entity is None else self.sources.get(entity.name)

    def contribution(self, item: dict[str, Any] | None) -> Totals:
        """What one (unmarshalled) item adds to every aggregate it feeds; raises Rejected when
        its source's fields cannot be read."""
        if item is None:
            return {}
        found = self.source(item, item.get(self.names.entity))
        if found is None:
            return {}
        return self._contribution(item, found)

    def _contribution(self, item: dict[str, Any], found: tuple[Entity, tuple[Aggregate, ...]]) -> Totals:
        entity, feeding = found
        # what the write-back refuses counts for nothing here either: both sides agree on an item
        placing.check_keys(entity, {a.name: item.get(a.name) for a in entity.table.key_schema()}, item)
        writer_version(entity, item)
        values = to_values(entity, item)
        out: Totals = {}
        for aggregate in feeding:
            for key, parts in aggregate.contribution(entity, values).items():
                out[(aggregate.name, *key)] = parts
        return out

    def parse(self, record: dict[str, Any]) -> RecordDelta | None:
        """The measure deltas of one record (new contribution minus old); None if no source's.
        Raises Rejected for a record that can never be applied."""
        record = kinesis.as_change(record)
        data = stream_data(record)
        old, new = data.get("OldImage"), data.get("NewImage")
        image = new or old
        if not isinstance(image, dict):
            return None
        try:
            tag = image.get(self.names.entity)
            found = self.source(unmarshal(data.get("Keys") or image), tag and unmarshal({"t": tag})["t"])
            if found is None:
                return None
            number = sequence(record)
            before = self._contribution(unmarshal(old), found) if old else {}
            after = self._contribution(unmarshal(new), found) if new else {}
            deltas = {}
            for key in before.keys() | after.keys():
                width = len(self.by_name[key[0]].measures)
                b, a = before.get(key, (Decimal(0),) * width), after.get(key, (Decimal(0),) * width)
                delta = tuple(ARITHMETIC.subtract(y, x) for x, y in zip(b, a, strict=True))
                if any(delta):
                    deltas[key] = delta
        except Rejected:
            raise
        except ArithmeticError:
            raise Rejected(f"a measure of this record needs more than DynamoDB's {DIGITS} digits") from None
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            raise Rejected(f"undecodable source record: {type(error).__name__}: {error}") from None
        return RecordDelta(number, deltas, record, kinesis.change_of(record))

    # --- folding a batch -------------------------------------------------------------------------

    def aggregate(
        self,
        records: Sequence[dict[str, Any]],
        client: Any,
        table: str,
        shard: str,
        *,
        dead_letter: Callable[[list[DeadLetter]], None] | None = None,
    ) -> Outcome:
        """Fold one batch of one shard into the aggregates, exactly once. DynamoDB failures raise:
        the platform retries the batch, and the retry resumes where this call stopped."""
        if not shard:
            raise ValueError("the shard id is required (the event source mapping needs a tumbling window)")
        records = [kinesis.readable(record) for record in records]  # its dead letters name the change
        parsed, rejected, skipped = triage(records, self.parse)
        outcome = Outcome(received=len(records), skipped=skipped)
        refused = [
            RecordDelta(n, {}, letter.record) for letter in rejected if (n := _sequence(letter.record))
        ]
        self._fold(parsed, client, table, shard, outcome, dead_letter, refused)
        _reject(outcome, rejected, dead_letter)  # parse rejections are stored after: a retry meets them again
        return outcome

    def redrive(
        self,
        records: Sequence[dict[str, Any]],
        client: Any,
        table: str,
        shard: str,
        *,
        dead_letter: Callable[[list[DeadLetter]], None] | None = None,
    ) -> Outcome:
        """Apply a failed batch of `shard` (from its failure destination, or read back from the
        stream) exactly once: records a journal of the shard covered count as
        duplicates, the rest are folded under a cursor named after the batch, which skips them on
        a second redrive. A journal's range spans only the records it folded in: a rejected record
        inside it was never applied, and its dead letter (stored once per record) may still be owed."""
        records = [kinesis.readable(record) for record in records]
        parsed, rejected, skipped = triage(records, self.parse)
        outcome = Outcome(received=len(records), skipped=skipped)
        if parsed:
            sequences = sorted(d.sequence for d in parsed)
            covered = self._applied(client, table, shard, sequences[0], sequences[-1])
            # a rebuild counted every record up to the watermark it ran at (hybridsync.sync.rebuild)
            rebuilt = self._read_cursor(client, table, shard, outcome).get("RebuiltThrough")
            if rebuilt:
                covered.append((0, int(rebuilt)))
            fresh = [d for d in parsed if not any(a <= d.sequence <= b for a, b in covered)]
            # the same cursor every redrive
            self._fold(fresh, client, table, f"{shard}@{sequences[0]}", outcome, dead_letter)
            outcome.duplicates += len(parsed) - len(fresh)
        _reject(outcome, rejected, dead_letter)
        return outcome

    def _fold(self, parsed: list[RecordDelta], client: Any, table: str, shard: str, outcome: Outcome,
              dead_letter: Letters, refused: Sequence[RecordDelta] = ()) -> None:  # fmt: skip
        """Journal and apply the records past the shard's watermark (see the module's steps);
        `refused` records (dead letters) are journaled as changing nothing."""
        changing = [d for d in parsed if d.deltas]
        outcome.skipped += len(parsed) - len(changing)
        deltas = sorted([*changing, *refused], key=lambda d: d.sequence)
        for attempt in range(1, CONCURRENT_RETRIES + 1):
            try:
                cursor = self._read_cursor(client, table, shard, outcome)
                if cursor.get("Pending"):  # an earlier call stopped between chunks: finish it first
                    self._apply_journal(client, table, shard, cursor, outcome, dead_letter)
                watermark = int(cursor.get("Watermark", 0))
                pending = [d for d in deltas if d.sequence > watermark]
                outcome.duplicates = sum(1 for d in deltas if d.deltas and d.sequence <= watermark)
                pending = self._unseen(client, table, pending, outcome)
                if pending:
                    new_shard = "Watermark" not in cursor
                    for run, totals in (r for part in _with_markers(pending) for r in _exact_runs(part)):
                        self._journal(client, table, shard, cursor, run, totals, outcome)
                        self._apply_journal(client, table, shard, cursor, outcome, dead_letter)
                    if new_shard:
                        self._prune_quietly(client, table, outcome)
                return
            except ConcurrentUpdate:
                if attempt == CONCURRENT_RETRIES:
                    raise

    def _unseen(self, client: Any, table: str, pending: list[RecordDelta],
                outcome: Outcome) -> list[RecordDelta]:  # fmt: skip
        """Changes read from Kinesis that a journal folded in already (a duplicate: kds.html), or
        that come twice in this batch, changing nothing: journaled so the watermark passes them."""
        ids = sorted({d.change for d in pending if d.change and d.deltas})
        if not ids:
            return pending
        keys = [self.change_entity.key({"Change": change}) for change in ids]
        seen = {item["Change"] for item in store.batch_get(client, table, keys)}
        outcome.calls += -(-len(keys) // 100)
        out = []
        for delta in pending:
            if delta.change and delta.deltas and delta.change in seen:
                outcome.duplicates += 1
                delta = dataclasses.replace(delta, deltas={}, change=None)
            elif delta.change:
                seen.add(delta.change)
            out.append(delta)
        return out

    def _cursor_key(self, shard: str) -> dict[str, Any]:
        return marshal(self.cursor.key({"ShardId": shard}))

    def _expiry(self) -> dict[str, int]:
        return {self._expires: int(time.time()) + cursor_lifetime_s()}

    @property
    def _expires(self) -> str:
        return self.table.ttl_attribute or "ExpiresAt"  # TTL's attribute if the table has one

    def _read_cursor(self, client: Any, table: str, shard: str, outcome: Outcome) -> dict[str, Any]:
        got = client.get_item(TableName=table, Key=self._cursor_key(shard), ConsistentRead=True)
        outcome.calls += 1
        return unmarshal(got["Item"]) if "Item" in got else {}

    def _transact(self, client: Any, items: list[dict], outcome: Outcome, units: int) -> None:
        """One TransactWriteItems. A conflict with another write of an item is retried in place
        (nothing of a cancelled transaction was applied, and each is conditional on the cursor, so
        the retry is the same request); a failed condition means another invocation moved the
        cursor (ConcurrentUpdate)."""

        def retried() -> None:
            outcome.calls += 1
            outcome.conflicts_retried += 1

        try:
            store.send_transaction(client, {"TransactItems": items}, on_retry=retried)
        except client.exceptions.TransactionCanceledException as error:
            outcome.calls += 1
            reasons = store.cancellation_codes(error)
            if "ConditionalCheckFailed" in reasons:
                raise ConcurrentUpdate(str(reasons)) from None
            raise
        outcome.calls += 1
        outcome.transactions += 1
        outcome.write_units += units

    def _journal(self, client: Any, table: str, shard: str, cursor: dict, pending: list[RecordDelta],
                 totals: dict[Key, list[Decimal]], outcome: Outcome) -> None:  # fmt: skip
        """Store the records' net deltas (`totals`, exact) and advance the watermark, in one
        transaction. A journal row is `[aggregate, [*group, period], [*deltas]]`: any number of
        measures."""
        rows = [
            [key[0], list(key[1:]), [str(d) for d in delta]] for key, delta in totals.items() if any(delta)
        ]
        chunks = [rows[i : i + CHUNK] for i in range(0, len(rows), CHUNK)]
        journal = str(pending[-1].sequence)
        parts: list[list[Any]] = [[]]
        size = 0
        for chunk in chunks:  # parts hold whole chunks, so a chunk is read from one part
            chunk_bytes = len(json.dumps(chunk))
            if parts[-1] and size + chunk_bytes > JOURNAL_PART_BYTES:
                parts.append([])
                size = 0
            parts[-1].extend(chunk)
            size += chunk_bytes
        expiry = self._expiry()
        covered = {"ShardId": shard, "First": _padded(pending[0].sequence), "Last": journal}
        items: list[dict] = [
            {"Put": {"TableName": table, "Item": marshal(self.range_entity.item(covered) | expiry)}}
        ]
        units = _units(200)
        for number, part in enumerate(parts):
            body = json.dumps(part)
            values = {"ShardId": shard, "JournalId": journal, "Part": number, "Deltas": body}
            items.append({"Put": {"TableName": table, "Item": marshal(self.journal_entity.item(values))}})
            units += _units(len(body) + 100)
        for delta in pending:  # changes read from Kinesis: marked, once (another writer raises)
            if delta.change and delta.deltas:
                marker = marshal(self.change_entity.item({"Change": delta.change}) | expiry)
                fresh = f"attribute_not_exists({self.pk})"
                items.append({"Put": {"TableName": table, "Item": marker, "ConditionExpression": fresh}})
                units += _units(100)
        previous = cursor.get("Watermark")
        sets = {
            "Watermark": str(pending[-1].sequence),
            "Pending": journal,
            "Chunks": len(chunks),
            "Progress": 0,
            "ShardId": shard,
            self.names.entity: self.cursor.name,
        } | expiry
        names = {f"#a{n}": name for n, name in enumerate(sets)}
        values = {f":a{n}": value for n, value in enumerate(sets.values())}
        update = {
            "TableName": table,
            "Key": self._cursor_key(shard),
            "UpdateExpression": "SET " + ", ".join(f"#a{n} = :a{n}" for n in range(len(sets))),
            "ConditionExpression": "attribute_not_exists(#a0)" if previous is None else "#a0 = :prev",
            "ExpressionAttributeNames": names,
        }
        if previous is not None:
            values[":prev"] = previous
        update["ExpressionAttributeValues"] = marshal(values)
        items.append({"Update": update})
        if previous is None:  # a new shard: listed, so its bookkeeping is found once it expires
            registered = self.registry.item({"ShardId": shard}) | expiry
            items.append({"Put": {"TableName": table, "Item": marshal(registered)}})
            units += _units(100)
        self._transact(client, items, outcome, units + _units(200))
        outcome.applied += sum(1 for d in pending if d.deltas)
        cursor.update({"Watermark": journal, "Pending": journal, "Chunks": len(chunks), "Progress": 0})

    def _load_journal(
        self, client: Any, table: str, shard: str, journal: str, outcome: Outcome
    ) -> tuple[list[list[Any]], list[dict]]:
        """The journal's delta rows, in order, and the keys of its parts."""
        where = {"ShardId": shard, "JournalId": journal}
        rows: list[list[Any]] = []
        part_keys: list[dict] = []
        for page in store.pages(
            client,
            "query",
            TableName=table,
            ConsistentRead=True,
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :sk)",
            ExpressionAttributeNames={"#pk": self.pk, "#sk": self.sk},
            ExpressionAttributeValues=marshal(
                {
                    ":pk": self.journal_entity.key_value(self.pk, where),
                    ":sk": self.journal_entity.key_prefix(self.sk, where),
                }
            ),
        ):
            outcome.calls += 1
            for raw in page["Items"]:
                rows += json.loads(raw["Deltas"]["S"])
                part_keys.append({self.pk: raw[self.pk], self.sk: raw[self.sk]})
        return rows, part_keys

    def _apply_journal(self, client: Any, table: str, shard: str, cursor: dict, outcome: Outcome,
                       dead_letter: Letters) -> None:  # fmt: skip
        """Apply the pending journal's remaining chunks, each with the cursor's progress, then drop it."""
        journal = cursor["Pending"]
        rows, parts = self._load_journal(client, table, shard, journal, outcome)
        chunks = [rows[i : i + CHUNK] for i in range(0, len(rows), CHUNK)]
        progress = int(cursor.get("Progress", 0))
        for number in range(progress, len(chunks)):
            self._apply_chunk(client, table, shard, journal, number, chunks[number], outcome, dead_letter)
        # Done: forget the journal, then delete its parts (a crash in between leaves only garbage:
        # no cursor points at them any more).
        client.update_item(
            TableName=table,
            Key=self._cursor_key(shard),
            UpdateExpression="REMOVE Pending, Chunks, Progress",
            ConditionExpression="Pending = :j",
            ExpressionAttributeValues=marshal({":j": journal}),
        )
        outcome.calls += 1
        outcome.write_units += capacity.units(200)
        part_bytes = len(json.dumps(rows)) // max(len(parts), 1) + 100
        store.batch_write(client, table, [{"DeleteRequest": {"Key": k}} for k in parts])
        outcome.calls += -(-len(parts) // 25)
        outcome.write_units += len(parts) * capacity.units(part_bytes)
        cursor.pop("Pending", None)

    def _apply_chunk(self, client: Any, table: str, shard: str, journal: str, number: int, chunk: list,
                     outcome: Outcome, dead_letter: Letters) -> None:  # fmt: skip
        """One chunk of a journal with the cursor's progress, in one transaction. A row whose stored
        totals plus its delta need more than 38 digits can never apply. DynamoDB refuses the whole
        transaction: a `ValidationError` cancellation naming the action in AWS (TransactWriteItems
        API reference: "Number overflow"), a plain ValidationException from DynamoDB Local 1.25.1
        ("DynamoDB only supports precision up to 38 digits"). Either way the rows that cannot apply
        are found by reading their items; each becomes a dead letter, stored before the chunk is
        sent again without it, so every other row still applies exactly once and the shard goes on."""
        rows, items = [], []
        for row in chunk:  # a row no item can hold (a key over its size) is a letter, never a stuck shard
            name, key, delta = row
            try:
                items.append(self._update(table, name, tuple(key), tuple(map(Decimal, delta))))
                rows.append(row)
            except Rejected as refused:
                _reject(outcome, [_journal_letter(shard, journal, row, refused.reason)], dead_letter)
        progress = {"Update": {
            "TableName": table, "Key": self._cursor_key(shard),
            "UpdateExpression": "SET Progress = :next",
            "ConditionExpression": "Pending = :j AND Progress = :at",
            "ExpressionAttributeValues": marshal({":next": number + 1, ":j": journal, ":at": number}),
        }}  # fmt: skip
        while True:
            moves = sum(1 for name, _, _ in rows if self.by_name[name].rank)  # rank entries
            units = len(rows) * _units(200) + _units(200, gsi_moves=moves)  # items, cursor
            try:
                self._transact(client, [*items, progress], outcome, units)
                return
            except client.exceptions.ClientError as error:
                codes = store.cancellation_codes(error)
                if (
                    "ValidationError" not in codes
                    and error.response["Error"]["Code"] != "ValidationException"
                ):
                    raise
                refusal = error.response["Error"].get("Message", "")
            refused = self._overflowing(client, rows, items, outcome)
            if not refused:
                raise RuntimeError(f"DynamoDB refused a journal chunk of shard {shard}: {refusal}")
            _reject(
                outcome, [_journal_letter(shard, journal, rows[n], refusal) for n in refused], dead_letter
            )
            rows = [row for n, row in enumerate(rows) if n not in refused]
            items = [item for n, item in enumerate(items) if n not in refused]

    def _overflowing(self, client: Any, rows: list, updates: list[dict], outcome: Outcome) -> list[int]:
        """The rows whose aggregate item (the key of its update) holds measures that plus the row's
        delta DynamoDB cannot store."""
        refused = []
        for n, (name, _, delta) in enumerate(rows):  # GetItem each: a rare path, on the role's own actions
            update = updates[n]["Update"]
            got = client.get_item(TableName=update["TableName"], Key=update["Key"], ConsistentRead=True)
            item = unmarshal(got.get("Item", {}))
            outcome.calls += 1
            try:
                for measure, d in zip(self.by_name[name].measures, delta, strict=True):
                    ARITHMETIC.add(Decimal(item.get(measure.name, 0)), Decimal(d))
            except ArithmeticError:
                refused.append(n)
        return refused

    def _update(self, table: str, name: str, group_and_period: tuple[Any, ...], delta: tuple[Decimal, ...], *,
                absolute: bool = False) -> dict:  # fmt: skip
        """One aggregate item's update: its measures, and its rank keys (the ranked measure's new
        value as the index's sort key); `absolute`: set to these values (a rebuild), not added."""
        aggregate = self.by_name[name]
        entity = aggregate.entity
        zeros = tuple(Decimal(0) for _ in aggregate.measures)
        item = entity.item(aggregate.item_values(group_and_period, zeros))
        key = entity.key(item)
        sets: list[str] = []
        names: dict[str, str] = {}
        values: dict[str, Any] = {} if absolute else {":zero": 0}
        for n, (measure, d) in enumerate(zip(aggregate.measures, delta, strict=True)):
            names[f"#m{n}"], values[f":d{n}"] = measure.name, d
            sets.append(f"#m{n} = :d{n}" if absolute else f"#m{n} = if_not_exists(#m{n}, :zero) + :d{n}")
        if aggregate.rank:
            index = self.table.index(aggregate.rank.index)
            ranked = next(n for n, m in enumerate(aggregate.measures) if m.name == aggregate.rank.measure)
            names["#rp"], values[":rp"] = index.partition.name, item[index.partition.name]
            sets.append("#rp = :rp")
            if index.sort:
                names["#rs"] = index.sort.name
                sets.append(
                    f"#rs = :d{ranked}"
                    if absolute
                    else f"#rs = if_not_exists(#m{ranked}, :zero) + :d{ranked}"
                )
        plain = {self.names.entity: entity.name, PERIOD: group_and_period[-1]}
        plain |= dict(zip(aggregate.group_by, group_and_period, strict=False))
        for n, (attribute, value) in enumerate(plain.items()):
            if attribute not in key:
                names[f"#v{n}"], values[f":v{n}"] = attribute, value
                sets.append(f"#v{n} = :v{n}")
        return {
            "Update": {
                "TableName": table,
                "Key": marshal(key),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": marshal(values),
            }
        }

    def _prune_quietly(self, client: Any, table: str, outcome: Outcome) -> None:
        """Housekeeping must not fail a batch that was applied: a failed prune is left to the next."""
        try:
            outcome.shards_pruned += self.prune(client, table)
        except Exception:
            log.exception("pruning expired shards' bookkeeping failed; the next new shard tries again")

    def prune(self, client: Any, table: str, *, now: float | None = None) -> int:
        """Drop the bookkeeping (cursor, ranges, journal leftovers) of every shard whose cursor
        expired; how many shards. The cursor goes first, on the condition that it is still
        expired (a batch renewing it wins)."""
        now = time.time() if now is None else now
        where = {"ShardId": ""}
        listed = store.pages(
            client, "query", TableName=table, ConsistentRead=True,
            KeyConditionExpression="#pk = :pk", ExpressionAttributeNames={"#pk": self.pk},
            ExpressionAttributeValues=marshal({":pk": self.registry.key_value(self.pk, where)}),
        )  # fmt: skip
        pruned = 0
        for page in listed:
            for raw in page["Items"]:
                entry = unmarshal(raw)
                if int(entry.get(self._expires, 0)) > now:
                    continue  # the registry entry's expiry is the cursor's first; check the cursor
                shard = entry["ShardId"]
                try:
                    client.delete_item(
                        TableName=table, Key=self._cursor_key(shard),
                        ConditionExpression="attribute_not_exists(#e) OR #e < :now",
                        ExpressionAttributeNames={"#e": self._expires},
                        ExpressionAttributeValues=marshal({":now": int(now)}),
                    )  # fmt: skip
                except client.exceptions.ConditionalCheckFailedException:
                    # renewed since: the registry entry follows the cursor's expiry
                    cursor = self._read_cursor(client, table, shard, Outcome())
                    renewed = {self._expires: cursor.get(self._expires, int(now) + cursor_lifetime_s())}
                    listed = self.registry.item({"ShardId": shard}) | renewed
                    client.put_item(TableName=table, Item=marshal(listed))
                    continue
                self._delete_partition(client, table, shard)
                client.delete_item(TableName=table, Key={self.pk: raw[self.pk], self.sk: raw[self.sk]})
                pruned += 1
        return pruned

    def _delete_partition(self, client: Any, table: str, shard: str) -> None:
        """Every item left under a shard's key: its ranges and any journal part a crash left."""
        where = {"ShardId": shard}
        for page in store.pages(
            client, "query", TableName=table, ConsistentRead=True, ProjectionExpression="#pk, #sk",
            KeyConditionExpression="#pk = :pk", ExpressionAttributeNames={"#pk": self.pk, "#sk": self.sk},
            ExpressionAttributeValues=marshal({":pk": self.range_entity.key_value(self.pk, where)}),
        ):  # fmt: skip
            keys = [{self.pk: item[self.pk], self.sk: item[self.sk]} for item in page["Items"]]
            store.batch_write(client, table, [{"DeleteRequest": {"Key": k}} for k in keys])

    def bookkeeping_counts(self, client: Any, table: str) -> dict[str, int]:
        """How many shards are listed and how many cursor and range items the table holds (a full
        scan: for tests and benchmarks)."""
        counts = {"shards_listed": 0, "cursors": 0, "ranges": 0}
        prefix = self.registry.key_value(self.pk, {"ShardId": ""})
        names = {"#pk": self.pk, "#e": self.names.entity}
        scan = store.pages(client, "scan", TableName=table, ProjectionExpression="#pk, #e",
                           ExpressionAttributeNames=names)  # fmt: skip
        for page in scan:
            for item in page["Items"]:
                name = item.get(self.names.entity, {}).get("S")
                if item[self.pk]["S"] == prefix:
                    counts["shards_listed"] += 1
                elif name == self.cursor.name:
                    counts["cursors"] += 1
                elif name == self.range_entity.name:
                    counts["ranges"] += 1
        return counts

    def _applied(self, client: Any, table: str, shard: str, first: int, last: int) -> list[tuple[int, int]]:
        """The journaled ranges of `shard` overlapping first..last, newest first. Ranges never
        overlap and come in stream order, so the walk back stops at the first ending before `first`."""
        where = {"ShardId": shard}
        low = self.range_entity.key_prefix(self.sk, where)
        found = []
        for page in store.pages(
            client,
            "query",
            TableName=table,
            ScanIndexForward=False,
            ConsistentRead=True,
            KeyConditionExpression="#pk = :pk AND #sk BETWEEN :lo AND :hi",
            ExpressionAttributeNames={"#pk": self.pk, "#sk": self.sk},
            ExpressionAttributeValues=marshal(
                {":pk": self.range_entity.key_value(self.pk, where), ":lo": low, ":hi": low + _padded(last)}
            ),
        ):
            for raw in page["Items"]:
                start, end = int(raw["First"]["S"]), int(raw["Last"]["S"])
                if end < first:
                    return found
                found.append((start, end))
        return found

    # --- checking: a clean recount against what is stored ----------------------------------------

    def recount(
        self, items: Iterable[dict[str, Any]], keep: Callable[[Key], bool] = lambda _: True
    ) -> Totals:
        """The aggregates a clean pass over the table's items gives (items the mapping would
        reject count for nothing, as in the pipeline: they are dead letters); all-zero ones left out."""
        totals: dict[Key, list[Decimal]] = {}
        for item in items:
            try:
                contribution = self.contribution(item)
            except (Rejected, TypeError, ValueError, KeyError, ArithmeticError):
                continue
            for key, parts in contribution.items():
                _add(totals, key, parts, WIDE)  # exact, whatever the stored items hold
        return {k: tuple(v) for k, v in totals.items() if any(v) and keep(k)}

    def stored(self, items: Iterable[dict[str, Any]], keep: Callable[[Key], bool] = lambda _: True) -> Totals:
        """The aggregates as the table holds them (all-zero ones count as absent)."""
        out: Totals = {}
        for item in items:
            aggregate = self.by_name.get(item.get(self.names.entity))  # type: ignore[arg-type]
            if aggregate is None:
                continue
            key = (aggregate.name, *(item[g] for g in aggregate.group_by), item[PERIOD])
            value = tuple(Decimal(item.get(m.name, 0)) for m in aggregate.measures)
            if any(value) and keep(key):
                out[key] = value
        return out


def differences(stored: Totals, clean: Totals) -> dict[Key, tuple[Any, Any]]:
    """Aggregate items whose stored measures differ from a recount: key -> (stored, recount)."""
    return {
        k: (stored.get(k), clean.get(k))
        for k in stored.keys() | clean.keys()
        if stored.get(k) != clean.get(k)
    }


def grouped(totals: Totals) -> dict[str, int]:
    """How many aggregate items each aggregate has (for a report)."""
    counts: dict[str, int] = defaultdict(int)
    for key in totals:
        counts[key[0]] += 1
    return dict(counts)
