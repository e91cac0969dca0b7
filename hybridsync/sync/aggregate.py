"""Materialized aggregation: order-line stream records folded into sales and spend aggregates,
each record applied exactly once although the stream delivers at least once.

Plain `ADD` counters double-count a retried batch. Here, per stream shard (Lambda passes the
shard id when the event source mapping uses a tumbling window):

1. A cursor item holds the shard's watermark, the last sequence number journaled. Records at or
   below it are skipped: replays, bisected halves and retried batches arriving late change nothing.
2. The remaining records are summed into net deltas per aggregate item (a hot product is written
   once per batch, not once per record), stored as a journal, and the watermark advanced: one
   TransactWriteItems, conditional on the watermark read.
3. The journal is applied in chunks of 99 aggregates, each chunk in one TransactWriteItems with the
   cursor's progress counter, so a crash between two chunks resumes at the next chunk, on the
   retry of any batch of the shard, without applying a chunk twice. Then the journal is deleted.

Each journal also records the range of sequence numbers it covered. A batch the platform gave up
on (its retries exhausted, its metadata in the failure queue) is skipped by the watermark once
later batches pass it; `redrive` applies such a batch later, only its records no range covers,
under a cursor of its own, so redriving it twice applies nothing more.

Cursors and ranges carry a TTL renewed on every batch: a closed shard's expire on their own 48 h
after its last batch (the stream keeps records 24 h). TransactWriteItems' `ClientRequestToken` would not
do: it is remembered for 10 minutes only, and moto ignores it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from hybridsync import store
from hybridsync.convert import attribute_value, marshal, to_row, unmarshal
from hybridsync.model import (
    AGGREGATION_CURSOR,
    AGGREGATION_JOURNAL,
    AGGREGATION_RANGE,
    CANCELLED,
    CUSTOMER_SPEND,
    ENTITY,
    EXPIRES_AT,
    ORDER_LINE,
    SALES,
)
from hybridsync.records import DeadLetter, Rejected, stream_data, triage

SOURCE = "aggregate"
MAX_TRANSACTION_ITEMS = 100  # TransactWriteItems limit
CONCURRENT_RETRIES = 3

# Only order-line changes reach the function (REMOVE records carry only the old image).
EVENT_FILTERS: list[dict[str, Any]] = [
    {"dynamodb": {"NewImage": {ENTITY: {"S": [ORDER_LINE.name]}}}},
    {"dynamodb": {"OldImage": {ENTITY: {"S": [ORDER_LINE.name]}}}},
]

# An aggregate item: (entity, owner id, period). Sales per product per day and per month;
# spend and points per customer per month.
Aggregate = tuple[str, str, str]  # (entity name, owner id, period)


def points(revenue: Decimal) -> int:
    """Loyalty points of one line: one per whole currency unit (per line, so deltas add up)."""
    return int(revenue)


@dataclass(frozen=True)
class RecordDelta:
    """What one stream record changes: counter deltas per aggregate item."""

    sequence: int
    deltas: dict[Aggregate, tuple[Decimal, Decimal]]  # (ranked counter, other): units/revenue, points/spend
    record: dict[str, Any] = field(repr=False, compare=False)


_LINE_FIELDS = tuple(f.attribute for f in ORDER_LINE.fields)


def _contribution(image: dict[str, Any] | None) -> dict[Aggregate, tuple[Decimal, Decimal]]:
    if image is None:
        return {}
    row = to_row(ORDER_LINE, {name: attribute_value(image[name]) for name in _LINE_FIELDS if name in image})
    if row["status"] == CANCELLED:
        return {}
    quantity, revenue = Decimal(row["quantity"]), row["quantity"] * row["unit_price"]
    day = row["created_at"].strftime("%Y-%m-%d")
    month = day[:7]
    return {
        (SALES.name, row["product_id"], day): (quantity, revenue),
        (SALES.name, row["product_id"], month): (quantity, revenue),
        (CUSTOMER_SPEND.name, row["customer_id"], month): (Decimal(points(revenue)), revenue),
    }


def parse(record: dict[str, Any]) -> RecordDelta | None:
    """The counter deltas of one record (new contribution minus old); None if it is not an order
    line. Raises Rejected for a record that can never be applied."""
    data = stream_data(record)
    old, new = data.get("OldImage"), data.get("NewImage")
    image = new or old
    if not isinstance(image, dict) or attribute_value(image.get(ENTITY, {"NULL": True})) != ORDER_LINE.name:
        return None
    try:
        sequence = int(data["SequenceNumber"])
        before, after = _contribution(old), _contribution(new)
    except Rejected:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as error:
        raise Rejected(f"undecodable order line: {type(error).__name__}: {error}") from None
    deltas = {}
    for item in before.keys() | after.keys():
        b, a = before.get(item, (0, 0)), after.get(item, (0, 0))
        delta = (a[0] - b[0], a[1] - b[1])
        if delta != (0, 0):
            deltas[item] = delta
    return RecordDelta(sequence, deltas, record)


@dataclass
class Outcome:
    received: int = 0
    applied: int = 0  # records folded into counters by this call
    duplicates: int = 0  # records at or below the shard's watermark: already applied
    skipped: int = 0  # not order lines, or no counter changes
    transactions: int = 0
    calls: int = 0  # DynamoDB requests made
    write_units: int = 0  # by DynamoDB's rules (see `write_units`)
    rejected: list[DeadLetter] = field(default_factory=list)


CHUNK = MAX_TRANSACTION_ITEMS - 1  # aggregates per transaction, beside the cursor
JOURNAL_PART_BYTES = 300_000  # a journal item stays well under DynamoDB's 400 KB
CURSOR_TTL_S = 48 * 3600


class ConcurrentUpdate(Exception):
    """Another invocation moved the shard's cursor between our read and our write."""


def write_units(item_bytes: int, *, transactional: bool, gsi_moves: int = 0) -> int:
    """DynamoDB's rule: 1 unit per started KB, doubled in a transaction; each GSI entry that
    moves (its sort key changes) costs a delete and a put of ~1 KB."""
    units = -(-item_bytes // 1024)
    return units * (2 if transactional else 1) + 2 * gsi_moves


def _padded(sequence: int) -> str:
    return f"{sequence:040d}"  # sequence numbers sort as text once padded


def _cursor_key(shard: str) -> dict[str, Any]:
    return marshal(AGGREGATION_CURSOR.key({"ShardId": shard}))


def _read_cursor(client: Any, table: str, shard: str, outcome: Outcome) -> dict[str, Any]:
    got = client.get_item(TableName=table, Key=_cursor_key(shard), ConsistentRead=True)
    outcome.calls += 1
    return unmarshal(got["Item"]) if "Item" in got else {}


def _transact(client: Any, items: list[dict], outcome: Outcome, units: int) -> None:
    try:
        client.transact_write_items(TransactItems=items)
    except client.exceptions.TransactionCanceledException as error:
        outcome.calls += 1
        reasons = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
        if "ConditionalCheckFailed" in reasons:
            raise ConcurrentUpdate(str(reasons)) from None
        raise
    outcome.calls += 1
    outcome.transactions += 1
    outcome.write_units += units


def _journal(
    client: Any, table: str, shard: str, cursor: dict, pending: list[RecordDelta], outcome: Outcome
) -> None:
    """Store the batch's net deltas and advance the watermark, in one transaction."""
    totals: dict[Aggregate, list[Decimal]] = {}
    for record in pending:
        for item, (a, b) in record.deltas.items():
            total = totals.setdefault(item, [Decimal(0), Decimal(0)])
            total[0] += a
            total[1] += b
    rows = [[*item, str(a), str(b)] for item, (a, b) in totals.items() if (a, b) != (0, 0)]
    chunks = [rows[i : i + CHUNK] for i in range(0, len(rows), CHUNK)]
    journal = str(pending[-1].sequence)
    parts: list[list[list[str]]] = [[]]
    size = 0
    for chunk in chunks:  # parts hold whole chunks, so a chunk is read from one part
        chunk_bytes = len(json.dumps(chunk))
        if parts[-1] and size + chunk_bytes > JOURNAL_PART_BYTES:
            parts.append([])
            size = 0
        parts[-1].extend(chunk)
        size += chunk_bytes
    expires = int(time.time()) + CURSOR_TTL_S
    covered = {"ShardId": shard, "First": _padded(pending[0].sequence), "Last": journal}
    range_item = AGGREGATION_RANGE.item(covered) | {EXPIRES_AT: expires}
    items: list[dict] = [{"Put": {"TableName": table, "Item": marshal(range_item)}}]
    units = write_units(200, transactional=True)
    for number, part in enumerate(parts):
        body = json.dumps(part)
        values = {"ShardId": shard, "JournalId": journal, "Part": number, "Deltas": body}
        items.append({"Put": {"TableName": table, "Item": marshal(AGGREGATION_JOURNAL.item(values))}})
        units += write_units(len(body) + 100, transactional=True)
    previous = cursor.get("Watermark")
    names = {"#w": "Watermark", "#p": "Pending", "#c": "Chunks", "#g": "Progress", "#t": EXPIRES_AT,
             "#s": "ShardId", "#e": ENTITY}  # fmt: skip
    values = {":w": str(pending[-1].sequence), ":p": journal, ":c": len(chunks), ":g": 0, ":s": shard,
              ":t": expires, ":e": AGGREGATION_CURSOR.name}  # fmt: skip
    update = {
        "TableName": table,
        "Key": _cursor_key(shard),
        "UpdateExpression": "SET #w = :w, #p = :p, #c = :c, #g = :g, #t = :t, #s = :s, #e = :e",
        "ConditionExpression": "attribute_not_exists(#w)" if previous is None else "#w = :prev",
        "ExpressionAttributeNames": names,
    }
    if previous is not None:
        values[":prev"] = previous
    update["ExpressionAttributeValues"] = marshal(values)
    items.append({"Update": update})
    _transact(client, items, outcome, units + write_units(200, transactional=True))
    outcome.applied += len(pending)
    cursor.update({"Watermark": journal, "Pending": journal, "Chunks": len(chunks), "Progress": 0})


def _load_journal(
    client: Any, table: str, shard: str, journal: str, outcome: Outcome
) -> tuple[list[list[str]], list[dict]]:
    """The journal's delta rows, in order, and the keys of its parts."""
    where = {"ShardId": shard, "JournalId": journal}
    rows: list[list[str]] = []
    part_keys: list[dict] = []
    for page in store.pages(
        client, "query", TableName=table, KeyConditionExpression="PK = :pk AND begins_with(SK, :sk)",
        ExpressionAttributeValues=marshal({":pk": AGGREGATION_JOURNAL.key_value("PK", where),
                                           ":sk": AGGREGATION_JOURNAL.key_prefix("SK", where)}),
        ConsistentRead=True,
    ):  # fmt: skip
        outcome.calls += 1
        for raw in page["Items"]:
            rows += json.loads(raw["Deltas"]["S"])
            part_keys.append({"PK": raw["PK"], "SK": raw["SK"]})
    return rows, part_keys


def _apply_journal(client: Any, table: str, shard: str, cursor: dict, outcome: Outcome) -> None:
    """Apply the pending journal's remaining chunks, each with the cursor's progress, then drop it."""
    journal = cursor["Pending"]
    rows, parts = _load_journal(client, table, shard, journal, outcome)
    chunks = [rows[i : i + CHUNK] for i in range(0, len(rows), CHUNK)]
    progress = int(cursor.get("Progress", 0))
    for number in range(progress, len(chunks)):
        items = [
            _update(table, (name, owner, period), (Decimal(a), Decimal(b)))
            for name, owner, period, a, b in chunks[number]
        ]
        items.append({"Update": {
            "TableName": table, "Key": _cursor_key(shard),
            "UpdateExpression": "SET Progress = :next",
            "ConditionExpression": "Pending = :j AND Progress = :at",
            "ExpressionAttributeValues": marshal({":next": number + 1, ":j": journal, ":at": number}),
        }})  # fmt: skip
        units = len(chunks[number]) * write_units(200, transactional=True, gsi_moves=1)
        _transact(client, items, outcome, units + write_units(200, transactional=True))
    # Done: forget the journal, then delete its parts (a crash in between leaves only garbage:
    # no cursor points at them any more).
    client.update_item(
        TableName=table, Key=_cursor_key(shard), UpdateExpression="REMOVE Pending, Chunks, Progress",
        ConditionExpression="Pending = :j", ExpressionAttributeValues=marshal({":j": journal}),
    )  # fmt: skip
    outcome.calls += 1
    outcome.write_units += write_units(200, transactional=False)
    part_bytes = len(json.dumps(rows)) // max(len(parts), 1) + 100
    for start in range(0, len(parts), 25):
        batch = parts[start : start + 25]
        client.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": k}} for k in batch]})
        outcome.calls += 1
        outcome.write_units += len(batch) * write_units(part_bytes, transactional=False)
    cursor.pop("Pending", None)


def _update(table: str, item: Aggregate, delta: tuple[Decimal, Decimal]) -> dict:
    """One aggregate's update: its counters and its rank sort key (the new count)."""
    name, owner, period = item
    entity = SALES if name == SALES.name else CUSTOMER_SPEND
    first, second = ("Units", "Revenue") if entity is SALES else ("Points", "Spend")
    owner_attribute = "ProductId" if entity is SALES else "CustomerId"
    values = entity.item({owner_attribute: owner, "Period": period, first: 0, second: 0})
    attribute_values = {
        ":zero": 0, ":da": delta[0], ":db": delta[1], ":rank": values["RankPK"], ":entity": entity.name,
        ":owner": owner, ":period": period,
    }  # fmt: skip
    return {"Update": {
        "TableName": table,
        "Key": marshal(entity.key(values)),
        "UpdateExpression": (
            "SET #a = if_not_exists(#a, :zero) + :da, #b = if_not_exists(#b, :zero) + :db, "
            "RankSK = if_not_exists(#a, :zero) + :da, "
            "RankPK = :rank, #e = :entity, #o = :owner, Period = :period"
        ),
        "ExpressionAttributeNames": {"#a": first, "#b": second, "#e": ENTITY, "#o": owner_attribute},
        "ExpressionAttributeValues": marshal(attribute_values),
    }}  # fmt: skip


def aggregate(
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
    parsed, rejected, skipped = triage(records, parse)
    outcome = Outcome(received=len(records), skipped=skipped, rejected=rejected)
    _fold(parsed, client, table, shard, outcome)
    if outcome.rejected and dead_letter is not None:
        dead_letter(outcome.rejected)
    return outcome


def _fold(parsed: list[RecordDelta], client: Any, table: str, shard: str, outcome: Outcome) -> None:
    """Journal and apply the records past the shard's watermark (see the module's steps)."""
    deltas = sorted((d for d in parsed if d.deltas), key=lambda d: d.sequence)
    outcome.skipped += len(parsed) - len(deltas)
    for attempt in range(1, CONCURRENT_RETRIES + 1):
        try:
            cursor = _read_cursor(client, table, shard, outcome)
            if cursor.get("Pending"):  # an earlier call stopped between chunks: finish it first
                _apply_journal(client, table, shard, cursor, outcome)
            watermark = int(cursor.get("Watermark", 0))
            pending = [d for d in deltas if d.sequence > watermark]
            outcome.duplicates = len(deltas) - len(pending)
            if pending:
                _journal(client, table, shard, cursor, pending, outcome)
                _apply_journal(client, table, shard, cursor, outcome)
            return
        except ConcurrentUpdate:
            if attempt == CONCURRENT_RETRIES:
                raise


def redrive(
    records: Sequence[dict[str, Any]],
    client: Any,
    table: str,
    shard: str,
    *,
    dead_letter: Callable[[list[DeadLetter]], None] | None = None,
) -> Outcome:
    """Apply a failed batch of `shard` (read back from the stream after its metadata reached the
    failure queue) exactly once: records a journal of the shard covered count as duplicates, the
    rest are folded under a cursor named after the batch, which skips them on a second redrive.
    A journal's range spans only the records it folded in: a rejected record inside it was never
    applied, and its dead letter (stored once per record) may still be owed."""
    parsed, rejected, skipped = triage(records, parse)
    outcome = Outcome(received=len(records), skipped=skipped, rejected=rejected)
    if parsed:
        sequences = sorted(d.sequence for d in parsed)
        covered = _applied(client, table, shard, sequences[0], sequences[-1])
        fresh = [d for d in parsed if not any(a <= d.sequence <= b for a, b in covered)]
        _fold(fresh, client, table, f"{shard}@{sequences[0]}", outcome)  # the same on every redrive
        outcome.duplicates += len(parsed) - len(fresh)
    if outcome.rejected and dead_letter is not None:
        dead_letter(outcome.rejected)
    return outcome


def _applied(client: Any, table: str, shard: str, first: int, last: int) -> list[tuple[int, int]]:
    """The journaled ranges of `shard` overlapping first..last, newest first. Ranges never overlap
    and come in stream order, so the walk back stops at the first one ending before `first`."""
    where = {"ShardId": shard}
    found = []
    for page in store.pages(
        client, "query", TableName=table, ScanIndexForward=False, ConsistentRead=True,
        KeyConditionExpression="PK = :pk AND SK BETWEEN :lo AND :hi",
        ExpressionAttributeValues=marshal({":pk": AGGREGATION_RANGE.key_value("PK", where),
                                           ":lo": AGGREGATION_RANGE.key_prefix("SK", where),
                                           ":hi": AGGREGATION_RANGE.key_prefix("SK", where) + _padded(last)}),
    ):  # fmt: skip
        for raw in page["Items"]:
            start, end = int(raw["First"]["S"]), int(raw["Last"]["S"])
            if end < first:
                return found
            found.append((start, end))
    return found
