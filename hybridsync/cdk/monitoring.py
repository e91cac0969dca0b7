"""Monitoring stack: every alarm of the deployment, each with the alarm topic as its action (ALARM and
OK), and the dashboard. Derived from the other stacks (their functions, mappings, queues, tables and
indexes, proxy, cluster, API), never listed by hand: a function without an errors alarm cannot be
synthesized. Thresholds are context settings (`hybridsync.truth.context`); the runbook line of each alarm
kind is in docs/operating.md#alarms, and `hybridsync up` evaluates the same alarms locally."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from hybridsync import truth
from hybridsync.cdk.alarm_topic import alarm_topic
from hybridsync.cdk.api import ApiStack
from hybridsync.cdk.dashboard import dashboard
from hybridsync.cdk.data import DataStack, title
from hybridsync.cdk.database import DatabaseStack
from hybridsync.cdk.metrics import FIVE_MINUTES, FRESHNESS, FRESHNESS_PERIODS, mapping_metric, service_metric
from hybridsync.cdk.pipeline import PipelineStack
from hybridsync.model.declare import Model
from hybridsync.sql import deadletters
from hybridsync.truth import context

GT = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
LT = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
# what the engine calls, as DynamoDB names the `Operation` dimension of SystemErrors (a math alarm
# takes at most 10 metrics)
ENGINE_OPERATIONS = ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                     "BatchWriteItem", "TransactWriteItems")  # fmt: skip
# the operations that change items, as DynamoDB names them in its metrics' `Operation` dimension
WRITE_OPERATIONS = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")


class MonitoringStack(Stack):
    """`alarms`: construct id -> alarm, every one with the topic as its ALARM and OK action."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        model: Model,
        data: DataStack,
        database: DatabaseStack,
        pipeline: PipelineStack,
        api: ApiStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.topic = alarm_topic(self)
        self._functions(pipeline)
        self._consumers(pipeline)
        self._scheduled(pipeline)
        self._freshness(pipeline)
        self._api(api)
        self._database(database)
        self._tables(model, data)
        self._replication(model, data)
        self._change_streams(data)
        self._canary()
        self.dashboard = dashboard(self, list(self.alarms.values()), model, data, database, pipeline, api)

    def setting(self, name: str) -> Any:
        return context.read(self, name)

    def service_metric(self, function: str, name: str, statistic: str = "Sum") -> cloudwatch.Metric:
        """A metric one of the engine's functions emits (`hybridsync.cdk.metrics.service_metric`)."""
        return service_metric(self, function, name, statistic)

    # --- where alarms go ----------------------------------------------------------------------

    def alarm(
        self,
        id: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        runbook: str,
        *,
        periods: int = 1,
        comparison: cloudwatch.ComparisonOperator = GT,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        """An alarm whose description is its runbook line, with the topic as ALARM and OK action."""
        alarm = cloudwatch.Alarm(
            self,
            id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=comparison,
            treat_missing_data=missing,
            alarm_description=runbook,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms[id] = alarm
        return alarm

    # --- the alarm set ------------------------------------------------------------------------

    def _functions(self, pipeline: PipelineStack) -> None:
        errors = self.setting("function_errors_alarm")
        for id, handler in pipeline.handlers.items():
            function = handler.function
            self.alarm(
                f"{id}Errors",
                function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                errors,
                f"{id} failed (raised or timed out): read its log group; a stream consumer retries "
                "and bisects, then stores the batch (failed-batches)",
            )
            self.alarm(
                f"{id}Throttles",
                function.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                0,
                f"{id} was throttled: its reserved concurrency, or the account's, is used up "
                "(`hybridsync plan`); a stream consumer retries, the API answers 500",
            )

    def _consumers(self, pipeline: PipelineStack) -> None:
        for id, consumer in pipeline.consumers.items():
            function, name = consumer.handler.function, consumer.name
            lag = function.metric("IteratorAge", statistic="Maximum", period=Duration.minutes(1))
            # a Kinesis change stream keeps its records `kinesis_retention_h`, a DynamoDB stream 24 h
            retention = context.read(self, "kinesis_retention_h")
            kept = min(retention if t in pipeline.data.kinesis_streams else 24 for t, _ in consumer.mappings)
            for level, key in (("Warning", "iterator_age_warning_s"), ("Critical", "iterator_age_alarm_s")):
                self.alarm(
                    f"{id}IteratorAge{level}",
                    lag,
                    self.setting(key) * 1000,
                    f"{name} is behind its stream ({level.lower()}): look at its errors and "
                    f"throttles; records older than {kept} h are lost to the stream",
                    periods=5,
                )
            self.alarm(
                f"{id}DeadLetters",
                self.service_metric(name, deadletters.DEAD_LETTER_METRIC),
                0,
                f"{name} dead-lettered a record it can never apply: `hybridsync dead-letters`, "
                "fix, then `dead-letters redrive`",
            )
            self.alarm(
                f"{id}DestinationDeliveryFailures",
                function.metric("DestinationDeliveryFailures", statistic="Sum", period=FIVE_MINUTES),
                0,
                f"{name}: a failed batch could not be stored in the failure bucket (permissions, "
                "size): its records stay only in the stream, 24 h; redrive now",
            )
            for table, mapping_id in consumer.mappings:
                self.alarm(
                    f"{id}{title(table)}FailedBatches",
                    mapping_metric(mapping_id, "OnFailureDestinationDeliveredEventCount"),
                    0,
                    f"{name} gave up on a batch of {table}'s stream after its retries: "
                    "`hybridsync failed-batches`, fix, then `failed-batches redrive`",
                )

    def _scheduled(self, pipeline: PipelineStack) -> None:
        queue = pipeline.scheduled_failures
        self.alarm(
            "ScheduledFailures",
            queue.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES, statistic="Maximum"),
            0,
            "a scheduled run (outbox drain, sweep, rotation) failed past its retries: read the message, "
            "fix, invoke the function again, delete the message",
        )
        self.alarm(
            "ScheduledFailuresAge",
            queue.metric_approximate_age_of_oldest_message(period=FIVE_MINUTES, statistic="Maximum"),
            self.setting("failure_queue_age_alarm_s"),
            "a failed scheduled run waits unhandled in its queue (kept 14 days)",
        )
        for id, handler in pipeline.handlers.items():
            if id in pipeline.scheduled:
                self.alarm(
                    f"{id}DeadLetterErrors",
                    handler.function.metric("DeadLetterErrors", statistic="Sum", period=FIVE_MINUTES),
                    0,
                    f"{id}: a failed run could not reach its dead-letter queue: it is lost; "
                    "run the function by hand",
                )
        if "SqlSync" in pipeline.handlers:
            # Emitted by every drain, a failed one included; no point at all means no drain ran to its
            # end (PostgreSQL unreachable, the function failing): that breaches too.
            self.alarm(
                "OutboxAge",
                self.service_metric("sql_sync", "OutboxAge", "Maximum"),
                self.setting("outbox_age_alarm_s"),
                "sql_sync: a PostgreSQL change waited too long in the outbox, or no drain ran: "
                "SqlSync's errors, the database, `hybridsync status`",
                # paused on purpose (pipeline_enabled=false, or a standby consumes): no alarm
                missing=cloudwatch.TreatMissingData.BREACHING
                if pipeline.enabled
                else cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            self.alarm(
                "SqlSyncDeadLetters",
                self.service_metric("sql_sync", deadletters.DEAD_LETTER_METRIC),
                0,
                "sql_sync dead-lettered an outbox row no write can apply: `hybridsync dead-letters "
                "--source sql_sync`, fix the row, redrive",
            )

    def _freshness(self, pipeline: PipelineStack) -> None:
        """Per direction present, the p99 of `Freshness` (each batch's apply time minus its oldest
        change's creation, ms) over 5 minutes: a percentile of the period's values, which CloudWatch
        computes from an EMF metric's raw values (CloudWatch guide, "Percentiles"):
        https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_concepts.html#Percentiles
        A direction emits nothing without traffic, and no traffic is not stale: missing data does
        not breach (CloudWatch guide, "Configuring how CloudWatch alarms treat missing data"):
        https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html"""
        # in ms, the unit `Freshness` is emitted in; unset: 5 s under freshness=realtime, 120 s economy
        threshold = context.by_freshness(self, "freshness_p99_alarm_s") * 1000
        for id, (name, direction, look) in FRESHNESS.items():
            if id not in pipeline.handlers:
                continue
            # one value per batch, so a quiet period holds few: its p99 is its slowest batch
            # (CloudWatch guide, "Percentile-based alarms and low data samples": a p99 of fewer than
            # 1,000 samples). Three periods in a row, so one slow batch (a cold start, a retry) pages no one.
            self.alarm(
                f"{id}FreshnessP99",
                self.service_metric(name, "Freshness", "p99"),
                threshold,
                f"{name}: the slowest 1% of {direction} batches took over {threshold / 1000:g} s to reach "
                f"the other side, 15 minutes in a row: {look}; `hybridsync status`",
                periods=FRESHNESS_PERIODS,
                missing=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

    def _api(self, api: ApiStack) -> None:
        http = api.api
        self.alarm(
            "Api5xx",
            http.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            self.setting("api_5xx_alarm"),
            "the API answered 5xx: the Api function's errors and throttles, the database",
        )
        self.alarm(
            "ApiLatencyP99",
            http.metric_latency(period=FIVE_MINUTES, statistic="p99"),
            self.setting("api_latency_p99_alarm_ms"),
            "the API's slowest 1% are slow: cold starts, the database (proxy borrow latency), "
            "a hot partition",
        )

    def _database(self, database: DatabaseStack) -> None:
        if database.proxy is not None:
            name = database.proxy.db_proxy_name

            def proxy(metric: str, statistic: str, **dimensions: str) -> cloudwatch.Metric:
                return cloudwatch.Metric(
                    namespace="AWS/RDS",
                    metric_name=metric,
                    statistic=statistic,
                    dimensions_map={"ProxyName": name, **dimensions},
                    period=FIVE_MINUTES,
                )

            self.alarm(
                "ProxyBorrowLatency",
                proxy("DatabaseConnectionsBorrowLatency", "Average"),
                self.setting("proxy_borrow_latency_alarm_ms") * 1000,  # the metric is in microseconds
                "RDS Proxy waits for a database connection: the cluster is at its connection "
                "limit or capacity (ACU)",
            )
            self.alarm(
                "ProxyFailedAuth",
                proxy("ClientConnectionsSetupFailedAuth", "Sum"),
                0,
                "functions failed to log in through RDS Proxy: the secret changed under them",
            )
            self.alarm(
                "ProxyAvailability",
                # published only per target group and role (RDS Proxy's CloudWatch page, dimension
                # set 4); the writer's role is READ_WRITE (RDS API, DBProxyTarget Role)
                proxy("AvailabilityPercentage", "Minimum", TargetGroup="default", TargetRole="READ_WRITE"),
                100,
                "RDS Proxy could not reach the database",
                comparison=LT,
            )
        if database.cluster is not None:
            acu = cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name="ACUUtilization",
                statistic="Maximum",
                dimensions_map={"DBClusterIdentifier": database.cluster.cluster_identifier},
                period=FIVE_MINUTES,
            )
            self.alarm(
                "AuroraCapacity",
                acu,
                self.setting("acu_utilization_alarm_pct"),
                "Aurora runs near its ACU cap: raise the maximum capacity or slow the writers",
                periods=3,
            )

    def _tables(self, model: Model, data: DataStack) -> None:
        """Throttles per table and per GSI (a throttled GSI throttles the table's writes)."""
        for table in model.tables:
            name = data.tables[table.name].table_name
            places: list[tuple[str, dict[str, str]]] = [("", {})]
            places += [(title(i.name), {"GlobalSecondaryIndexName": i.name}) for i in table.indexes]
            for place, index in places:
                for kind in ("Read", "Write"):
                    metric = cloudwatch.Metric(
                        namespace="AWS/DynamoDB",
                        metric_name=f"{kind}ThrottleEvents",
                        statistic="Sum",
                        period=FIVE_MINUTES,
                        dimensions_map={"TableName": name, **index},
                    )
                    where = (
                        f"{table.name}'s index {index['GlobalSecondaryIndexName']}" if index else table.name
                    )
                    self.alarm(
                        f"{title(table.name)}{place}{kind}Throttles",
                        metric,
                        0,
                        f"DynamoDB throttled {kind.lower()}s of {where}: a hot key, or the on-demand "
                        "ceiling (`hybridsync plan`)",
                    )
            errors = self._system_errors(data.tables[table.name])
            self.alarm(
                f"{title(table.name)}SystemErrors",
                errors,
                0,
                f"DynamoDB answered 500 on {table.name}: the SDK retried; if it persists, AWS Health",
            )

    def _replication(self, model: Model, data: DataStack) -> None:
        """Replication to each replica Region, as DynamoDB measures it from home (`ReplicationLatency`,
        ms, per `ReceivingRegion`: metrics-dimensions). Over a minute on average for 15 minutes, home's
        writes are late there: reached only once home is back if it fails (the evacuation guide
        watches it: bp-global-table-design.prescriptive-guidance.evacuation.html)."""
        for table in model.tables:
            for region in context.replicas(self, table):
                metric = cloudwatch.Metric(
                    namespace="AWS/DynamoDB",
                    metric_name="ReplicationLatency",
                    statistic="Average",
                    period=FIVE_MINUTES,
                    dimensions_map={
                        "TableName": data.tables[table.name].table_name,
                        "ReceivingRegion": region,
                    },
                )
                self.alarm(
                    f"{title(table.name)}ReplicationLatency{title(region)}",
                    metric,
                    60_000,
                    f"{table.name}'s writes take over a minute to reach {region}: if home fails, they "
                    "get there only once it is back; evacuating a Region: docs/operating.md",
                    periods=3,
                )

    def _change_streams(self, data: DataStack) -> None:
        """A Kinesis change stream DynamoDB stopped writing to (a key policy that no longer lets it, a
        stream that throttles it): no consumer fails and no iterator ages, so it is measured where the
        changes go. The table took writes and the stream took no record for 15 minutes; and the
        stream refusing DynamoDB's puts (Kinesis guide, "Monitoring the Amazon Kinesis Data Streams
        service with CloudWatch": IncomingRecords, WriteProvisionedThroughputExceeded per StreamName).
        DynamoDB's own replication metrics need a `DelegatedOperation` value its guide does not give.

        The table's writes are its *successful* write requests (SuccessfulRequestLatency's
        SampleCount, "the number of successful requests", per write operation), not the write
        capacity it consumed: a conditional write whose condition fails still consumes write capacity
        and changes nothing (DynamoDB guide, "Working with items": "Capacity units consumed by
        conditional writes"), so no record is due, and the engine makes such writes (version guards)."""
        for name, stream in sorted(data.kinesis_streams.items()):
            table = data.tables[name].table_name
            writes = {
                f"writes{operation.lower()}": cloudwatch.Metric(
                    namespace="AWS/DynamoDB", metric_name="SuccessfulRequestLatency",
                    dimensions_map={"TableName": table, "Operation": operation}, statistic="SampleCount",
                    period=FIVE_MINUTES,
                )
                for operation in WRITE_OPERATIONS
            }  # fmt: skip
            incoming = stream.metric_incoming_records(statistic="Sum", period=FIVE_MINUTES)
            stalled = cloudwatch.MathExpression(
                # SUM of an array: the operations that had no successful request have no datapoint
                expression='IF(FILL(SUM(METRICS("writes")), 0) > 0 AND FILL(incoming, 0) == 0, 1, 0)',
                using_metrics={**writes, "incoming": incoming},
                label="successful writes that reached no Kinesis record",
                period=FIVE_MINUTES,
            )
            self.alarm(
                f"{title(name)}ChangesNotReachingKinesis",
                stalled,
                0,
                f"{name} took writes and its Kinesis change stream no record for 15 minutes: check the "
                "table's streaming destination (DescribeKinesisStreamingDestination) and the stream key's "
                "policy; `hybridsync reconcile --repair` catches up what was missed",
                periods=3,
            )
            self.alarm(
                f"{title(name)}ChangeStreamThrottled",
                stream.metric_write_provisioned_throughput_exceeded(statistic="Sum", period=FIVE_MINUTES),
                0,
                f"{name}'s Kinesis change stream refused DynamoDB's puts: add shards (`kinesis_shards`, "
                "`hybridsync plan`) or use on-demand; DynamoDB retries them, late",
            )

    def _system_errors(self, table: dynamodb.TableV2) -> cloudwatch.MathExpression:
        """DynamoDB's 500s over the operations the engine calls, summed with SUM(METRICS()): the
        operator form `a + b + ...` has a value only where every series has a datapoint, and a
        table's SystemErrors appear only for operations that failed (CloudWatch guide, "Using math
        expressions with CloudWatch metrics": arithmetic on time series, and SUM of an array)."""
        metrics: dict[str, cloudwatch.IMetric] = {
            operation.lower(): cloudwatch.Metric(
                namespace="AWS/DynamoDB",
                metric_name="SystemErrors",
                statistic="Sum",
                period=FIVE_MINUTES,
                dimensions_map={"TableName": table.table_name, "Operation": operation},
            )
            for operation in ENGINE_OPERATIONS
        }
        return cloudwatch.MathExpression(
            expression="SUM(METRICS())", using_metrics=metrics, label="DynamoDB 500s", period=FIVE_MINUTES
        )

    def _canary(self) -> None:
        """The alarm `hybridsync doctor` drives to ALARM and back with SetAlarmState, to see the
        topic take its notification: its metric is never emitted, so it rests in OK."""
        self.alarm(
            truth.CANARY,
            self.service_metric("doctor", truth.CANARY),
            0,
            "a test notification of `hybridsync doctor` (SetAlarmState): nothing to do",
        )
