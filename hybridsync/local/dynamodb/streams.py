"""A table's stream read as Lambda's event source mapping delivers it (records in the event shape):
one cursor per shard over GetRecords, one reader per shard shared by every mapping on it, and a
whole-stream reader for tools and tests built on the same two."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from hybridsync.streams.records import created, lambda_record, sequence

PAGE = 1000  # records per GetRecords (the API's limit)
# What the platform adds to a stream's records that DynamoDB Local's lack (local/dynamodb/ttl.py: the
# service's identity on a TTL deletion): (stream ARN, a GetRecords record) -> that record.
Mark = Callable[[str, dict[str, Any]], dict[str, Any]]


def unmarked(stream_arn: str, record: dict[str, Any]) -> dict[str, Any]:
    return record


def as_delivered(raw: dict[str, Any], stream_arn: str, region: str, read_at: float) -> dict[str, Any]:
    """A GetRecords record as Lambda delivers it, with what DynamoDB Local gets wrong put right:
    `awsRegion` is the table's region (DynamoDB Local says `ddblocal`), and the creation time, which
    DynamoDB Local rounds down to the minute where AWS rounds it down to the second, becomes the
    second the record was first read, within that minute (the poller reads within a second)."""
    record = lambda_record(raw, stream_arn)
    record["awsRegion"] = region
    data = record.get("dynamodb")
    created = data.get("ApproximateCreationDateTime") if isinstance(data, dict) else None
    if isinstance(created, int) and created % 60 == 0:
        data["ApproximateCreationDateTime"] = max(created, min(int(read_at), created + 59))  # type: ignore[index]
    return record


class ShardCursor:
    """GetRecords over one shard, page by page, from a starting position ("TRIM_HORIZON", "LATEST"
    or "AFTER_SEQUENCE_NUMBER" with a sequence number); after an error it starts again after the
    last record it returned.

    DynamoDB Local 1.25.1 hands out, for a shard that holds no record yet, an iterator it refuses
    once records arrive (TrimmedDataAccessException "read past the oldest stream record", whenever
    another table of the database has records). A cursor that has returned nothing yet and began at
    TRIM_HORIZON or LATEST starts again at TRIM_HORIZON: the shard then holds only the records
    written since, which is what either start delivers. A position past the trim horizon (AWS keeps
    records 24 h) still raises."""

    def __init__(self, streams: Any, stream_arn: str, shard: str, kind: str, sequence: str | None = None):
        self.streams, self.stream_arn, self.shard = streams, stream_arn, shard
        self.kind, self.sequence = kind, sequence
        self.iterator: str | None = None
        self.last: str | None = None  # the last record returned, as the stream spells its number

    def _open(self) -> str:
        kind, sequence = ("AFTER_SEQUENCE_NUMBER", self.last) if self.last else (self.kind, self.sequence)
        request = {"StreamArn": self.stream_arn, "ShardId": self.shard, "ShardIteratorType": kind}
        if sequence is not None:
            request["SequenceNumber"] = sequence
        return self.streams.get_shard_iterator(**request)["ShardIterator"]

    def page(self, limit: int = 1000) -> tuple[list[dict[str, Any]], bool]:
        """The next records (as GetRecords gives them) and whether the shard goes on (not closed)."""
        try:
            self.iterator = self.iterator or self._open()
            try:
                page = self.streams.get_records(ShardIterator=self.iterator, Limit=limit)
            except self.streams.exceptions.TrimmedDataAccessException:
                if self.last is not None or self.kind not in ("TRIM_HORIZON", "LATEST"):
                    raise
                self.kind, self.sequence = "TRIM_HORIZON", None  # DynamoDB Local's empty-shard iterator
                self.iterator = self._open()
                page = self.streams.get_records(ShardIterator=self.iterator, Limit=limit)
        except Exception:
            self.iterator = None  # start again after the last record returned
            raise
        self.iterator = page.get("NextShardIterator")
        if page["Records"]:
            self.last = page["Records"][-1]["dynamodb"]["SequenceNumber"]
        return page["Records"], self.iterator is not None


class ShardReader:
    """One reader of a stream shard for every mapping on it: each record is fetched and converted
    once (GetRecords is the local app's costliest call), while each poller keeps its own position.
    It starts at the earliest position any poller needs and forgets what every poller has taken."""

    def __init__(self, streams: Any, stream_arn: str, shard: str, mark: Mark = unmarked):
        self.streams, self.stream_arn, self.shard, self.mark = streams, stream_arn, shard, mark
        self._lock = threading.Lock()
        self._cache: deque[dict[str, Any]] = deque()
        self._cursor: ShardCursor | None = None
        self._cursors: dict[int, int] = {}  # poller -> last sequence number it took (-1: none yet)
        self._starts: dict[int, tuple[str, str | None]] = {}  # poller -> (start kind, sequence number)
        self._not_before: dict[int, float] = {}  # LATEST pollers: nothing written before they began
        self.read_through = 0.0  # wall time: every record written before it has been fetched

    def register(self, poller: object, position: str | None, starting_position: str) -> None:
        with self._lock:
            self._starts[id(poller)] = ("AFTER_SEQUENCE_NUMBER", position) if position else (
                starting_position, None)  # fmt: skip
            self._cursors[id(poller)] = int(position) if position else -1
            if not position and starting_position == "LATEST":
                self._not_before[id(poller)] = float(int(time.time()))  # creation times are whole seconds

    def _open(self) -> ShardCursor:
        """A cursor at the earliest position any poller needs."""
        order = {"TRIM_HORIZON": 0, "AFTER_SEQUENCE_NUMBER": 1, "LATEST": 2}
        kind, sequence = min(self._starts.values(), key=lambda s: (order[s[0]], int(s[1] or 0)))
        return ShardCursor(self.streams, self.stream_arn, self.shard, kind, sequence)

    def drained(self, poller: object) -> bool:
        """DynamoDB Local never seals a shard: it is never read to its end."""
        return False

    def release(self, poller: object) -> None:
        pass

    def take(self, poller: object) -> tuple[list[dict[str, Any]], bool]:
        """The records after the poller's last one, and whether the shard may hold more right now
        (a full page came)."""
        with self._lock:
            cursor = self._cursors[id(poller)]
            newer = [r for r in self._cache if sequence(r) > cursor]
            more = False
            if not newer:
                self._cursor = self._cursor or self._open()
                began = time.time()
                raw, _ = self._cursor.page(PAGE)
                more = len(raw) == PAGE
                if not more:
                    self.read_through = began
                region, now = self.streams.meta.region_name, time.time()
                arn = self.stream_arn
                self._cache.extend(as_delivered(self.mark(arn, record), arn, region, now) for record in raw)
                newer = [r for r in self._cache if sequence(r) > cursor]
            if newer:
                self._cursors[id(poller)] = sequence(newer[-1])
            if id(poller) in self._not_before:
                newer = [r for r in newer if created(r) >= self._not_before[id(poller)]]
            slowest = min(self._cursors.values())
            while self._cache and sequence(self._cache[0]) <= slowest:
                self._cache.popleft()
            return newer, more


class StreamReader:
    """Reads a table's stream shard by shard from where it left off, as Lambda would receive it:
    each record in the event shape (`eventSourceARN`, epoch times, base64 binary). The mappings'
    own reader (`ShardReader`) does the reading, this reader being its one poller per shard."""

    def __init__(self, streams: Any, stream_arn: str, start: str = "LATEST", mark: Mark = unmarked):
        self.streams = streams
        self.stream_arn = stream_arn
        self.start = start
        self.mark = mark
        self.readers: dict[str, ShardReader] = {}

    def _shards(self) -> list[str]:
        description = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        return [shard["ShardId"] for shard in description["Shards"]]

    @property
    def shard(self) -> str:
        """The stream's only shard (DynamoDB Local keeps one per table), as Lambda names it in a
        tumbling-window event's `shardId`."""
        (only,) = self._shards()
        return only

    def read(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for shard in self._shards():
            if shard not in self.readers:
                self.readers[shard] = ShardReader(self.streams, self.stream_arn, shard, self.mark)
                self.readers[shard].register(self, None, self.start)
            while True:
                taken, more = self.readers[shard].take(self)
                records += taken
                if not more:
                    break
        return records


def every_record(streams: Any) -> Callable[[str, list[str]], list[dict[str, Any]]]:
    """A trace's reader (`hybridsync.sync.trace.Sources.records`): every record of a stream, shard by
    shard from its trim horizon, as Lambda delivers them (a local stream is small, and its records'
    stamps put right)."""
    return lambda arn, sequences: StreamReader(streams, arn, start="TRIM_HORIZON").read()
