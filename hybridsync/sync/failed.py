"""Failed batches: what an event source mapping gave up on, read back and redriven.

When a batch still fails after the mapping's retries (or outlives its maximum record age), Lambda
skips it and sends its metadata (an invocation record whose `DDBStreamBatchInfo` names the stream,
shard, first and last sequence number; the platform writes it, locally `hybridsync.local.mappings`)
to the consumer's on-failure queue; the records stay in the stream for 24 h. `pending`
lists those messages, `redrive` reads each batch's records back from the stream (as the mapping
delivered them: the consumer's filters applied), hands them to the consumer's library function
and deletes the message only once they are applied. Both consumers apply a redriven batch exactly
once in effect: the write-back by its version guards, the aggregation by its journaled ranges.
A batch whose records the stream no longer holds is reported and left in the queue:
`hybridsync reconcile --repair` is then the way back for the write-back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from hybridsync import deadletters, filters
from hybridsync.declare import Model
from hybridsync.records import DeadLetter, lambda_record, sequence
from hybridsync.sync import aggregate, writeback

# A queue or function named after its consumer's construct (`WriteBackFailures`, `Aggregate...`).
CONSUMERS = {"WriteBack": writeback.SOURCE, "Aggregate": aggregate.SOURCE}
HOLD_S = 120  # a received message stays invisible this long: one redrive at a time per batch


class Gone(Exception):
    """The stream no longer holds the batch's records (kept 24 h)."""


@dataclass(frozen=True)
class FailedBatch:
    queue_url: str
    message_id: str
    receipt: str = field(repr=False)
    consumer: str | None  # write_back, aggregate, or None when the names tell nothing
    condition: str  # RetryAttemptsExhausted, EventAgeExceeded, ...
    attempts: int
    at: str
    stream_arn: str
    shard: str
    first: str  # sequence numbers as the stream spells them (21 digits, zero-padded)
    last: str
    size: int

    @classmethod
    def parse(cls, queue_url: str, message: dict[str, Any]) -> FailedBatch:
        body = json.loads(message["Body"])
        info, context = body["DDBStreamBatchInfo"], body.get("requestContext", {})
        names = f"{queue_url} {context.get('functionArn', '')}"
        consumer = next((source for name, source in CONSUMERS.items() if name in names), None)
        return cls(
            queue_url,
            message["MessageId"],
            message["ReceiptHandle"],
            consumer,
            context.get("condition", "?"),
            int(context.get("approximateInvokeCount", 0)),
            body.get("timestamp", ""),
            info["streamArn"],
            info["shardId"],
            info["startSequenceNumber"],
            info["endSequenceNumber"],
            int(info["batchSize"]),
        )


def pending(sqs: Any, queue_url: str, *, hold_s: int = HOLD_S) -> list[FailedBatch]:
    """Every failed batch in the queue; each is hidden from other readers for `hold_s` (SQS has no
    way to look without receiving), then visible again unless it was redriven."""
    batches: list[FailedBatch] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=hold_s, WaitTimeSeconds=0
        )
        if not got.get("Messages"):
            return batches
        batches += [FailedBatch.parse(queue_url, m) for m in got["Messages"]]


def stream_records(streams: Any, batch: FailedBatch) -> list[dict[str, Any]]:
    """The batch's records, first to last, in the shape the mapping delivers them."""
    try:
        iterator = streams.get_shard_iterator(
            StreamArn=batch.stream_arn,
            ShardId=batch.shard,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=batch.first,
        )["ShardIterator"]
    except streams.exceptions.TrimmedDataAccessException:
        raise Gone(f"the stream no longer holds {batch.first}..{batch.last} (24 h retention)") from None
    records: list[dict[str, Any]] = []
    while iterator:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        for raw in page["Records"]:
            if sequence(raw) > int(batch.last):
                return records
            records.append(lambda_record(raw, batch.stream_arn))
        if not page["Records"]:  # an open shard's end: nothing more was written
            break
        iterator = page.get("NextShardIterator")
    if not records or sequence(records[0]) != int(batch.first):
        raise Gone(f"the stream no longer holds record {batch.first} of the batch")
    return records


@dataclass
class Redriven:
    batches: int = 0
    records: int = 0  # records of the batches, as the consumer's filters deliver them
    applied: int = 0  # of those, changed something now (the rest had been applied already)
    left: list[tuple[FailedBatch, str]] = field(default_factory=list)  # (batch, why it stays)


def apply(
    batch: FailedBatch,
    records: list[dict[str, Any]],
    *,
    client: Any,
    tables: Mapping[str, str],
    engine: sa.Engine,
    model: Model,
) -> int:
    """Hand a failed batch's records to its consumer (as its mapping's filters deliver them); how
    many changed something. `tables`: logical -> physical names of the model's tables."""
    if batch.consumer == writeback.SOURCE:
        delivered = [r for r in records if filters.admits(writeback.event_filters(model), r)]
        return writeback.write_back(delivered, engine, model).changed
    logical = aggregate.source_table(model, tables, batch.stream_arn)
    folding = aggregate.Aggregation(model, logical)
    delivered = [r for r in records if filters.admits(folding.event_filters(), r)]

    def store_dead_letters(letters: list[DeadLetter]) -> None:
        with engine.begin() as conn:
            deadletters.store(conn, aggregate.SOURCE, letters)

    outcome = folding.redrive(delivered, client, tables[logical], batch.shard, dead_letter=store_dead_letters)
    return outcome.applied


def redrive(
    sqs: Any,
    streams: Any,
    queue_urls: list[str],
    *,
    client: Any,
    tables: Mapping[str, str],
    engine: sa.Engine,
    model: Model,
    progress: Callable[[FailedBatch], None] | None = None,
) -> Redriven:
    """Redrive every failed batch of the queues; a batch leaves its queue only once applied."""
    done = Redriven()
    for url in queue_urls:
        for batch in pending(sqs, url):
            if batch.consumer is None:
                done.left.append((batch, "no consumer is named in the queue or function name"))
                continue
            try:
                records = stream_records(streams, batch)
                done.applied += apply(
                    batch, records, client=client, tables=tables, engine=engine, model=model
                )
            except Gone as gone:
                done.left.append((batch, str(gone)))
                continue
            except Exception as error:  # left in the queue, with the reason, to retry
                done.left.append((batch, f"{type(error).__name__}: {error}"))
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=batch.receipt, VisibilityTimeout=0)
                continue
            sqs.delete_message(QueueUrl=url, ReceiptHandle=batch.receipt)
            done.batches += 1
            done.records += len(records)
            if progress:
                progress(batch)
    return done
