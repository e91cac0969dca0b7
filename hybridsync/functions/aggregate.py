"""A table's changes (its DynamoDB stream, or Kinesis Data Streams for DynamoDB) -> the model's
declared aggregates, exactly once (hybridsync.sync.aggregate).
One function for every table with aggregates: each batch names its stream, hence its table."""

import functools
import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.runtime import clients, handling
from hybridsync.runtime.clients import dynamodb, engine, model, tables
from hybridsync.sql import deadletters
from hybridsync.streams import changes, trail
from hybridsync.streams.records import DeadLetter
from hybridsync.sync import aggregate

logger = Logger()
tracer = clients.tracer()
metrics = Metrics()
# what the tumbling window's state carries
WINDOW_COUNTS = ("applied", "duplicates", "dead_letters", "conflicts_retried")


@functools.cache
def folding(table: str) -> aggregate.Aggregation:
    return aggregate.Aggregation(model(), table)


def store_dead_letters(letters: list[DeadLetter]) -> None:
    # The only reason this function talks to PostgreSQL: the engine (and SQLAlchemy with psycopg)
    # is built with the first poison record, so cold starts stay DynamoDB-only.
    with engine().begin() as conn:
        deadletters.store(conn, aggregate.SOURCE, letters)


@handling.lambda_handler(logger, tracer, metrics)  # the doctor's probe first, then metrics, trace, log
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    # Under a tumbling window Lambda requires `state` in every response, or it counts the invocation
    # as failed (and a failed final invocation stops the shard until it succeeds). The state carries
    # the window's counts, so its final invocation logs one line per shard and window.
    counts = {name: int((event.get("state") or {}).get(name, 0)) for name in WINDOW_COUNTS}
    if event.get("isFinalInvokeForWindow"):
        # Touches nothing that can fail: a pending journal is finished by the shard's next batch.
        logger.info("window closed", extra={"shardId": event.get("shardId"), "window": event.get("window"),
                                            **counts})  # fmt: skip
        metrics.add_metric("AggregateWindowsClosed", MetricUnit.Count, 1)
        return {"state": {}, "batchItemFailures": []}
    # With a tumbling window Lambda names the shard of the batch: the key of its exactly-once cursor.
    records = event["Records"]
    arn = event.get("eventSourceARN") or (records[0].get("eventSourceARN", "") if records else "")
    batch = changes.read(records)  # each record read once, as its source's change
    arn = batch.table_arn(arn)  # a Kinesis stream's records name their table inside
    table = aggregate.source_table(model(), tables(), arn)
    outcome = folding(table).aggregate(batch, dynamodb(), tables()[table], event.get("shardId", ""),
                                       dead_letter=store_dead_letters)  # fmt: skip
    metrics.add_metric("AggregatedRecords", MetricUnit.Count, outcome.applied)
    metrics.add_metric("DuplicateRecords", MetricUnit.Count, outcome.duplicates)
    metrics.add_metric("AggregateTransactions", MetricUnit.Count, outcome.transactions)
    metrics.add_metric("AggregateConflictsRetried", MetricUnit.Count, outcome.conflicts_retried)
    # a change's trip, from its write in DynamoDB until the aggregates count it (the batch's first)
    if (freshness := batch.freshness_ms(time.time())) is not None:
        metrics.add_metric("Freshness", MetricUnit.Milliseconds, round(freshness))
    if outcome.conflicts_retried or outcome.shards_pruned:  # another shard's batch wrote a hot item at once
        logger.info("batch aggregated", extra={"shardId": event.get("shardId"),
                                               "conflicts_retried": outcome.conflicts_retried,
                                               "shards_pruned": outcome.shards_pruned})  # fmt: skip
    # each change's identity, for `hybridsync trace`; what the batch folded beside it
    trail.log(logger, "changes folded", batch, applied=outcome.applied, duplicates=outcome.duplicates,
              dead_letters=len(outcome.rejected))  # fmt: skip
    deadletters.report(metrics, logger, outcome.rejected)
    counts["applied"] += outcome.applied
    counts["duplicates"] += outcome.duplicates
    counts["dead_letters"] += len(outcome.rejected)
    counts["conflicts_retried"] += outcome.conflicts_retried
    # A failure raises and the whole batch is retried: the retry skips what was journaled and
    # resumes the journal, which a partial report could not do better.
    return {"state": counts, "batchItemFailures": []}
