"""The metrics the alarms and the dashboard share: an engine function's own (Powertools EMF), a
stream mapping's, and each direction's freshness."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from hybridsync.truth import context

FIVE_MINUTES = Duration.minutes(5)

# each direction's function (construct id) -> its service and what it carries, and where its runbook
# looks when its freshness passes the threshold
FRESHNESS_PERIODS = 3  # 5-minute periods in a row over the threshold before a freshness alarm fires
FRESHNESS = {
    "WriteBack": ("write_back", "DynamoDB -> PostgreSQL row",
                  "WriteBack's IteratorAge (behind its stream?), its errors and duration (PostgreSQL slow, "
                  "retries)"),
    "Aggregate": ("aggregate", "DynamoDB -> aggregate",
                  "Aggregate's IteratorAge (behind its stream?), its errors and duration (conflicts "
                  "retried, throttles)"),
    "SqlSync": ("sql_sync", "PostgreSQL -> DynamoDB",
                "the drain's runs (is a SqlSync run polling the outbox? its invocations, errors "
                "and duration), the outbox (OutboxAge, OutboxDepth)"),
}  # fmt: skip


def mapping_metric(mapping_id: str, name: str) -> cloudwatch.Metric:
    """An event source mapping's own metric (MetricsConfig EventCount: Lambda's "Event source mapping
    metrics"), per mapping."""
    return cloudwatch.Metric(
        namespace="AWS/Lambda",
        metric_name=name,
        statistic="Sum",
        dimensions_map={"EventSourceMappingUUID": mapping_id},
        period=FIVE_MINUTES,
    )


def service_metric(scope: Construct, function: str, name: str, statistic: str = "Sum") -> cloudwatch.Metric:
    """A metric one of the engine's functions emits (Powertools EMF: the namespace and the
    `service` dimension its stack gave it, `<prefix>` and `<prefix>-<function>`)."""
    return cloudwatch.Metric(
        namespace=context.names(scope),
        metric_name=name,
        statistic=statistic,
        dimensions_map={"service": f"{context.names(scope)}-{function}"},
        period=FIVE_MINUTES,
    )
