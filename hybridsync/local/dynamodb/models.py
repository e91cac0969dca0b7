"""A table's stream partitioned into shards as DynamoDB Streams has them in production, over DynamoDB
Local's one shard per table.

AWS gives a stream at least one shard per table partition (a partition takes 1,000 write units/s),
routes each item's records by its partition key, seals every shard after about four hours and
continues it in a child (`ParentShardId`), splits a shard into two children when its partition
splits, and trims records after 24 hours (developerguide/Streams.html, "Reading and processing a
stream"). `Topology` does the same with time compressed: N shards by partition-key hash, each
sealed after `lifetime_s` (or once it holds `records_per_shard` records) and continued by a child
covering the same hashes, `split()` on demand,
records older than `retention_s` trimmed. Shard ids are AWS-shaped (`shardId-<20 digits>-<8 hex>`).

What a record belongs to follows from the persisted layout alone (each shard's hash range and the
stream positions it was open between), so a restarted app routes the records DynamoDB Local still
holds to the shards they were first read in, and saved positions and the aggregation's per-shard
cursors stay right. The state is here (models); the wire, `StreamsServer` (dynamodb/responses.py),
answers the DynamoDB Streams API over it.

Lambda documents at most two concurrent readers per shard (more are throttled): a third reader
registering on a shard is refused with GetRecords' `LimitExceededException`.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import json
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybridsync.local.dynamodb.streams import PAGE, Mark, ShardCursor, as_delivered, unmarked
from hybridsync.streams.records import created, sequence

log = logging.getLogger(__name__)
HASHES = 2**64  # the hash space the shards divide (md5 of the partition key, first 8 bytes)
READERS_PER_SHARD = 2  # Lambda: "no more than two processes at most should be reading" a shard
PUMP_INTERVAL_S = 0.1


class TrimmedDataAccess(Exception):
    """The reader's next records were trimmed (older than the retention) before it read them;
    `lost` holds them, as a failure record names them."""

    def __init__(self, shard: str, lost: list[dict[str, Any]]):
        super().__init__(
            f"TrimmedDataAccessException: shard {shard}: {len(lost)} record(s) past the trim horizon"
        )
        self.lost = lost


class LimitExceeded(Exception):
    """A third reader on a shard."""


def partition_hash(record: dict[str, Any], partition_key: str) -> int:
    """Where an item's records go: its partition key's value, hashed as DynamoDB hashes it to a
    partition (the function differs; what matters is one shard per key at a time)."""
    value = record["dynamodb"]["Keys"][partition_key]
    text = json.dumps(value, sort_keys=True)
    return int.from_bytes(hashlib.md5(text.encode(), usedforsecurity=False).digest()[:8], "big")


@dataclass
class Shard:
    id: str
    parent: str | None
    low: int  # hashes low <= h < high
    high: int
    after: int  # the stream positions it holds: after < sequence <= through (None: open)
    through: int | None = None
    opened_at: float = field(default_factory=time.time)
    sealed_at: float | None = None
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    sequences: list[int] = field(default_factory=list, repr=False)
    trimmed: list[dict[str, Any]] = field(default_factory=list, repr=False)  # until every reader passed
    trimmed_through: int = -1
    cursors: dict[int, int] = field(default_factory=dict, repr=False)  # reader -> last sequence taken

    def holds(self, hashed: int, number: int) -> bool:
        return (
            self.low <= hashed < self.high
            and number > self.after
            and (self.through is None or number <= self.through)
        )

    def layout(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("id", "parent", "low", "high", "after", "through",
                                               "opened_at", "sealed_at")}  # fmt: skip

    def describe(self) -> dict[str, Any]:
        """As DescribeStream lists it."""
        numbers: dict[str, str] = {}
        first = self.trimmed[0] if self.trimmed else self.records[0] if self.records else None
        if first is not None:
            numbers["StartingSequenceNumber"] = first["dynamodb"]["SequenceNumber"]
        else:
            numbers["StartingSequenceNumber"] = f"{self.after + 1:021d}"
        if self.through is not None:
            numbers["EndingSequenceNumber"] = f"{self.through:021d}"
        shape: dict[str, Any] = {"ShardId": self.id, "SequenceNumberRange": numbers}
        if self.parent:
            shape["ParentShardId"] = self.parent
        return shape


class ShardView:
    """One shard as a mapping's poller reads it (the `ShardReader` interface)."""

    def __init__(self, topology: Topology, shard: Shard):
        self.topology, self.shard = topology, shard

    def register(self, poller: object, position: str | None, starting_position: str) -> None:
        self.topology.register(self.shard, id(poller), position, starting_position)

    def take(self, poller: object) -> tuple[list[dict[str, Any]], bool]:
        return self.topology.take(self.shard, id(poller))

    @property
    def read_through(self) -> float:
        return self.topology.read_through

    def drained(self, poller: object) -> bool:
        """Sealed, and the poller has taken all it held: its children may start."""
        return self.topology.drained(self.shard, id(poller))

    def release(self, poller: object) -> None:
        self.topology.release(self.shard, id(poller))


class Topology:
    """One stream's shards. `pump()` reads DynamoDB Local's shard and routes what is new (any
    reader's `take` pumps when the last pump is older than 0.1 s); rollover and trimming happen
    there too."""

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        partition_key: str,
        *,
        shards: int = 1,
        lifetime_s: float | None = None,
        records_per_shard: int | None = None,
        retention_s: float = 24 * 3600,
        state: Path | None = None,
        seed: int = 7,
        mark: Mark = unmarked,
    ):
        if shards < 1:
            raise ValueError(f"a stream has at least one shard, not {shards}")
        self.streams, self.stream_arn, self.partition_key = streams, stream_arn, partition_key
        self.lifetime_s, self.retention_s, self.state = lifetime_s, retention_s, state
        self.records_per_shard, self.mark = records_per_shard, mark
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        self._pumped_at = 0.0
        self.read_through = 0.0  # wall time: every record written before it has been routed
        self.highest = -1  # the highest stream position routed so far
        self.rollovers = self.splits = 0
        self.trimmed_records = 0
        self.shards: dict[str, Shard] = {}
        self.dropped: set[str] = set()  # shards past the retention, deleted as AWS deletes them
        saved = json.loads(state.read_text()) if state is not None and state.is_file() else None
        if saved and saved.get("stream") == stream_arn:
            for layout in saved["shards"]:
                self.shards[layout["id"]] = Shard(**layout)
            self.rollovers, self.splits = saved.get("rollovers", 0), saved.get("splits", 0)
        else:
            width = HASHES // shards
            for n in range(shards):
                high = HASHES if n == shards - 1 else (n + 1) * width
                self._open(None, n * width, high, after=-1)
        underlying = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        self._source = ShardCursor(streams, stream_arn, underlying[0]["ShardId"], "TRIM_HORIZON")
        self._save()

    # --- the layout ---------------------------------------------------------------------------

    def _new_id(self) -> str:
        return f"shardId-{int(time.time() * 1000):020d}-{self._rng.getrandbits(32):08x}"

    def _open(self, parent: str | None, low: int, high: int, after: int) -> Shard:
        shard = Shard(self._new_id(), parent, low, high, after)
        self.shards[shard.id] = shard
        return shard

    def _seal(self, shard: Shard) -> None:
        shard.through, shard.sealed_at = self.highest, time.time()

    def _save(self) -> None:
        if self.state is None:
            return
        saved = {"stream": self.stream_arn, "rollovers": self.rollovers, "splits": self.splits,
                 "shards": [s.layout() for s in self.shards.values()]}  # fmt: skip
        staged = self.state.with_suffix(".tmp")
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_text(json.dumps(saved, indent=1))
        staged.replace(self.state)

    def open_shards(self) -> list[Shard]:
        return [s for s in self.shards.values() if s.through is None]

    def split(self, shard_id: str | None = None) -> tuple[str, str]:
        """Seal an open shard (the one holding most records, by default) and continue it in two
        children, each with half its hashes, as a partition split does; their ids."""
        with self._lock:
            self._pump()
            candidates = self.open_shards()
            shard = self.shards[shard_id] if shard_id else max(candidates, key=lambda s: len(s.records))
            if shard.through is not None:
                raise ValueError(f"{shard.id} is sealed already")
            self._seal(shard)
            middle = shard.low + (shard.high - shard.low) // 2
            left = self._open(shard.id, shard.low, middle, shard.through)  # type: ignore[arg-type]
            right = self._open(shard.id, middle, shard.high, shard.through)  # type: ignore[arg-type]
            self.splits += 1
            self._save()
            return left.id, right.id

    # --- reading DynamoDB Local ---------------------------------------------------------------

    def pump(self) -> None:
        with self._lock:
            self._pump()

    def _pump(self) -> None:
        self._pumped_at, began = time.monotonic(), time.time()
        while True:
            raw, _ = self._source.page(PAGE)
            region, now = self.streams.meta.region_name, time.time()
            # new records belong to open shards; only a restart's re-read needs the sealed ones
            candidates = [*self.open_shards(), *(s for s in self.shards.values() if s.through is not None)]
            for record in raw:
                delivered = as_delivered(self.mark(self.stream_arn, record), self.stream_arn, region, now)
                number, hashed = sequence(delivered), partition_hash(delivered, self.partition_key)
                self.highest = max(self.highest, number)
                home = next((s for s in candidates if s.holds(hashed, number)), None)
                if home is not None and number > home.trimmed_through:
                    home.records.append(delivered)
                    home.sequences.append(number)
            if len(raw) < PAGE:
                break
        self.read_through = began
        changed = self._roll_over() | self._trim()
        if changed:
            self._save()

    def _roll_over(self) -> bool:
        """Seal each open shard past its lifetime (or holding `records_per_shard` records: a short
        run's stand-in for the hours AWS keeps a shard open) and continue it in a child."""
        if self.lifetime_s is None and self.records_per_shard is None:
            return False
        now, rolled = time.time(), False
        for shard in self.open_shards():
            old = self.lifetime_s is not None and now - shard.opened_at >= self.lifetime_s
            full = self.records_per_shard is not None and len(shard.records) >= self.records_per_shard
            if old or full:
                self._seal(shard)
                self._open(shard.id, shard.low, shard.high, shard.through)  # type: ignore[arg-type]
                self.rollovers += 1
                rolled = True
        return rolled

    def _trim(self) -> bool:
        horizon, dropped = time.time() - self.retention_s, False
        for shard in list(self.shards.values()):
            old = 0
            while old < len(shard.records) and created(shard.records[old]) < horizon:
                old += 1
            if old:
                shard.trimmed += shard.records[:old]
                shard.trimmed_through = shard.sequences[old - 1]
                del shard.records[:old], shard.sequences[:old]
                self.trimmed_records += old
            slowest = min(shard.cursors.values(), default=shard.trimmed_through)
            shard.trimmed = [r for r in shard.trimmed if sequence(r) > slowest]
            if shard.sealed_at is not None and shard.sealed_at < horizon and not shard.records:
                del self.shards[shard.id]  # AWS deletes a sealed shard once its records are gone
                self.dropped.add(shard.id)
                dropped = True
        return dropped

    # --- readers ------------------------------------------------------------------------------

    def register(self, shard: Shard, reader: int, position: str | None, starting_position: str) -> None:
        with self._lock:
            if reader not in shard.cursors and len(shard.cursors) >= READERS_PER_SHARD:
                raise LimitExceeded(
                    f"LimitExceededException: shard {shard.id} of {self.stream_arn} already has "
                    f"{len(shard.cursors)} readers; DynamoDB Streams throttles more than two per shard"
                )
            if position:
                shard.cursors[reader] = int(position)
            elif starting_position == "LATEST" and shard.parent is None:
                self._pump()
                shard.cursors[reader] = max(self.highest, shard.after)
            else:
                shard.cursors[reader] = shard.after  # a child is read from its start

    def release(self, shard: Shard, reader: int) -> None:
        with self._lock:
            shard.cursors.pop(reader, None)

    def take(self, shard: Shard, reader: int) -> tuple[list[dict[str, Any]], bool]:
        with self._lock:
            if time.monotonic() - self._pumped_at >= PUMP_INTERVAL_S:
                self._pump()
            cursor = shard.cursors[reader]
            if cursor < shard.trimmed_through:
                lost = [r for r in shard.trimmed if sequence(r) > cursor]
                shard.cursors[reader] = shard.trimmed_through  # it goes on at the trim horizon
                if lost:
                    raise TrimmedDataAccess(shard.id, lost)
            start = bisect.bisect_right(shard.sequences, shard.cursors[reader])
            taken = shard.records[start : start + PAGE]
            if taken:
                shard.cursors[reader] = shard.sequences[start + len(taken) - 1]
            return taken, start + len(taken) < len(shard.records)

    def drained(self, shard: Shard, reader: int) -> bool:
        with self._lock:
            if shard.through is None:
                return False
            cursor = shard.cursors.get(reader, shard.after)
            return not shard.records or shard.sequences[-1] <= cursor

    def backlog(self, shard_id: str, reader: int | None) -> int:
        """Records of the shard the reader has not taken (all of them for a reader not started)."""
        with self._lock:
            shard = self.shards.get(shard_id)
            if shard is None:
                return 0
            cursor = shard.cursors.get(reader, shard.after) if reader is not None else shard.after
            return len(shard.records) - bisect.bisect_right(shard.sequences, cursor)

    # --- the Streams API ----------------------------------------------------------------------

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            self._pump()
            return [s.describe() for s in self.shards.values()]

    def iterator(self, shard_id: str, kind: str, number: str | None) -> str:
        with self._lock:
            self._pump()
            shard = self.shards.get(shard_id)
            if shard is None:
                raise KeyError(shard_id)
            if kind == "TRIM_HORIZON":
                after = max(shard.after, shard.trimmed_through)
            elif kind == "LATEST":
                after = self.highest if shard.through is None else shard.through
            else:
                at = int(number or 0)
                if at <= shard.trimmed_through:
                    raise TrimmedDataAccess(shard.id, [])
                after = at - 1 if kind == "AT_SEQUENCE_NUMBER" else at
            return base64.b64encode(json.dumps([self.stream_arn, shard_id, after]).encode()).decode()

    def records(self, iterator: str, limit: int) -> tuple[list[dict[str, Any]], str | None]:
        arn, shard_id, after = json.loads(base64.b64decode(iterator))
        with self._lock:
            self._pump()
            shard = self.shards.get(shard_id)
            if shard is None:
                raise KeyError(shard_id)
            if after < shard.trimmed_through:
                raise TrimmedDataAccess(shard.id, [])
            start = bisect.bisect_right(shard.sequences, after)
            taken = shard.records[start : start + limit]
            last = shard.sequences[start + len(taken) - 1] if taken else after
            if shard.through is not None and start + len(taken) >= len(shard.records):
                return taken, None  # a sealed shard read to its end has no next iterator
            return taken, base64.b64encode(json.dumps([arn, shard_id, last]).encode()).decode()

    def figures(self) -> dict[str, int]:
        with self._lock:
            return {"shards": len(self.shards), "open": len(self.open_shards()), "rollovers": self.rollovers,
                    "splits": self.splits, "trimmed_records": self.trimmed_records,
                    "deleted_shards": len(self.dropped)}  # fmt: skip
