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
`ParallelizationFactor` N runs up to N batches of a shard at once, each item's records (partition
and sort key) in one lane, in order. Positions are saved under `.local/` after every batch.

The same poller serves a Kinesis stream's shard (local/kinesis/models.py): its reader says how the
source's records are read (`Shape`: sequence number, arrival time, what filters see, the failure
record's batch info).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hybridsync.local.awslambda.functions import FunctionError
from hybridsync.local.dynamodb.models import TrimmedDataAccess
from hybridsync.local.dynamodb.streams import PAGE, ShardReader
from hybridsync.model import keys
from hybridsync.streams import filters
from hybridsync.streams.records import created

log = logging.getLogger(__name__)
POLL_INTERVAL_S = 0.25  # Lambda polls each shard about four times a second
STATE_LIMIT = 1024 * 1024  # a tumbling window's state per shard; past it Lambda ends the window early
THROTTLE_BACKOFF_S = 1.0  # a throttled invocation is retried after this, without using an attempt


@dataclass(frozen=True)
class Shape:
    """What a mapping needs to know of its source's records."""

    batch_info: str  # the failure record's section: DDBStreamBatchInfo or KinesisBatchInfo
    number: Callable[[dict[str, Any]], str]  # the sequence number, as the source spells it
    created: Callable[[dict[str, Any]], float]  # epoch seconds: age, lag, windows
    item: Callable[[dict[str, Any]], Any]  # what keeps one lane's order (parallelization)
    filterable: Callable[[dict[str, Any]], dict[str, Any]]  # what FilterCriteria patterns see

    def sequence(self, record: dict[str, Any]) -> int:
        return int(self.number(record))


DYNAMODB = Shape(
    "DDBStreamBatchInfo",
    number=lambda r: r["dynamodb"]["SequenceNumber"],
    created=created,
    item=lambda r: r["dynamodb"].get("Keys"),  # Lambda keeps each item's order (partition and sort key)
    filterable=lambda r: r,
)


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
        """Raises filters.InvalidPattern for a filter Lambda refuses when the mapping is created."""
        criteria = properties.get("FilterCriteria") or {}
        return cls(
            name=name,
            batch_size=int(properties.get("BatchSize", 100)),
            batching_window_s=float(properties.get("MaximumBatchingWindowInSeconds", 0)),
            starting_position=properties.get("StartingPosition", "TRIM_HORIZON"),
            patterns=tuple(filters.parse(f["Pattern"]) for f in criteria.get("Filters", [])),
            max_retries=int(properties.get("MaximumRetryAttempts", -1)),
            max_age_s=int(properties.get("MaximumRecordAgeInSeconds", -1)),
            bisect=bool(properties.get("BisectBatchOnFunctionError", False)),
            report_failures="ReportBatchItemFailures" in properties.get("FunctionResponseTypes", []),
            tumbling_window_s=int(properties.get("TumblingWindowInSeconds", 0)),
            parallelization=int(properties.get("ParallelizationFactor", 1)),
        )


def destination(
    arn: str, client: Callable[[str], Any], mapping_id: str
) -> Callable[[dict[str, Any], list[dict[str, Any]]], None]:
    """What sends a failure record to an `OnFailure` destination, by its ARN's service, as Lambda
    does: an SQS message, an SNS message, or an S3 object that also carries the batch's records
    (`payload`, recorded: on_failure_s3_function_error) under
    `aws/lambda/<mapping UUID>/<shard>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<uuid>` (Lambda developer
    guide, "Retain discarded batch records", Kinesis and DynamoDB alike). `client(service)` gives
    the clients."""
    service, name = arn.split(":")[2], arn.split(":")[-1]
    if service == "sqs":
        sqs = client("sqs")
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        return lambda info, records: sqs.send_message(QueueUrl=url, MessageBody=json.dumps(info))
    if service == "sns":
        sns = client("sns")
        return lambda info, records: sns.publish(TopicArn=arn, Message=json.dumps(info))
    if service == "s3":
        s3 = client("s3")

        def put(info: dict[str, Any], records: list[dict[str, Any]] | None) -> None:
            at = datetime.now(UTC)
            shard = next(info[k] for k in ("DDBStreamBatchInfo", "KinesisBatchInfo") if k in info)["shardId"]
            key = f"aws/lambda/{mapping_id}/{shard}/{at:%Y/%m/%d}/{at:%Y-%m-%dT%H.%M.%S}-{uuid.uuid4()}"
            body = info if records is None else info | {"payload": {"Records": records}}
            s3.put_object(Bucket=name, Key=key, Body=json.dumps(body))

        return put
    raise ValueError(f"an OnFailure destination must be an SQS queue, SNS topic or S3 bucket, not {arn}")


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
            self._save()

    def forget(self, mapping: str, stream: str, shard: str) -> None:
        """A shard the stream deleted: its position means nothing any more (Lambda drops its lease)."""
        with self._lock:
            if self._positions.get(mapping, {}).get(stream, {}).pop(shard, None) is not None:
                self._save()

    def _save(self) -> None:
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
    trimmed: int = 0  # records the stream trimmed before this mapping read them
    lags: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=100_000))  # (at, lag s)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def failure_record(records: list[dict[str, Any]], *, stream_arn: str, shard: str, function_arn: str,
                   condition: str, invokes: int, function_error: str | None = None,
                   shape: Shape = DYNAMODB) -> dict[str, Any]:  # fmt: skip
    """The invocation record Lambda sends a stream mapping's on-failure destination: the batch's
        metadata, not its records. As recorded against AWS (on_failure_*_function_error,
        report_batch_item_failures, record_age_exceeded_*): a UUID request id; `functionError`
        "Unhandled" when the function raised or timed out, null when it returned a response that failed
        the batch; no `responseContext` for records that grew too old; arrival times in seconds, the
        record's `timestamp` in milliseconds. A Kinesis mapping's names its batch `KinesisBatchInfo`
    (recorded: test_lambda_integration_kinesis report_batch_item_failures, record_age_exceeded_*)."""
    request = {"requestId": str(uuid.uuid4()), "functionArn": function_arn, "condition": condition,
               "approximateInvokeCount": invokes}  # fmt: skip
    body: dict[str, Any] = {"requestContext": request}
    if condition != "RecordAgeExceeded":
        body["responseContext"] = {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": function_error,
        }
    return body | {
        "version": "1.0",
        "timestamp": keys.iso_ms(datetime.now(UTC)),
        shape.batch_info: {
            "shardId": shard,
            "startSequenceNumber": shape.number(records[0]),
            "endSequenceNumber": shape.number(records[-1]),
            "approximateArrivalOfFirstRecord": _iso(shape.created(records[0])),
            "approximateArrivalOfLastRecord": _iso(shape.created(records[-1])),
            "batchSize": len(records),
            "streamArn": stream_arn,
        },
    }


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
        on_failure: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None,
        function_arn: str = "",
        stats: MappingStats | None = None,
        retention_s: float | None = None,
        switch: Any = None,
        metric: Callable[[str, float], None] | None = None,
    ):
        self.settings, self.invoke = settings, invoke
        self.metric = metric or (lambda name, value: None)  # what Lambda counts (local/cloudwatch/alarms.py)
        # the mapping's Enabled (local/awslambda/responses.py): disabled, it neither reads nor delivers
        self.switch = switch
        if switch is not None:
            switch.join(self)
        self.retention_s = retention_s  # the stream's (24 h in AWS): no record is delivered older
        self.stream_arn, self.shard, self.checkpoints = stream_arn, shard, checkpoints
        # a reader shared with the shard's other mappings (a ShardReader, or a shard of a
        # `shards.Topology`), or a client to read alone with
        self.reader = streams if hasattr(streams, "take") else ShardReader(streams, stream_arn, shard)
        self.shape: Shape = getattr(self.reader, "shape", DYNAMODB)
        self.poll_interval_s: float = getattr(self.reader, "poll_interval_s", POLL_INTERVAL_S)
        position = checkpoints.get(settings.name, stream_arn, shard)
        self.reader.register(self, position, settings.starting_position)
        self.on_failure, self.function_arn = on_failure, function_arn
        self.stats = stats or MappingStats()
        self.buffer: deque[dict[str, Any]] = deque()  # admitted, not yet delivered
        self.passed: deque[dict[str, Any]] = deque()  # filtered-out records behind the buffer's head
        self.first_buffered_at = 0.0
        self.window: tuple[float, float] | None = None  # the open tumbling window and its state
        self.state: dict[str, Any] = {}
        self.final_attempts = 0  # failed final invocations of the open window so far
        self.terminated_early = False  # the window's state passed 1 MB: its final invocation is due now
        self.final_retry_at = 0.0  # monotonic time of the next one
        if position:
            self.stats.position = position
        self._in_lanes = False  # lanes checkpoint together, when all are done
        self.done = False  # a sealed shard delivered to its end
        self.read_through = 0.0  # wall time before which every record written was read (and measured)

    # --- reading ------------------------------------------------------------------------------

    def read(self) -> int:
        """Take what the shard has past this poller's last record; returns how many came (PAGE when
        a full page came: more is waiting)."""
        try:
            records, more = self.reader.take(self)
        except TrimmedDataAccess as trimmed:
            self._lost_to_trim(trimmed.lost)
            return 0
        if records:
            self.metric("PolledEventCount", len(records))
        done = None  # the last filtered-out record with nothing waiting before it: done once read
        for record in records:
            if filters.admits(self.settings.patterns, self.shape.filterable(record)):
                if not self.buffer:
                    self.first_buffered_at = time.monotonic()
                self.buffer.append(record)
            else:
                self.stats.filtered += 1
                self.metric("FilteredOutEventCount", 1)
                if self.buffer:
                    self.passed.append(record)
                else:
                    done = record
        if done is not None:  # one position saved per page, not one per record
            self._checkpoint(done)
        self._measure_lag()
        if not records:  # the lag just measured counts every record written before this
            self.read_through = self.reader.read_through
        return PAGE if more else len(records)

    def _lost_to_trim(self, lost: list[dict[str, Any]]) -> None:
        """Records trimmed from the stream before this poller read them: gone. The poller goes on
        at the trim horizon; the ones its filters admit go to the failure destination as records
        too old to deliver, so `failed-batches` shows them (their redrive finds them gone) and
        `reconcile --repair` is the way back. AWS records nothing for this case (it needs a
        consumer a full retention period behind); the README says so."""
        admitted = [r for r in lost if filters.admits(self.settings.patterns, self.shape.filterable(r))]
        self.stats.trimmed += len(lost)
        self.stats.last_error = f"TrimmedDataAccessException: {len(lost)} record(s) trimmed before read"
        if admitted:  # Lambda never held them: their metadata alone, even to S3
            self._send_to_failure_queue(admitted, "RecordAgeExceeded", 1, payload=False)

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
        """`ParallelizationFactor` N: up to N batches of the shard at once, each item's records in
        one lane, in order. The shard's position moves once every lane is done."""
        lanes_n = self.settings.parallelization
        taken = list(itertools.islice(self.buffer, self.settings.batch_size * lanes_n))
        lanes: list[list[dict[str, Any]]] = [[] for _ in range(lanes_n)]
        for record in taken:  # Lambda keeps each item's order (Kinesis: its partition key), no more
            item = json.dumps(self.shape.item(record), sort_keys=True)
            lanes[keys.shard_of(item, lanes_n)].append(record)
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
        self._checkpoint(taken[-1])
        return taken

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
        start = self.shape.created(record) // size * size
        return (start, start + size)

    def _event(self, records: list[dict[str, Any]], final: bool = False) -> dict[str, Any]:
        event: dict[str, Any] = {"Records": records}
        if self.settings.tumbling_window_s and self.window is not None:
            start, end = self.window
            event |= {"window": {"start": _iso(start), "end": _iso(end)}, "state": self.state,
                      "shardId": self.shard, "eventSourceARN": self.stream_arn,
                      "isFinalInvokeForWindow": final,
                      "isWindowTerminatedEarly": self.terminated_early}  # fmt: skip
        return event

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        work: deque[tuple[list[dict[str, Any]], int]] = deque([(batch, 0)])
        while work:
            records, attempts = work.popleft()
            records = self._drop_expired(records, attempts)
            if not records:
                continue
            raised = False
            age_ms = (time.time() - self.shape.created(records[-1])) * 1000  # the batch's last
            self.metric("IteratorAge", age_ms)
            self.metric("InvokedEventCount", len(records))
            try:
                response = self.invoke(self._event(records))
                error = self._refusal(response)
            except FunctionError as failure:
                if failure.error_type == "TooManyRequestsException":  # throttled: retried, no attempt used
                    self.stats.last_error = str(failure)[:300]
                    time.sleep(THROTTLE_BACKOFF_S)
                    work.appendleft((records, attempts))
                    continue
                error, raised = str(failure), True
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
                    self.terminated_early = len(json.dumps(self.state)) > STATE_LIMIT
            done = records[: len(records) - len(failed)]
            if done:
                self._delivered(done)
            if not failed:
                continue
            # A partial failure that moved the checkpoint makes what is left a batch of its own, its
            # invocations counted afresh (recorded: the failed record was delivered once in its batch,
            # then 4 times alone, and its record says approximateInvokeCount 4 with 3 retries).
            attempts = 0 if done else attempts + 1
            if 0 <= self.settings.max_retries < attempts:
                self._send_to_failure_queue(
                    failed, "RetryAttemptsExhausted", attempts, "Unhandled" if raised else None
                )
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
        sequences = {self.shape.number(r) for r in records}
        try:
            lowest = min(int(f["itemIdentifier"]) for f in failures if f["itemIdentifier"] in sequences)
        except (KeyError, TypeError, ValueError):
            self.stats.last_error = f"malformed batchItemFailures: {failures!r}"[:300]
            return records
        self.stats.last_error = f"{len(failures)} item(s) reported failed"
        return [r for r in records if self.shape.sequence(r) >= lowest]

    def _drop_expired(self, records: list[dict[str, Any]], invokes: int) -> list[dict[str, Any]]:
        """Records older than `MaximumRecordAgeInSeconds` go to the failure destination with the
        invocations so far (1 when none was made yet, as recorded)."""
        ages = [a for a in (self.settings.max_age_s, self.retention_s) if a is not None and a >= 0]
        if not ages:
            return records
        oldest_allowed = time.time() - min(ages)
        expired = [r for r in records if self.shape.created(r) < oldest_allowed]
        if expired:  # expired records sit in front: the stream is in order
            self._send_to_failure_queue(expired, "RecordAgeExceeded", max(invokes, 1))
        return records[len(expired) :]

    def _delivered(self, records: list[dict[str, Any]]) -> None:
        self.stats.delivered += len(records)
        self.stats.batches += 1
        now = time.time()
        self.stats.lags.extend((now, now - self.shape.created(record)) for record in records)
        self._checkpoint(records[-1])

    def _send_to_failure_queue(self, records: list[dict[str, Any]], condition: str, invokes: int,
                               function_error: str | None = None, payload: bool = True) -> None:  # fmt: skip
        info = failure_record(records, stream_arn=self.stream_arn, shard=self.shard,
                              function_arn=self.function_arn, condition=condition, invokes=invokes,
                              function_error=function_error, shape=self.shape)  # fmt: skip
        if self.on_failure is not None:
            try:
                self.on_failure(info, records if payload else None)
                self.metric("OnFailureDestinationDeliveredEventCount", len(records))
            except Exception as error:  # the records are skipped all the same
                log.error("%s: the failure destination refused a batch: %s", self.settings.name, error)
                self.metric("DestinationDeliveryFailures", 1)
        self.stats.sent_to_failure_queue += len(records)
        log.warning(
            "%s: %d record(s) to the failure destination (%s)", self.settings.name, len(records), condition
        )
        self._checkpoint(records[-1])

    # --- windows and positions ----------------------------------------------------------------

    def _window_over(self) -> bool:
        """The open window is done: the next record belongs to a later one, or its end has passed
        with nothing of it left to deliver."""
        if self.window is None:
            return False
        if self.terminated_early:
            return True
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
        if not self.terminated_early:
            self.window = None
        self.state, self.terminated_early = {}, False  # an early end goes on in the same window, afresh
        self.final_attempts, self.final_retry_at, self.stats.blocked = 0, 0.0, ""
        return True

    def _checkpoint(self, record: dict[str, Any]) -> None:
        """The shard is done up to `record` (its sequence number kept as the stream spells it)."""
        if self._in_lanes:
            return
        sequence = self.shape.number(record)
        self.stats.position = sequence
        self.checkpoints.set(self.settings.name, self.stream_arn, self.shard, sequence)

    def _checkpoint_passed(self) -> None:
        """Filtered records between delivered batches are done too, once what precedes them is. One
        that lay inside the batch just delivered is behind its checkpoint already: the position never
        moves back (a restart would deliver that batch's last record again)."""
        head = self.shape.sequence(self.buffer[0]) if self.buffer else None
        last = None
        while self.passed and (head is None or self.shape.sequence(self.passed[0]) < head):
            last = self.passed.popleft()
        if last is not None and self.shape.sequence(last) > int(self.stats.position or -1):
            self._checkpoint(last)

    def _measure_lag(self) -> None:
        self.stats.lag_records = len(self.buffer)
        self.stats.lag_s = time.time() - self.shape.created(self.buffer[0]) if self.buffer else 0.0

    # --- running ------------------------------------------------------------------------------

    def finished(self) -> bool:
        """A sealed shard read to its end, all of it delivered and its window closed: done."""
        if self.buffer or not self.reader.drained(self):
            return False
        return self.window is None or self._close_window()

    def run(self, stop: threading.Event) -> None:
        """Poll until `stop`, or until a sealed shard is done (its children may start then);
        then deliver what was read, so nothing read is left undelivered."""
        while not stop.is_set():
            if self.switch is not None and not self.switch.may_poll(self):
                stop.wait(self.poll_interval_s)
                continue
            try:
                came = self.read()
                self.deliver_due(draining=self.reader.drained(self))
                if self.finished():
                    self.reader.release(self)
                    self.done = True
                    return
            except Exception as error:  # the emulator keeps polling, as Lambda does
                self.stats.last_error = f"{type(error).__name__}: {error}"[:300]
                log.exception("%s: poller error", self.settings.name)
                stop.wait(1.0)
                continue
            self.stats.caught_up = not came and not self.buffer and not self.final_attempts
            if came < PAGE:  # a full page: more is waiting, read on at once
                stop.wait(self.poll_interval_s)
        self.deliver_due(draining=True)
