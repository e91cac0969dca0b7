"""Outbox drain: PostgreSQL changes -> DynamoDB views (hybridsync.sync.outbox does the work).

Runs on a schedule, and can be invoked right after a commit to cut the lag. Its figures are
emitted whatever happens, a failed drain included: the outbox's depth and the age of its oldest
change (`OutboxAge`, alarmed, missing data counting as breaching), rows applied, superseded,
dead-lettered and left for the next drain."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.runtime import clients, doctor
from hybridsync.runtime.clients import dynamodb, engine, model, tables
from hybridsync.sql import deadletters
from hybridsync.sync import outbox

logger = Logger()
tracer = clients.tracer()
metrics = Metrics()
SAFETY_MS = 15_000  # stop claiming new batches this close to the timeout


@doctor.answers  # `hybridsync doctor`'s probe, answered before anything else
@metrics.log_metrics
@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    total = outbox.Drained()
    try:
        while context.get_remaining_time_in_millis() > SAFETY_MS:
            step = total.add(outbox.drain(engine(), dynamodb(), model(), tables()))
            if not step.claimed or step.deferred:  # empty, or DynamoDB refused writes for now
                break
    finally:
        waiting = _backlog()
        emitted = {"OutboxDrained": total.claimed, "OutboxApplied": total.applied,
                   "OutboxSuperseded": total.superseded, "OutboxDeferred": total.deferred}  # fmt: skip
        for name, count in emitted.items():
            metrics.add_metric(name, MetricUnit.Count, count)
        deadletters.report(metrics, logger, total.rejected)
        if waiting is not None:  # else no OutboxAge: the alarm counts the missing point as breaching
            metrics.add_metric("OutboxDepth", MetricUnit.Count, waiting.depth)
            metrics.add_metric("OutboxAge", MetricUnit.Seconds, max(total.oldest_age_s, waiting.oldest_age_s))
    return {"claimed": total.claimed, "applied": total.applied, "superseded": total.superseded,
            "dead_lettered": total.dead_lettered, "deferred": total.deferred,
            "depth": waiting.depth if waiting else None}  # fmt: skip


def _backlog() -> outbox.Backlog | None:
    try:
        return outbox.backlog(engine())
    except Exception:  # PostgreSQL unreachable: say so, and let the drain's own error propagate
        logger.exception("cannot measure the outbox")
        return None
