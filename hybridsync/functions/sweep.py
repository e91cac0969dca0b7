"""Orphan sweep (pattern 18): the chunks and S3 objects of large bodies that no item names any more
(a writer that died between its body and its item, or an old body S3 failed to delete), for every
`Bodies` the model declares. Runs on a schedule."""

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.dynamodb import large
from hybridsync.runtime import clients, handling, settings
from hybridsync.runtime.clients import dynamodb, model, s3, tables

logger = Logger()
tracer = clients.tracer()
metrics = Metrics()


@handling.lambda_handler(logger, tracer, metrics)  # the doctor's probe first, then metrics, trace, log
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    grace = int(os.environ.get("SWEEP_GRACE_S", "900"))
    swept = {"chunks": 0, "objects": 0}
    for bodies in model().bodies:
        place = large.Place(tables()[bodies.chunks.table.name], s3(), settings.bucket_name("bodies"))
        found = large.sweep(bodies, dynamodb(), tables()[bodies.entity.table.name], place, older_than_s=grace)
        swept = {kind: swept[kind] + found[kind] for kind in swept}
    metrics.add_metric("OrphanChunksSwept", MetricUnit.Count, swept["chunks"])
    metrics.add_metric("OrphanObjectsSwept", MetricUnit.Count, swept["objects"])
    logger.info("swept orphaned bodies", extra=swept)
    return swept
