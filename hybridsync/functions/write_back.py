"""A table's changes (its DynamoDB stream, or Kinesis Data Streams for DynamoDB) -> PostgreSQL
write-back of the model's DynamoDB-mastered entities (hybridsync.sync.writeback does the work)."""

import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.runtime import clients, handling
from hybridsync.runtime.clients import engine, model
from hybridsync.sql import deadletters
from hybridsync.streams import changes, trail
from hybridsync.sync import writeback

logger = Logger()
tracer = clients.tracer()
metrics = Metrics()


@handling.lambda_handler(logger, tracer, metrics)  # the doctor's probe first, then metrics, trace, log
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    truth = writeback.Truth(clients.dynamodb(), clients.tables())
    batch = changes.read(event["Records"])  # each record read once, as its source's change
    outcome = writeback.write_back(batch, engine(), model(), truth=truth)
    # changed a row; the rest of what was sent changed nothing (a replay, or an older version)
    metrics.add_metric("WriteBackApplied", MetricUnit.Count, outcome.changed)
    metrics.add_metric("WriteBackUnchanged", MetricUnit.Count, outcome.applied - outcome.changed)
    metrics.add_metric("WriteBackSkipped", MetricUnit.Count, outcome.skipped)
    # items whose keys fit no entity of the model: a writer outside it, visible rather than silent
    metrics.add_metric("WriteBackUnplaced", MetricUnit.Count, outcome.unplaced)
    # items read to settle what the stream could not order (replays, a shard's children)
    metrics.add_metric("WriteBackItemsRead", MetricUnit.Count, outcome.read)
    # a change's trip, from its write in DynamoDB until PostgreSQL holds it (the batch's first change)
    if (freshness := batch.freshness_ms(time.time())) is not None:
        metrics.add_metric("Freshness", MetricUnit.Milliseconds, round(freshness))
    # each change's identity, for `hybridsync trace`; the batch's outcome beside it
    trail.log(logger, "changes written back", batch, applied=outcome.applied, changed=outcome.changed,
              skipped=outcome.skipped, dead_letters=len(outcome.rejected))  # fmt: skip
    if outcome.unplaced:
        logger.warning("items of no entity of the model", extra={"unplaced": outcome.unplaced})
    deadletters.report(metrics, logger, outcome.rejected)
    # The batch is one transaction: it landed whole (dead letters included), so no record failed.
    # Infrastructure failures raise instead, and the event source mapping retries the batch.
    return {"batchItemFailures": []}
