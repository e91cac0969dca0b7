"""A consumer's stream mappings: on a table's DynamoDB stream or its Kinesis stream, in order per
shard, their failed batches (records included) to the pipeline's failure bucket."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsii
from aws_cdk import Duration
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3

from hybridsync.cdk.assets import HandlerFunction
from hybridsync.cdk.data import title
from hybridsync.cdk.grants import grant_kinesis_read, grant_prefix
from hybridsync.sync import failed
from hybridsync.truth import context

if TYPE_CHECKING:  # the stack this builds into, for its type only (it imports this module)
    from hybridsync.cdk.pipeline import PipelineStack

MAX_RECORD_AGE_H = 168  # MaximumRecordAgeInSeconds: at most 604,800 s (Lambda's stream mapping parameters)


@jsii.implements(lambda_.IEventSourceDlq)
class FailureBucket:
    """A stream mapping's on-failure destination in S3: Lambda stores the whole invocation record,
    the batch's records included, under `aws/lambda/<mapping>/<shard>/...` (Lambda developer guide,
    "Retain discarded records": S3 destinations), with the function's role: it may put objects
    under that prefix and list the bucket, nothing else."""

    def __init__(self, bucket: s3.IBucket):
        self.bucket = bucket

    def bind(
        self, _target: lambda_.IEventSourceMapping, handler: lambda_.IFunction
    ) -> lambda_.DlqDestinationConfig:
        grant_prefix(handler, self.bucket, ["s3:PutObject"], failed.PREFIX, listing="any")
        return lambda_.DlqDestinationConfig(destination=self.bucket.bucket_arn)


def change_mapping(
    stack: PipelineStack,
    id: str,
    handler: HandlerFunction,
    table: str,
    filters: list[dict],
    batching: str,
    tumbling_window: bool,
    *,
    enabled: bool,
) -> str:
    """`handler`'s mapping on `table`'s changes, its DynamoDB stream or its Kinesis stream (through
    an enhanced fan-out consumer of its own, with `kinesis_fan_out`), the same knobs on both; the
    mapping's id."""
    age = stack.setting("stream_max_record_age_h")
    if not 1 <= age <= MAX_RECORD_AGE_H:
        raise ValueError(f"-c stream_max_record_age_h={age}: Lambda allows 1 to {MAX_RECORD_AGE_H} hours")
    options: dict[str, Any] = dict(
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=stack.setting(f"{batching}_batch_size"),
        # 0 under freshness=realtime: Lambda invokes as soon as a poll finds records, and under
        # load a batch fills itself while the previous one runs (services-ddb-params: "default 0")
        max_batching_window=Duration.seconds(context.by_freshness(stack, f"{batching}_batching_window_s")),
        bisect_batch_on_error=True,
        retry_attempts=stack.setting("stream_retry_attempts"),
        max_record_age=Duration.hours(age),
        report_batch_item_failures=True,
        parallelization_factor=1,  # keeps one shard's records in order
        on_failure=FailureBucket(stack.failed_batches),
        metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
        enabled=enabled,
        tumbling_window=Duration.seconds(stack.setting(f"{batching}_tumbling_window_s"))
        if tumbling_window
        else None,
    )
    stream = stack.data.kinesis_streams.get(table)
    if stream is None:
        source = sources.DynamoEventSource(
            stack.data.tables[table],
            filters=[lambda_.FilterCriteria.filter(pattern) for pattern in filters],
            **options,
        )
        handler.alias.add_event_source(source)
        return source.event_source_mapping_id
    consumer = None
    if context.read(stack, "kinesis_fan_out"):  # 2 MB/s per shard of its own, pushed (Kinesis guide,
        # "Develop enhanced fan-out consumers with dedicated throughput")
        consumer = kinesis.StreamConsumer(stack, f"{id}{title(table)}Consumer", stream=stream,
                                          stream_consumer_name=f"{stack.stack_name}-{id}")  # fmt: skip
    grant_kinesis_read(handler.function, stream, consumer)
    mapping = handler.alias.add_event_source_mapping(
        f"{title(table)}Changes",
        event_source_arn=consumer.stream_consumer_arn if consumer else stream.stream_arn,
        support_s3_on_failure_destination=True,
        # A Kinesis mapping filters on the record's decoded `data` only: DynamoDB's record is in it
        # (Lambda guide, "Using event filtering with a Kinesis event source")
        filters=[lambda_.FilterCriteria.filter({"data": pattern}) for pattern in filters],
        **options,
    )
    return mapping.event_source_mapping_id
