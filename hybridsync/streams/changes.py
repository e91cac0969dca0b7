"""The seam between a change source and its consumers: one registry of change sources, keyed by
the `eventSource` of the records Lambda delivers, each entry reading a record once into a typed
`StreamChange` (after Powertools' batch utility, which names its event sources in one place:
`EventType`, `_COLLECTOR_MAPPING`, `DynamoDBRecord`).

The write-back, the aggregation, failed batches and dead letters work on `StreamChange`s and never
open a record themselves: `read` turns a batch into a `Batch` (each record's change, or the dead
letter of one that holds none), once, and everything after works on that. Adding a source is one
`Source` entry here plus its reader module (docs/contributing/adding-a-change-source.md): no
consumer changes.

A source's reader is imported when its first record arrives: a function fed by DynamoDB Streams
never imports the Kinesis reader.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from hybridsync.model.errors import Rejected
from hybridsync.streams.records import DeadLetter, is_ttl_expiry, table_of_arn


@dataclass(frozen=True)
class Promises:
    """What a change source promises about its records: what the consumers must absorb."""

    in_order: bool  # each item's changes arrive in the order they were made
    once: bool  # each change arrives once: no copy of it comes again as a record of its own
    unique_positions: bool  # no two changes of one item share a write-back position
    cite: str  # where AWS says so


@dataclass(frozen=True)
class Source:
    """One change source: its records' `eventSource`, what it promises, and its reader."""

    event_source: str
    title: str
    promises: Promises
    # The band of write-back positions its changes take: from here up to the next source's. Two
    # sources' positions are never compared (a row they both wrote is settled from the item).
    positions_from: int
    reader: str  # "module:function" reading one record into a StreamChange; imported on first use
    # what names its stream in an ARN, and the section naming a failed batch in the invocation
    # record Lambda sends to a mapping's on-failure destination (Lambda developer guide, "Retain
    # discarded records")
    arn_marker: str
    batch_info: str
    # a failed batch whose destination kept no records is read back from the stream (by the
    # DynamoDB Streams API); False: only the records a bucket destination stored redrive it
    read_back: bool
    # The section a record read from this source keeps what the source added under (a dead letter
    # stores the read record: it is read again, by the same source, when redriven); None: none.
    carried_in: str | None = None

    def read(self, record: dict[str, Any]) -> StreamChange:
        """The record as a change; Rejected when it carries none."""
        return _reader(self.reader)(record)


@functools.cache
def _reader(path: str) -> Callable[[dict[str, Any]], StreamChange]:
    module, name = path.split(":")
    return cast(Callable[[dict[str, Any]], "StreamChange"], getattr(importlib.import_module(module), name))


DYNAMODB_STREAMS: Final = Source(
    event_source="aws:dynamodb",
    title="DynamoDB Streams",
    # Streams.html: "each stream record appears exactly once in the stream" and "for each item that
    # is modified in a DynamoDB table, the stream records appear in the same sequence as the actual
    # modifications to the item"; sequence numbers are unique within a stream.
    promises=Promises(in_order=True, once=True, unique_positions=True,
                      cite="https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html"),
    positions_from=0,
    reader="hybridsync.streams.changes:read_dynamodb",
    arn_marker=":dynamodb:",
    batch_info="DDBStreamBatchInfo",
    read_back=True,
)  # fmt: skip
KINESIS: Final = Source(
    event_source="aws:kinesis",
    title="Kinesis Data Streams for DynamoDB",
    # kds.html: records may appear in another order than the item's modifications were made, and one
    # change may appear more than once; positions are microsecond times, which two changes may share.
    promises=Promises(in_order=False, once=False, unique_positions=False,
                      cite="https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/kds.html"),
    # above every DynamoDB stream's slot (see SLOT_WIDTH), within the write-back's Numeric(40)
    # position column
    positions_from=9 * 10**38,
    reader="hybridsync.streams.kinesis:read",
    arn_marker=":kinesis:",
    batch_info="KinesisBatchInfo",  # recorded: a Kinesis mapping's invocation record
    read_back=False,
    carried_in="kinesis",
)  # fmt: skip
SOURCES: Final[Mapping[str, Source]] = {s.event_source: s for s in (DYNAMODB_STREAMS, KINESIS)}
DEFAULT: Final = DYNAMODB_STREAMS  # a record naming no registered source is a DynamoDB stream record
# A DynamoDB stream's sequence numbers order that stream's records only. Another stream numbers its
# own: another Region's replica of a global table ("each replica has its own stream"), or a stream
# disabled and enabled again (a new stream, a new ARN). So DynamoDB Streams' band is cut into slots,
# one per stream, hashed from its ARN: a position is SLOT_WIDTH * slot + sequence number, and two
# streams' positions are never compared (a row they both wrote is settled from the item). Sequence
# numbers have 21 digits locally; the Streams API allows 21 to 40 (StreamRecord): one of more than
# 32 takes no position, and its change is settled from the item.
SLOT_WIDTH: Final = 10**32
SLOTS: Final = KINESIS.positions_from // SLOT_WIDTH  # slot 0: a record naming no stream (as before slots)


@dataclass(frozen=True, slots=True)
class StreamChange:
    """One change to one item, as its source delivered it, read once."""

    source: Source
    # The record in a DynamoDB stream record's shape (as read from its source): what a dead letter
    # and a failed batch keep, and what Lambda's event filters are evaluated on.
    record: dict[str, Any] = field(repr=False, compare=False)
    event: Any  # eventName as given: INSERT, MODIFY, REMOVE (anything else is the consumers' to refuse)
    table: str | None  # the physical table it changed (None: its ARN names no table)
    table_arn: str | None  # the ARN the record names its table (or its table's stream) by
    has_data: bool  # it carries its `dynamodb` section
    keys: dict[str, Any]  # the item's key attributes, in DynamoDB JSON ({} when not given)
    new_image: dict[str, Any] | None  # DynamoDB JSON
    old_image: dict[str, Any] | None
    sequence: int | None  # its place in its shard (what the aggregation's watermark counts)
    position: int | None  # its write-back position: its place among its item's changes, in its band
    identity: str | None  # what names it for dead letters: one letter for all its copies
    change_id: str | None  # what identifies it across its copies; None when its source never copies
    ttl_expiry: bool  # a REMOVE made by DynamoDB's TTL sweeper
    created_micros: int | None  # when it was made (ApproximateCreationDateTime), epoch microseconds

    @property
    def image(self) -> dict[str, Any] | None:
        """The image its item has after it (before it, for a REMOVE)."""
        return self.old_image if self.event == "REMOVE" else self.new_image

    def dead_letter(self, reason: str) -> DeadLetter:
        return DeadLetter(self.record, reason, self.identity)


def source_of(record: dict[str, Any]) -> Source:
    """The registry entry that reads a record: by its `eventSource`, or, for a record read from a
    source already (a dead letter, redriven), by the section that source keeps in it."""
    named = SOURCES.get(str(record.get("eventSource")))
    if named is not None and named is not DEFAULT:
        return named
    for source in SOURCES.values():
        if source.carried_in and isinstance(record.get(source.carried_in), dict):
            return source
    return DEFAULT


def source_of_stream(arn: str) -> Source:
    """The source a stream (or a mapping's event source) ARN is of."""
    return next((s for s in SOURCES.values() if s.arn_marker in arn), DEFAULT)


def batch_info(invocation: Mapping[str, Any]) -> Mapping[str, Any]:
    """What names a failed batch (stream, shard, first and last sequence number, size) in the
    invocation record of a mapping's on-failure destination, whichever source it read."""
    for source in SOURCES.values():
        if isinstance(info := invocation.get(source.batch_info), Mapping):
            return info
    raise KeyError(f"no {' or '.join(s.batch_info for s in SOURCES.values())} in the invocation record")


def read_one(record: dict[str, Any]) -> StreamChange:
    """One record as its change; Rejected when it carries none."""
    return source_of(record).read(record)


def microseconds(value: Any) -> int:
    """`ApproximateCreationDateTime` as epoch microseconds, whatever its precision: microseconds
    (16 digits), milliseconds (13) or, from DynamoDB Streams, seconds (10)."""
    number = int(value)
    if number >= 10**15:
        return number
    return number * 1000 if number >= 10**12 else number * 1_000_000


def _number(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _map(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def shaped(
    source: Source,
    record: dict[str, Any],
    *,
    position: int | None,
    identity: str | None,
    change_id: str | None = None,
    created_micros: int | None = None,
) -> StreamChange:
    """A change from a record in a DynamoDB stream record's shape, with what its source decides."""
    data = _map(record.get("dynamodb"))
    arn = record.get("eventSourceARN")
    try:
        table = table_of_arn(arn) if isinstance(arn, str) else None
    except ValueError:
        table = None
    section = data or {}
    if created_micros is None:
        try:
            created = section.get("ApproximateCreationDateTime")
            created_micros = None if created is None else microseconds(created)
        except (TypeError, ValueError):
            created_micros = None
    return StreamChange(
        source=source,
        record=record,
        event=record.get("eventName"),
        table=table,
        table_arn=arn if isinstance(arn, str) else None,
        has_data=data is not None,
        keys=_map(section.get("Keys")) or {},
        new_image=_map(section.get("NewImage")),
        old_image=_map(section.get("OldImage")),
        sequence=_number(section.get("SequenceNumber")),
        position=position,
        identity=identity,
        change_id=change_id,
        ttl_expiry=is_ttl_expiry(record),
        created_micros=created_micros,
    )


def read_dynamodb(record: dict[str, Any]) -> StreamChange:
    """A DynamoDB stream record (Lambda's `aws:dynamodb` event record): its position is its
    `SequenceNumber` in its stream's slot, its identity its `eventID`. Never rejected here: what it
    lacks, each consumer refuses in its own words."""
    data = _map(record.get("dynamodb")) or {}
    event_id, sequence = record.get("eventID"), _number(data.get("SequenceNumber"))
    position = None
    if sequence is not None and sequence < SLOT_WIDTH:
        position = slot(record.get("eventSourceARN")) * SLOT_WIDTH + sequence
    return shaped(DYNAMODB_STREAMS, record, position=position,
                  identity=str(event_id) if event_id else None)  # fmt: skip


def band(position: int) -> int:
    """The band a write-back position is in: its DynamoDB stream's slot (see SLOT_WIDTH), or, for any
    Kinesis position, one past them all. Positions of two bands are never compared."""
    return min(position // SLOT_WIDTH, SLOTS)


def slot(stream_arn: object) -> int:
    """The slot of a DynamoDB stream's positions: 1 to SLOTS - 1 by its ARN, 0 when none is named."""
    if not isinstance(stream_arn, str) or not stream_arn:
        return 0
    return 1 + int.from_bytes(hashlib.sha256(stream_arn.encode()).digest()[:8], "big") % (SLOTS - 1)


@dataclass(frozen=True)
class Batch:
    """A batch of records read once: per record, in the order delivered, its change or the dead
    letter of a record that carries none."""

    items: tuple[StreamChange | DeadLetter, ...]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[StreamChange | DeadLetter]:
        return iter(self.items)

    def where(self, keep: Callable[[dict[str, Any]], bool]) -> Batch:
        """The records `keep` admits (by the record, as a mapping's event filters see it)."""
        return Batch(tuple(item for item in self.items if keep(item.record)))

    def table_arn(self, default: str) -> str:
        """The table the batch is of: a source that names it inside its records (Kinesis) says so
        in its first readable change; else `default`, the batch's own `eventSourceARN` (a DynamoDB
        stream's names its table)."""
        for item in self.items:
            if isinstance(item, DeadLetter):
                continue
            if item.source is DEFAULT or item.table_arn is None:
                return default
            return item.table_arn
        return default

    def freshness_ms(self, now: float) -> float | None:
        """How long ago the batch's first change was made, in ms (None for no readable change):
        what a consumer publishes as its `Freshness`. In shard order the first is the oldest (a
        Kinesis stream may reorder a little). From DynamoDB Streams `ApproximateCreationDateTime`
        is rounded down to the second (StreamRecord API reference), so the figure may be up to 1 s
        more than the trip; from Kinesis it is the change's microsecond."""
        for item in self.items[:1]:
            if isinstance(item, StreamChange) and item.created_micros is not None:
                return max(now * 1000 - item.created_micros / 1000, 0.0)
        return None


def read(records: Iterable[dict[str, Any]] | Batch) -> Batch:
    """Read a batch once (a Batch is returned as it is): each record by its source's entry."""
    if isinstance(records, Batch):
        return records
    items: list[StreamChange | DeadLetter] = []
    for record in records:
        try:
            items.append(read_one(record))
        except Rejected as error:
            items.append(DeadLetter(record, error.reason))
    return Batch(tuple(items))
