"""Aggregates rebuilt from the table's items (`hybridsync aggregates rebuild`), exactly once with
the stream going: every record is counted by the rebuild or by the stream, never both.

The aggregation's stream mappings are paused (disabled: Lambda keeps their positions) for the
rebuild's duration and enabled again whatever happens. Paused, each shard's cursor watermark W is
where the stream's counting stands: everything up to W is in the stored aggregates, everything
after W the aggregation applies once it resumes. So the rebuild computes the aggregates as of W,
item by item, and writes them in place of the stored ones:

1. a scan (strongly consistent, parallel segments) adds up every source item's contribution as
   read, and spills each item's contribution to a file (memory stays flat whatever the table);
2. the stream is read from W to its end, a settle time after the scan: an item with records there
   changed after W, and its state at W is its first such record's old image; every other item is
   as the scan read it (it has not changed since W);
3. the aggregates as of W = the scan's totals, less the spilled contribution of each changed item,
   plus its contribution at W; written absolutely (measures and rank keys), each transaction on the
   condition that no cursor moved (the pause held); each cursor notes `RebuiltThrough` = W, so a
   failed batch from before the rebuild is never redriven into it.

A stream no cursor has read yet (a new home's replica after a failover, or a table whose
aggregation has counted nothing yet) has no W: its trim horizon moves on as records pass 24 hours,
so a count "as of the trim horizon" would lose whatever is trimmed before the aggregation starts
there. Such a rebuild counts as of the last record it read in each shard instead (an item's state
there is its last record's new image), and starts each shard's cursor at that record before it
writes the aggregates (killed in between, it is run again from W = that record), so the
aggregation skips what the rebuild counted, wherever it starts reading.

Resumed, the aggregation applies the records after W, as it would have. The one assumption: a
change's record is in the stream within the settle time after the change (DynamoDB: "near-real
time"); a record later than that would be counted twice. A rebuild killed midway is run again
from its start (its writes are absolute: rewriting them is harmless); `--resume` enables the
mappings a killed run left disabled.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from hybridsync.dynamodb import store
from hybridsync.dynamodb.scans import Scanner
from hybridsync.model.convert import WIDE, marshal, unmarshal
from hybridsync.model.errors import Rejected
from hybridsync.sync.aggregate import Aggregation, Key, Outcome, Totals, _add
from hybridsync.sync.jobs import DONE, Counts, JobError, Services, kind
from hybridsync.sync.ledger import CHUNK

SETTLE_S = 5.0  # after the scan, before the stream's end is read
PAUSE_TIMEOUT_S = 120.0  # for a mapping to reach Disabled
PAGE = 1000  # items per Scan request: pages waiting to be counted stay small whatever the table
EMPTY_PAGES = 20  # empty GetRecords pages in a row taken for an open shard's end, short of the present


def plan(services: Services, spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    model = services.model
    names = spec.get("aggregates") or [a.name for a in model.aggregates]
    unknown = [n for n in names if n not in {a.name for a in model.aggregates}]
    if unknown or not names:
        raise JobError(
            f"no aggregate {', '.join(unknown) or ''}; the model's: "
            f"{', '.join(a.name for a in model.aggregates) or 'none'}"
        )
    tables = sorted({model.aggregate(n).table.name for n in names})
    return spec | {"aggregates": names, "tables": tables}, len(tables)


@kind("rebuild", plan)
def rebuild_unit(
    services: Services, spec: dict[str, Any], unit: int, checkpoint: Any
) -> Iterator[tuple[Any, Counts]]:
    logical = spec["tables"][unit]
    aggregation = Aggregation(services.model, logical)
    names = set(spec["aggregates"]) & set(aggregation.by_name)
    with paused(services, not spec.get("no_pause")):
        counts = rebuild(
            services,
            aggregation,
            services.tables[logical],
            names,
            segments=int(spec.get("segments", 1)),
            settle_s=float(spec.get("settle_s", SETTLE_S)),
        )
    yield DONE, counts


@contextlib.contextmanager
def paused(services: Services, pause: bool = True) -> Iterator[None]:
    """The aggregation function's stream mappings disabled (Lambda keeps each one's position, and
    resumes from it when enabled), enabled again on the way out, whatever happened: unless the stack
    pauses the pipeline on purpose (`-c pipeline_enabled=false`: `PIPELINE_ENABLED=false` in the
    operations function), when they are left disabled as the stack declares them."""
    if not pause:
        yield
        return
    function = os.environ.get("AGGREGATE_FUNCTION")
    if not function:
        raise JobError(
            "cannot pause the aggregation: no AGGREGATE_FUNCTION (the stack's aggregate function; "
            "`source .local/env` beside `hybridsync up`)"
        )
    lam = services.aws("lambda")
    mappings = lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
    uuids = [m["UUID"] for m in mappings]
    try:
        for uuid in uuids:
            lam.update_event_source_mapping(UUID=uuid, Enabled=False)
        deadline = time.monotonic() + PAUSE_TIMEOUT_S
        while any(lam.get_event_source_mapping(UUID=u)["State"] != "Disabled" for u in uuids):
            if time.monotonic() > deadline:
                raise JobError(
                    f"the aggregation's mappings did not reach Disabled in {PAUSE_TIMEOUT_S:.0f} s"
                )
            time.sleep(0.5)
        yield
    finally:
        # a mapping a killed rebuild left disabled is enabled too: the pipeline runs, unless paused
        running = os.environ.get("PIPELINE_ENABLED", "true").lower() != "false"
        for uuid in uuids:
            lam.update_event_source_mapping(UUID=uuid, Enabled=running)


def _key_text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True, default=str)


def _dump(contribution: Totals) -> str:
    return json.dumps(
        [[list(k), [str(v) for v in values]] for k, values in contribution.items()], default=str
    )


def _load(text: str) -> Totals:
    return {
        tuple(k): tuple(Decimal(v) for v in values) for k, values in json.loads(text, parse_float=Decimal)
    }


def _safe(aggregation: Aggregation, item: dict[str, Any] | None, names: set[str]) -> Totals:
    """An item's contribution to the rebuilt aggregates (one the aggregation rejects adds nothing:
    it is a dead letter there)."""
    try:
        return {k: v for k, v in aggregation.contribution(item).items() if k[0] in names}
    except (Rejected, TypeError, ValueError, KeyError, ArithmeticError):
        return {}


def rebuild(
    services: Services,
    aggregation: Aggregation,
    table: str,
    names: set[str],
    *,
    segments: int = 1,
    settle_s: float = SETTLE_S,
) -> Counts:
    """The aggregates `names` of one table as of the paused aggregation's watermarks, written in
    place of the stored ones (see the module's steps). The aggregation must not run meanwhile."""
    client, counts = services.client, Counts()
    if aggregation.table.name in json.loads(os.environ.get("CHANGE_STREAMS") or "{}"):
        # its window would be read by Kinesis position, where a change may come after a later one
        raise JobError(
            f"table {aggregation.table.name} reads its changes from Kinesis: `aggregates rebuild` reads "
            "a DynamoDB stream's window and does not rebuild such a table yet"
        )
    stream_arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = services.aws("dynamodbstreams")
    # before the scan: a journal a batch left half-applied is finished first, so the stored
    # aggregates the scan reads include it
    settled = {s: _settled_cursor(services, aggregation, table, s) for s in _shards(streams, stream_arn)}
    key_names = [a.name for a in aggregation.table.key_schema()]
    aggregate_entities = {aggregation.by_name[n].entity.name for n in names}
    totals: dict[Key, list[Decimal]] = {}
    stored: Totals = {}
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spill:
        scanner = Scanner(client, table, segments=segments, page_limit=PAGE, consistent=True)
        scanner.pacer = services.pacer
        for item in scanner.items():
            counts.read += 1
            if item.get(aggregation.names.entity) in aggregate_entities:
                stored |= aggregation.stored([item], keep=lambda k: k[0] in names)
                continue
            contribution = _safe(aggregation, item, names)
            if contribution:
                for key, parts in contribution.items():
                    _add(totals, key, parts, WIDE)
                spill.write(f"{_key_text({k: item[k] for k in key_names})}\t{_dump(contribution)}\n")
        time.sleep(settle_s)
        # listed again after the scan: a shard made during it holds records of changes the scan read
        # (the aggregation is paused: no cursor of it moved or started meanwhile)
        cursors = {s: settled.get(s) or aggregation._read_cursor(client, table, s, Outcome())
                   for s in _shards(streams, stream_arn)}  # fmt: skip
        at_w, ends = _window(streams, stream_arn, cursors, aggregation, names, counts)
        spill.seek(0)
        for line in spill:
            key, _, text = line.rstrip("\n").partition("\t")
            if key in at_w:
                for agg_key, parts in _load(text).items():
                    _add(totals, agg_key, tuple(-p for p in parts), WIDE)
        for contribution in at_w.values():
            for agg_key, parts in contribution.items():
                _add(totals, agg_key, parts, WIDE)
    rebuilt = {k: tuple(v) for k, v in totals.items() if any(v)}
    changed = [k for k in rebuilt.keys() | stored.keys() if rebuilt.get(k) != stored.get(k)]
    counts.skipped = len(rebuilt.keys() | stored.keys()) - len(changed)
    for shard, end in ends.items():  # before the aggregates: a run killed after this is run again
        _start_cursor(client, aggregation, table, shard, end)  # from W = end, as any other
        cursors[shard] = {"Watermark": end}
    _write(client, aggregation, table, cursors, changed, rebuilt)
    counts.written = len(changed)
    for shard, cursor in cursors.items():
        if "Watermark" in cursor:
            client.update_item(
                TableName=table,
                Key=aggregation._cursor_key(shard),
                UpdateExpression="SET RebuiltThrough = :w",
                ConditionExpression="Watermark = :w",
                ExpressionAttributeValues=marshal({":w": cursor["Watermark"]}),
            )
    return counts


def _window(streams: Any, stream_arn: str, cursors: dict[str, dict[str, Any]], aggregation: Aggregation,
            names: set[str], counts: Counts) -> tuple[dict[str, Totals], dict[str, str]]:  # fmt: skip
    """The stream after each shard's watermark W: each item changed after W, with its contribution
    as of W (its first record's old image). On a stream no cursor has read (`fresh`), as of each
    shard's last record instead (its last new image), with that record (`ends`: the cursors' start)."""
    fresh = not any("Watermark" in cursor for cursor in cursors.values())
    at_w: dict[str, Totals] = {}
    ends: dict[str, str] = {}
    for shard, cursor in cursors.items():
        for record in _records_after(streams, stream_arn, shard, cursor.get("Watermark")):
            data = record.get("dynamodb", {})
            key = _key_text(unmarshal(data.get("Keys", {})))
            image = data.get("NewImage") if fresh else data.get("OldImage")
            if fresh or key not in at_w:
                at_w[key] = _safe(aggregation, unmarshal(image) if image else None, names)
            if fresh:
                ends[shard] = data["SequenceNumber"].lstrip("0") or "0"
            else:
                counts.older += 1  # records the stream counts once the aggregation resumes
    return at_w, ends


def _shards(streams: Any, stream_arn: str) -> list[str]:
    """The stream's shards, each after its parent: an item's records in a parent come before those
    in its children (DynamoDB Streams: "process a parent shard before a child shard")."""
    parents, start = {}, None
    while True:
        request = {"StreamArn": stream_arn} | ({"ExclusiveStartShardId": start} if start else {})
        description = streams.describe_stream(**request)["StreamDescription"]
        parents |= {s["ShardId"]: s.get("ParentShardId") for s in description["Shards"]}
        start = description.get("LastEvaluatedShardId")
        if not start:
            break
    ordered: list[str] = []

    def place(shard: str) -> None:
        if shard not in ordered:
            if (parent := parents.get(shard)) in parents:
                place(parent)  # type: ignore[arg-type]
            ordered.append(shard)

    for shard in parents:
        place(shard)
    return ordered


def _settled_cursor(services: Services, aggregation: Aggregation, table: str, shard: str) -> dict[str, Any]:
    """The shard's cursor with no journal pending: one a batch left half-applied (the function
    stopped between chunks) is finished here, as the shard's next batch would finish it."""
    outcome = Outcome()
    cursor = aggregation._read_cursor(services.client, table, shard, outcome)
    if cursor.get("Pending"):
        aggregation._apply_journal(services.client, table, shard, cursor, outcome, services.dead_letter)
        cursor = aggregation._read_cursor(services.client, table, shard, outcome)
    return cursor


def _records_after(
    streams: Any, stream_arn: str, shard: str, watermark: str | None
) -> Iterator[dict[str, Any]]:
    """The shard's records after the watermark (all of them without one), to its current end."""
    request = {"StreamArn": stream_arn, "ShardId": shard}
    if watermark:
        # the cursor keeps the number unpadded; the API wants at least 21 digits
        request |= {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": watermark.zfill(21)}
    else:
        request |= {"ShardIteratorType": "TRIM_HORIZON"}
    began, empty, present = time.time(), 0, False
    iterator = streams.get_shard_iterator(**request).get("ShardIterator")
    while iterator:  # None: a closed shard's end
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        if records := page["Records"]:
            yield from records
            made = records[-1].get("dynamodb", {}).get("ApproximateCreationDateTime", 0)
            present, empty = _epoch(made) >= began - SETTLE_S, 0
        else:
            # an empty page is an open shard's end only at the present: "it might take multiple
            # calls to get to a portion of the shard that contains stream records" (GetRecords)
            empty += 1
            if present or empty >= EMPTY_PAGES:
                return
        iterator = page.get("NextShardIterator")


def _epoch(made: Any) -> float:
    """A record's ApproximateCreationDateTime in seconds (boto3 gives a datetime)."""
    return made.timestamp() if hasattr(made, "timestamp") else float(made)


def _write(
    client: Any,
    aggregation: Aggregation,
    table: str,
    cursors: dict[str, dict[str, Any]],
    changed: list[Key],
    rebuilt: Totals,
) -> None:
    """The changed aggregate items set to their rebuilt measures, each transaction on the condition
    that every cursor is still where the rebuild read it."""
    checks = []
    for shard, cursor in cursors.items():
        guard = (
            "Watermark = :w AND attribute_not_exists(Pending)"
            if "Watermark" in cursor
            else "attribute_not_exists(Watermark)"
        )
        check = {"TableName": table, "Key": aggregation._cursor_key(shard), "ConditionExpression": guard}
        if "Watermark" in cursor:
            check["ExpressionAttributeValues"] = marshal({":w": cursor["Watermark"]})
        checks.append({"ConditionCheck": check})
    room = CHUNK + 1 - len(checks)
    if room < 1:
        raise JobError(f"{len(checks)} shards: too many to guard in one transaction; rebuild per aggregate")
    for start in range(0, len(changed), room):
        updates = []
        for key in changed[start : start + room]:
            aggregate = aggregation.by_name[key[0]]
            values = rebuilt.get(key, tuple(Decimal(0) for _ in aggregate.measures))
            updates.append(aggregation._update(table, key[0], tuple(key[1:]), values, absolute=True))
        try:
            store.send_transaction(client, {"TransactItems": [*updates, *checks]})
        except client.exceptions.TransactionCanceledException as error:
            if "ConditionalCheckFailed" in store.cancellation_codes(error)[len(updates) :]:
                raise JobError(
                    "the aggregation moved during the rebuild (is its mapping paused?); run it again"
                ) from None
            raise


def _start_cursor(client: Any, aggregation: Aggregation, table: str, shard: str, end: str) -> None:
    """A shard's cursor started at `end`, as the aggregation's first journal starts one, and listed
    in the registry; on the condition that none started meanwhile."""
    expiry = aggregation._expiry()
    sets = {"Watermark": end, "RebuiltThrough": end, "ShardId": shard,
            aggregation.names.entity: aggregation.cursor.name} | expiry  # fmt: skip
    try:
        client.update_item(
            TableName=table,
            Key=aggregation._cursor_key(shard),
            UpdateExpression="SET " + ", ".join(f"#a{n} = :a{n}" for n in range(len(sets))),
            ConditionExpression="attribute_not_exists(#a0)",
            ExpressionAttributeNames={f"#a{n}": name for n, name in enumerate(sets)},
            ExpressionAttributeValues=marshal({f":a{n}": value for n, value in enumerate(sets.values())}),
        )
    except client.exceptions.ConditionalCheckFailedException:
        raise JobError(
            "the aggregation moved during the rebuild (is its mapping paused?); run it again"
        ) from None
    registered = aggregation.registry.item({"ShardId": shard}) | expiry
    client.put_item(TableName=table, Item=marshal(registered))
