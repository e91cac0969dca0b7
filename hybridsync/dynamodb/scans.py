"""Reading a lot (patterns 20, 21): paged, paced and parallel Scans, the distinct partition keys of
a table by its sparse KEYS_ONLY index or by a skip-scan, each priced by the capacity model.

A Scan reads whole pages (up to `Limit` items and 1 MB) and is charged for every item it reads,
filtered or not, so these scans never filter on the server: callers filter what they get, and the
model's units are exact. Pacing keeps the units spent per second under a target, so a scan does
not starve the traffic a table is there for; segments read in parallel threads.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from hybridsync.dynamodb import capacity
from hybridsync.dynamodb.capacity import Cost
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import KeyAttribute, Table
from hybridsync.model.keys import HIGHEST

# The largest sort-key value of each type: the skip-scan restarts after it, i.e. at the next item
# collection. S: 256 x U+10FFFF (1,024 bytes of UTF-8); N: the largest number DynamoDB holds;
# B: 1,024 x 0xFF. (The key limits: 1,024 bytes for a sort key.)
LARGEST_SORT_VALUE: dict[str, Any] = {
    "S": HIGHEST * 256,
    "N": Decimal("9.9999999999999999999999999999999999999E+125"),
    "B": b"\xff" * 1024,
}
DEFAULT_RATE = 100.0  # read units/s the CLI's scans are paced to unless told: ~800 KB/s, 1 GB in 22 min
RETRIED = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
           "InternalServerError", "ServiceUnavailable"}  # fmt: skip


class ScanError(RuntimeError):
    """The endpoint answered in a way DynamoDB never does, or kept throttling past the retries."""


@dataclass
class Pacer:
    """Keeps the read units spent per second at or under `rate` (None: no pacing), shared by every
    segment of a scan: each page's units are owed before the next request goes out."""

    rate: float | None
    sleep: Callable[[float], None] = time.sleep
    _spent: float = 0.0
    _started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def spend(self, units: float) -> None:
        if not self.rate:
            return
        with self._lock:
            self._spent += units
            due = self._started + self._spent / self.rate - time.monotonic()
        if due > 0:
            self.sleep(due)


@dataclass
class Scanner:
    """Scans one table or index. `cost` adds up what every page cost by the model (and what
    DynamoDB reported, when it reports it); `progress` is called after each page with the total."""

    client: Any
    table_name: str
    index_name: str | None = None
    segments: int = 1
    page_limit: int | None = None  # items per request: smaller pages spread the load
    rate: float | None = None  # read units per second, across all segments
    consistent: bool = False  # eventually consistent by default: half the units
    retries: int = 8
    progress: Callable[[Cost], None] | None = None
    cost: Cost = field(default_factory=Cost)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.segments < 1 or (self.page_limit is not None and self.page_limit < 1):
            raise ValueError("segments and page_limit must be at least 1")
        if self.consistent and self.index_name:
            raise ValueError("a global secondary index has no strongly consistent reads")
        self.pacer = Pacer(self.rate)

    def request(self, **extra: Any) -> dict[str, Any]:
        request: dict[str, Any] = {"TableName": self.table_name, "ReturnConsumedCapacity": "TOTAL"}
        if self.index_name:
            request["IndexName"] = self.index_name
        if self.consistent:
            request["ConsistentRead"] = True
        if self.page_limit:
            request["Limit"] = self.page_limit
        return request | extra

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """One Scan request, retried with backoff while DynamoDB throttles or has a hiccup; its
        cost counted and paced."""
        for attempt in range(self.retries + 1):
            try:
                page = self.client.scan(**request)
                break
            except ClientError as error:
                if error.response["Error"]["Code"] not in RETRIED or attempt == self.retries:
                    raise
                time.sleep(min(2.0, 0.05 * 2**attempt))
        spent = Cost(requests=1, items_read=page.get("ScannedCount", len(page["Items"])),
                     read_units=capacity.page_units((capacity.item_size(unmarshal(i)) for i in page["Items"]),
                                                    consistent=self.consistent),
                     consumed=_consumed(page))  # fmt: skip
        with self._lock:
            self.cost += spent
            total = self.cost
        self.pacer.spend(spent.read_units)
        if self.progress:
            self.progress(total)
        return page

    def pages(self, **extra: Any) -> Iterator[list[dict[str, Any]]]:
        """Every page of the scan (items unmarshalled), segments read in parallel."""
        yield from self.parallel(lambda segment: self._segment_pages(segment, extra))

    def items(self, **extra: Any) -> Iterator[dict[str, Any]]:
        for page in self.pages(**extra):
            yield from page

    def _segment_pages(self, segment: int, extra: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        request = self.request(**extra)
        if self.segments > 1:
            request |= {"Segment": segment, "TotalSegments": self.segments}
        while True:
            page = self.call(request)
            yield [unmarshal(i) for i in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def parallel(self, run: Callable[[int], Iterator[Any]]) -> Iterator[Any]:
        """What `run(segment)` yields for every segment, one thread per segment when there are
        several; the first error of any segment is raised to the reader."""
        if self.segments == 1:
            yield from run(0)
            return
        out: queue.Queue = queue.Queue(maxsize=4 * self.segments)
        done = object()

        def worker(segment: int) -> None:
            try:
                for value in run(segment):
                    out.put(value)
            except BaseException as error:  # handed to the reader, raised there
                out.put(error)
            finally:
                out.put(done)

        threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in range(self.segments)]
        for thread in threads:
            thread.start()
        finished = 0
        while finished < self.segments:
            value = out.get()
            if value is done:
                finished += 1
            elif isinstance(value, BaseException):
                raise value
            else:
                yield value


def _consumed(page: dict[str, Any]) -> float | None:
    reported = page.get("ConsumedCapacity")
    return float(reported["CapacityUnits"]) if reported and "CapacityUnits" in reported else None


# --- distinct partition keys (pattern 20) --------------------------------------------------------


def distinct_keys_by_index(scanner: Scanner, index_partition: str) -> Iterator[Any]:
    """Every partition key, read from a sparse KEYS_ONLY index holding one small entry per item
    collection (the `#static` items): the index's own partition attribute is the table's key."""
    for item in scanner.items():
        yield item[index_partition]


def skip_scan(scanner: Scanner, partition: KeyAttribute, sort: KeyAttribute) -> Iterator[Any]:
    """Every partition key of a table with a sort key, reading one item per item collection: Scan
    with `Limit=1`, then restart after the largest possible sort key of the collection just seen,
    which is the start of the next one. About 0.5 read units per key whatever the collections'
    sizes; segments walk disjoint key ranges in parallel."""
    largest = LARGEST_SORT_VALUE[sort.type]

    def walk(segment: int) -> Iterator[Any]:
        request = scanner.request(Limit=1)  # whole items: the model prices what DynamoDB reads
        if scanner.segments > 1:
            request |= {"Segment": segment, "TotalSegments": scanner.segments}
        last = None
        while True:
            page = scanner.call(request)
            for raw in page["Items"]:
                key = unmarshal(raw)[partition.name]
                if key == last:
                    raise ScanError(
                        f"the endpoint returned item collection {key!r} again after the skip: it does "
                        "not order ExclusiveStartKey the way DynamoDB does"
                    )
                last = key
                yield key
            if "LastEvaluatedKey" not in page:
                return
            collection = unmarshal(page["LastEvaluatedKey"])[partition.name]
            request["ExclusiveStartKey"] = marshal({partition.name: collection, sort.name: largest})

    yield from scanner.parallel(walk)


def distinct_keys_by_scan(scanner: Scanner, partition: str) -> Iterator[Any]:
    """The naive way: read every item and keep the partition keys not seen before."""
    seen: set[Any] = set()
    for item in scanner.items():
        if item[partition] not in seen:
            seen.add(item[partition])
            yield item[partition]


def table_sort_key(table: Table) -> KeyAttribute:
    if table.sort is None:
        raise ValueError(f"table {table.name!r} has no sort key: a plain Scan lists its keys")
    return table.sort
