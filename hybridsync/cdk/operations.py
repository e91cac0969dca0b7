"""The operations function: where an operator's work runs in AWS, next to the database."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import ArnFormat, CfnOutput, Duration
from aws_cdk import aws_iam as iam
from cdk_nag import NagSuppressions

from hybridsync.cdk.assets import HandlerFunction
from hybridsync.cdk.grants import grant_prefix
from hybridsync.sync import failed

if TYPE_CHECKING:  # the stack this builds into, for its type only (it imports this module)
    from hybridsync.cdk.pipeline import PipelineStack


def add_operations_function(stack: PipelineStack) -> None:
    """Where an operator's work runs in AWS (hybridsync.sync.operations): the loads, the aggregates'
    rebuild, reconcile, redrives and migrations, next to the database. It reads and writes every
    table of the model (loads, repairs, rebuilt aggregates, job checkpoints), reads their
    streams (a rebuild's window, a failed batch's records), pauses the aggregation's mappings,
    reads exports under `exports/` and takes failed batches out of the failure bucket."""
    aggregate = getattr(stack, "aggregate", None)
    environment = {
        "FAILED_BATCHES_BUCKET": stack.failed_batches.bucket_name,
        "MIGRATE_FUNCTION": stack.migrate.function.function_arn,
        # a rebuild leaves the aggregation's mappings as the stack declares them
        "PIPELINE_ENABLED": str(stack.folding).lower(),
    }  # upgrades run as the migrator
    if aggregate is not None:  # its mappings are the alias's
        environment["AGGREGATE_FUNCTION"] = aggregate.alias.function_arn
    streams = stack.data.kinesis_streams
    if streams:  # table -> the Kinesis stream its changes are read from (the others: its DynamoDB stream)
        environment["CHANGE_STREAMS"] = stack.to_json_string({n: s.stream_arn for n, s in streams.items()})
    ops = stack.function(
        "Operations",
        name="operations",
        role="writer",
        timeout=Duration.minutes(15),
        memory_size=1024,
        environment=environment,
    )
    _grant_data(stack, ops)
    if aggregate is not None:
        _grant_pausing(stack, ops)
    CfnOutput(stack, "OperationsFunctionName", value=ops.function.function_name)


def _grant_data(stack: PipelineStack, ops: HandlerFunction) -> None:
    """Every table's items, its DynamoDB stream, the migration, failed batches and exports."""
    tables = [stack.data.tables[name] for name in sorted(stack.data.tables)]
    ops.function.add_to_role_policy(
        iam.PolicyStatement(
            actions=[
                "dynamodb:DescribeTable",
                "dynamodb:GetItem",
                "dynamodb:BatchGetItem",
                "dynamodb:Query",
                "dynamodb:Scan",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:DeleteItem",
                "dynamodb:BatchWriteItem",
                "dynamodb:ConditionCheckItem",
            ],
            resources=[t.table_arn for t in tables],
        )
    )
    # It reads a table's DynamoDB stream (a rebuild's window, a queued failed batch), whatever the
    # change source: nothing of it reads Kinesis (a Kinesis batch is redriven from the failure
    # bucket's copy), and the data stack keeps exporting every stream ARN, so switching the
    # source never removes an export in use (CloudFormation, Fn::ImportValue).
    for name in sorted(stack.data.tables):
        if stack.model.table(name).stream is not None:  # a table without one has no StreamArn
            stack.data.tables[name].grant_stream_read(ops.function)
    stack.migrate.function.grant_invoke(ops.function)
    # failed batches: read, and deleted once redriven
    grant_prefix(
        ops.function,
        stack.failed_batches,
        ["s3:GetObject", "s3:DeleteObject"],
        failed.PREFIX,
        listing=True,
    )
    if "bodies" in stack.data.buckets:  # exports land under exports/ of the stack's bucket
        stack.grant_bodies(ops, ["s3:GetObject"], prefix="exports", listing=True)


def _grant_pausing(stack: PipelineStack, ops: HandlerFunction) -> None:
    """Pausing and resuming the aggregation's mappings (a rebuild)."""
    mappings = stack.format_arn(
        service="lambda",
        resource="event-source-mapping",
        resource_name="*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    ops.function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"],
            resources=[mappings],
        )
    )
    ops.function.add_to_role_policy(  # the Service Authorization Reference: no resource type
        iam.PolicyStatement(actions=["lambda:ListEventSourceMappings"], resources=["*"])
    )
    NagSuppressions.add_resource_suppressions(
        ops.function.role,
        [
            {
                "id": "AwsSolutions-IAM5",
                "reason": "Pausing the aggregation: its mappings' ids are made at "
                "deploy time, and ListEventSourceMappings takes no resource.",
                "applies_to": [
                    "Resource::*",
                    {"regex": "/^Resource::arn:.*:event-source-mapping:\\*$/g"},
                ],
            }
        ],
        apply_to_children=True,
    )
