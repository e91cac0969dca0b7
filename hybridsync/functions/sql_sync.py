"""Outbox drain: PostgreSQL changes -> DynamoDB views (hybridsync.sync.outbox does the work).

Runs on a schedule, and can be invoked right after a commit to cut the lag."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.runtime import dynamodb, engine, model, tables
from hybridsync.sync import outbox

logger = Logger()
metrics = Metrics()
SAFETY_MS = 15_000  # stop claiming new batches this close to the timeout


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    total = outbox.Drained()
    while context.get_remaining_time_in_millis() > SAFETY_MS:
        if not total.add(outbox.drain(engine(), dynamodb(), model(), tables())).claimed:
            break
    metrics.add_metric("OutboxDrained", MetricUnit.Count, total.claimed)
    metrics.add_metric("OutboxSuperseded", MetricUnit.Count, total.superseded)
    metrics.add_metric("OutboxAge", MetricUnit.Seconds, total.oldest_age_s)
    return {"claimed": total.claimed, "applied": total.applied, "superseded": total.superseded}
