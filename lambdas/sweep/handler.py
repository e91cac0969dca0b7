"""Orphan sweep: chunks and S3 objects of review bodies that no review names any more (a writer
that died between its body and its item, or an old body S3 failed to delete). Runs on a schedule."""

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync import settings
from hybridsync.runtime import dynamodb, s3
from hybridsync.writes import reviews

logger = Logger()
metrics = Metrics()


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    place = reviews.Place(settings.table_name("chunks"), s3(), settings.bucket_name("bodies"))
    grace = int(os.environ.get("SWEEP_GRACE_S", "900"))
    swept = reviews.sweep(dynamodb(), settings.table_name("main"), place, older_than_s=grace)
    metrics.add_metric("OrphanChunksSwept", MetricUnit.Count, swept["chunks"])
    metrics.add_metric("OrphanObjectsSwept", MetricUnit.Count, swept["objects"])
    logger.info("swept orphaned review bodies", extra=swept)
    return swept
