"""Outbox drain: PostgreSQL changes -> DynamoDB views (hybridsync.sync.outbox does the work).

A schedule starts it each minute. With `OUTBOX_POLL_MS` (freshness=realtime) a scheduled run polls
the outbox that often until the next run takes over (`outbox.poll`); without it, and on any other
invoke, a run drains once.
Its figures are emitted whatever happens, a failed drain included: the outbox's depth and the age
of its oldest change (`OutboxAge`, alarmed, missing data counting as breaching), rows applied,
superseded, dead-lettered and left for the next drain, and each drain step's `Freshness` (from
the change's transaction to its view written)."""

import logging
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.runtime import clients, handling
from hybridsync.runtime.clients import dynamodb, engine, model, tables
from hybridsync.sql import deadletters
from hybridsync.streams import trail
from hybridsync.sync import outbox

logger = Logger()
tracer = clients.tracer()
metrics = Metrics()
SAFETY_MS = 15_000  # stop claiming new batches this close to the timeout


def landed(step: outbox.Drained) -> None:
    metrics.add_metric("Freshness", MetricUnit.Milliseconds, round(step.freshness_s * 1000))
    deadletters.report(metrics, logger, step.rejected)
    # each row's item and fate, for `hybridsync trace` (built only when logged)
    if logger.isEnabledFor(logging.INFO):
        entries = outbox.trailed(model(), tables(), step)
        trail.log_entries(logger, "outbox drained", entries, applied=step.applied, superseded=step.superseded)


def waiting(backlog: outbox.Backlog, oldest_age_s: float = 0.0) -> None:
    metrics.add_metric("OutboxDepth", MetricUnit.Count, backlog.depth)
    metrics.add_metric("OutboxAge", MetricUnit.Seconds, max(oldest_age_s, backlog.oldest_age_s))


def published(backlog: outbox.Backlog) -> None:
    """A polling run's figures as it goes, each second (one log line: about 2.6 M lines a month),
    not only at its end: OutboxAge treats a missing point as breaching."""
    waiting(backlog)
    metrics.flush_metrics()


@handling.lambda_handler(logger, tracer, metrics)  # the doctor's probe first, then metrics, trace, log
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    total = outbox.Drained()
    # a run the schedule started polls (freshness=realtime); any other invoke (an operator's,
    # `hybridsync invoke sql_sync`) drains once and returns
    scheduled = event.get("source") == "aws.events"
    poll_ms = int(os.environ.get("OUTBOX_POLL_MS") or 0) if scheduled else 0
    try:
        if poll_ms:
            left = lambda: (context.get_remaining_time_in_millis() - SAFETY_MS) / 1000  # noqa: E731
            total = outbox.poll(engine(), dynamodb(), model(), tables(), seconds_left=left,
                                every_s=poll_ms / 1000, drained=landed, waiting=published)  # fmt: skip
        while not poll_ms and context.get_remaining_time_in_millis() > SAFETY_MS:
            step = total.add(outbox.drain(engine(), dynamodb(), model(), tables()))
            if step.claimed:
                landed(step)
            if not step.claimed or step.deferred:  # empty, or DynamoDB refused writes for now
                break
    finally:
        backlog = _backlog()
        emitted = {"OutboxDrained": total.claimed, "OutboxApplied": total.applied,
                   "OutboxSuperseded": total.superseded, "OutboxDeferred": total.deferred}  # fmt: skip
        for name, count in emitted.items():
            metrics.add_metric(name, MetricUnit.Count, count)
        if backlog is not None:  # else no OutboxAge: the alarm counts the missing point as breaching
            waiting(backlog, total.oldest_age_s)
    return {"claimed": total.claimed, "applied": total.applied, "superseded": total.superseded,
            "dead_lettered": total.dead_lettered, "deferred": total.deferred,
            "depth": backlog.depth if backlog else None}  # fmt: skip


def _backlog() -> outbox.Backlog | None:
    try:
        return outbox.backlog(engine())
    except Exception:  # PostgreSQL unreachable: say so, and let the drain's own error propagate
        logger.exception("cannot measure the outbox")
        return None
