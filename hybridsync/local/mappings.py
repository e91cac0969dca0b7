"""DynamoDB stream event source mappings, run locally as Lambda runs them.

One poller per stream shard: it reads from the saved position (or `StartingPosition`), drops what
the `FilterCriteria` do not admit (checkpointing past it), fills a batch up to `BatchSize` or until
`MaximumBatchingWindowInSeconds` has passed, and invokes the function synchronously. On a function
error it bisects the batch (`BisectBatchOnFunctionError`; a split does not count as a retry) or
retries it up to `MaximumRetryAttempts`; with `ReportBatchItemFailures` it checkpoints before the
lowest failed sequence number and retries from there. Records older than
`MaximumRecordAgeInSeconds`, and batches out of retries, go to the `OnFailure` queue as Lambda's
invocation record (metadata, not the records) and the shard goes on. `TumblingWindowInSeconds` adds
the window, the shard id and the state returned by the previous invocation of the window, and a
final invocation when the window closes; as Lambda documents (services-ddb-windows), a response
without a `state` object is a failed invocation, and a failed final invocation is retried while
the shard waits: nothing more of it is delivered until that invocation succeeds.
`ParallelizationFactor` N runs up to N batches of a shard at once, each partition key's records in
one lane, in order. Positions are saved under `.local/` after every batch.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hybridsync import filters, keys
from hybridsync.local.functions import FunctionError
from hybridsync.records import lambda_record
from hybridsync.sync import failed

log = logging.getLogger(__name__)
POLL_INTERVAL_S = 0.25  # Lambda polls each shard about four times a second
PAGE = 1000


@dataclass(frozen=True)
class Settings:
    """An AWS::Lambda::EventSourceMapping's properties, with Lambda's defaults."""

    name: str
    batch_size: int = 100
    batching_window_s: float = 0.0
    starting_position: str = "TRIM_HORIZON"
    patterns: tuple[dict[str, Any], ...] = ()
    max_retries: int = -1  # -1: until the record expires
    max_age_s: int = -1  # -1: never too old
    bisect: bool = False
    report_failures: bool = False
    tumbling_window_s: int = 0
    parallelization: int = 1

    @classmethod
    def from_properties(cls, name: str, properties: dict[str, Any]) -> Settings:
        criteria = properties.get("FilterCriteria") or {}
        return cls(
            name=name,
            batch_size=int(properties.get("BatchSize", 100)),
            batching_window_s=float(properties.get("MaximumBatchingWindowInSeconds", 0)),
            starting_position=properties.get("StartingPosition", "TRIM_HORIZON"),
            patterns=tuple(json.loads(f["Pattern"]) for f in criteria.get("Filters", [])),
            max_retries=int(properties.get("MaximumRetryAttempts", -1)),
            max_age_s=int(properties.get("MaximumRecordAgeInSeconds", -1)),
            bisect=bool(properties.get("BisectBatchOnFunctionError", False)),
            report_failures="ReportBatchItemFailures" in properties.get("FunctionResponseTypes", []),
            tumbling_window_s=int(properties.get("TumblingWindowInSeconds", 0)),
            parallelization=int(properties.get("ParallelizationFactor", 1)),
        )


class Checkpoints:
    """Saved positions: mapping -> stream ARN -> shard -> last sequence number done."""

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self._positions: dict[str, dict[str, dict[str, str]]] = (
            json.loads(path.read_text()) if path is not None and path.is_file() else {}
        )

    def get(self, mapping: str, stream: str, shard: str) -> str | None:
        with self._lock:
            return self._positions.get(mapping, {}).get(stream, {}).get(shard)

    def set(self, mapping: str, stream: str, shard: str, sequence: str) -> None:
        with self._lock:
            self._positions.setdefault(mapping, {}).setdefault(stream, {})[shard] = sequence
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                staged = self.path.with_suffix(".tmp")
                staged.write_text(json.dumps(self._positions, indent=1))
                staged.replace(self.path)  # atomic: a crash leaves the old file or the new one


@dataclass
class MappingStats:
    position: str = ""
    delivered: int = 0  # records the function took
    filtered: int = 0
    batches: int = 0
    retries: int = 0
    sent_to_failure_queue: int = 0  # records whose metadata went to the OnFailure destination
    last_error: str = ""
    blocked: str = ""  # why the shard waits: a window's final invocation that keeps failing
    lag_records: int = 0
    lag_s: float = 0.0
    caught_up: bool = False  # the last read found nothing new and nothing waits to be delivered
    lags: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=100_000))  # (at, lag s)


def _sequence(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def _created(record: dict[str, Any]) -> float:
    return float(record["dynamodb"].get("ApproximateCreationDateTime") or time.time())


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ShardReader:
    """One reader of a stream shard for every mapping on it: each record is fetched and converted
    once (GetRecords is the local app's costliest call), while each poller keeps its own position.
    It starts at the earliest position any poller needs and forgets what every poller has taken."""

    def __init__(self, streams: Any, stream_arn: str, shard: str,
                 mark: Callable[[dict[str, Any]], dict[str, Any]] | None = None):  # fmt: skip
        self.streams, self.stream_arn, self.shard = streams, stream_arn, shard
        self.mark = mark  # what the stream adds that the API does not show (TTL deletions' identity)
        self.hash_key: str | None = None  # the table's partition key: parallel lanes keep its order
        self._lock = threading.Lock()
        self._cache: deque[dict[str, Any]] = deque()
        self._iterator: str | None = None
        self._cursors: dict[int, int] = {}  # poller -> last sequence number it took (-1: none yet)
        self._starts: dict[int, tuple[str, int | None]] = {}  # poller -> (start kind, sequence)
        self._not_before: dict[int, float] = {}  # LATEST pollers: nothing written before they began

    def register(self, poller: object, position: str | None, starting_position: str) -> None:
        with self._lock:
            self._starts[id(poller)] = ("AFTER_SEQUENCE_NUMBER", int(position)) if position else (
                starting_position, None)  # fmt: skip
            self._cursors[id(poller)] = int(position) if position else -1
            if not position and starting_position == "LATEST":
                self._not_before[id(poller)] = time.time()

    def _open(self) -> None:
        starts = list(self._starts.values())
        order = {"TRIM_HORIZON": 0, "AFTER_SEQUENCE_NUMBER": 1, "LATEST": 2}
        kind, sequence = min(starts, key=lambda s: (order[s[0]], s[1] or 0))
        if self._cache:  # reopened after an error: go on after what was read
            kind, sequence = "AFTER_SEQUENCE_NUMBER", _sequence(self._cache[-1])
        request = {"StreamArn": self.stream_arn, "ShardId": self.shard, "ShardIteratorType": kind}
        if sequence is not None:
            request["SequenceNumber"] = str(sequence)
        self._iterator = self.streams.get_shard_iterator(**request)["ShardIterator"]
        schema = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        hashes = [k["AttributeName"] for k in schema.get("KeySchema", []) if k["KeyType"] == "HASH"]
        self.hash_key = hashes[0] if hashes else None

    def take(self, poller: object) -> tuple[list[dict[str, Any]], bool]:
        """The records after the poller's last one, and whether the shard may hold more right now
        (a full page came)."""
        with self._lock:
            cursor = self._cursors[id(poller)]
            newer = [r for r in self._cache if _sequence(r) > cursor]
            more = False
            if not newer:
                try:
                    if self._iterator is None:
                        self._open()
                    page = self.streams.get_records(ShardIterator=self._iterator, Limit=PAGE)
                except Exception:
                    self._iterator = None
                    raise
                self._iterator = page.get("NextShardIterator")
                more = len(page["Records"]) == PAGE
                for raw in page["Records"]:
                    record = lambda_record(raw, self.stream_arn)
                    self._cache.append(self.mark(record) if self.mark else record)
                newer = [r for r in self._cache if _sequence(r) > cursor]
            if newer:
                self._cursors[id(poller)] = _sequence(newer[-1])
            if id(poller) in self._not_before:
                newer = [r for r in newer if _created(r) >= self._not_before[id(poller)]]
            slowest = min(self._cursors.values())
            while self._cache and _sequence(self._cache[0]) <= slowest:
                self._cache.popleft()
            return newer, more


class ShardPoller:
    """Feeds one shard's records to one function, in order, with the mapping's semantics."""

    def __init__(
        self,
        settings: Settings,
        invoke: Callable[[dict[str, Any]], Any],
        streams: Any,
        stream_arn: str,
        shard: str,
        checkpoints: Checkpoints,
        on_failure: Callable[[dict[str, Any]], None] | None = None,
        function_arn: str = "",
        stats: MappingStats | None = None,
        mark: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ):
        self.settings, self.invoke = settings, invoke
        self.stream_arn, self.shard, self.checkpoints = stream_arn, shard, checkpoints
        # a ShardReader shared with the shard's other mappings, or a client to read alone with
        self.reader = (
            streams if isinstance(streams, ShardReader) else ShardReader(streams, stream_arn, shard, mark)
        )
        position = checkpoints.get(settings.name, stream_arn, shard)
        self.reader.register(self, position, settings.starting_position)
        self.on_failure, self.function_arn = on_failure, function_arn
        self.stats = stats or MappingStats()
        self.buffer: deque[dict[str, Any]] = deque()  # admitted, not yet delivered
        self.passed: deque[int] = deque()  # filtered-out sequence numbers behind the buffer's head
        self.first_buffered_at = 0.0
        self.window: tuple[float, float] | None = None  # the open tumbling window and its state
        self.state: dict[str, Any] = {}
        self.final_attempts = 0  # failed final invocations of the open window so far
        self.final_retry_at = 0.0  # monotonic time of the next one
        if position:
            self.stats.position = position
        self._in_lanes = False  # lanes checkpoint together, when all are done

    # --- reading ------------------------------------------------------------------------------

    def read(self) -> int:
        """Take what the shard has past this poller's last record; returns how many came (PAGE when
        a full page came: more is waiting)."""
        records, more = self.reader.take(self)
        for record in records:
            if filters.admits(self.settings.patterns, record):
                if not self.buffer:
                    self.first_buffered_at = time.monotonic()
                self.buffer.append(record)
            else:
                self.stats.filtered += 1
                if self.buffer:
                    self.passed.append(_sequence(record))
                else:
                    self._checkpoint(_sequence(record))
        self._measure_lag()
        return PAGE if more else len(records)

    # --- delivering ---------------------------------------------------------------------------

    def due(self, *, draining: bool = False) -> bool:
        if not self.buffer:
            return False
        full = len(self.buffer) >= self.settings.batch_size
        waited = time.monotonic() - self.first_buffered_at >= self.settings.batching_window_s
        head_window = self._window_of(self.buffer[0])
        window_over = head_window is not None and time.time() >= head_window[1]  # nothing more joins it
        return full or waited or draining or window_over

    def deliver_due(self, *, draining: bool = False) -> None:
        while True:
            if self._window_over() and not self._close_window():
                return  # the shard waits for the window's final invocation to succeed
            if not self.due(draining=draining):
                return
            if self.settings.parallelization > 1 and not self.settings.tumbling_window_s:
                batch = self._deliver_in_lanes()
            else:
                batch = self._next_batch()
                self._deliver(batch)
            for _ in batch:
                self.buffer.popleft()
            if self.buffer:
                self.first_buffered_at = time.monotonic()
            self._checkpoint_passed()

    def _deliver_in_lanes(self) -> list[dict[str, Any]]:
        """`ParallelizationFactor` N: up to N batches of the shard at once, each partition key's
        records in one lane, in order. The shard's position moves once every lane is done."""
        lanes_n = self.settings.parallelization
        taken = list(itertools.islice(self.buffer, self.settings.batch_size * lanes_n))
        lanes: list[list[dict[str, Any]]] = [[] for _ in range(lanes_n)]
        for record in taken:
            lanes[keys.shard_of(self._partition_key(record), lanes_n)].append(record)
        size = self.settings.batch_size

        def run(lane: list[dict[str, Any]]) -> None:
            for start in range(0, len(lane), size):
                self._deliver(lane[start : start + size])

        self._in_lanes = True
        try:
            with ThreadPoolExecutor(max_workers=lanes_n) as pool:
                list(pool.map(run, [lane for lane in lanes if lane]))
        finally:
            self._in_lanes = False
        self._checkpoint(_sequence(taken[-1]))
        return taken

    def _partition_key(self, record: dict[str, Any]) -> str:
        keys_ = record["dynamodb"].get("Keys", {})
        hash_key = self.reader.hash_key
        return json.dumps(keys_.get(hash_key) if hash_key else keys_, sort_keys=True)

    def _next_batch(self) -> list[dict[str, Any]]:
        batch = []
        window = self._window_of(self.buffer[0])
        for record in self.buffer:
            if len(batch) == self.settings.batch_size or self._window_of(record) != window:
                break  # a batch never spans two tumbling windows
            batch.append(record)
        if window is not None and self.window is None:  # the previous one was closed first
            self.window, self.state = window, {}
        return batch

    def _window_of(self, record: dict[str, Any]) -> tuple[float, float] | None:
        size = self.settings.tumbling_window_s
        if not size:
            return None
        start = _created(record) // size * size
        return (start, start + size)

    def _event(self, records: list[dict[str, Any]], final: bool = False) -> dict[str, Any]:
        event: dict[str, Any] = {"Records": records}
        if self.settings.tumbling_window_s and self.window is not None:
            start, end = self.window
            event |= {"window": {"start": _iso(start), "end": _iso(end)}, "state": self.state,
                      "shardId": self.shard, "eventSourceARN": self.stream_arn,
                      "isFinalInvokeForWindow": final, "isWindowTerminatedEarly": False}  # fmt: skip
        return event

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        work: deque[tuple[list[dict[str, Any]], int]] = deque([(batch, 0)])
        while work:
            records, attempts = work.popleft()
            records = self._drop_expired(records)
            if not records:
                continue
            try:
                response = self.invoke(self._event(records))
                error = self._refusal(response)
            except FunctionError as raised:
                error = str(raised)
            if error:
                self.stats.last_error = error[:300]
                if self.settings.bisect and len(records) > 1:
                    middle = len(records) // 2
                    work.extendleft([(records[middle:], attempts), (records[:middle], attempts)])
                    continue
                failed = records
            else:
                failed = self._failed(records, response)
                if self.settings.tumbling_window_s:
                    self.state = response["state"]
            done = records[: len(records) - len(failed)]
            if done:
                self._delivered(done)
            if not failed:
                continue
            attempts += 1
            if 0 <= self.settings.max_retries < attempts:
                self._send_to_failure_queue(failed, "RetryAttemptsExhausted", attempts)
                continue
            self.stats.retries += 1
            time.sleep(min(0.05 * 2**attempts, 2.0))
            work.appendleft((failed, attempts))

    def _refusal(self, response: Any) -> str | None:
        """Why Lambda counts a response that returned normally as a failed invocation, if it does:
        under a tumbling window the response must carry a `state` object."""
        if self.settings.tumbling_window_s and not (isinstance(response, dict)
                                                    and isinstance(response.get("state"), dict)):  # fmt: skip
            return f"the response has no state object, required under a tumbling window: {response!r}"
        return None

    def _failed(self, records: list[dict[str, Any]], response: Any) -> list[dict[str, Any]]:
        """The records to retry after a partial batch response: from the lowest failed sequence
        number on. A malformed response fails the whole batch, as Lambda treats it."""
        if not self.settings.report_failures or not isinstance(response, dict):
            return []
        failures = response.get("batchItemFailures") or []
        if not failures:
            return []
        sequences = {r["dynamodb"]["SequenceNumber"] for r in records}
        try:
            lowest = min(int(f["itemIdentifier"]) for f in failures if f["itemIdentifier"] in sequences)
        except (KeyError, TypeError, ValueError):
            self.stats.last_error = f"malformed batchItemFailures: {failures!r}"[:300]
            return records
        self.stats.last_error = f"{len(failures)} item(s) reported failed"
        return [r for r in records if _sequence(r) >= lowest]

    def _drop_expired(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.settings.max_age_s < 0:
            return records
        oldest_allowed = time.time() - self.settings.max_age_s
        expired = [r for r in records if _created(r) < oldest_allowed]
        if expired:  # expired records sit in front: the stream is in order
            self._send_to_failure_queue(expired, "EventAgeExceeded", 0)
        return records[len(expired) :]

    def _delivered(self, records: list[dict[str, Any]]) -> None:
        self.stats.delivered += len(records)
        self.stats.batches += 1
        now = time.time()
        self.stats.lags.extend((now, now - _created(record)) for record in records)
        self._checkpoint(_sequence(records[-1]))

    def _send_to_failure_queue(self, records: list[dict[str, Any]], condition: str, attempts: int) -> None:
        info = failed.batch_info(
            records,
            stream_arn=self.stream_arn,
            shard=self.shard,
            function_arn=self.function_arn,
            condition=condition,
            attempts=attempts,
        )
        if self.on_failure is not None:
            self.on_failure(info)
        self.stats.sent_to_failure_queue += len(records)
        log.warning("%s: %d record(s) to the failure queue (%s)", self.settings.name, len(records), condition)
        self._checkpoint(_sequence(records[-1]))

    # --- windows and positions ----------------------------------------------------------------

    def _window_over(self) -> bool:
        """The open window is done: the next record belongs to a later one, or its end has passed
        with nothing of it left to deliver."""
        if self.window is None:
            return False
        if self.buffer:
            return self._window_of(self.buffer[0]) != self.window
        return time.time() >= self.window[1]

    def _close_window(self) -> bool:
        """The window's final invocation, with the state the last one returned; whether it succeeded.
        Lambda retries a failed one and processes nothing more of the shard until it succeeds."""
        assert self.window is not None
        if time.monotonic() < self.final_retry_at:
            return False
        try:
            error = self._refusal(self.invoke(self._event([], final=True)))
        except FunctionError as raised:
            error = str(raised)
        if error:
            self.final_attempts += 1
            self.stats.retries += 1
            self.stats.last_error = f"final invocation of the window: {error}"[:300]
            start, end = (_iso(t) for t in self.window)
            self.stats.blocked = (f"the final invocation of window {start}..{end} failed "
                                  f"{self.final_attempts} time(s); the shard waits for it")  # fmt: skip
            self.final_retry_at = time.monotonic() + min(0.05 * 2**self.final_attempts, 2.0)
            return False
        self.window, self.state = None, {}
        self.final_attempts, self.final_retry_at, self.stats.blocked = 0, 0.0, ""
        return True

    def _checkpoint(self, sequence: int) -> None:
        if self._in_lanes:
            return
        self.stats.position = str(sequence)
        self.checkpoints.set(self.settings.name, self.stream_arn, self.shard, str(sequence))

    def _checkpoint_passed(self) -> None:
        """Filtered records between delivered batches are done too, once what precedes them is."""
        head = _sequence(self.buffer[0]) if self.buffer else None
        last = None
        while self.passed and (head is None or self.passed[0] < head):
            last = self.passed.popleft()
        if last is not None:
            self._checkpoint(last)

    def _measure_lag(self) -> None:
        self.stats.lag_records = len(self.buffer)
        self.stats.lag_s = time.time() - _created(self.buffer[0]) if self.buffer else 0.0

    # --- running ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Poll until `stop`; then deliver what was read, so nothing read is left undelivered."""
        while not stop.is_set():
            try:
                came = self.read()
                self.deliver_due()
            except Exception as error:  # the emulator keeps polling, as Lambda does
                self.stats.last_error = f"{type(error).__name__}: {error}"[:300]
                log.exception("%s: poller error", self.settings.name)
                stop.wait(1.0)
                continue
            self.stats.caught_up = not came and not self.buffer and not self.final_attempts
            if came < PAGE:  # a full page: more is waiting, read on at once
                stop.wait(POLL_INTERVAL_S)
        self.deliver_due(draining=True)
