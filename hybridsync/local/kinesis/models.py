"""Kinesis Data Streams for DynamoDB, run locally: a table's changes put into its Kinesis stream (moto
server's Kinesis), and Kinesis event source mappings read with Lambda's semantics.

DynamoDB Local has no Kinesis streaming destination. `Pump` stands in for it: it reads the table's
own stream (NEW_AND_OLD_IMAGES, which the app turns on; no mapping reads it) and puts each change
into the Kinesis stream in AWS's record format for Kinesis Data Streams for DynamoDB
(amazondynamodb/latest/developerguide/kds.html; Powertools' `DynamoDBStreamToKinesisRecord`):
`recordFormat` "application/json", `tableName`, a UUID `eventID`, `userIdentity` null or the TTL
service's, `dynamodb` with `ApproximateCreationDateTime` in microseconds (MICROSECOND precision) or
milliseconds, `Keys`, the images and `SizeBytes`; no `SequenceNumber`, no `StreamViewType`.

What AWS does not document, so chosen: the partition key is the item's table keys, md5 in upper-case
hex (a real record's is 32 hex digits), so one item's changes share a shard. DynamoDB Local rounds
creation times down to the minute: the time is when the destination first read the change (within
a pump interval of it), to the unit of the precision, one more than the previous change's at least,
so it increases change by change; it is saved with the pump's position before the change is put, so
a pump killed before it saved its position puts its last changes again on restart with the same
time, as AWS's duplicates carry theirs (kds.html). A consumer's freshness is measured from it.

`KinesisShardReader` is a `ShardPoller`'s reader over one Kinesis shard (GetShardIterator,
GetRecords), each record in Lambda's Kinesis event shape (recorded: test_lambda_integration_kinesis).
A mapping on a stream consumer (enhanced fan-out) reads its own copy, pushed: it polls every 70 ms
("Average latency of 70 ms", Lambda: with-kinesis.html, "Enhanced fan-out"); a standard mapping
polls each shard once a second (Lambda: "polls each shard in your Kinesis stream for records at a
base rate of once per second"). The shared 5 GetRecords per second per shard is not modelled, nor is
resharding (the local stream is never resharded, so a shard has no parent or child).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hybridsync.local.awslambda.mappings import Checkpoints, Shape
from hybridsync.local.dynamodb.streams import PAGE, Mark, ShardCursor, as_delivered, unmarked

log = logging.getLogger(__name__)

PUMP = "kinesis-destination"  # the pump's name among the saved positions
STAMPS = "kinesis-destination-times"  # ... and the times of the changes read past its position
PUMP_INTERVAL_S = 0.25  # the destination reads the table's changes as a mapping polls a DynamoDB stream
HOLD_S = 1.0  # a change held back (`reorder`) goes out after the next one, or after this at the latest
ON_DEMAND_SHARDS = 4  # an on-demand stream starts with 4 shards (Kinesis: "How on-demand mode works")
CONSUMERS_PER_STREAM = 20  # Kinesis quota: enhanced fan-out consumers per stream
STANDARD_POLL_S = 1.0
PUT_RECORDS = 500  # records per PutRecords request
EFO_POLL_S = 0.07
# moto numbers a shard's records 1, 2, ...; AWS's sequence numbers are 56 digits (49...): the
# mappings see them shaped so, in the same order
SEQUENCE_BASE = 49 * 10**54
# what a Kinesis mapping needs of the function's role (Lambda: services-kinesis-create.html,
# "Lambda needs the following permissions"); SubscribeToShard on the consumer, for fan-out
KINESIS_READ = ("DescribeStream", "DescribeStreamSummary", "GetRecords", "GetShardIterator", "ListShards")
EFO_READ = ("SubscribeToShard",)


# moto's Kinesis shard is not safe for concurrency (its own note on `Shard.put_record`): a
# GetRecords iterating a shard's records while a PutRecords adds one fails with "OrderedDict mutated
# during iteration", a 500 that AWS never answers. The local moto server's shards are serialized.
_SHARD_METHODS = ("get_records", "put_record", "get_min_sequence_number", "get_max_sequence_number",
                  "get_sequence_number_at")  # fmt: skip
_serializing = threading.Lock()


def serialize_shards() -> None:
    """Make each moto Kinesis shard's readers and writers take the shard's lock, one at a time
    (idempotent; before moto server serves)."""
    from moto.kinesis.models import Shard

    with _serializing:
        if getattr(Shard, "_hybridsync_serialized", False):
            return
        for name in _SHARD_METHODS:
            if hasattr(Shard, name):  # a later moto may name them otherwise: then unserialized, not broken
                setattr(Shard, name, _locked(getattr(Shard, name)))
        Shard._hybridsync_serialized = True  # type: ignore[attr-defined]


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(shard: Any, *args: Any, **kwargs: Any) -> Any:
        lock = shard.__dict__.get("_hybridsync_lock") or shard.__dict__.setdefault(
            "_hybridsync_lock", threading.RLock()
        )  # setdefault is atomic: one lock per shard, whoever comes first
        with lock:
            return method(shard, *args, **kwargs)

    return locked


def partition_key(keys: dict[str, Any]) -> str:
    """An item's partition key in its table's Kinesis stream (our derivation; see the module)."""
    text = json.dumps(keys, sort_keys=True)
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest().upper()


def stream_name(arn: str) -> str:
    """The stream a Kinesis stream or consumer ARN names (`...:stream/NAME[/consumer/...]`)."""
    return arn.split(":stream/", 1)[1].split("/")[0]


def stream_of(arn: str) -> str:
    """The stream ARN of a stream or consumer ARN."""
    return arn.split("/consumer/", 1)[0]


def change_record(delivered: dict[str, Any], table: str, region: str, created: int) -> dict[str, Any]:
    """A DynamoDB change (Lambda's shape of a stream record) as DynamoDB puts it into Kinesis."""
    stream = delivered["dynamodb"]
    data = {"ApproximateCreationDateTime": created, "Keys": stream["Keys"]}
    data |= {image: stream[image] for image in ("NewImage", "OldImage") if image in stream}
    return {"awsRegion": region, "eventID": str(uuid.uuid4()), "eventName": delivered["eventName"],
            "userIdentity": delivered.get("userIdentity"), "recordFormat": "application/json",
            "tableName": table, "dynamodb": data | {"SizeBytes": stream["SizeBytes"]},
            "eventSource": "aws:dynamodb"}  # fmt: skip


def _decoded(record: dict[str, Any]) -> dict[str, Any]:
    """What a Kinesis mapping's filters see: only `data`, decoded as JSON (Lambda:
    with-kinesis-filtering.html, "only support filtering on the data key"); none if it is not JSON."""
    try:
        return {"data": json.loads(base64.b64decode(record["kinesis"]["data"]))}
    except ValueError:
        return {}


KINESIS = Shape(
    "KinesisBatchInfo",
    number=lambda r: r["kinesis"]["sequenceNumber"],
    created=lambda r: float(r["kinesis"]["approximateArrivalTimestamp"]),
    item=lambda r: r["kinesis"]["partitionKey"],  # Lambda keeps order per partition key
    filterable=_decoded,
)


@dataclass
class _Change:
    data: bytes
    key: str
    number: str  # its position in the table's own stream
    copy: bool = False  # a duplicate's second put
    held_at: float = field(default_factory=time.monotonic)


class Pump:
    """One table's Kinesis streaming destination. `faults(kind)` rolls the plan's `duplicate_put`
    and `reorder` (Kinesis kds.html: records may appear more than once and out of order; a
    producer's retry puts a record twice, each copy with its own sequence number)."""

    def __init__(self, streams: Any, kinesis: Any, *, stream_arn: str, table: str, kinesis_arn: str,
                 checkpoints: Checkpoints, precision: str = "MICROSECOND", start: str = "TRIM_HORIZON",
                 mark: Mark = unmarked, faults: Callable[[str], bool] | None = None):  # fmt: skip
        self.streams, self.kinesis, self.stream_arn, self.table = streams, kinesis, stream_arn, table
        self.kinesis_name, self.checkpoints, self.mark = stream_name(kinesis_arn), checkpoints, mark
        self.unit = 1_000_000 if precision == "MICROSECOND" else 1000
        self.faults = faults or (lambda kind: False)
        self.hold_s = HOLD_S
        (shard,) = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][:1]
        self.shard = shard["ShardId"]
        position = checkpoints.get(PUMP, stream_arn, self.shard)
        kind = "AFTER_SEQUENCE_NUMBER" if position else start
        self.cursor = ShardCursor(streams, stream_arn, self.shard, kind, position)
        # stream sequence number -> the change's time, for the changes read past the saved position
        self.stamps: dict[str, int] = json.loads(checkpoints.get(STAMPS, stream_arn, self.shard) or "{}")
        self.last_stamp = max(self.stamps.values(), default=0)
        self._lock = threading.Lock()
        self.read: deque[_Change] = deque()  # read, not yet put (a failed put is tried again)
        self.held: deque[_Change] = deque()  # reordered: it goes after the next one
        self.copies: deque[_Change] = deque()  # duplicated: the copy goes after the next one
        self.outbox: deque[_Change] = deque()  # to put, in order, with the cycle's PutRecords
        self.put = 0
        self.latest: dict[str, int] = {}  # Kinesis shard -> the highest (moto) sequence number put
        self.read_through = 0.0  # wall time: every change made before it is in the Kinesis stream

    @property
    def waiting(self) -> int:
        """Changes read but not yet put: held back, or a copy still to come."""
        return len(self.read) + len(self.held) + len(self.copies) + len(self.outbox)

    def pump(self) -> int:
        """Put what is new; how many changes came."""
        with self._lock:
            began, came = time.time(), 0
            while True:
                raw, _ = self.cursor.page(PAGE)
                self.read.extend(self._change(record) for record in raw)
                came += len(raw)
                if len(raw) < PAGE:
                    break
            if came:  # their times, saved before any of them is put
                self.checkpoints.set(STAMPS, self.stream_arn, self.shard, json.dumps(self.stamps))
            while self.read:
                self._emit(self.read[0])
                self.read.popleft()
            flushed = 0
            for queue in (self.held, self.copies):  # nothing waits for a next change for ever
                while queue and time.monotonic() - queue[0].held_at >= self.hold_s:
                    self._put(queue[0])
                    queue.popleft()
                    flushed += 1
            self._flush()  # raises when a put failed: the position is not saved past it
            if came or flushed:
                self._save()
            if not self.held:
                self.read_through = began
            return came

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(PUMP_INTERVAL_S):
            try:
                self.pump()
            except Exception:  # the destination keeps going, as DynamoDB's does
                log.exception("%s: Kinesis destination", self.table)
                stop.wait(1.0)

    def _change(self, raw: dict[str, Any]) -> _Change:
        data = raw["dynamodb"]
        created = self.stamps.get(data["SequenceNumber"])
        if created is None:
            created = max(int(time.time() * self.unit), self.last_stamp + 1)
            self.stamps[data["SequenceNumber"]] = self.last_stamp = created
        region = self.streams.meta.region_name
        delivered = as_delivered(self.mark(self.stream_arn, raw), self.stream_arn, region, time.time())
        record = change_record(delivered, self.table, region, created)
        key = partition_key(record["dynamodb"]["Keys"])
        return _Change(json.dumps(record).encode(), key, raw["dynamodb"]["SequenceNumber"])

    def _emit(self, change: _Change) -> None:
        if not self.held and not change.copy and self.faults("reorder"):
            self.held.append(change)
            return
        earlier = len(self.copies)  # copies of changes before this one: they go after it
        self._put(change)
        while self.held:
            self._put(self.held[0])
            self.held.popleft()
        for _ in range(earlier):
            self._put(self.copies[0])
            self.copies.popleft()

    def _put(self, change: _Change) -> None:
        self.outbox.append(change)
        if not change.copy and self.faults("duplicate_put"):
            self.copies.append(_Change(change.data, change.key, change.number, copy=True))

    def _flush(self) -> None:
        """The cycle's changes in PutRecords of up to 500 (Kinesis API reference, PutRecords), in
        order: the destination promises no order anyway (kds.html), and moto keeps it. What a put
        refused stays, first, for the next cycle."""
        while self.outbox:
            batch = list(self.outbox)[:PUT_RECORDS]
            answer = self.kinesis.put_records(
                StreamName=self.kinesis_name, Records=[{"Data": c.data, "PartitionKey": c.key} for c in batch]
            )
            for put in answer["Records"]:
                if "ErrorCode" in put:
                    raise RuntimeError(
                        f"PutRecords refused a change: {put['ErrorCode']} {put.get('ErrorMessage')}"
                    )
                shard = put["ShardId"]
                self.latest[shard] = max(self.latest.get(shard, 0), int(put["SequenceNumber"]))
                self.outbox.popleft()
                self.put += 1

    def _save(self) -> None:
        """Position: the last change read, unless one is held back (then the one before it)."""
        if self.cursor.last is None:
            return
        number = self.cursor.last if not self.held else f"{int(self.held[0].number) - 1:021d}"
        self.checkpoints.set(PUMP, self.stream_arn, self.shard, number)
        self.stamps = {seq: at for seq, at in self.stamps.items() if int(seq) > int(number)}
        self.checkpoints.set(STAMPS, self.stream_arn, self.shard, json.dumps(self.stamps))


def lambda_record(raw: dict[str, Any], shard: str, stream_arn: str, region: str, role: str) -> dict[str, Any]:
    """A GetRecords record as Lambda's Kinesis event carries it (recorded: the `Records` of
    test_lambda_integration_kinesis; arrival in epoch seconds, data base64)."""
    number = str(SEQUENCE_BASE + int(raw["SequenceNumber"]))
    arrived = raw["ApproximateArrivalTimestamp"]
    return {"awsRegion": region, "eventID": f"{shard}:{number}", "eventName": "aws:kinesis:record",
            "eventSource": "aws:kinesis", "eventSourceARN": stream_arn, "eventVersion": "1.0",
            "invokeIdentityArn": role,
            "kinesis": {"approximateArrivalTimestamp": arrived.timestamp(),
                        "data": base64.b64encode(raw["Data"]).decode(), "kinesisSchemaVersion": "1.0",
                        "partitionKey": raw["PartitionKey"], "sequenceNumber": number}}  # fmt: skip


class KinesisShardReader:
    """One mapping's reader of one Kinesis shard (the `ShardReader` interface a `ShardPoller` takes).
    `source_through()` is the wall time before which every change is in the stream (the pump's):
    a read that reaches the shard's end has read them all."""

    shape = KINESIS

    def __init__(self, kinesis: Any, stream_arn: str, shard: str, *, role: str, efo: bool = False,
                 source_through: Callable[[], float] = time.time,
                 latest: Callable[[], int] | None = None):  # fmt: skip
        self.kinesis, self.stream_arn, self.shard, self.role = kinesis, stream_arn, shard, role
        self.poll_interval_s = EFO_POLL_S if efo else STANDARD_POLL_S
        self.source_through = source_through
        # A push is a record put: what the pump put in this shard (`latest`) tells a fan-out reader
        # whether to ask moto at all; it still asks once a second (what an earlier run put).
        self.latest, self.asked_at = latest, 0.0
        self.iterator: str | None = None
        self.start: tuple[str, str | None] = ("TRIM_HORIZON", None)
        self.last: int | None = None  # moto's number of the last record taken
        self.read_through = 0.0

    def register(self, poller: object, position: str | None, starting_position: str) -> None:
        if position:
            self.last = int(position) - SEQUENCE_BASE
        else:
            self.start = (starting_position, None)
            if starting_position == "LATEST":  # what is put from now on
                self.iterator = self._open()

    def _open(self) -> str:
        request = {"StreamName": stream_name(self.stream_arn), "ShardId": self.shard}
        if self.last is not None:
            request |= {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                        "StartingSequenceNumber": str(self.last)}  # fmt: skip
        else:
            request["ShardIteratorType"] = self.start[0]
        return self.kinesis.get_shard_iterator(**request)["ShardIterator"]

    def take(self, poller: object) -> tuple[list[dict[str, Any]], bool]:
        through = self.source_through()
        idle = self.latest is not None and self.latest() <= (self.last or 0)
        if idle and time.monotonic() - self.asked_at < STANDARD_POLL_S:
            self.read_through = through  # everything the pump put, it has taken
            return [], False
        self.asked_at = time.monotonic()
        try:
            self.iterator = self.iterator or self._open()
            page = self.kinesis.get_records(ShardIterator=self.iterator, Limit=PAGE)
        except Exception:
            self.iterator = None  # again after the last record taken
            raise
        self.iterator = page.get("NextShardIterator")
        raw = page["Records"]
        if raw:
            self.last = int(raw[-1]["SequenceNumber"])
        more = len(raw) == PAGE
        if not more:
            self.read_through = through
        region = self.kinesis.meta.region_name
        return [lambda_record(r, self.shard, self.stream_arn, region, self.role) for r in raw], more

    def backlog(self, latest: dict[str, int]) -> int:
        """Records of the shard put (by the pump, this run) and not taken yet."""
        return max(0, latest.get(self.shard, 0) - (self.last or 0))

    def drained(self, poller: object) -> bool:
        return False  # never resharded locally: no shard is sealed

    def release(self, poller: object) -> None:
        pass


def seeded(
    seed: int, name: str, rates: dict[str, float], count: Callable[[str], None]
) -> Callable[[str], bool]:
    """A pump's own fault rolls, deterministic for the seed and the table whatever else runs."""
    rng = random.Random(f"{seed}:{name}")

    def roll(kind: str) -> bool:
        hit = rng.random() < rates.get(kind, 0.0)
        if hit:
            count(kind)
        return hit

    return roll
