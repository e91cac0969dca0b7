"""The aggregation's bookkeeping in DynamoDB, per stream shard (`hybridsync.sync.aggregate` says
why and in which steps): the cursor and its watermark, the journal of a batch's net deltas applied
chunk by chunk, the ranges of sequence numbers each journal covered, the markers of changes that
may come twice, and the registry of shards whose expired bookkeeping is pruned.

`Ledger` is the half of `Aggregation` that talks to DynamoDB; `Aggregation` reads the deltas and
folds a batch through it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from hybridsync.dynamodb import capacity, store
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import PERIOD, Aggregate, Entity, Names, Table
from hybridsync.model.errors import Rejected
from hybridsync.model.limits import ARITHMETIC, DIGITS
from hybridsync.streams.records import DeadLetter

SOURCE = "aggregate"
MAX_TRANSACTION_ITEMS = 100  # TransactWriteItems limit
CHUNK = MAX_TRANSACTION_ITEMS - 1  # aggregate items per transaction, beside the cursor
JOURNAL_PART_BYTES = 300_000  # a journal item stays well under DynamoDB's 400 KB
log = logging.getLogger("hybridsync.sync.aggregate")  # the name its messages have always had


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


def _padded(sequence: int) -> str:
    return f"{sequence:040d}"  # sequence numbers sort as text once padded


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


def _journal_letter(shard: str, journal: str, row: list[Any], refusal: str) -> DeadLetter:
    """A journal row DynamoDB refused, as a dead letter naming the aggregate item and its delta."""
    name, key, delta = row
    record = {"eventID": f"journal:{shard}:{journal}:{json.dumps([name, key])}", "eventSource": SOURCE,
              "aggregate": name, "key": key, "delta": delta}  # fmt: skip
    why = (f"{name} {key}: its stored totals plus {delta} need more than DynamoDB's {DIGITS} digits "
           f"(DynamoDB: {refusal or 'ValidationError'})")  # fmt: skip
    return DeadLetter(record, why)


class Ledger:
    """A table's shard bookkeeping for the aggregates declared over it (the base of `Aggregation`,
    which sets what is declared here)."""

    table: Table
    names: Names
    by_name: dict[str, Aggregate]
    cursor: Entity  # a shard's cursor: its watermark, the pending journal and its progress
    journal_entity: Entity  # a journal's parts
    range_entity: Entity  # the sequence numbers a journal covered
    registry: Entity  # every shard with a cursor, in one partition
    change_entity: Entity  # a change's marker: folded once, however often it comes
    pk: str
    sk: str

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
