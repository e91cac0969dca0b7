"""Failed batches: what an event source mapping gave up on, read back and redriven.

When a batch still fails after the mapping's retries (or outlives its maximum record age), Lambda
skips it and sends its invocation record (`DDBStreamBatchInfo` names the stream, shard, first and
last sequence number; the platform writes it, locally `hybridsync.local.awslambda.mappings`) to the mapping's
on-failure destination. The stack's is an S3 bucket: Lambda stores the whole invocation record
there, the batch's records included (`payload`), under `aws/lambda/<mapping>/<shard>/...` (Lambda
developer guide, "Retain discarded records"), kept until the bucket's lifecycle expires it, long
after the stream (24 h) forgot them. An SQS destination gets the metadata alone: its batches are read
back from the stream, while it still holds them.

`BucketStore` / `QueueStore` list what is stored; `redrive` hands each batch's records to the
consumer's library function (as the mapping delivered them: its filters applied) and removes the
batch only once they are applied. Both consumers apply a redriven batch exactly once in effect: the
write-back by its version guards, the aggregation by its journaled ranges. A queued batch whose
records the stream no longer holds is reported and left: `hybridsync reconcile --repair` is then the
way back for the write-back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlalchemy as sa

from hybridsync.model.declare import Model
from hybridsync.sql import deadletters
from hybridsync.streams import changes as stream
from hybridsync.streams import filters
from hybridsync.streams.records import DeadLetter, lambda_record, sequence
from hybridsync.sync import aggregate, writeback

# A queue or function named after its consumer's construct (`WriteBackFailures`, `Aggregate...`).
CONSUMERS = {"WriteBack": writeback.SOURCE, "Aggregate": aggregate.SOURCE}
HOLD_S = 120  # a received message stays invisible this long: one redrive at a time per batch
PREFIX = "aws/lambda/"  # where Lambda puts a stream mapping's failed batches in an S3 destination


def _payload(body: dict[str, Any]) -> dict[str, Any]:
    """The invocation's event an S3 destination stores with the record: an object, or the same JSON
    as a string (the Lambda guide shows the function's payload as the event it was given; a
    string of it is read the same)."""
    payload = body.get("payload") or {}
    return json.loads(payload) if isinstance(payload, str) else payload


class Gone(Exception):
    """The stream no longer holds the batch's records (kept 24 h)."""


@dataclass(frozen=True)
class FailedBatch:
    place: str  # the queue's URL, or s3://bucket
    message_id: str  # the message's id, or the object's key
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
    records: list[dict[str, Any]] | None = field(default=None, repr=False)  # stored with it (S3)

    @classmethod
    def parse(cls, place: str, ident: str, receipt: str, body: dict[str, Any]) -> FailedBatch:
        """From an invocation record (recorded: on_failure_sqs_function_error, ..._s3_...)."""
        info = stream.batch_info(body)  # DDBStreamBatchInfo, KinesisBatchInfo (recorded), ...
        context = body.get("requestContext", {})
        names = f"{place} {context.get('functionArn', '')}"
        consumer = next((source for name, source in CONSUMERS.items() if name in names), None)
        return cls(
            place,
            ident,
            receipt,
            consumer,
            context.get("condition", "?"),
            int(context.get("approximateInvokeCount", 0)),
            body.get("timestamp", ""),
            info["streamArn"],
            info["shardId"],
            info["startSequenceNumber"],
            info["endSequenceNumber"],
            int(info["batchSize"]),
            _payload(body).get("Records"),
        )


class Store(Protocol):
    """Where a mapping's failed batches are kept."""

    def pending(self) -> list[FailedBatch]: ...
    def remove(self, batch: FailedBatch) -> None: ...  # redriven: gone for good
    def release(self, batch: FailedBatch) -> None: ...  # not redriven: visible again at once


@dataclass
class BucketStore:
    """The stack's failure bucket: one object per failed batch, its records included."""

    s3: Any
    bucket: str

    def pending(self) -> list[FailedBatch]:
        batches = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=PREFIX):
            for entry in page.get("Contents", []):
                body = json.loads(self.s3.get_object(Bucket=self.bucket, Key=entry["Key"])["Body"].read())
                batches.append(FailedBatch.parse(f"s3://{self.bucket}", entry["Key"], "", body))
        return sorted(batches, key=lambda b: (b.at, b.message_id))

    def remove(self, batch: FailedBatch) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=batch.message_id)

    def release(self, batch: FailedBatch) -> None:
        pass  # an object is there for every reader until removed


@dataclass
class QueueStore:
    """An SQS on-failure queue: the batches' metadata; each received one is hidden from other readers
    for `hold_s` (SQS has no way to look without receiving), then visible again unless redriven."""

    sqs: Any
    url: str
    hold_s: int = HOLD_S

    def pending(self) -> list[FailedBatch]:
        batches: list[FailedBatch] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.url, MaxNumberOfMessages=10, VisibilityTimeout=self.hold_s, WaitTimeSeconds=0
            )
            if not got.get("Messages"):
                return batches
            batches += [FailedBatch.parse(self.url, m["MessageId"], m["ReceiptHandle"], json.loads(m["Body"]))
                        for m in got["Messages"]]  # fmt: skip

    def remove(self, batch: FailedBatch) -> None:
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=batch.receipt)

    def release(self, batch: FailedBatch) -> None:
        self.sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=batch.receipt, VisibilityTimeout=0
        )


def store_at(place: str, aws: Callable[[str], Any]) -> Store:
    """`s3://bucket` or a bucket's name -> its BucketStore; a queue URL -> its QueueStore."""
    if place.startswith(("http://", "https://")):
        return QueueStore(aws("sqs"), place)
    return BucketStore(aws("s3"), place.removeprefix("s3://"))


def stream_records(streams: Any, batch: FailedBatch) -> list[dict[str, Any]]:
    """The batch's records, first to last, in the shape the mapping delivers them."""
    if not (source := stream.source_of_stream(batch.stream_arn)).read_back:
        raise Gone(
            f"a {source.title} mapping's batch is redriven from the records its S3 destination stored "
            "(the stacks' failure bucket keeps them); this destination kept none"
        )
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
    read = stream.read(records)  # once: a Kinesis record as its change
    if batch.consumer == writeback.SOURCE:
        delivered = read.where(lambda r: filters.admits(writeback.event_filters(model), r))
        # a batch of any age, from any shard: every change settled from the table as it is now
        truth = writeback.Truth(client, tables)
        return writeback.write_back(delivered, engine, model, truth=truth, verify=True).changed
    logical = aggregate.source_table(model, tables, read.table_arn(batch.stream_arn))
    folding = aggregate.Aggregation(model, logical)
    delivered = read.where(lambda r: filters.admits(folding.event_filters(), r))

    def store_dead_letters(letters: list[DeadLetter]) -> None:
        with engine.begin() as conn:
            deadletters.store(conn, aggregate.SOURCE, letters)

    outcome = folding.redrive(delivered, client, tables[logical], batch.shard, dead_letter=store_dead_letters)
    return outcome.applied


def redrive(
    places: list[Store],
    streams: Any,
    *,
    client: Any,
    tables: Mapping[str, str],
    engine: sa.Engine,
    model: Model,
    progress: Callable[[FailedBatch], None] | None = None,
) -> Redriven:
    """Redrive every failed batch of the stores; a batch leaves its store only once applied: with
    the records stored beside it, or else read back from the stream."""
    done = Redriven()
    for store in places:
        for batch in store.pending():
            if batch.consumer is None:
                done.left.append((batch, "no consumer is named in the queue or function name"))
                continue
            try:
                records = batch.records if batch.records is not None else stream_records(streams, batch)
                done.applied += apply(
                    batch, records, client=client, tables=tables, engine=engine, model=model
                )
            except Gone as gone:
                done.left.append((batch, str(gone)))
                continue
            except Exception as error:  # left in the queue, with the reason, to retry
                done.left.append((batch, f"{type(error).__name__}: {error}"))
                store.release(batch)
                continue
            store.remove(batch)
            done.batches += 1
            done.records += len(records)
            if progress:
                progress(batch)
    return done
