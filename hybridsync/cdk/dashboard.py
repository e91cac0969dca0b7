"""The monitoring stack's dashboard: the alarms' states, freshness, each consumer's lag, throughput,
errors, failed batches and records per mapping, dead letters, the outbox, consumed capacity per table
and index, the database's connections and the API's requests and latency."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch

from hybridsync.cdk.api import ApiStack
from hybridsync.cdk.assets import HandlerFunction
from hybridsync.cdk.data import DataStack
from hybridsync.cdk.database import DatabaseStack
from hybridsync.cdk.metrics import FIVE_MINUTES, FRESHNESS, mapping_metric, service_metric
from hybridsync.cdk.pipeline import PipelineStack
from hybridsync.model.declare import Model
from hybridsync.sql import deadletters


def dashboard(
    stack: Stack,
    alarms: list[cloudwatch.Alarm],
    model: Model,
    data: DataStack,
    database: DatabaseStack,
    pipeline: PipelineStack,
    api: ApiStack,
) -> cloudwatch.Dashboard:
    """The dashboard of `stack` (construct id `Dashboard`), and its URL as the output `DashboardUrl`."""
    rows = _pipeline_rows(stack, alarms, model, data, pipeline)
    rows.append(_database_and_api_row(database, api))
    dashboard = cloudwatch.Dashboard(stack, "Dashboard", widgets=rows)
    url = (
        f"https://{stack.region}.console.aws.amazon.com/cloudwatch/home?region={stack.region}"
        f"#dashboards:name={dashboard.dashboard_name}"
    )
    CfnOutput(stack, "DashboardUrl", value=url)
    return dashboard


def _graph(title: str, metrics: Sequence[cloudwatch.IMetric], width: int = 8) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=list(metrics), width=width, height=6)


def _per_function(
    handlers: dict[str, HandlerFunction], name: str, statistic: str
) -> list[cloudwatch.IMetric]:
    return [
        h.function.metric(name, statistic=statistic, period=FIVE_MINUTES, label=id)
        for id, h in handlers.items()
    ]


def _capacity(model: Model, data: DataStack) -> list[cloudwatch.IMetric]:
    """Consumed read and write capacity of every table and each of its global secondary indexes."""
    tables = [(t, data.tables[t.name].table_name) for t in model.tables]
    return [
        cloudwatch.Metric(
            namespace="AWS/DynamoDB",
            metric_name=f"Consumed{kind}CapacityUnits",
            statistic="Sum",
            period=FIVE_MINUTES,
            label=f"{t.name}{'/' + i if i else ''} {kind.lower()}",
            dimensions_map={"TableName": n, **({"GlobalSecondaryIndexName": i} if i else {})},
        )
        for t, n in tables
        for i in ("", *(x.name for x in t.indexes))
        for kind in ("Read", "Write")
    ]


def _pipeline_rows(
    stack: Stack, alarms: list[cloudwatch.Alarm], model: Model, data: DataStack, pipeline: PipelineStack
) -> list[list[cloudwatch.IWidget]]:
    """The alarms, freshness, the consumers and their mappings, dead letters, the outbox, capacity."""
    handlers: dict[str, HandlerFunction] = pipeline.handlers
    consumers = pipeline.consumers.values()
    mappings = [(c, t, m) for c in consumers for t, m in c.mappings]
    fresh = [
        service_metric(stack, name, "Freshness", s).with_(label=f"{name} {s} (ms)")
        for id, (name, _, _) in FRESHNESS.items()
        if id in handlers
        for s in ("p50", "p99")
    ]
    lag = [
        c.handler.function.metric(
            "IteratorAge", statistic="Maximum", label=c.name, period=Duration.minutes(1)
        )
        for c in consumers
    ]
    dead_letters = [c.name for c in consumers] + (["sql_sync"] if "SqlSync" in handlers else [])
    return [
        [cloudwatch.AlarmStatusWidget(title="Alarms", alarms=alarms, width=24, height=4)],
        *([[_graph("Freshness (p50, p99)", fresh, width=24)]] if fresh else []),
        [
            _graph("Lag per consumer (IteratorAge, ms)", lag),
            _graph("Throughput (invocations)", _per_function(handlers, "Invocations", "Sum")),
            _graph(
                "Errors and throttles",
                _per_function(handlers, "Errors", "Sum") + _per_function(handlers, "Throttles", "Sum"),
            ),
        ],
        [
            _graph(
                "Failed batches per mapping",
                [
                    mapping_metric(m, "OnFailureDestinationDeliveredEventCount").with_(label=f"{c.name} {t}")
                    for c, t, m in mappings
                ],
            ),
            _graph(
                "Records per mapping (polled, filtered out, invoked)",
                [
                    mapping_metric(m, k).with_(label=f"{c.name} {t} {k.removesuffix('EventCount')}")
                    for c, t, m in mappings
                    for k in ("PolledEventCount", "FilteredOutEventCount", "InvokedEventCount")
                ],
            ),
            _graph(
                "Dead letters",
                [
                    service_metric(stack, f, deadletters.DEAD_LETTER_METRIC).with_(label=f)
                    for f in dead_letters
                ],
            ),
        ],
        [
            _graph(
                "Outbox depth and age (s)",
                [
                    service_metric(stack, "sql_sync", "OutboxDepth", "Maximum"),
                    service_metric(stack, "sql_sync", "OutboxAge", "Maximum"),
                ],
            ),
            _graph("Consumed capacity per table and GSI", _capacity(model, data), width=16),
        ],
    ]


def _database_and_api_row(database: DatabaseStack, api: ApiStack) -> list[cloudwatch.IWidget]:
    """The proxy's connections and the cluster's capacity (ACU); the API's requests, 5xx and latency."""
    database_metrics: list[cloudwatch.IMetric] = []
    if database.proxy is not None:
        database_metrics += [
            cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name=m,
                statistic="Maximum",
                period=FIVE_MINUTES,
                dimensions_map={"ProxyName": database.proxy.db_proxy_name},
            )
            for m in ("ClientConnections", "DatabaseConnections")
        ]
    if database.cluster is not None:
        database_metrics.append(
            cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name="ServerlessDatabaseCapacity",
                statistic="Maximum",
                period=FIVE_MINUTES,
                dimensions_map={"DBClusterIdentifier": database.cluster.cluster_identifier},
            )
        )
    http = api.api
    return [
        _graph("Database connections and ACU", database_metrics),
        _graph(
            "API requests and 5xx",
            [http.metric_count(period=FIVE_MINUTES), http.metric_server_error(period=FIVE_MINUTES)],
        ),
        _graph(
            "API latency (p50, p99, ms)",
            [http.metric_latency(period=FIVE_MINUTES, statistic=s) for s in ("p50", "p99")],
        ),
    ]
