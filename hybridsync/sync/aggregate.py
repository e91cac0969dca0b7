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

This module reads each change's deltas and folds a batch; the bookkeeping of steps 1-3 (cursor,
journal, ranges, markers, registry) is `hybridsync.sync.ledger`'s, the base of `Aggregation`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Context, Decimal
from typing import Any

from hybridsync.dynamodb import store
from hybridsync.model import placing
from hybridsync.model.convert import WIDE, to_values, unmarshal, writer_version
from hybridsync.model.declare import PERIOD, Aggregate, Entity, Model, Table
from hybridsync.model.errors import Rejected
from hybridsync.model.limits import ARITHMETIC, DIGITS
from hybridsync.streams import changes as stream
from hybridsync.streams.changes import Batch, StreamChange
from hybridsync.streams.records import DeadLetter, table_of_arn
from hybridsync.sync.ledger import CHUNK as CHUNK  # still importable from here, as before the split
from hybridsync.sync.ledger import JOURNAL_PART_BYTES as JOURNAL_PART_BYTES
from hybridsync.sync.ledger import (
    MAX_TRANSACTION_ITEMS,
    ConcurrentUpdate,
    Key,
    Ledger,
    Letters,
    Outcome,
    RecordDelta,
    Totals,
    _reject,
)
from hybridsync.sync.ledger import SOURCE as SOURCE  # the aggregation's name among dead letters
from hybridsync.sync.ledger import _units as _units  # the write units of a transactional write
from hybridsync.sync.ledger import cursor_lifetime_s as cursor_lifetime_s

CONCURRENT_RETRIES = 3
# changes read from Kinesis per journal: each one's marker joins the journal's transaction
CHANGES_PER_JOURNAL = MAX_TRANSACTION_ITEMS - 10


def _add(totals: dict[Key, list[Decimal]], key: Key, parts: tuple[Decimal, ...],
         context: Context = ARITHMETIC) -> None:  # fmt: skip
    """Add one item's measure parts into running totals, by default in DynamoDB's 38 digits: a sum
    that would round raises ArithmeticError and changes nothing."""
    total = totals.get(key, [Decimal(0)] * len(parts))
    totals[key] = [context.add(t, part) for t, part in zip(total, parts, strict=True)]


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


class Aggregation(Ledger):
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

    def parse(self, record: StreamChange | dict[str, Any]) -> RecordDelta | None:
        """The measure deltas of one change (new contribution minus old; a record is read through
        the seam first); None if no source's. Raises Rejected for one that can never be applied."""
        change = record if isinstance(record, StreamChange) else stream.read_one(record)
        if not change.has_data:
            raise Rejected("record has no dynamodb section")
        old, new = change.old_image, change.new_image
        image = new or old
        if not isinstance(image, dict):
            return None
        try:
            tag = image.get(self.names.entity)
            found = self.source(unmarshal(change.keys or image), tag and unmarshal({"t": tag})["t"])
            if found is None:
                return None
            number = change.sequence
            if number is None:
                raise Rejected("undecodable source record: no SequenceNumber (its place in the shard)")
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
        return RecordDelta(number, deltas, change.record, change.change_id)

    def _triage(self, batch: Batch) -> tuple[list[RecordDelta], list[tuple[DeadLetter, int | None]], int]:
        """Parse each change of a batch: (what parsed, the dead letters of the rejected ones with
        their sequence numbers when known, how many were not for this aggregation). One bad record
        never stops the others."""
        parsed: list[RecordDelta] = []
        rejected: list[tuple[DeadLetter, int | None]] = []
        skipped = 0
        for read in batch:
            if isinstance(read, DeadLetter):  # a record that carries no change
                rejected.append((read, None))
                continue
            try:
                delta = self.parse(read)
            except Rejected as error:
                rejected.append((read.dead_letter(error.reason), read.sequence))
                continue
            if delta is None:
                skipped += 1
            else:
                parsed.append(delta)
        return parsed, rejected, skipped

    # --- folding a batch -------------------------------------------------------------------------

    def aggregate(
        self,
        records: Sequence[dict[str, Any]] | Batch,
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
        batch = stream.read(records)  # once: its dead letters name the change
        parsed, rejected, skipped = self._triage(batch)
        outcome = Outcome(received=len(batch), skipped=skipped)
        refused = [RecordDelta(n, {}, letter.record) for letter, n in rejected if n]
        self._fold(parsed, client, table, shard, outcome, dead_letter, refused)
        # parse rejections are stored after: a retry meets them again
        _reject(outcome, [letter for letter, _ in rejected], dead_letter)
        return outcome

    def redrive(
        self,
        records: Sequence[dict[str, Any]] | Batch,
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
        batch = stream.read(records)
        parsed, rejected, skipped = self._triage(batch)
        outcome = Outcome(received=len(batch), skipped=skipped)
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
        _reject(outcome, [letter for letter, _ in rejected], dead_letter)
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
