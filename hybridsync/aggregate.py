"""Materialized aggregation: order-line stream records folded into sales and spend aggregates,
each record applied exactly once although the stream delivers at least once.

Plain `ADD` counters double-count a retried batch. Here every record belongs to a *lane*, the
customer's month (a line's customer and creation time never change, and all of a customer's items
share a partition key, hence a stream shard, hence one increasing sequence order). The lane's
CustomerSpend item stores the sequence number of the last record folded into it (`AppliedSeq`),
updated in the same TransactWriteItems as every counter that record moves, under a condition on
the value read before. Records at or below their lane's watermark are skipped, so replays,
bisections and retried batches that arrive late change nothing. (A per-shard watermark would need
the shard id, which Lambda does not pass to a DynamoDB stream handler.) A batch that touches more
items than one transaction holds is cut into consecutive sequence ranges, each its own transaction
advancing the watermarks of the records it covers: a crash between two of them loses nothing and
applies nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from hybridsync import store
from hybridsync.deadletters import DeadLetter
from hybridsync.model import CUSTOMER_SPEND, ENTITY, ORDER_LINE, SALES
from hybridsync.writeback import Rejected, _value, to_row

SOURCE = "aggregate"
CANCELLED = "CANCELLED"
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
    """What one stream record changes: counter deltas per aggregate item, and its lane."""

    sequence: int
    lane: tuple[str, str]  # (customer id, month)
    deltas: dict[Aggregate, tuple[Decimal, Decimal]]  # (ranked counter, other): units/revenue, points/spend
    record: dict[str, Any] = field(repr=False, compare=False)


_LINE_FIELDS = tuple(f.attribute for f in ORDER_LINE.fields)


def _contribution(image: dict[str, Any] | None) -> dict[Aggregate, tuple[Decimal, Decimal]]:
    if image is None:
        return {}
    row = to_row(ORDER_LINE, {name: _value(image[name]) for name in _LINE_FIELDS if name in image})
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
    data = record.get("dynamodb")
    if not isinstance(data, dict):
        raise Rejected("record has no dynamodb section")
    old, new = data.get("OldImage"), data.get("NewImage")
    image = new or old
    if not isinstance(image, dict) or _value(image.get(ENTITY, {"NULL": True})) != ORDER_LINE.name:
        return None
    try:
        sequence = int(data["SequenceNumber"])
        before, after = _contribution(old), _contribution(new)
        customer = _value(image["CustomerId"])
        month = str(_value(image["CreatedAt"]))[:7]
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
    return RecordDelta(sequence, (customer, month), deltas, record)


@dataclass
class Outcome:
    received: int = 0
    applied: int = 0  # records folded into counters by this call
    duplicates: int = 0  # records at or below their lane's watermark: already applied
    skipped: int = 0  # not order lines, or no counter changes
    transactions: int = 0
    calls: int = 0  # DynamoDB requests made
    write_units: int = 0  # by DynamoDB's rules: 1 KB per unit, transactions double, GSI writes
    rejected: list[DeadLetter] = field(default_factory=list)


def _lane_key(lane: tuple[str, str]) -> dict[str, Any]:
    return CUSTOMER_SPEND.key({"CustomerId": lane[0], "Period": lane[1]})


def read_watermarks(client: Any, table: str, lanes: Iterable[tuple[str, str]], outcome: Outcome) -> dict:
    """The applied sequence number of every lane (0 when none yet), strongly consistent."""
    lanes = list(lanes)
    marks: dict[tuple[str, str], int] = {lane: 0 for lane in lanes}
    by_key = {(k["PK"], k["SK"]): lane for lane in lanes for k in [_lane_key(lane)]}
    for start in range(0, len(lanes), 100):
        keys = [store.marshal(_lane_key(lane)) for lane in lanes[start : start + 100]]
        request = {
            table: {"Keys": keys, "ProjectionExpression": "PK, SK, AppliedSeq", "ConsistentRead": True}
        }
        while request:
            response = client.batch_get_item(RequestItems=request)
            outcome.calls += 1
            for item in response["Responses"].get(table, []):
                lane = by_key[(item["PK"]["S"], item["SK"]["S"])]
                marks[lane] = int(item.get("AppliedSeq", {}).get("S", "0"))
            request = response.get("UnprocessedKeys") or None
    return marks


def _groups(records: Sequence[RecordDelta]) -> list[list[RecordDelta]]:
    """Consecutive runs of records (in sequence order) touching at most 100 distinct items."""
    groups: list[list[RecordDelta]] = []
    items: set[Aggregate] = set()
    for record in records:
        touched = set(record.deltas) | {(CUSTOMER_SPEND.name, *record.lane)}
        if groups and len(items | touched) <= MAX_TRANSACTION_ITEMS:
            groups[-1].append(record)
            items |= touched
        else:
            groups.append([record])
            items = touched
    return groups


def _update(
    table: str, item: Aggregate, delta: tuple[Decimal, Decimal], mark: tuple[int, int] | None
) -> dict:
    """One aggregate's update: counters + rank sort key (the new count), and for a lane item its
    watermark, conditional on the value this batch read."""
    name, owner, period = item
    entity = SALES if name == SALES.name else CUSTOMER_SPEND
    first, second = ("Units", "Revenue") if entity is SALES else ("Points", "Spend")
    values = entity.item(
        {("ProductId" if entity is SALES else "CustomerId"): owner, "Period": period, first: 0, second: 0}
    )
    names = {"#a": first, "#b": second, "#e": ENTITY, "#o": "ProductId" if entity is SALES else "CustomerId"}
    expression = (
        "SET #a = if_not_exists(#a, :zero) + :da, #b = if_not_exists(#b, :zero) + :db, "
        "RankSK = if_not_exists(#a, :zero) + :da, RankPK = :rank, #e = :entity, #o = :owner, Period = :period"
    )
    attribute_values = {
        ":zero": 0, ":da": delta[0], ":db": delta[1], ":rank": values["RankPK"], ":entity": entity.name,
        ":owner": owner, ":period": period,
    }  # fmt: skip
    update: dict[str, Any] = {"TableName": table, "Key": store.marshal(entity.key(values))}
    if mark is not None:
        previous, applied = mark
        expression += ", AppliedSeq = :applied"
        attribute_values[":applied"] = str(applied)
        if previous:
            update["ConditionExpression"] = "AppliedSeq = :previous"
            attribute_values[":previous"] = str(previous)
        else:
            update["ConditionExpression"] = "attribute_not_exists(AppliedSeq)"
    update |= {
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": store.marshal(attribute_values),
    }
    return {"Update": update}


class ConcurrentUpdate(Exception):
    """Another consumer moved a watermark between our read and our write."""


def _apply_group(client: Any, table: str, group: list[RecordDelta], marks: dict, outcome: Outcome) -> None:
    totals: dict[Aggregate, list[Decimal]] = {}
    last_seq: dict[tuple[str, str], int] = {}
    for record in group:
        for item, (a, b) in record.deltas.items():
            total = totals.setdefault(item, [Decimal(0), Decimal(0)])
            total[0] += a
            total[1] += b
        totals.setdefault((CUSTOMER_SPEND.name, *record.lane), [Decimal(0), Decimal(0)])
        last_seq[record.lane] = record.sequence
    items = [
        _update(
            table,
            item,
            (total[0], total[1]),
            (marks[item[1:]], last_seq[item[1:]])
            if item[0] == CUSTOMER_SPEND.name and item[1:] in last_seq
            else None,
        )
        for item, total in totals.items()
    ]
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
    # Aggregate items are ~200 bytes: 1 KB -> 1 unit, doubled in a transaction, plus 2 units on
    # the Rankings GSI (its sort key changes: delete the old entry, put the new one).
    outcome.write_units += len(items) * (2 * 1 + 2)
    outcome.applied += len(group)
    for lane, sequence in last_seq.items():
        marks[lane] = sequence


def aggregate(
    records: Sequence[dict[str, Any]],
    client: Any,
    table: str,
    *,
    dead_letter: Callable[[list[DeadLetter]], None] | None = None,
) -> Outcome:
    """Fold one batch into the aggregates, exactly once. DynamoDB failures raise (the platform
    retries the batch; what was committed is skipped on the retry)."""
    outcome = Outcome(received=len(records))
    deltas = []
    for record in records:
        try:
            delta = parse(record)
        except Rejected as rejected:
            outcome.rejected.append(DeadLetter(record, rejected.reason))
            continue
        if delta is None or not delta.deltas:
            outcome.skipped += 1
        else:
            deltas.append(delta)
    deltas.sort(key=lambda d: d.sequence)
    for attempt in range(1, CONCURRENT_RETRIES + 1):
        marks = read_watermarks(client, table, {d.lane for d in deltas}, outcome)
        pending = [d for d in deltas if d.sequence > marks[d.lane]]
        if attempt == 1:
            outcome.duplicates = len(deltas) - len(pending)
        try:
            for group in _groups(pending):
                _apply_group(client, table, group, marks, outcome)
            break
        except ConcurrentUpdate:
            if attempt == CONCURRENT_RETRIES:
                raise
    if outcome.rejected and dead_letter is not None:
        dead_letter(outcome.rejected)
    return outcome
